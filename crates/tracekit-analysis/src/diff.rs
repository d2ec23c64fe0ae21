//! Differential frame trees: the stacks of a baseline (A) and of a second
//! profile (B) merged into one tree, each frame with its weight in both, for
//! differential flame graphs (each frame as wide as B, coloured by its change
//! from A, as Brendan Gregg's `difffolded.pl` graphs and `pprof -diff_base`
//! draw them) and the tables of what changed.
//!
//! The union tree has a node for every printed stack of either profile: a
//! frame only A has is kept with a B weight of 0 (it draws nothing, yet its
//! change shows in the tables and the stacks). Weights are in the trees' own
//! unit, taken as they are: two memtrace traces compare in estimated bytes
//! whatever their sample rates, two perf recordings in samples.
//!
//! The stacks come out as `frame;frame;frame A B` lines, the differential
//! folded format that `difffolded.pl` writes and flamegraph.pl and inferno read,
//! depth-first as [`FrameTree::try_for_each_stack`] walks them.

use std::io;

use tracekit_stacks::folded;

use crate::frames::{FrameId, FrameTree, Grower};
use crate::paths;

/// Two frame trees merged: B's weights on the union of both trees' stacks, and
/// A's beside them ([`diff`]).
#[derive(Debug)]
pub struct DiffTree {
    /// The union, weighed by B.
    tree: FrameTree,
    /// Per node of `tree`, A's own weight and its total with its callees.
    base: Vec<(u64, u64)>,
}

/// Merges `base` (A) and `tree` (B) into one tree, frame by frame.
pub fn diff(base: &FrameTree, tree: &FrameTree) -> DiffTree {
    let mut grower = Grower::new();
    let mut own_a: Vec<u64> = vec![0];
    // Each tree walked from its root, each node mapped to the union's node of
    // the same printed stack (made when new).
    for (side, t) in [(1, tree), (0, base)] {
        let mut stack: Vec<(FrameId, u32)> = vec![(FrameId::ROOT, Grower::ROOT)];
        while let Some((n, u)) = stack.pop() {
            let own = t.weight(n).0;
            if side == 1 {
                grower.add(u, own, 0);
            } else {
                if own_a.len() <= u as usize {
                    own_a.resize(u as usize + 1, 0);
                }
                own_a[u as usize] = own_a[u as usize].saturating_add(own);
            }
            for c in t.children(n) {
                let uc = grower.child(u, t.name(c));
                stack.push((c, uc));
            }
        }
    }
    let tree = grower.finish();
    own_a.resize(tree.len(), 0);
    let base = totals(&tree, &own_a);
    DiffTree { tree, base }
}

/// Each node's own weight and its total with its callees, from the own
/// weights of `tree`'s nodes.
fn totals(tree: &FrameTree, own: &[u64]) -> Vec<(u64, u64)> {
    // A callee's index is above its caller's: sum the totals bottom-up.
    let mut base: Vec<(u64, u64)> = own.iter().map(|&o| (o, o)).collect();
    for i in (1..tree.len()).rev() {
        let p = tree.parent(FrameId::from_index(i)).index();
        base[p].1 = base[p].1.saturating_add(base[i].1);
    }
    base
}

impl DiffTree {
    /// Scales A's weights so that its total is B's (as `pprof -normalize` and
    /// `difffolded.pl -n` do, for two recordings of different lengths), each
    /// stack's share kept; rounded so that the stacks add up to B's total.
    pub fn normalize(&mut self) {
        let (from, to) = (self.base_total(), self.tree.total());
        if from == 0 {
            return;
        }
        let (mut cumulative, mut emitted) = (0u128, 0u64);
        let own: Vec<u64> = (self.base.iter())
            .map(|&(own, _)| {
                cumulative += u128::from(own);
                let upto = u64::try_from(cumulative * u128::from(to) / u128::from(from))
                    .unwrap_or(u64::MAX);
                let scaled = upto - emitted;
                emitted = upto;
                scaled
            })
            .collect();
        self.base = totals(&self.tree, &own);
    }

