//! Backtrace interning: every distinct backtrace of the trace becomes one
//! [`BacktraceId`], a node of a prefix tree keyed by location code.
//!
//! Memtrace alloc events carry `common_prefix`, the number of leading (outermost)
//! entries shared with the previous alloc of the same domain (format notes section 5).
//! The trie keeps, per domain, the node path of the previous backtrace, so an alloc
//! costs one step per *new* entry, exactly like the decoder, and never a copy or a
//! hash of the whole backtrace. Deep OCaml stacks (a thousand frames) that differ only
//! in their last frames therefore cost a few steps each.
//!
//! Memory is one node per distinct prefix, so it is bounded by the total length of the
//! distinct backtraces, independent of the number of events.

use tracekit_columns::store::le_at;
use tracekit_columns::{Grow, Plain, Spill, Store};
use tracekit_memtrace::{DomainId, LocationCode};
use tracekit_stacks::IdTable;

/// An interned backtrace: a node of the trie. The root ([`BacktraceId::EMPTY`]) is the
/// empty backtrace; every other node is its parent's backtrace plus one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct BacktraceId(pub u32);

// SAFETY: `repr(transparent)` over a `u32`: 4 bytes, every pattern an id.
unsafe impl Plain for BacktraceId {
    const WIDTH: usize = 4;

    fn from_le(b: &[u8]) -> Self {
        BacktraceId(le_at(b, 0))
    }
}

impl BacktraceId {
    /// The empty backtrace.
    pub const EMPTY: BacktraceId = BacktraceId(0);

    fn ix(self) -> usize {
        self.0 as usize
    }
}

/// No cached child yet / no site.
const NONE: u32 = u32::MAX;

/// One trie node. The last child reached from it and that child's code live in the
/// node itself, so following a cached edge touches only the parent, which the walk has
/// just visited: the common case costs no cache miss.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Node {
    code: LocationCode,
    last_child_code: LocationCode,
    parent: u32,
    last_child: u32,
    depth: u32,
    /// The caller's index for this backtrace (see [`Backtraces::site`]).
    site: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() == 32 && std::mem::align_of::<Node>() == 8);

// SAFETY: `Node` is `repr(C)` of two 8-byte codes (each an `i64`) and four
// `u32`s, 32 bytes with no padding (asserted above); every pattern of them is
// a node's fields (integers have no invalid values). Nodes only spill to a
// file of their own trie, read back by the same process.
unsafe impl Plain for Node {
    const WIDTH: usize = 32;

    fn from_le(b: &[u8]) -> Self {
        Node {
            code: LocationCode::new(le_at::<u64>(b, 0) as i64),
            last_child_code: LocationCode::new(le_at::<u64>(b, 8) as i64),
            parent: le_at(b, 16),
            last_child: le_at(b, 20),
            depth: le_at(b, 24),
            site: le_at(b, 28),
        }
    }
}

/// A node's key in the child table: its parent and its code.
#[inline]
fn child_key(parent: u32, code: LocationCode) -> u64 {
    code.get() as u64 ^ u64::from(parent).rotate_left(32)
}

/// The trie of backtraces.
#[derive(Clone, Debug)]
pub struct Backtraces {
    /// In memory, or in a file when the trie was made to spill
    /// ([`Backtraces::spilling`]).
    nodes: Grow<Node>,
    /// Every node but the root, by its `parent` and `code`.
    children: IdTable,
    /// Per domain, the node path of its previous alloc's backtrace (`path[i]` is the
    /// node of its first `i + 1` entries).
    paths: Vec<(DomainId, Vec<u32>)>,
    last_domain: usize,
    /// A trie read back as columns ([`Backtraces::from_columns`]), where they
    /// are (in a mapped cache file), `nodes` and `children` left empty: nothing
    /// of it in memory. Read only; a change makes it a trie in memory first.
    columns: Option<Box<Columns>>,
}

/// A trie's nodes as columns, each node's parent, location code and depth.
#[derive(Clone, Debug)]
struct Columns {
    parent: Store<u32>,
    code: Store<u64>,
    depth: Store<u32>,
}

impl Default for Backtraces {
    fn default() -> Self {
        Self::new()
    }
}

impl Backtraces {
    /// A trie holding only the empty backtrace.
    pub fn new() -> Self {
        Backtraces::spilling(&Spill::memory())
    }

