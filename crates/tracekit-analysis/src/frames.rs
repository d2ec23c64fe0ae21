//! Frame trees: the backtrace trie ([`Backtraces`](crate::Backtraces)) relabelled by
//! what each entry prints as, with the weights of a profile's sites. This is what
//! folded stacks, flame graphs and the backtrace report are made from.
//!
//! The trie has one node per distinct prefix of location codes. Printing an entry can
//! give several frames (inlined functions, caller first), and distinct codes can print
//! the same (two codes of one function when frames show functions), so the frame tree
//! is built by walking the trie: each trie node that leads to a weighted site is mapped
//! once to the frame-tree node of its printed frames, its parent's node extended by the
//! entry's frames. Memory is a `u32` per trie node plus one node per distinct printed
//! prefix; no stack is ever held as a string.
//!
//! The tree is grown by the call-tree builder of `tracekit-stacks` (a node per
//! distinct (caller, frame name)), and frame names are made safe for folded stacks
//! as they enter it, by the one rule of `tracekit_stacks::folded` (a `;` becomes
//! `:`), which also writes them.
//!
//! Stacks come out depth-first, a node's own stack before its callees', callees in
//! order of their frame names. With weights in bytes each stack's weight is the rounded
//! cumulative byte count minus the previous one, so that the stacks add up exactly to
//! the rounded total.

use std::io;

use rustc_hash::FxHashMap;
use tracekit_columns::Spill;
use tracekit_memtrace::{LocationCode, LocationLookup};
use tracekit_stacks::{CallTree, Names, folded};

use crate::analyzer::Profile;
use crate::backtrace::{BacktraceId, Backtraces};
use crate::sampling::Sampling;
use crate::sites::SiteCounts;
use crate::symbols::{
    EMPTY_BACKTRACE, FrameLabel, FrameSkip, Naming, entry_labels, is_runtime_start,
};

/// Not mapped yet.
const NONE: u32 = u32::MAX;

/// A trie node's place in the frame tree when its stack has just passed the
/// runtime's frames ([`Naming`]): the root, the standard library's frames
/// still to be looked past.
const MAIN_ROOT: u32 = u32::MAX - 1;

/// Unit of folded-stack weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Estimated bytes (rounded so that the lines add up to the rounded total).
    Bytes,
    /// Samples.
    Samples,
}

impl Unit {
    /// `bytes` or `samples`, as the JSON answers name the unit.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Samples => "samples",
        }
    }
}

/// A frame-tree node's weights.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Weights {
    /// This stack's own weight (after rounding, in the tree's unit).
    own: u64,
    /// Own weight plus the callees'.
    total: u64,
}

tracekit_columns::plain_struct!(Weights {
    own: u64,
    total: u64
});

/// A frame-tree node: a printed stack, its parent's plus one frame (its name an
/// index into [`FrameTree::names`]).
type Node = tracekit_stacks::Node<Weights>;

/// How to print and weigh the stacks of a [`FrameTree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeOptions {
    /// What a frame shows.
    pub label: FrameLabel,
    /// Samples, or estimated bytes.
    pub unit: Unit,
    /// Merge runs of the same frame (direct recursion) into one.
    pub collapse_recursion: bool,
    /// Fold recursion, direct and indirect: a frame whose name is already on
    /// the stack joins that (innermost) frame, so that `a > b > a > b` is
    /// `a > b`.
    pub fold_recursion: bool,
    /// How frames are named, and whether stacks start at `main`.
    pub naming: Naming,
}

/// Stacks deeper than this many frames do not fit on a screen: a flame graph
/// folds their recursion unless asked not to.
pub const SCREEN_FRAMES: usize = 60;

/// The printed stacks of a profile's sites, merged into a tree, with their weights.
#[derive(Debug)]
pub struct FrameTree {
    names: Vec<Box<str>>,
    nodes: Vec<Node>,
    /// Children of node `i`: `children[child_start[i]..child_start[i + 1]]`, in order of
    /// their names.
    child_start: Vec<u32>,
    children: Vec<u32>,
    /// Stacks of non-zero weight.
    stacks: usize,
    /// Per node, the sampled objects of its own stack and with its callees; empty
    /// when the weights came without counts (then every node has 0), so that a
    /// tree that is not counted is no larger for it. `u32`, saturating: a count
    /// past 4 G objects is beyond any trace's.
    objects: Vec<(u32, u32)>,
}

