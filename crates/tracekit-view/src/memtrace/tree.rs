//! The page's own answers about a flame graph's tree: the part of it drawn
//! around one node (`flametree`) and each function's weight (`functions`),
//! sized to what the page shows rather than to the stacks.

use tracekit_analysis::diff::{DiffTree, FunctionChange};
use tracekit_analysis::frames::{FrameId, FrameTree};
use tracekit_analysis::paths;

/// How much of a tree a `flametree` answer shows.
#[derive(Clone, Copy)]
pub(super) struct Shown {
    pub(super) min_share: f64,
    pub(super) depth: usize,
}

/// Most nodes a `flametree` answer holds.
pub(super) const MAX_NODES: usize = 20_000;

/// `/api/flametree`: the part of a flame graph's tree the page draws.
#[derive(Debug, serde::Serialize)]
pub(super) struct FlameTreeJson {
    /// `bytes` or `samples`.
    pub(super) unit: &'static str,
    /// What the weights measure.
    pub(super) what: String,
    /// The weight of the whole tree.
    pub(super) total: u64,
    /// With `--diff`: the compared trace's whole weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) base_total: Option<u64>,
    /// Whether recursion is folded (asked, or the stacks were deeper than a
    /// screen).
    pub(super) recursion_folded: bool,
    #[serde(flatten)]
    pub(super) nodes: NodesJson,
    /// With a fragment: where it was found and who calls it.
    #[serde(flatten)]
    pub(super) around: Option<Around>,
}

/// The callers of a fragment of frames.
#[derive(Debug, serde::Serialize)]
pub(super) struct Around {
    /// The part of the fragment the tree holds.
    pub(super) fragment: Vec<String>,
    /// Its callers, as the callees are.
    pub(super) callers: Vec<NodeJson>,
    /// Whether the callers were cut at the most nodes sent.
    pub(super) callers_truncated: bool,
}

/// Nodes of a tree around a focus ([`nodes_json`]).
#[derive(Debug, serde::Serialize)]
pub(super) struct NodesJson {
    /// The frames followed from the root.
    pub(super) focus: Vec<String>,
    /// The least weight of a node sent.
    pub(super) min_weight: u64,
    /// Whether nodes were cut at the most sent.
    pub(super) truncated: bool,
    /// The nodes, in preorder.
    pub(super) nodes: Vec<NodeJson>,
}

/// One node.
#[derive(Debug, serde::Serialize)]
pub(super) struct NodeJson {
    pub(super) name: String,
    pub(super) total: u64,
    #[serde(rename = "self")]
    pub(super) own: u64,
    pub(super) objects: u64,
    /// Its parent's index, -1 for the first.
    pub(super) parent: i64,
    /// How many callees it has (sent or not).
    pub(super) callees: usize,
    /// With `--diff`: its total and own weight in the compared trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) base_total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) base_self: Option<u64>,
}

/// `/api/functions`.
#[derive(Debug, serde::Serialize)]
pub(super) struct FunctionsJson {
    pub(super) unit: &'static str,
    pub(super) what: String,
    pub(super) total: u64,
    /// Functions in the tree.
    pub(super) count: usize,
    /// The first of them.
    pub(super) functions: Vec<paths::FunctionWeight>,
}

/// `/api/functions --diff`.
#[derive(Debug, serde::Serialize)]
pub(super) struct FunctionChangesJson {
    pub(super) unit: &'static str,
    pub(super) what: String,
    pub(super) total: u64,
    /// The compared trace's whole weight.
    pub(super) base_total: u64,
    /// Functions in either tree.
    pub(super) count: usize,
    /// The first of them, the largest change first.
    pub(super) functions: Vec<FunctionChange>,
}

/// The node of `tree` that `focus` leads to from the root (as far as it
/// leads), and its callees as `shown` says, in preorder, each with its
/// parent's index; with `diff` (whose tree `tree` is), each with its weights in
/// the compared trace.
pub(super) fn nodes_json(
    tree: &FrameTree,
    diff: Option<&DiffTree>,
    focus: &[String],
    shown: Shown,
) -> NodesJson {
    let mut node = FrameId::ROOT;
    let mut followed = Vec::new();
    for name in focus {
        match tree.children(node).find(|&c| tree.name(c) == name) {
            Some(c) => {
                node = c;
                followed.push(name.clone());
            }
            None => break,
        }
    }
    let weight = tree.weight(node).1;
    let floor = ((weight as f64 * shown.min_share).ceil() as u64).max(1);
    let mut nodes = Vec::new();
    let mut truncated = false;
    // (node, its parent's index in `nodes`, its depth below `node`)
    let mut stack = vec![(node, -1i64, 0usize)];
    while let Some((n, parent, depth)) = stack.pop() {
        if nodes.len() == MAX_NODES {
            truncated = true;
            break;
        }
        let ((own, total), (_, objects)) = (tree.weight(n), tree.objects(n));
        let index = nodes.len() as i64;
        let kids: Vec<FrameId> = tree
            .children(n)
            .filter(|&c| tree.weight(c).1 >= floor)
            .collect();
        nodes.push(NodeJson {
            name: tree.name(n).to_string(),
            total,
            own,
            objects,
            parent,
            callees: tree.children(n).count(),
            base_total: diff.map(|d| d.base(n).1),
            base_self: diff.map(|d| d.base(n).0),
        });
        if depth < shown.depth {
            stack.extend(kids.into_iter().rev().map(|c| (c, index, depth + 1)));
        }
    }
    NodesJson {
        focus: followed,
        min_weight: floor,
        truncated,
        nodes,
    }
}