    /// [`Backtraces::new`], its nodes grown as `spill` says: in a file rather
    /// than in memory past a few MiB ([`tracekit_columns::spill`]).
    pub fn spilling(spill: &Spill) -> Self {
        let mut nodes = Grow::new(spill);
        nodes.push(Node {
            code: LocationCode::new(0),
            last_child_code: LocationCode::new(0),
            parent: 0,
            last_child: NONE,
            depth: 0,
            site: NONE,
        });
        Backtraces {
            nodes,
            children: IdTable::spilling(spill),
            paths: Vec::new(),
            last_domain: 0,
            columns: None,
        }
    }

    /// The trie whose node `i` has parent `parent[i]`, location code `code[i]`
    /// (its bits) and depth `depth[i]`, read where the columns are: `None`
    /// unless they are a trie's (as long as each other, the root first, each
    /// node's parent before it, each depth one more than its parent's).
    pub fn from_columns(
        parent: Store<u32>,
        code: Store<u64>,
        depth: Store<u32>,
    ) -> Option<Backtraces> {
        let n = parent.len();
        if n == 0 || code.len() != n || depth.len() != n || parent[0] != 0 || depth[0] != 0 {
            return None;
        }
        let consistent = (1..n).all(|i| {
            let p = parent[i] as usize;
            p < i && depth[p].checked_add(1) == Some(depth[i])
        });
        consistent.then(|| Backtraces {
            columns: Some(Box::new(Columns {
                parent,
                code,
                depth,
            })),
            nodes: Grow::new(&Spill::memory()),
            ..Backtraces::new()
        })
    }

    /// Makes a trie read back as columns one in memory, to be changed: a
    /// check inline, the work out of line.
    #[inline(always)]
    fn thawed(&mut self) {
        if self.columns.is_some() {
            self.thaw();
        }
    }

    /// A trie read back as columns made a trie in memory, to be changed.
    #[cold]
    fn thaw(&mut self) {
        let Some(c) = self.columns.take() else {
            return;
        };
        *self = Backtraces::new();
        for i in 1..c.parent.len() {
            let (parent, code) = (c.parent[i], LocationCode::new(c.code[i] as i64));
            // A node that repeats another (which no trie written here has) keeps
            // its id, unindexed: interning finds the first.
            let slot = self.find(parent, code).err();
            self.push_node(parent, code, c.depth[i], slot);
        }
    }

    /// Number of distinct prefixes (nodes), the root included.
    pub fn len(&self) -> usize {
        match &self.columns {
            Some(c) => c.parent.len(),
            None => self.nodes.len(),
        }
    }