/// A node of a [`FrameTree`], as its readers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FrameId(u32);

impl FrameId {
    /// The root: the empty stack, above every frame.
    pub const ROOT: FrameId = FrameId(0);

    /// The node's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The node of index `i` (below [`FrameTree::len`] for a node of that tree).
    pub fn from_index(i: usize) -> FrameId {
        FrameId(i as u32)
    }
}

impl FrameTree {
    /// The tree of `profile`'s sites, each weighted by `weight` (in samples, and the
    /// sampled objects that weight counts) and printed through `symbols` as `options`
    /// say. Sites of weight 0 are left out.
    pub fn build(
        profile: &Profile,
        symbols: &dyn LocationLookup,
        options: TreeOptions,
        weight: impl Fn(&SiteCounts) -> (u64, u64),
    ) -> FrameTree {
        Self::build_hiding(profile, symbols, options, &Hide::default(), weight)
    }

    /// [`FrameTree::build`], leaving out of the stacks the frames `hide` names (their
    /// callees join their callers).
    pub fn build_hiding(
        profile: &Profile,
        symbols: &dyn LocationLookup,
        options: TreeOptions,
        hide: &Hide,
        weight: impl Fn(&SiteCounts) -> (u64, u64),
    ) -> FrameTree {
        let mut b = Builder::new(profile.backtraces.len(), options, hide.clone());
        for (bt, counts) in profile.sites.iter() {
            let (w, objects) = weight(&counts);
            if w > 0 {
                let node = b.node_of(&profile.backtraces, symbols, bt);
                b.tree.add(node, w, objects);
            }
        }
        let bytes = (options.unit == Unit::Bytes).then_some(profile.sampling);
        b.tree.finish(bytes)
    }

    /// [`FrameTree::build_hiding`] with the options and hidden frames of
    /// `skeleton`, which holds the frames of the nodes of `profile`'s trie that
    /// folds before it mapped (and maps the others now): only the weights are
    /// added. The tree is the one `build_hiding` makes, node for node: its nodes
    /// are made in the same order, those of the stacks of non-zero weight, site
    /// after site, each stack's from the root down.
    pub(crate) fn build_on(
        skeleton: &mut Skeleton,
        profile: &Profile,
        symbols: &dyn LocationLookup,
        weight: impl Fn(&SiteCounts) -> (u64, u64),
    ) -> FrameTree {
        let b = &mut skeleton.builder;
        if b.map.len() < profile.backtraces.len() {
            b.map.resize(profile.backtraces.len(), NONE);
        }
        let mut out = Growing::new();
        // Skeleton node -> node of `out`, and skeleton name -> name of `out`.
        let mut node_in: Vec<u32> = Vec::new();
        let mut name_in: Vec<u32> = Vec::new();
        let mut path: Vec<u32> = Vec::new();
        for (bt, counts) in profile.sites.iter() {
            let (w, objects) = weight(&counts);
            if w == 0 {
                continue;
            }
            let node = b.node_of(&profile.backtraces, symbols, bt);
            if node_in.len() < b.tree.calls.len() {
                node_in.resize(b.tree.calls.len(), NONE);
                node_in[0] = 0;
            }
            if name_in.len() < b.tree.names.len() {
                name_in.resize(b.tree.names.len(), NONE);
                name_in[0] = 0;
            }
            let mut x = node;
            while node_in.get(x as usize).is_some_and(|&n| n == NONE) {
                path.push(x);
                x = b.tree.calls.node(x).map_or(0, |n| n.parent);
            }
            let mut parent = node_in.get(x as usize).copied().unwrap_or(0);
            while let Some(x) = path.pop() {
                let name = b.tree.calls.node(x).map_or(0, |n| n.name);
                let mut id = name_in.get(name as usize).copied().unwrap_or(NONE);
                if id == NONE {
                    id = out.name_id(b.tree.names.get(name).unwrap_or(""));
                    if let Some(slot) = name_in.get_mut(name as usize) {
                        *slot = id;
                    }
                }
                // A skeleton's node is one (parent, name) pair, so `out` has no
                // such child yet.
                parent = out.push_child(parent, id);
                if let Some(slot) = node_in.get_mut(x as usize) {
                    *slot = parent;
                }
            }
            out.add(parent, w, objects);
        }
        let bytes = (b.options.unit == Unit::Bytes).then_some(profile.sampling);
        out.finish(bytes)
    }

