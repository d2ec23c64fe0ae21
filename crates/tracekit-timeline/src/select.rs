//! What a viewer asks of a selection and of names: the slices of a time range
//! on some tracks, by name, as Perfetto's area selection sums them, and the
//! next or previous slice whose name matches a search.

use tracekit_columns::{Grow, Spill};
use tracekit_stacks::{CallTree, Node};

use crate::lane::{Lane, OPEN, Slice};
use crate::{Timeline, TrackKind};

/// The slices of one name in a selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameTotals {
    /// The name, in the timeline's strings.
    pub name: u32,
    /// Slices.
    pub count: u64,
    /// Their whole durations, nanoseconds.
    pub total_ns: u64,
    /// Their durations less their children's (the slices one lane deeper that
    /// start within them, as far as they stay within them), nanoseconds.
    pub self_ns: u64,
    /// The longest one's duration, nanoseconds.
    pub max_ns: u64,
}

/// A node of a range's call tree ([`Timeline::flame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlameNode {
    /// Its caller's node (an index in the tree), `None` at the root.
    pub parent: Option<u32>,
    /// The name, in the timeline's strings.
    pub name: u32,
    /// Nanoseconds its slices spend inside the range.
    pub total_ns: u64,
    /// The same, less its children's.
    pub self_ns: u64,
}

/// A range's call tree ([`Timeline::flame`]): its nodes where they grew (in
/// memory, or in a file), each read as a [`FlameNode`], parents first.
pub struct Flame {
    /// The call tree's nodes, weighing (total, self); the answer's node `i`
    /// is the tree's `i + 1` (the root, no slice, stays out).
    nodes: Grow<Node<[u64; 2]>>,
}

impl Flame {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    /// Whether the range holds no slice.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Node `i`.
    pub fn get(&self, i: usize) -> Option<FlameNode> {
        self.nodes.get(i.checked_add(1)?).map(flame_node)
    }

    /// Every node, parents first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = FlameNode> + '_ {
        self.nodes.iter().skip(1).map(flame_node)
    }
}

/// The answer's node of a call tree's (not the root).
fn flame_node(n: &Node<[u64; 2]>) -> FlameNode {
    FlameNode {
        parent: n.parent.checked_sub(1),
        name: n.name,
        total_ns: n.data[0],
        self_ns: n.data[1],
    }
}

/// Where a slice is: its track, its lane in the track, its index in the lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Index in [`Timeline::tracks`].
    pub track: usize,
    /// Index in the track's lanes.
    pub lane: usize,
    /// Index in the lane.
    pub index: usize,
}

impl Timeline {
    /// The end of slice `end` for sums: an open slice ends with the trace.
    fn closed(&self, end: u64) -> u64 {
        match end {
            OPEN => self.last_ns.unwrap_or(0),
            e => e,
        }
    }

    /// The slices on `tracks` (indices in [`Timeline::tracks`]; others are
    /// ignored) that overlap `range` (`from..to`; every slice for `None`), by
    /// name, the largest total first: whole durations, as Perfetto's area
    /// selection sums them. An open slice lasts until the end of the trace.
    pub fn selection(&self, tracks: &[usize], range: Option<(u64, u64)>) -> Vec<NameTotals> {
        let mut by_name: Vec<Option<NameTotals>> = Vec::new();
        for track in tracks.iter().filter_map(|&t| self.tracks.get(t)) {
            for (depth, lane) in track.lanes.iter().enumerate() {
                let children = match track.kind {
                    TrackKind::Thread => track.lanes.get(depth + 1),
                    // Async lanes are packed, not nested.
                    TrackKind::Async => None,
                };
                for i in lane.shown(range) {
                    let Some(s) = lane.get(i) else { continue };
                    let end = self.closed(s.end);
                    let dur = end.saturating_sub(s.start);
                    let inner = self.inner_ns(children, s.start, end);
                    let at = s.name as usize;
                    if by_name.len() <= at {
                        by_name.resize(at + 1, None);
                    }
                    let t = by_name[at].get_or_insert(NameTotals {
                        name: s.name,
                        count: 0,
                        total_ns: 0,
                        self_ns: 0,
                        max_ns: 0,
                    });
                    t.count += 1;
                    // Saturating: durations of a damaged trace's stamps can
                    // sum past what 64 bits hold.
                    t.total_ns = t.total_ns.saturating_add(dur);
                    t.self_ns = t.self_ns.saturating_add(dur.saturating_sub(inner));
                    t.max_ns = t.max_ns.max(dur);
                }
            }
        }
        let mut out: Vec<NameTotals> = by_name.into_iter().flatten().collect();
        out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        out
    }

