//! A lane: the slices of one track at one depth, which never overlap, in
//! columns sorted by start, with the summaries that answer a viewport in time
//! proportional to what it shows rather than to what it holds.
//!
//! Because a lane's slices do not overlap, their ends are sorted as their
//! starts are, so the slices a time range shows are one run of indices, found
//! by two binary searches. Drawn at `ns_per_px` nanoseconds a pixel, a slice
//! of at least a pixel is drawn as itself; the slices under a pixel are merged
//! into runs, one run as long as each slice starts under a pixel after the
//! run's end (what a pixel cannot tell apart), which says how many it holds
//! and names the longest of them (the first, between equals). A zoomed-out
//! window is then as many items as there are gaps a pixel shows, not one per
//! pixel and lane.
//!
//! To merge without visiting every slice of a zoomed-out view, the lane keeps a
//! summary per block of [`BLOCK`] slices and per block of [`BLOCK`] blocks: the
//! first start, the last end, the longest slice and the widest gap between two
//! of its slices one after the other. A block whose slices are all under a
//! pixel and whose gaps are all under a pixel is one run, however many pixels
//! it spans, and merges whole, as its slices one by one would.
//!
//! | column | per | type | what |
//! | --- | --- | --- | --- |
//! | start | slice | `u64` | nanoseconds of the trace's clock |
//! | end | slice | `u64` | nanoseconds; [`OPEN`] for a slice still open at the end of the trace |
//! | name | slice | `u32` | the name, in the timeline's strings |
//! | category | slice | `u32` | the category, in the timeline's strings |
//! | args | slice | `u32` | its arguments, in the timeline's arguments ([`crate::Timeline::args`]) |
//! | ids | slice of an async lane | `u64` | the async id of its begin and end (none in a thread's lanes) |

use tracekit_columns::Store;

/// The end of a slice still open at the end of the trace.
pub const OPEN: u64 = u64::MAX;

/// Slices per block, and blocks per block of the second level.
pub const BLOCK: usize = 64;

/// What a block of slices holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summary {
    start: u64,
    end: u64,
    /// The longest slice (the first, between equals) and its duration.
    longest: u32,
    longest_ns: u64,
    /// The widest gap from a slice's end to the next one's start, at most
    /// `u32::MAX` nanoseconds (a summary stays 32 bytes; a wider gap is wider
    /// than any pixel a window merges at, and is never merged across).
    gap: u32,
}

/// A gap in a summary: `u32::MAX` for any gap as wide or wider.
fn narrow(gap: u64) -> u32 {
    u32::try_from(gap).unwrap_or(u32::MAX)
}

/// One slice of a lane, as it is added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Start, nanoseconds.
    pub start: u64,
    /// End, nanoseconds, or [`OPEN`].
    pub end: u64,
    /// Name, in the timeline's strings.
    pub name: u32,
    /// Category, in the timeline's strings.
    pub category: u32,
    /// Its arguments, in the timeline's arguments.
    pub args: u32,
}

/// The slices of one track at one depth (see the module docs). Its columns
/// are built in memory, or read in place from a mapped timeline file.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    start: Store<u64>,
    end: Store<u64>,
    name: Store<u32>,
    category: Store<u32>,
    args: Store<u32>,
    ids: Store<u64>,
    blocks: Vec<Summary>,
    supers: Vec<Summary>,
}

/// What a viewport shows of a lane, in time order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drawn {
    /// A slice of at least a pixel: its index in the lane.
    Slice(u32),
    /// Slices under a pixel, each starting under a pixel after the end of
    /// the one before.
    Merged {
        /// The first one's start.
        start: u64,
        /// The latest end among them ([`OPEN`] never: an open slice is never
        /// under a pixel).
        end: u64,
        /// How many.
        count: u32,
        /// The longest of them (the first, between equals): its index.
        longest: u32,
    },
}

/// A lane's columns as a timeline file holds them.
pub(crate) struct Columns {
    pub start: Store<u64>,
    pub end: Store<u64>,
    pub name: Store<u32>,
    pub category: Store<u32>,
    pub args: Store<u32>,
    /// One per slice in an async track's lane, none in a thread's.
    pub ids: Store<u64>,
}

impl Lane {
    /// The lane of columns read from a file, checked by the caller to be as
    /// long as each other (`ids` empty or as long) and to hold slices that do
    /// not overlap; [`Lane::finish`] makes its summaries.
    pub(crate) fn from_columns(c: Columns) -> Lane {
        Lane {
            start: c.start,
            end: c.end,
            name: c.name,
            category: c.category,
            args: c.args,
            ids: c.ids,
            blocks: Vec::new(),
            supers: Vec::new(),
        }
    }

    /// Bytes of memory its columns hold of their own (0 for columns read in
    /// place).
    #[cfg(test)]
    pub(crate) fn own_bytes(&self) -> usize {
        self.start.own_bytes()
            + self.end.own_bytes()
            + self.name.own_bytes()
            + self.category.own_bytes()
            + self.args.own_bytes()
            + self.ids.own_bytes()
    }