    /// For each of `profile.sites` (in order), the id of its printed stack, frames
    /// shown as `label` and `naming` says, down to the site (the innermost frame
    /// `site` does not skip; the frames inside it are left out): two sites have
    /// the same id exactly when their stacks print the same. Also the number of
    /// ids (the largest is below it). Nothing is weighed or sorted, so this is
    /// cheaper than [`FrameTree::build`].
    pub fn site_stacks(
        profile: &Profile,
        symbols: &dyn LocationLookup,
        label: FrameLabel,
        site: &FrameSkip,
    ) -> (Vec<FrameId>, usize) {
        let options = TreeOptions {
            label,
            unit: Unit::Samples,
            collapse_recursion: false,
            fold_recursion: false,
            naming: site.naming,
        };
        // Never finished, the tree may stay where it grew: in the sites' folder.
        let (nodes, spill) = (profile.backtraces.len(), profile.sites.spill());
        let mut b = Builder::spilling(nodes, options, Hide::default(), spill);
        b.site = Some(site.clone());
        let ids = profile
            .sites
            .iter()
            .map(|(bt, _)| {
                let node = b.node_of(&profile.backtraces, symbols, bt);
                FrameId(b.site_node(node))
            })
            .collect();
        (ids, b.tree.calls.len())
    }

    /// The tree of folded stacks (`frame;frame;frame`, and a weight), their weights
    /// taken as they are.
    pub fn from_folded<S: AsRef<str>>(lines: &[(S, u64)]) -> FrameTree {
        let mut t = Growing::new();
        for (stack, w) in lines {
            let mut node = 0;
            for frame in folded::frames(stack.as_ref()) {
                let name = t.name_id(frame);
                node = t.child(node, name);
            }
            t.add(node, *w, 0);
        }
        t.finish(None)
    }