    /// The time the slices of `children` that start in `start..end` spend in
    /// it.
    fn inner_ns(&self, children: Option<&Lane>, start: u64, end: u64) -> u64 {
        let Some(children) = children else { return 0 };
        children
            .range(start, end)
            .filter_map(|c| children.get(c))
            .filter(|c| c.start >= start)
            .fold(0u64, |inner, c| {
                inner.saturating_add(self.closed(c.end).min(end).saturating_sub(c.start))
            })
    }

    /// The slice at `at`, and its self time: its duration less that of the
    /// slices nested in it (an async slice nests none).
    pub fn slice_at(&self, at: Position) -> Option<(Slice, u64)> {
        let track = self.tracks.get(at.track)?;
        let s = track.lanes.get(at.lane)?.get(at.index)?;
        let end = self.closed(s.end);
        let children = match track.kind {
            TrackKind::Thread => track.lanes.get(at.lane + 1),
            TrackKind::Async => None,
        };
        let inner = self.inner_ns(children, s.start, end);
        Some((s, end.saturating_sub(s.start).saturating_sub(inner)))
    }

    /// How many slices have a name `names` marks.
    pub fn count_named(&self, names: &[bool]) -> u64 {
        let mut n = 0;
        for lane in self.tracks.iter().flat_map(|t| &t.lanes) {
            n += lane
                .names()
                .iter()
                .filter(|&&i| names.get(i as usize).copied().unwrap_or(false))
                .count() as u64;
        }
        n
    }

    /// The call tree of a range: the slices on `tracks`' threads that
    /// overlap `from..to`, merged by their path of names from the outermost
    /// slice (over every thread), each weighing the part of it inside the
    /// range. Nodes in the order made: a parent before its children. A slice
    /// nests in the slice one lane up that starts last at or before it; one
    /// that outlasts that slice past the range's start is a root.
    pub fn flame(&self, tracks: &[usize], range: (u64, u64), spill: &Spill) -> Flame {
        let (from, to) = range;
        // Per node, nanoseconds inside the range and (once all are in) its
        // self time; the root (no slice) stays out of the answer. A range of
        // millions of distinct paths grows the tree in files where `spill`
        // says, not in memory.
        let mut tree: CallTree<[u64; 2]> = CallTree::spilling(u32::MAX, spill);
        for track in tracks.iter().filter_map(|&t| self.tracks.get(t)) {
            if track.kind != TrackKind::Thread {
                continue;
            }
            // Per lane, the node of each slice in the range, by its index.
            let mut above: Option<(std::ops::Range<usize>, Vec<u32>)> = None;
            for (depth, lane) in track.lanes.iter().enumerate() {
                let shown = lane.range(from, to);
                let mut here = Vec::with_capacity(shown.len());
                for i in shown.clone() {
                    let Some(s) = lane.get(i) else { break };
                    let parent = match (&above, depth) {
                        (_, 0) | (None, _) => None,
                        (Some((r, ids)), _) => {
                            let up = &track.lanes[depth - 1];
                            up.starting_before(s.start.saturating_add(1))
                                .checked_sub(1)
                                .filter(|j| r.contains(j))
                                .and_then(|j| ids.get(j - r.start).copied())
                        }
                    };
                    let id = tree.child(parent.unwrap_or(CallTree::<[u64; 2]>::ROOT), s.name);
                    let inside = self.closed(s.end).min(to).saturating_sub(s.start.max(from));
                    if let Some([total, _]) = tree.data_mut(id) {
                        *total = total.saturating_add(inside);
                    }
                    here.push(id);
                }
                above = Some((shown, here));
            }
        }
        // The child table is let go: only the nodes are the answer's.
        let mut nodes = tree.into_nodes();
        let nodes_mut = nodes.as_mut_slice();
        for n in nodes_mut.iter_mut() {
            n.data[1] = n.data[0];
        }
        // Self time: what the children do not cover (a child comes after its
        // parent; the root's children take nothing from it).
        for i in 1..nodes_mut.len() {
            let (total, parent) = (nodes_mut[i].data[0], nodes_mut[i].parent as usize);
            if parent != 0
                && let Some(p) = nodes_mut.get_mut(parent)
            {
                p.data[1] = p.data[1].saturating_sub(total);
            }
        }
        Flame { nodes }
    }