    /// Adds a slice after the others: it must not start before the previous one
    /// ends (the caller's depth assignment sees to that).
    pub(crate) fn push(&mut self, s: Slice) {
        self.start.push(s.start);
        self.end.push(s.end);
        self.name.push(s.name);
        self.category.push(s.category);
        self.args.push(s.args);
    }

    /// Adds an async slice, with its id, after the others (as [`Lane::push`]).
    pub(crate) fn push_async(&mut self, s: Slice, id: u64) {
        self.push(s);
        self.ids.push(id);
    }

    /// The async id of slice `i`, in an async track's lane.
    pub fn id(&self, i: usize) -> Option<u64> {
        self.ids.get(i).copied()
    }

    /// The async ids, one per slice, or none for a thread's lane.
    pub(crate) fn ids(&self) -> &[u64] {
        &self.ids[..]
    }

    /// Makes the block summaries; after the last [`Lane::push`].
    pub(crate) fn finish(&mut self) {
        self.blocks = (0..self.start.len().div_ceil(BLOCK))
            .map(|b| self.summarize(b * BLOCK, BLOCK))
            .collect();
        let blocks = &self.blocks;
        self.supers = blocks
            .chunks(BLOCK)
            .map(|c| {
                let mut s = c[0];
                for b in &c[1..] {
                    s.gap = s.gap.max(b.gap).max(narrow(b.start.saturating_sub(s.end)));
                    s.end = b.end;
                    if b.longest_ns > s.longest_ns {
                        (s.longest, s.longest_ns) = (b.longest, b.longest_ns);
                    }
                }
                s
            })
            .collect();
        self.start.shrink_to_fit();
        self.end.shrink_to_fit();
        self.name.shrink_to_fit();
        self.category.shrink_to_fit();
        self.args.shrink_to_fit();
        self.ids.shrink_to_fit();
    }

    fn summarize(&self, from: usize, n: usize) -> Summary {
        let to = (from + n).min(self.start.len());
        let mut s = Summary {
            start: self.start[from],
            end: self.end[to - 1],
            longest: from as u32,
            longest_ns: self.duration(from),
            gap: 0,
        };
        for i in from + 1..to {
            let d = self.duration(i);
            if d > s.longest_ns {
                (s.longest, s.longest_ns) = (i as u32, d);
            }
            s.gap = s
                .gap
                .max(narrow(self.start[i].saturating_sub(self.end[i - 1])));
        }
        s
    }

    /// Slices in the lane.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether the lane has no slice.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The names of its slices, in order.
    pub fn names(&self) -> &[u32] {
        &self.name[..]
    }