    /// Sorts each node's children by name, into one flat array. The names are
    /// ranked once, so that siblings sort by integers rather than by text, and the
    /// nodes go into their parents' runs in one pass.
    fn index_children(&mut self) {
        let mut by_name: Vec<u32> = (0..self.names.len() as u32).collect();
        let names = &self.names;
        by_name.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut rank = vec![0u32; self.names.len()];
        for (r, &n) in by_name.iter().enumerate() {
            rank[n as usize] = r as u32;
        }
        let mut start = vec![0u32; self.nodes.len() + 1];
        for n in self.nodes.iter().skip(1) {
            start[n.parent as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut next = start.clone();
        // Each child with its name's rank above it, so that siblings sort as
        // plain integers, with no lookup of node and rank per comparison.
        let mut ranked = vec![0u64; self.nodes.len().saturating_sub(1)];
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let at = &mut next[n.parent as usize];
            ranked[*at as usize] = u64::from(rank[n.name as usize]) << 32 | i as u64;
            *at += 1;
        }
        for p in 0..self.nodes.len() {
            let run = &mut ranked[start[p] as usize..start[p + 1] as usize];
            if run.len() > 1 {
                run.sort_unstable();
            }
        }
        self.child_start = start;
        self.children = ranked.into_iter().map(|c| c as u32).collect();
    }

    /// Turns own weights from samples into bytes when `bytes` gives the sampling
    /// (rounded so that the stacks add up to the rounded total, in output order), then
    /// sums the totals.
    fn settle(&mut self, bytes: Option<Sampling>) {
        let mut cumulative: u64 = 0;
        let mut emitted: u64 = 0;
        let mut stacks = 0;
        let order = self.preorder();
        // Own weights apart, read in node order and written back after: in
        // output order they are read at random, and a node's whole record
        // per read costs several times the cache misses.
        let mut owns: Vec<u64> = self.nodes.iter().map(|n| n.data.own).collect();
        for &n in &order {
            let Some(own) = owns.get_mut(n as usize) else {
                continue;
            };
            if *own == 0 {
                continue;
            }
            if let Some(sampling) = bytes {
                cumulative = cumulative.saturating_add(*own);
                let upto = sampling.bytes(cumulative);
                *own = upto.saturating_sub(emitted);
                emitted = upto;
            }
            stacks += usize::from(*own > 0);
        }
        for (node, own) in self.nodes.iter_mut().zip(owns) {
            node.data.own = own;
        }
        self.stacks = stacks;
        // Children come after their parents in node order: sum bottom-up.
        for i in (0..self.nodes.len()).rev() {
            let n = self.nodes[i];
            let total = n.data.total.saturating_add(n.data.own);
            self.nodes[i].data.total = total;
            if i > 0 {
                let p = &mut self.nodes[n.parent as usize].data;
                p.total = p.total.saturating_add(total);
            }
            if let Some(&(own, callees)) = self.objects.get(i) {
                let total = callees.saturating_add(own);
                self.objects[i].1 = total;
                if let Some(p) = self.objects.get_mut(n.parent as usize).filter(|_| i > 0) {
                    p.1 = p.1.saturating_add(total);
                }
            }
        }
    }

    /// Every node, depth-first, callers before callees, siblings by name.
    fn preorder(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            out.push(n);
            stack.extend(self.children_of(n).iter().rev());
        }
        out
    }

    fn children_of(&self, n: u32) -> &[u32] {
        let (s, e) = (
            self.child_start[n as usize] as usize,
            self.child_start[n as usize + 1] as usize,
        );
        self.children.get(s..e).unwrap_or(&[])
    }

    /// Number of nodes, the root included (node indexes are below it; a caller's
    /// index is below its callees').
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree is the root alone.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() < 2
    }

    /// Number of stacks (of non-zero weight).
    pub fn stacks(&self) -> usize {
        self.stacks
    }

    /// The most frames on one stack.
    pub fn depth(&self) -> usize {
        // A node's index is below its callees'.
        let mut depth = vec![0usize; self.nodes.len()];
        let mut most = 0;
        for i in 1..self.nodes.len() {
            let d = depth[self.nodes[i].parent as usize] + 1;
            depth[i] = d;
            most = most.max(d);
        }
        most
    }

    /// The sum of all stacks' weights.
    pub fn total(&self) -> u64 {
        self.nodes[0].data.total
    }

    /// `node`'s frame name (`all` for the root).
    pub fn name(&self, node: FrameId) -> &str {
        let n = self.nodes[node.0 as usize].name;
        &self.names[n as usize]
    }

    /// `node`'s own weight and its total with its callees'.
    pub fn weight(&self, node: FrameId) -> (u64, u64) {
        let n = &self.nodes[node.0 as usize].data;
        (n.own, n.total)
    }

    /// The sampled objects of `node`'s own stack and of it with its callees (0 for
    /// a tree made from folded stacks, which have no counts).
    pub fn objects(&self, node: FrameId) -> (u64, u64) {
        let (own, total) = self.objects.get(node.0 as usize).copied().unwrap_or((0, 0));
        (u64::from(own), u64::from(total))
    }

    /// `node`'s caller (the root is its own).
    pub fn parent(&self, node: FrameId) -> FrameId {
        FrameId(self.nodes[node.0 as usize].parent)
    }

    /// `node`'s callees, in order of their names.
    pub fn children(&self, node: FrameId) -> impl Iterator<Item = FrameId> + '_ {
        self.children_of(node.0).iter().map(|&c| FrameId(c))
    }

    /// Calls `f` with each stack of non-zero weight (its frames, caller first) and
    /// that weight, depth-first; stops at `f`'s first error.
    pub fn try_for_each_stack<E>(
        &self,
        mut f: impl FnMut(&[&str], u64) -> Result<(), E>,
    ) -> Result<(), E> {
        // (node, depth) to visit; `path` holds the frames above the node being visited.
        let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
        let mut path: Vec<&str> = Vec::new();
        while let Some((n, depth)) = stack.pop() {
            let node = &self.nodes[n as usize];
            if node.data.total == 0 {
                continue;
            }
            path.truncate(depth.saturating_sub(1));
            if n != 0 {
                path.push(&self.names[node.name as usize]);
            }
            if node.data.own > 0 {
                f(&path, node.data.own)?;
            }
            for &c in self.children_of(n).iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        Ok(())
    }

    /// The folded stacks as text, `frame;frame;frame weight` a line, written to `out`
    /// as they are produced.
    pub fn write_folded(&self, out: &mut dyn io::Write) -> io::Result<()> {
        self.try_for_each_stack(|frames, w| folded::write_line(out, frames.iter().copied(), w))
    }

    /// The stacks as `(frames joined by ;, weight)` pairs: a string per stack, for small
    /// profiles and tests ([`FrameTree::write_folded`] streams them instead).
    pub fn lines(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(self.stacks);
        let _ = self.try_for_each_stack(|frames, w| {
            out.push((folded::join(frames.iter().copied()), w));
            Ok::<(), ()>(())
        });
        out
    }
}