    /// Per string, whether it contains `text` (ASCII case ignored): the names
    /// a search matches.
    pub fn names_containing(&self, text: &str) -> Vec<bool> {
        let text = text.to_ascii_lowercase();
        self.strings
            .iter()
            .map(|s| s.to_ascii_lowercase().contains(&text))
            .collect()
    }

    /// The first slice after `after` (or the first of all), or with `backward`
    /// the last before it (or the last of all), whose name `names` marks, in
    /// the order of their starts (then track, lane and index).
    pub fn find(
        &self,
        names: &[bool],
        after: Option<Position>,
        backward: bool,
    ) -> Option<Position> {
        let key = |p: Position| -> Option<(u64, Position)> {
            let s = self.tracks.get(p.track)?.lanes.get(p.lane)?.get(p.index)?;
            Some((s.start, p))
        };
        let from = after.and_then(key);
        let mut best: Option<(u64, Position)> = None;
        for (t, track) in self.tracks.iter().enumerate() {
            for (l, lane) in track.lanes.iter().enumerate() {
                let hit = |i: usize| {
                    let s = lane.get(i)?;
                    let k = (
                        s.start,
                        Position {
                            track: t,
                            lane: l,
                            index: i,
                        },
                    );
                    let beyond = match (from, backward) {
                        (None, _) => true,
                        (Some(f), false) => k > f,
                        (Some(f), true) => k < f,
                    };
                    (beyond && names.get(s.name as usize).copied().unwrap_or(false)).then_some(k)
                };
                // Within a lane, starts are sorted: the first hit past the
                // start searched from is the lane's best.
                let found = match (backward, from) {
                    (false, f) => {
                        let first = f.map_or(0, |(start, _)| lane.starting_before(start));
                        (first..lane.len()).find_map(hit)
                    }
                    (true, f) => {
                        let last = f.map_or(lane.len(), |(start, _)| {
                            lane.starting_before(start.saturating_add(1))
                        });
                        (0..last).rev().find_map(hit)
                    }
                };
                if let Some(k) = found
                    && best.is_none_or(|b| if backward { k > b } else { k < b })
                {
                    best = Some(k);
                }
            }
        }
        best.map(|(_, p)| p)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tracekit_fxt::format::Koid;
    use tracekit_fxt::io::IoDestination;
    use tracekit_fxt::read::Reader;
    use tracekit_fxt::write::{Initialization, Writer, WriterOptions};

    /// A trace of nested slices on three threads, from `shape`: per slice its
    /// thread, name (of five), gap after the previous one of its thread,
    /// duration and whether it holds the next one; begins and ends or complete
    /// events by `complete`.
    fn trace(shape: &[(u8, u8, u16, u16, bool)], complete: bool) -> Timeline {
        let init = WriterOptions {
            initialization: Some(Initialization::new(1_000_000_000)),
            ..WriterOptions::default()
        };
        let mut w = Writer::with_options(IoDestination::new(Vec::new()), &init).unwrap();
        let threads: Vec<_> = (0..3u8)
            .map(|i| {
                w.set_thread_slot(i, Koid(1), Koid(10 + u64::from(i)))
                    .unwrap()
            })
            .collect();
        let names: Vec<_> = (0..5)
            .map(|i| w.intern(&format!("n{i}")).unwrap())
            .collect();
        let cat = w.intern("c").unwrap();
        // Per thread: its clock and the slices still open (end, name).
        let mut clock = [0u64; 3];
        let mut open: [Vec<(u64, usize)>; 3] = Default::default();
        let close =
            |w: &mut Writer<IoDestination<Vec<u8>>>, t: usize, (end, name): (u64, usize)| {
                if !complete {
                    w.duration_end(threads[t], cat, names[name], end, &[])
                        .unwrap();
                }
            };
        let mut pending: Vec<(usize, u64, u64, usize)> = Vec::new();
        for &(t, name, gap, dur, holds) in shape {
            let (t, name) = (usize::from(t % 3), usize::from(name % 5));
            let mut start = clock[t] + u64::from(gap);
            // Close what ends before this one starts.
            while let Some(&(end, n)) = open[t].last() {
                if end > start {
                    break;
                }
                open[t].pop();
                close(&mut w, t, (end, n));
            }
            // Begins and ends nest by their order; complete events may
            // outlive the slice they start in.
            let end = match open[t].last() {
                Some(&(outer, _)) => {
                    start = start.min(outer.saturating_sub(1));
                    match complete {
                        true => start + u64::from(dur),
                        false => (start + u64::from(dur)).min(outer),
                    }
                }
                None => start + u64::from(dur),
            };
            if complete {
                pending.push((t, start, end, name));
            } else {
                w.duration_begin(threads[t], cat, names[name], start, &[])
                    .unwrap();
            }
            open[t].push((end, name));
            clock[t] = if holds { start } else { end };
            if !holds {
                open[t].pop();
                close(&mut w, t, (end, name));
            }
        }
        for (t, stack) in open.iter_mut().enumerate() {
            while let Some(x) = stack.pop() {
                close(&mut w, t, x);
            }
        }
        for (t, start, end, name) in pending {
            w.duration_complete(threads[t], cat, names[name], start, end, &[])
                .unwrap();
        }
        let bytes = w.finish_io().unwrap();
        Timeline::build(&mut Reader::new(&bytes), &mut |_| {})
    }

    /// Every slice with its position and depth.
    fn all(t: &Timeline) -> Vec<(Position, crate::lane::Slice)> {
        let mut out = Vec::new();
        for (ti, track) in t.tracks().iter().enumerate() {
            for (l, lane) in track.lanes.iter().enumerate() {
                for i in 0..lane.len() {
                    let p = Position {
                        track: ti,
                        lane: l,
                        index: i,
                    };
                    out.push((p, lane.get(i).unwrap()));
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A selection's sums and a search's steps against every slice looked at.
        #[test]
        fn selections_and_searches_answer_as_every_slice_says(
            shape in proptest::collection::vec((0u8..3, 0u8..5, 0u16..30, 1u16..200, proptest::bool::weighted(0.4)), 1..400),
            complete in proptest::bool::ANY,
            from in 0u64..20_000,
            span in 1u64..20_000,
            tracks in proptest::sample::subsequence(vec![0usize, 1, 2], 0..=3),
            wanted in proptest::collection::vec(proptest::bool::ANY, 7),
        ) {
            let t = trace(&shape, complete);
            let slices = all(&t);
            let to = from + span;
            // Selection.
            let mut expected: std::collections::BTreeMap<u32, (u64, u64, u64, u64)> = Default::default();
            for (p, s) in &slices {
                if !(tracks.contains(&p.track) && s.end > from && s.start < to) {
                    continue;
                }
                let end = t.closed(s.end);
                let dur = end - s.start;
                let inner: u64 = slices
                    .iter()
                    .filter(|(q, c)| q.track == p.track && q.lane == p.lane + 1 && c.start >= s.start && c.start < end)
                    .map(|(_, c)| t.closed(c.end).min(end) - c.start)
                    .sum();
                let e = expected.entry(s.name).or_default();
                e.0 += 1;
                e.1 += dur;
                e.2 += dur - inner.min(dur);
                e.3 = e.3.max(dur);
            }
            let got: std::collections::BTreeMap<u32, (u64, u64, u64, u64)> = t
                .selection(&tracks, Some((from, to)))
                .into_iter()
                .map(|n| (n.name, (n.count, n.total_ns, n.self_ns, n.max_ns)))
                .collect();
            prop_assert_eq!(&got, &expected);
            // The range's call tree: by path of names, what each path's
            // slices spend in the range.
            let mut paths: std::collections::BTreeMap<Vec<u32>, u64> = Default::default();
            for (p, s) in &slices {
                if !(tracks.contains(&p.track) && s.end > from && s.start < to) {
                    continue;
                }
                let mut path = vec![s.name];
                let (mut lane, mut start) = (p.lane, s.start);
                while lane > 0 {
                    lane -= 1;
                    let up = slices
                        .iter()
                        .filter(|(q, c)| q.track == p.track && q.lane == lane && c.start <= start)
                        .max_by_key(|(q, c)| (c.start, q.index))
                        .unwrap();
                    // A caller that ended before the range (a slice that
                    // outlasts it) is not in the range's tree.
                    if !(up.1.end > from && up.1.start < to) {
                        break;
                    }
                    path.push(up.1.name);
                    start = up.1.start;
                }
                path.reverse();
                *paths.entry(path).or_default() += t.closed(s.end).min(to) - s.start.max(from);
            }
            let tree = t.flame(&tracks, (from, to), &Spill::memory());
            let mut got: std::collections::BTreeMap<Vec<u32>, u64> = Default::default();
            for (i, n) in tree.iter().enumerate() {
                let mut path = vec![n.name];
                let mut at = n.parent;
                while let Some(p) = at {
                    prop_assert!((p as usize) < i, "a parent before its children");
                    let up = tree.get(p as usize).unwrap();
                    path.push(up.name);
                    at = up.parent;
                }
                path.reverse();
                got.insert(path, n.total_ns);
                let children: u64 = tree.iter().filter(|c| c.parent == Some(i as u32)).map(|c| c.total_ns).sum();
                prop_assert_eq!(n.self_ns, n.total_ns.saturating_sub(children));
            }
            prop_assert_eq!(&got, &paths);
            // A slice and its self time, by position.
            for (p, s) in slices.iter().take(20) {
                let (got, own) = t.slice_at(*p).unwrap();
                prop_assert_eq!(got, *s);
                let end = t.closed(s.end);
                let inner: u64 = slices
                    .iter()
                    .filter(|(q, c)| q.track == p.track && q.lane == p.lane + 1 && c.start >= s.start && c.start < end)
                    .map(|(_, c)| t.closed(c.end).min(end) - c.start)
                    .sum();
                prop_assert_eq!(own, (end - s.start).saturating_sub(inner));
            }
            // Search, forward from nothing to the end, then backward.
            let names: Vec<bool> = (0..t.strings.len()).map(|i| wanted[i % wanted.len()]).collect();
            let mut order: Vec<(u64, Position)> = slices
                .iter()
                .filter(|(_, s)| names[s.name as usize])
                .map(|(p, s)| (s.start, *p))
                .collect();
            order.sort();
            let mut walked = Vec::new();
            let mut at = None;
            while let Some(p) = t.find(&names, at, false) {
                walked.push(p);
                at = Some(p);
            }
            let forward: Vec<Position> = order.iter().map(|(_, p)| *p).collect();
            prop_assert_eq!(t.count_named(&names), forward.len() as u64);
            prop_assert_eq!(&walked, &forward);
            let mut back = Vec::new();
            let mut at = None;
            while let Some(p) = t.find(&names, at, true) {
                back.push(p);
                at = Some(p);
            }
            back.reverse();
            prop_assert_eq!(&back, &forward);
        }
    }

    #[test]
    fn names_are_searched_by_what_they_contain() {
        let t = trace(&[(0, 0, 0, 10, false), (0, 3, 1, 10, false)], true);
        let hits = t.names_containing("N3");
        let named: Vec<&str> = (0..hits.len())
            .filter(|&i| hits[i])
            .map(|i| t.string(i as u32))
            .collect();
        assert_eq!(named, ["n3"]);
    }
}