    /// True when only the empty backtrace exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 1
    }

    /// Interns `backtrace` (caller first) for an alloc of `domain` whose first
    /// `common_prefix` entries equal the previous alloc's of that domain.
    ///
    /// `common_prefix` may be larger than either backtrace; only the entries both have
    /// are reused.
    #[inline]
    pub fn intern(
        &mut self,
        domain: DomainId,
        common_prefix: usize,
        backtrace: &[LocationCode],
    ) -> BacktraceId {
        self.thawed();
        let slot = self.path_slot(domain);
        let path_len = self.paths[slot].1.len();
        let keep = common_prefix.min(backtrace.len()).min(path_len);
        self.intern_at(slot, keep, &backtrace[keep..])
    }

    /// Interns the backtrace made of the first `keep` entries of `domain`'s previous
    /// backtrace followed by `suffix`. `keep` must not exceed the previous backtrace's
    /// length ([`Backtraces::previous_len`]); larger values are clamped.
    ///
    /// This is [`Backtraces::intern`] for a source that sends only the new entries.
    #[inline]
    pub fn intern_suffix(
        &mut self,
        domain: DomainId,
        keep: usize,
        suffix: &[LocationCode],
    ) -> BacktraceId {
        self.thawed();
        let slot = self.path_slot(domain);
        let keep = keep.min(self.paths[slot].1.len());
        self.intern_at(slot, keep, suffix)
    }

    /// Length of `domain`'s previous backtrace (0 before its first).
    pub fn previous_len(&self, domain: DomainId) -> usize {
        self.paths
            .iter()
            .find(|(d, _)| *d == domain)
            .map_or(0, |(_, p)| p.len())
    }

    #[inline]
    fn intern_at(&mut self, slot: usize, keep: usize, suffix: &[LocationCode]) -> BacktraceId {
        let path = &self.paths[slot].1;
        if suffix.is_empty() && keep == path.len() {
            // Same backtrace as last time: nothing to walk.
            return BacktraceId(path.last().copied().unwrap_or(0));
        }
        let mut path = std::mem::take(&mut self.paths[slot].1);
        path.truncate(keep);
        let mut node = match path.last() {
            Some(&n) => n,
            None => 0,
        };
        for &code in suffix {
            node = self.child(node, code);
            path.push(node);
        }
        self.paths[slot].1 = path;
        BacktraceId(node)
    }

    /// Adds the child of `parent` with `code` as the next node, for a trie read
    /// back in the order of its nodes; `None` when `parent` is not a node yet or
    /// the child exists already (the nodes were not a trie's, in order).
    pub fn push_child(&mut self, parent: BacktraceId, code: LocationCode) -> Option<BacktraceId> {
        self.thawed();
        let next = self.nodes.len();
        if parent.ix() >= next {
            return None;
        }
        let child = self.child(parent.0, code);
        (child as usize == next).then_some(BacktraceId(child))
    }

    /// Interns `backtrace` without any prefix hint.
    #[inline]
    pub fn intern_full(&mut self, backtrace: &[LocationCode]) -> BacktraceId {
        self.thawed();
        let mut node = 0;
        for &code in backtrace {
            node = self.child(node, code);
        }
        BacktraceId(node)
    }

    #[inline]
    fn path_slot(&mut self, domain: DomainId) -> usize {
        if let Some((d, _)) = self.paths.get(self.last_domain)
            && *d == domain
        {
            return self.last_domain;
        }
        let slot = match self.paths.iter().position(|(d, _)| *d == domain) {
            Some(i) => i,
            None => {
                self.paths.push((domain, Vec::new()));
                self.paths.len() - 1
            }
        };
        self.last_domain = slot;
        slot
    }

    #[inline]
    fn child(&mut self, parent: u32, code: LocationCode) -> u32 {
        let p = &self.nodes[parent as usize];
        if p.last_child != NONE && p.last_child_code == code {
            return p.last_child;
        }
        let child = self.find_or_add(parent, code);
        if let Some(p) = self.nodes.get_mut(parent as usize) {
            p.last_child = child;
            p.last_child_code = code;
        }
        child
    }

    /// The child of `parent` with `code`, made if it is new.
    #[inline]
    fn find_or_add(&mut self, parent: u32, code: LocationCode) -> u32 {
        match self.find(parent, code) {
            Ok(c) => c,
            Err(slot) => self.add(slot, parent, code),
        }
    }

    /// The child of `parent` with `code`, or the empty slot of the child table
    /// where it would go.
    #[inline]
    fn find(&self, parent: u32, code: LocationCode) -> Result<u32, usize> {
        let nodes = &self.nodes;
        self.children.find(child_key(parent, code), |c| {
            let n = &nodes[c as usize];
            n.parent == parent && n.code == code
        })
    }

    /// A new child of `parent` with `code`, in the empty table slot `slot`.
    #[cold]
    fn add(&mut self, slot: usize, parent: u32, code: LocationCode) -> u32 {
        let Ok(next) = u32::try_from(self.nodes.len()) else {
            return parent;
        };
        if next == NONE {
            // 2^32 distinct prefixes: attribute deeper entries to the parent rather
            // than overflow ids. Memory runs out long before this in practice.
            return parent;
        }
        let depth = self.nodes[parent as usize].depth + 1;
        self.push_node(parent, code, depth, Some(slot))
    }

    /// Appends a node, indexed in the child table at `slot` when given.
    fn push_node(
        &mut self,
        parent: u32,
        code: LocationCode,
        depth: u32,
        slot: Option<usize>,
    ) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            code,
            last_child_code: LocationCode::new(0),
            parent,
            last_child: NONE,
            depth,
            site: NONE,
        });
        if let Some(slot) = slot {
            let nodes = &self.nodes;
            let key_of = |id: u32| {
                let n = &nodes[id as usize];
                child_key(n.parent, n.code)
            };
            self.children.insert(slot, id, nodes.len(), key_of);
        }
        id
    }

    /// The caller's index attached to `id` by [`Backtraces::set_site`], if any. The
    /// analysis keeps its per-backtrace counts this way, next to the node it has just
    /// walked to, in a trie it grows itself (a trie grown elsewhere and shared with
    /// it, as the trace tables', carries no sites).
    #[inline]
    pub fn site(&self, id: BacktraceId) -> Option<u32> {
        match self.nodes.get(id.ix()) {
            Some(n) if n.site != NONE => Some(n.site),
            _ => None,
        }
    }

    /// Attaches `site` (not `u32::MAX`) to `id`.
    #[inline]
    pub fn set_site(&mut self, id: BacktraceId, site: u32) {
        self.thawed();
        if let Some(n) = self.nodes.get_mut(id.ix()) {
            n.site = site;
        }
    }

    /// The backtrace without its last entry ([`BacktraceId::EMPTY`] stays empty).
    pub fn parent(&self, id: BacktraceId) -> BacktraceId {
        BacktraceId(match &self.columns {
            Some(c) => c.parent.get(id.ix()).copied().unwrap_or(0),
            None => self.nodes.get(id.ix()).map_or(0, |n| n.parent),
        })
    }

    /// The last entry (the allocation site), or `None` for the empty backtrace.
    pub fn leaf(&self, id: BacktraceId) -> Option<LocationCode> {
        if id == BacktraceId::EMPTY {
            return None;
        }
        match &self.columns {
            Some(c) => c.code.get(id.ix()).map(|&b| LocationCode::new(b as i64)),
            None => self.nodes.get(id.ix()).map(|n| n.code),
        }
    }

    /// Number of entries.
    pub fn depth(&self, id: BacktraceId) -> usize {
        match &self.columns {
            Some(c) => c.depth.get(id.ix()).map_or(0, |&d| d as usize),
            None => self.nodes.get(id.ix()).map_or(0, |n| n.depth as usize),
        }
    }

    /// The entries of `id`, caller first, written into `out` (which is cleared).
    pub fn codes_into(&self, id: BacktraceId, out: &mut Vec<LocationCode>) {
        out.clear();
        let mut node = BacktraceId(id.0.min(self.len().saturating_sub(1) as u32));
        while node != BacktraceId::EMPTY {
            out.extend(self.leaf(node));
            node = self.parent(node);
        }
        out.reverse();
    }

    /// The entries of `id`, caller first.
    pub fn codes(&self, id: BacktraceId) -> Vec<LocationCode> {
        let mut out = Vec::new();
        self.codes_into(id, &mut out);
        out
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        let columns = self.columns.as_ref().map_or(0, |c| {
            c.parent.own_bytes() + c.code.own_bytes() + c.depth.own_bytes()
        });
        columns
            + self.nodes.own_bytes()
            + self.children.heap_bytes()
            + self
                .paths
                .iter()
                .map(|(_, p)| p.capacity() * 4)
                .sum::<usize>()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn codes(v: &[u64]) -> Vec<LocationCode> {
        v.iter().map(|&c| LocationCode::new(c as i64)).collect()
    }

    #[test]
    fn prefix_reuse_matches_full_interning() {
        let mut t = Backtraces::new();
        let d = DomainId::new(0);
        let a = t.intern(d, 0, &codes(&[1, 2, 3]));
        let b = t.intern(d, 2, &codes(&[1, 2, 4]));
        let c = t.intern(d, 3, &codes(&[1, 2, 4]));
        assert_eq!(b, c);
        assert_ne!(a, b);
        assert_eq!(t.codes(a), codes(&[1, 2, 3]));
        assert_eq!(t.codes(b), codes(&[1, 2, 4]));
        assert_eq!(t.intern_full(&codes(&[1, 2, 3])), a);
        assert_eq!(t.parent(a), t.parent(b));
        assert_eq!(t.leaf(a), Some(LocationCode::new(3)));
        assert_eq!(t.depth(a), 3);
        assert_eq!(t.len(), 5);
    }

    /// A trie's nodes as columns, as a cache file keeps them.
    fn columns_of(t: &Backtraces) -> (Store<u32>, Store<u64>, Store<u32>) {
        let ids = || (0..t.len()).map(|i| BacktraceId(i as u32));
        (
            Store::from_vec(ids().map(|id| t.parent(id).0).collect()),
            Store::from_vec(
                ids()
                    .map(|id| t.leaf(id).map_or(0, |c| c.get() as u64))
                    .collect(),
            ),
            Store::from_vec(ids().map(|id| t.depth(id) as u32).collect()),
        )
    }

    #[test]
    fn a_trie_read_as_columns_answers_and_grows_as_the_trie() {
        let mut t = Backtraces::new();
        let d = DomainId::new(0);
        let stacks = [&[1, 2, 3][..], &[1, 2, 4], &[5], &[1, 6, 3, 3]];
        let ids: Vec<_> = stacks.iter().map(|s| t.intern(d, 0, &codes(s))).collect();
        let (parent, code, depth) = columns_of(&t);
        let mut read = Backtraces::from_columns(parent, code, depth).unwrap();
        assert_eq!(read.len(), t.len());
        for (s, &id) in stacks.iter().zip(&ids) {
            assert_eq!(read.codes(id), codes(s));
            assert_eq!(read.depth(id), s.len());
            assert_eq!(read.leaf(id), t.leaf(id));
            assert_eq!(read.parent(id), t.parent(id));
            assert_eq!(read.site(id), None);
        }
        // Columns in memory here: what a mapped file would hold in place.
        let empty = Backtraces::new().children.heap_bytes();
        assert_eq!(read.heap_bytes(), 16 * t.len() + empty);
        // Grown, it is a trie in memory whose nodes keep their ids.
        for (s, &id) in stacks.iter().zip(&ids) {
            assert_eq!(read.intern_full(&codes(s)), id);
        }
        let new = read.intern_full(&codes(&[1, 2, 9]));
        assert_eq!(new, t.intern_full(&codes(&[1, 2, 9])));
    }

    #[test]
    fn columns_that_are_no_trie_are_refused() {
        let store = |v: &[u32]| Store::from_vec(v.to_vec());
        let codes = |n: usize| Store::from_vec(vec![7u64; n]);
        // A node before its parent, a depth not one more than its parent's,
        // columns of different lengths, no root, a root with a parent.
        for (parent, depth, n) in [
            (&[0, 2, 1][..], &[0, 2, 1][..], 3),
            (&[0, 0, 1], &[0, 1, 1], 3),
            (&[0, 0], &[0, 1, 2], 2),
            (&[], &[], 0),
            (&[1, 0], &[0, 1], 2),
        ] {
            assert!(Backtraces::from_columns(store(parent), codes(n), store(depth)).is_none());
        }
        assert!(Backtraces::from_columns(store(&[0, 0, 1]), codes(3), store(&[0, 1, 2])).is_some());
    }

    #[test]
    fn oversized_common_prefix_reuses_the_previous_backtrace() {
        // After a truncated backtrace the reference reader reports a common prefix
        // larger than the backtrace it returns.
        let mut t = Backtraces::new();
        let d = DomainId::new(0);
        let a = t.intern(d, 0, &codes(&[5, 6]));
        assert_eq!(t.intern(d, 3005, &codes(&[5, 6])), a);
        assert_eq!(t.intern(d, 10, &codes(&[5])), t.parent(a));
    }

    #[test]
    fn domains_have_separate_paths() {
        let mut t = Backtraces::new();
        let a = t.intern(DomainId::new(0), 0, &codes(&[1, 2]));
        let b = t.intern(DomainId::new(1), 0, &codes(&[7, 8]));
        // Domain 0's prefix is still its own, not domain 1's.
        let c = t.intern(DomainId::new(0), 2, &codes(&[1, 2, 3]));
        assert_eq!(t.codes(c), codes(&[1, 2, 3]));
        assert_eq!(t.parent(c), a);
        assert_eq!(t.codes(b), codes(&[7, 8]));
    }

    #[test]
    fn a_trie_that_outgrows_its_child_table_finds_every_node_again() {
        // Far more nodes than a first table's few thousand slots, with codes that collide in
        // it (multiples of a large power of two) and one node with many children.
        let mut t = Backtraces::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut all = Vec::new();
        for i in 0..20_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let depth = 1 + (rng % 9) as usize;
            let bt: Vec<u64> = (0..depth)
                .map(|d| ((rng >> (d * 3)) % 7) << 40 | (i % 300))
                .collect();
            let id = t.intern_full(&codes(&bt));
            all.push((bt, id));
        }
        assert!(t.len() > 4 * 4096, "{} nodes", t.len());
        for (bt, id) in &all {
            assert_eq!(t.codes(*id), codes(bt));
            assert_eq!(t.intern_full(&codes(bt)), *id);
        }
    }

    #[test]
    fn empty_backtrace_is_the_root() {
        let mut t = Backtraces::new();
        let e = t.intern(DomainId::new(0), 0, &[]);
        assert_eq!(e, BacktraceId::EMPTY);
        assert_eq!(t.leaf(e), None);
        assert!(t.codes(e).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_hashing_whole_backtraces(
            traces in proptest::collection::vec(
                (0u16..3, proptest::collection::vec(0u64..6, 0..12)), 1..60)
        ) {
            let mut t = Backtraces::new();
            let mut prev: Vec<(u16, Vec<u64>)> = Vec::new();
            let mut seen = std::collections::HashMap::new();
            for (dom, bt) in &traces {
                let before = prev.iter().find(|(d, _)| d == dom).map(|(_, b)| b.clone());
                let cp = before
                    .map(|b| b.iter().zip(bt).take_while(|(x, y)| x == y).count())
                    .unwrap_or(0);
                let id = t.intern(DomainId::new(*dom), cp, &codes(bt));
                proptest::prop_assert_eq!(t.codes(id), codes(bt));
                let first = *seen.entry(bt.clone()).or_insert(id);
                proptest::prop_assert_eq!(first, id);
                prev.retain(|(d, _)| d != dom);
                prev.push((*dom, bt.clone()));
            }
        }
    }
}