/// A [`FrameTree`] grown by hand, frame by frame, with weights already in the
/// tree's unit (for trees made from another tree's stacks).
pub(crate) struct Grower(Growing);

impl Grower {
    /// An empty tree: the root alone.
    pub(crate) fn new() -> Grower {
        Grower(Growing::new())
    }

    /// The root.
    pub(crate) const ROOT: u32 = 0;

    /// `parent`'s callee named `name`, made if new.
    pub(crate) fn child(&mut self, parent: u32, name: &str) -> u32 {
        let name = self.0.name_id(name);
        self.0.child(parent, name)
    }

    /// Adds to `node`'s own weight and objects.
    pub(crate) fn add(&mut self, node: u32, weight: u64, objects: u64) {
        self.0.add(node, weight, objects);
    }

    /// The tree.
    pub(crate) fn finish(self) -> FrameTree {
        self.0.finish(None)
    }
}

/// A frame tree being grown: its names, and the call tree of their numbers.
struct Growing {
    names: Names,
    calls: CallTree<Weights>,
    /// Own objects per node ([`FrameTree::objects`]): empty until a count is added.
    objects: Vec<(u32, u32)>,
}

impl Growing {
    fn new() -> Growing {
        Growing::spilling(&Spill::memory())
    }

    /// An empty tree whose call tree grows where `spill` says.
    fn spilling(spill: &Spill) -> Growing {
        let mut names = Names::new();
        // Name 0 is the root's.
        let root = names.id("all");
        Growing {
            names,
            calls: CallTree::spilling(root, spill),
            objects: Vec::new(),
        }
    }