    /// Slice `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<Slice> {
        Some(Slice {
            start: *self.start.get(i)?,
            end: *self.end.get(i)?,
            name: *self.name.get(i)?,
            category: *self.category.get(i)?,
            args: *self.args.get(i)?,
        })
    }

    /// Slice `i`'s duration in nanoseconds (`u64::MAX` for an open slice, 0
    /// past the end).
    pub fn duration(&self, i: usize) -> u64 {
        match (self.start.get(i), self.end.get(i)) {
            (Some(&s), Some(&OPEN)) => OPEN - s,
            (Some(&s), Some(&e)) => e.saturating_sub(s),
            _ => 0,
        }
    }

    /// How many slices start before `t` (the index of the first that starts at
    /// or after it).
    pub fn starting_before(&self, t: u64) -> usize {
        self.start.partition_point(|&s| s < t)
    }

    /// The indices of the slices that show in `from..to`: those that end after
    /// `from` and start before `to`.
    pub fn range(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let first = self.end.partition_point(|&e| e <= from);
        let last = self.start.partition_point(|&s| s < to).max(first);
        first..last
    }

    /// The indices of the slices that show in `range` ([`Lane::range`]), or of
    /// every slice for `None`.
    pub fn shown(&self, range: Option<(u64, u64)>) -> std::ops::Range<usize> {
        match range {
            Some((from, to)) => self.range(from, to),
            None => 0..self.len(),
        }
    }

    /// What `from..to` at `ns_per_px` nanoseconds a pixel shows of the lane
    /// (see the module docs), appended to `out` in time order.
    pub fn window(&self, from: u64, to: u64, ns_per_px: u64, out: &mut Vec<Drawn>) {
        let px = ns_per_px.max(1);
        let range = self.range(from, to);
        let mut run: Option<Drawn> = None;
        let merge = |run: &mut Option<Drawn>, out: &mut Vec<Drawn>, s: Summary, n: u32| {
            if let Some(Drawn::Merged {
                end,
                count,
                longest,
                ..
            }) = run
                && s.start.saturating_sub(*end) < px
            {
                *end = (*end).max(s.end);
                *count += n;
                if s.longest_ns > self.duration(*longest as usize) {
                    *longest = s.longest;
                }
                return;
            }
            if let Some(r) = run.take() {
                out.push(r);
            }
            *run = Some(Drawn::Merged {
                start: s.start,
                end: s.end,
                count: n,
                longest: s.longest,
            });
        };
        // A block merges whole when all its slices and all its gaps are under
        // a pixel: slice by slice, each would join the run the one before it
        // is in.
        let whole = |s: &Summary| s.longest_ns < px && u64::from(s.gap) < px && s.gap < u32::MAX;
        let mut i = range.start;
        while i < range.end {
            if i.is_multiple_of(BLOCK * BLOCK)
                && i + BLOCK * BLOCK <= range.end
                && let Some(s) = self.supers.get(i / (BLOCK * BLOCK))
                && whole(s)
            {
                merge(&mut run, out, *s, (BLOCK * BLOCK) as u32);
                i += BLOCK * BLOCK;
                continue;
            }
            if i.is_multiple_of(BLOCK)
                && i + BLOCK <= range.end
                && let Some(s) = self.blocks.get(i / BLOCK)
                && whole(s)
            {
                merge(&mut run, out, *s, BLOCK as u32);
                i += BLOCK;
                continue;
            }
            // Slice by slice up to the next block, which may merge whole.
            let stop = (i / BLOCK + 1) * BLOCK;
            for j in i..stop.min(range.end) {
                let d = self.duration(j);
                if d >= px {
                    if let Some(r) = run.take() {
                        out.push(r);
                    }
                    out.push(Drawn::Slice(j as u32));
                } else {
                    let s = Summary {
                        start: self.start[j],
                        end: self.end[j],
                        longest: j as u32,
                        longest_ns: d,
                        gap: 0,
                    };
                    merge(&mut run, out, s, 1);
                }
            }
            i = stop;
        }
        if let Some(r) = run {
            out.push(r);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A lane of slices with the given gaps and durations, named by index.
    fn lane(shape: &[(u64, u64)], open_last: bool) -> Lane {
        let mut l = Lane::default();
        let mut t = 0;
        for (i, &(gap, dur)) in shape.iter().enumerate() {
            let start = t + gap;
            let end = if open_last && i + 1 == shape.len() {
                OPEN
            } else {
                start + dur
            };
            l.push(Slice {
                start,
                end,
                name: i as u32,
                category: 0,
                args: 0,
            });
            t = start + dur;
        }
        l.finish();
        l
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// A viewport's answer against the slices themselves: every slice that
        /// shows is drawn once, alone when it is at least a pixel, else in a
        /// run of slices each under a pixel after the one before, which names
        /// the longest of its slices.
        #[test]
        fn a_window_draws_every_slice_that_shows_once(
            shape in proptest::collection::vec((0u64..50, 0u64..40), 0..9000),
            open_last in proptest::bool::ANY,
            from in 0u64..200_000,
            span in 1u64..400_000,
            pixels in 1u64..3000,
        ) {
            let l = lane(&shape, open_last);
            let to = from + span;
            let px = span.div_ceil(pixels).max(1);
            let mut out = Vec::new();
            l.window(from, to, px, &mut out);
            let shows: Vec<usize> = (0..l.len())
                .filter(|&i| {
                    let s = l.get(i).unwrap();
                    s.end > from && s.start < to
                })
                .collect();
            let mut next = 0;
            for d in &out {
                match *d {
                    Drawn::Slice(i) => {
                        prop_assert_eq!(shows.get(next), Some(&(i as usize)));
                        prop_assert!(l.duration(i as usize) >= px);
                        next += 1;
                    }
                    Drawn::Merged { start, end, count, longest } => {
                        let run = shows.get(next..next + count as usize).unwrap_or(&[]);
                        prop_assert_eq!(run.len(), count as usize);
                        let mut best = run[0];
                        for (k, &i) in run.iter().enumerate() {
                            prop_assert!(l.duration(i) < px);
                            if k > 0 {
                                let before = l.get(run[k - 1]).unwrap().end;
                                prop_assert!(l.get(i).unwrap().start - before < px);
                            }
                            if l.duration(i) > l.duration(best) {
                                best = i;
                            }
                        }
                        prop_assert_eq!(start, l.get(run[0]).unwrap().start);
                        let latest = run.iter().map(|&i| l.get(i).unwrap().end).max();
                        prop_assert_eq!(Some(end), latest);
                        prop_assert_eq!(longest as usize, best);
                        next += count as usize;
                    }
                }
            }
            prop_assert_eq!(next, shows.len(), "every slice that shows is drawn");
            // Consecutive runs are a pixel or more apart: merged as far as
            // they go.
            for w in out.windows(2) {
                if let [Drawn::Merged { end: a, .. }, Drawn::Merged { start: b, .. }] = w {
                    prop_assert!(b - a >= px);
                }
            }
        }
    }

    #[test]
    fn a_zoomed_out_window_is_bounded_by_the_pixels() {
        // 200,000 slices of 10 ns every 20 ns: 4 ms, drawn on 1,000 pixels.
        let shape = vec![(10, 10); 200_000];
        let l = lane(&shape, false);
        let mut out = Vec::new();
        l.window(0, 4_000_000, 4_000, &mut out);
        assert!(out.len() <= 1_001, "{}", out.len());
        let count: u32 = out
            .iter()
            .map(|d| match d {
                Drawn::Merged { count, .. } => *count,
                Drawn::Slice(_) => 1,
            })
            .sum();
        assert_eq!(count, 200_000);
    }
}