    /// The union of both trees' stacks, with B's weights.
    pub fn tree(&self) -> &FrameTree {
        &self.tree
    }

    /// `node`'s own weight in A and its total with its callees.
    pub fn base(&self, node: FrameId) -> (u64, u64) {
        self.base.get(node.index()).copied().unwrap_or((0, 0))
    }

    /// A's whole weight.
    pub fn base_total(&self) -> u64 {
        self.base(FrameId::ROOT).1
    }

    /// How `node`'s total changed from A to B.
    pub fn change(&self, node: FrameId) -> i128 {
        i128::from(self.tree.weight(node).1) - i128::from(self.base(node).1)
    }

    /// The largest change of any frame but the root's, either way (at least 1):
    /// what colours are scaled by.
    pub fn largest_change(&self) -> u128 {
        (1..self.tree.len())
            .map(|i| self.change(FrameId::from_index(i)).unsigned_abs())
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// Calls `f` with each stack that has weight in A or B (its frames, caller
    /// first), its own weight in A and in B, depth-first; stops at `f`'s first
    /// error.
    pub fn try_for_each_stack<E>(
        &self,
        mut f: impl FnMut(&[&str], u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let t = &self.tree;
        let mut stack: Vec<(FrameId, usize)> = vec![(FrameId::ROOT, 0)];
        let mut path: Vec<&str> = Vec::new();
        while let Some((n, depth)) = stack.pop() {
            let ((own_b, total_b), (own_a, total_a)) = (t.weight(n), self.base(n));
            if total_a == 0 && total_b == 0 {
                continue;
            }
            path.truncate(depth.saturating_sub(1));
            if n != FrameId::ROOT {
                path.push(t.name(n));
            }
            if own_a > 0 || own_b > 0 {
                f(&path, own_a, own_b)?;
            }
            let children: Vec<FrameId> = t.children(n).collect();
            stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
        }
        Ok(())
    }

    /// The stacks as differential folded lines, `frame;frame;frame A B`.
    pub fn write_folded(&self, out: &mut dyn io::Write) -> io::Result<()> {
        self.try_for_each_stack(|frames, a, b| {
            writeln!(out, "{} {a} {b}", folded::join(frames.iter().copied()))
        })
    }

    /// Each function's weight in A and in B ([`paths::functions`] of each
    /// tree), the largest change of its total first (then by name).
    pub fn functions(&self, base: &FrameTree) -> Vec<FunctionChange> {
        let mut index: rustc_hash::FxHashMap<String, usize> = Default::default();
        let mut out: Vec<FunctionChange> = Vec::new();
        for (side, t) in [(1, &self.tree), (0, base)] {
            for f in paths::functions(t) {
                let i = *index.entry(f.name.clone()).or_insert_with(|| {
                    out.push(FunctionChange {
                        name: f.name.clone(),
                        ..FunctionChange::default()
                    });
                    out.len() - 1
                });
                let row = &mut out[i];
                if side == 1 {
                    (row.total, row.own) = (f.total, f.own);
                } else {
                    (row.base_total, row.base_own) = (f.total, f.own);
                }
            }
        }
        // Names only A has are in B's union tree with no weight.
        out.retain(|r| r.total > 0 || r.base_total > 0);
        out.sort_by(|x, y| {
            (y.change().unsigned_abs())
                .cmp(&x.change().unsigned_abs())
                .then_with(|| x.name.cmp(&y.name))
        });
        out
    }
}

/// A function's weight in A and in B ([`DiffTree::functions`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FunctionChange {
    /// The frame's name.
    pub name: String,
    /// In A: the weight of the stacks it appears in, each once.
    pub base_total: u64,
    /// In A: the weight of the stacks it ends.
    pub base_own: u64,
    /// In B: the weight of the stacks it appears in, each once.
    pub total: u64,
    /// In B: the weight of the stacks it ends.
    #[serde(rename = "self")]
    pub own: u64,
}

impl FunctionChange {
    /// B's total less A's.
    pub fn change(&self) -> i128 {
        i128::from(self.total) - i128::from(self.base_total)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tree(lines: &[(&str, u64)]) -> FrameTree {
        FrameTree::from_folded(lines)
    }

    fn node(t: &FrameTree, path: &[&str]) -> FrameId {
        let mut n = FrameId::ROOT;
        for name in path {
            n = t.children(n).find(|&c| t.name(c) == *name).unwrap();
        }
        n
    }

    #[test]
    fn frames_carry_both_weights() {
        let a = tree(&[("main;f;g", 30), ("main;f", 10), ("main;gone", 5)]);
        let b = tree(&[("main;f;g", 50), ("main;f", 10), ("main;new", 7)]);
        let d = diff(&a, &b);
        let t = d.tree();
        assert_eq!((d.base_total(), t.total()), (45, 67));
        let f = node(t, &["main", "f"]);
        assert_eq!((d.base(f), t.weight(f)), ((10, 40), (10, 60)));
        assert_eq!(d.change(f), 20);
        let gone = node(t, &["main", "gone"]);
        assert_eq!((d.base(gone), t.weight(gone)), ((5, 5), (0, 0)));
        assert_eq!(d.change(gone), -5);
        let new = node(t, &["main", "new"]);
        assert_eq!((d.base(new), t.weight(new)), ((0, 0), (7, 7)));
        assert_eq!(d.largest_change(), 22, "main: 67 - 45");
    }

    #[test]
    fn folded_lines_are_difffolded() {
        let a = tree(&[("main;f;g", 30), ("main;gone", 5)]);
        let b = tree(&[("main;f;g", 50), ("main;new", 7)]);
        let mut out = Vec::new();
        diff(&a, &b).write_folded(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "main;f;g 30 50\nmain;gone 5 0\nmain;new 0 7\n"
        );
    }

    #[test]
    fn the_same_tree_changes_nothing() {
        let a = tree(&[("main;f;g", 30), ("main;f", 10)]);
        let d = diff(&a, &a);
        assert!((0..d.tree().len()).all(|i| d.change(FrameId::from_index(i)) == 0));
        assert_eq!(d.largest_change(), 1);
        assert!(d.functions(&a).iter().all(|f| f.change() == 0));
    }

    #[test]
    fn normalizing_scales_a_to_b_and_keeps_its_shares() {
        let a = tree(&[("main;f", 10), ("main;g", 20), ("main;h", 3)]);
        let b = tree(&[("main;f", 20), ("main;g", 40), ("main;h", 6)]);
        let mut d = diff(&a, &b);
        d.normalize();
        assert_eq!(d.base_total(), 66);
        assert!((0..d.tree().len()).all(|i| d.change(FrameId::from_index(i)) == 0));
        let a = tree(&[("main;f", 1), ("main;g", 1), ("main;h", 1)]);
        let mut d = diff(&a, &tree(&[("main;f", 10)]));
        d.normalize();
        let own: Vec<u64> = ["f", "g", "h"]
            .iter()
            .map(|n| d.base(node(d.tree(), &["main", n])).0)
            .collect();
        assert_eq!((own.iter().sum::<u64>(), d.base_total()), (10, 10));
        assert!(own.iter().all(|&w| w == 3 || w == 4), "{own:?}");
    }

    #[test]
    fn functions_rank_by_change() {
        let a = tree(&[("main;f;g", 30), ("main;h", 100), ("main;gone", 5)]);
        let b = tree(&[("main;f;g", 50), ("main;h", 99)]);
        let d = diff(&a, &b);
        let rows = d.functions(&a);
        let names: Vec<(&str, i128)> = rows.iter().map(|r| (r.name.as_str(), r.change())).collect();
        assert_eq!(
            names,
            [("f", 20), ("g", 20), ("main", 14), ("gone", -5), ("h", -1)]
        );
        let gone = rows.iter().find(|r| r.name == "gone").unwrap();
        assert_eq!((gone.base_total, gone.base_own, gone.total), (5, 5, 0));
    }
}