    #[inline]
    fn name_id(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    /// `node` or its innermost caller named `name`, if one is.
    fn ancestor_named(&self, node: u32, name: u32) -> Option<u32> {
        self.calls.ancestor_named(node, name)
    }

    #[inline]
    fn child(&mut self, parent: u32, name: u32) -> u32 {
        self.calls.child(parent, name)
    }

    /// A new child `name` of `parent`, which has none of that name: not entered
    /// in the child table, which only [`Growing::child`] needs.
    fn push_child(&mut self, parent: u32, name: u32) -> u32 {
        self.calls.push_child(parent, name)
    }

    fn add(&mut self, node: u32, w: u64, objects: u64) {
        if let Some(n) = self.calls.data_mut(node) {
            n.own = n.own.saturating_add(w);
        }
        if objects > 0 {
            // Nodes made after this are given their slot in `finish`.
            if self.objects.len() < self.calls.len() {
                self.objects.resize(self.calls.len(), (0, 0));
            }
            if let Some(o) = self.objects.get_mut(node as usize) {
                o.0 =
                    o.0.saturating_add(u32::try_from(objects).unwrap_or(u32::MAX));
            }
        }
    }

    fn finish(self, bytes: Option<Sampling>) -> FrameTree {
        // The child table is only for growing: gone before the tree's own indexes are made.
        let Growing {
            names,
            calls,
            mut objects,
        } = self;
        let nodes = calls.into_nodes().into_vec();
        if !objects.is_empty() {
            objects.resize(nodes.len(), (0, 0));
        }
        let mut tree = FrameTree {
            names: names.into_vec(),
            nodes,
            child_start: Vec::new(),
            children: Vec::new(),
            stacks: 0,
            objects,
        };
        tree.index_children();
        tree.settle(bytes);
        tree
    }
}

/// The frames of a backtrace trie's nodes under some [`TreeOptions`] and
/// [`Hide`], kept between folds of profiles over one trie (the passes over trace
/// tables, whose profiles share the tables' trie), so that a fold finds each
/// site's stack by index instead of by name ([`FrameTree::build_on`]).
pub(crate) struct Skeleton {
    builder: Builder,
}

impl Skeleton {
    /// An empty skeleton: no node mapped yet.
    pub(crate) fn new(options: TreeOptions, hide: Hide) -> Skeleton {
        Skeleton {
            builder: Builder::new(0, options, hide),
        }
    }

    /// Whether the skeleton is of these options.
    pub(crate) fn is_of(&self, options: TreeOptions, hide: &Hide) -> bool {
        self.builder.options == options && self.builder.hide == *hide
    }
}

/// State while a [`FrameTree`] is built from a profile.
struct Builder {
    options: TreeOptions,
    /// Trie node → frame-tree node (`NONE`: not mapped yet).
    map: Vec<u32>,
    tree: Growing,
    /// A location code's printed frames: a range of `frame_names`, and whether
    /// the code holds the runtime's start, its stacks starting after it.
    code_names: FxHashMap<LocationCode, (u32, u32, bool)>,
    /// The name ids of every code's frames, one run per code.
    frame_names: Vec<u32>,
    /// Whether each of `frame_names` is of the standard library.
    frame_std: Vec<bool>,
    /// The standard library's frames.
    std: FrameSkip,
    scratch: Vec<BacktraceId>,
    labels: Vec<String>,
    /// Frames left out.
    hide: Hide,
    /// What a site looks past, when stacks end at their sites.
    site: Option<FrameSkip>,
    /// The names of frames `site` skips.
    skipped_names: rustc_hash::FxHashSet<u32>,
}

impl Builder {
    /// A builder for a trie of `nodes` nodes (more are mapped as they come).
    fn new(nodes: usize, options: TreeOptions, hide: Hide) -> Self {
        Builder::spilling(nodes, options, hide, &Spill::memory())
    }

    /// [`Builder::new`], its tree grown where `spill` says.
    fn spilling(nodes: usize, options: TreeOptions, hide: Hide, spill: &Spill) -> Self {
        let mut map = vec![NONE; nodes.max(1)];
        if let Some(m) = map.first_mut() {
            // The empty backtrace is the root (the trie's root maps to the tree's).
            *m = 0;
        }
        Builder {
            options,
            map,
            tree: Growing::spilling(spill),
            code_names: FxHashMap::default(),
            frame_names: Vec::new(),
            frame_std: Vec::new(),
            std: FrameSkip::rust_std(),
            scratch: Vec::new(),
            labels: Vec::new(),
            hide,
            site: None,
            skipped_names: Default::default(),
        }
    }

    /// The node of `node`'s site: `node`, or its nearest caller whose frame the
    /// site does not skip (`node` itself when every frame is skipped).
    fn site_node(&self, node: u32) -> u32 {
        let mut at = node;
        while at != 0 {
            let Some(n) = self.tree.calls.node(at) else {
                break;
            };
            if !self.skipped_names.contains(&n.name) {
                return at;
            }
            at = n.parent;
        }
        node
    }

    /// The frame-tree node of trie node `bt`, mapping the unmapped ones above it first.
    fn node_of(&mut self, bts: &Backtraces, symbols: &dyn LocationLookup, bt: BacktraceId) -> u32 {
        if bt == BacktraceId::EMPTY {
            let name = self.tree.name_id(EMPTY_BACKTRACE);
            return self.tree.child(0, name);
        }
        if self.map.len() < bts.len() {
            self.map.resize(bts.len(), NONE);
        }
        self.scratch.clear();
        let mut cur = bt;
        while self.map.get(cur.0 as usize).is_some_and(|&m| m == NONE) {
            self.scratch.push(cur);
            cur = bts.parent(cur);
        }
        let mut node = self.map.get(cur.0 as usize).copied().unwrap_or(0);
        while let Some(b) = self.scratch.pop() {
            if let Some(code) = bts.leaf(b) {
                node = self.extend(symbols, node, code);
            }
            if let Some(m) = self.map.get_mut(b.0 as usize) {
                *m = node;
            }
        }
        if node == MAIN_ROOT { 0 } else { node }
    }

    /// `node` extended by the frames `code` prints. A code holding the
    /// runtime's start (when stacks start at `main`) starts the stack again
    /// after it, at the root, the standard library's frames looked past until
    /// the program's first.
    fn extend(&mut self, symbols: &dyn LocationLookup, mut node: u32, code: LocationCode) -> u32 {
        let (start, end, reset) = match self.code_names.get(&code) {
            Some(&range) => range,
            None => {
                self.labels.clear();
                let naming = self.options.naming;
                entry_labels(symbols, code, self.options.label, naming, &mut self.labels);
                // One label per location, or one `$code` label without any.
                let locations = symbols.locations(code).unwrap_or(&[]);
                let after = match naming.from_main() {
                    true => locations.iter().rposition(is_runtime_start).map(|k| k + 1),
                    false => None,
                };
                let start = self.frame_names.len() as u32;
                for (i, l) in self.labels.iter().enumerate().skip(after.unwrap_or(0)) {
                    let name = folded::frame(l);
                    let location = locations.get(i);
                    let function = location.map(|l| l.defname.to_string());
                    if self.hide.hides(&name, function.as_deref()) {
                        continue;
                    }
                    let id = self.tree.name_id(&name);
                    if let (Some(site), Some(l)) = (&self.site, location)
                        && site.skips(l)
                    {
                        self.skipped_names.insert(id);
                    }
                    self.frame_names.push(id);
                    self.frame_std
                        .push(location.is_some_and(|l| self.std.skips(l)));
                }
                let range = (start, self.frame_names.len() as u32, after.is_some());
                self.code_names.insert(code, range);
                range
            }
        };
        if reset {
            node = MAIN_ROOT;
        }
        for i in start..end {
            if node == MAIN_ROOT {
                if self.frame_std.get(i as usize) == Some(&true) {
                    continue;
                }
                node = 0;
            }
            let name = self.frame_names[i as usize];
            if self.options.fold_recursion
                && let Some(outer) = self.tree.ancestor_named(node, name)
            {
                node = outer;
                continue;
            }
            let repeat = self.tree.calls.node(node).is_some_and(|n| n.name == name);
            if self.options.collapse_recursion && node != 0 && repeat {
                continue;
            }
            node = self.tree.child(node, name);
        }
        node
    }
}

/// Frames a [`FrameTree`] leaves out of its stacks (their callees join their
/// callers): memtrace_viewer's *hide* clauses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hide {
    /// Frames whose printed name contains one of these.
    pub containing: Vec<String>,
    /// Frames of a location in one of these functions (its defname equals the text).
    pub functions: Vec<String>,
}

impl Hide {
    /// Whether nothing is hidden.
    pub fn is_empty(&self) -> bool {
        self.containing.is_empty() && self.functions.is_empty()
    }

    /// Whether the frame printed as `name`, of a location in `function` (if it has
    /// a location), is hidden.
    fn hides(&self, name: &str, function: Option<&str>) -> bool {
        self.containing.iter().any(|h| name.contains(h.as_str()))
            || function.is_some_and(|f| self.functions.iter().any(|h| h == f))
    }
}
