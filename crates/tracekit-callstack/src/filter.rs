//! `-filter START..STOP`: keep only what happens between a call to START and the
//! next call to STOP (magic-trace's `For_range` and `Trace_filter`,
//! `src/for_range.ml` and `src/trace_filter.ml` in janestreet/magic-trace).
//!
//! Two passes over the events: the first collects the calls to either symbol (for a
//! sampled stack, the frame nearest the leaf decides) and pairs them; the second walks
//! the events again and reports, for each, whether it lies inside a region.

use std::collections::VecDeque;

use crate::event::{BranchKind, Event, Location, SampleData, Time};

/// Whether a hit opens or closes a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitKind {
    /// A call to the start symbol.
    Start,
    /// A call to the stop symbol.
    Stop,
}

/// A call to the start or stop symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolHit {
    /// Start or stop.
    pub kind: HitKind,
    /// The symbol's display name.
    pub symbol: String,
    /// The event's time.
    pub time: Time,
}

/// The two symbols of a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeFilter {
    /// Where regions start.
    pub start: String,
    /// Where they stop.
    pub stop: String,
}

impl RangeFilter {
    /// Parses `START..STOP`.
    pub fn parse(spec: &str) -> Option<Self> {
        let (start, stop) = spec.split_once("..")?;
        (!start.is_empty() && !stop.is_empty()).then(|| RangeFilter {
            start: start.into(),
            stop: stop.into(),
        })
    }

    fn kind_of(&self, loc: &Location<'_>) -> Option<HitKind> {
        let name = loc.display_name();
        if name == self.start {
            Some(HitKind::Start)
        } else if name == self.stop {
            Some(HitKind::Stop)
        } else {
            None
        }
    }

    /// The hit an event is, if any (first pass).
    pub(crate) fn hit(&self, event: &Event<'_>) -> Option<SymbolHit> {
        let Event::Sample(s) = event else { return None };
        match &s.data {
            SampleData::Branch(b) if b.kind == Some(BranchKind::Call) => {
                self.kind_of(&b.dst).map(|kind| SymbolHit {
                    kind,
                    symbol: b.dst.display_name(),
                    time: s.time,
                })
            }
            SampleData::Callstack(frames) => frames.iter().rev().find_map(|f| {
                self.kind_of(f).map(|kind| SymbolHit {
                    kind,
                    symbol: f.display_name(),
                    time: s.time,
                })
            }),
            _ => None,
        }
    }
}

/// Pairs hits left to right: a hit followed by a start is dropped, two stops are both
/// dropped, a start then a stop is kept, and a lone hit at the end is dropped.
pub(crate) fn pair_hits(hits: Vec<SymbolHit>) -> Vec<SymbolHit> {
    let mut out = Vec::new();
    let mut it = hits.into_iter().peekable();
    while let Some(first) = it.next() {
        let Some(second) = it.peek() else { break };
        match (first.kind, second.kind) {
            (_, HitKind::Start) => {}
            (HitKind::Stop, HitKind::Stop) => {
                it.next();
            }
            (HitKind::Start, HitKind::Stop) => {
                out.push(first);
                if let Some(second) = it.next() {
                    out.push(second);
                }
            }
        }
    }
    out
}

/// The second pass: whether each event should be written.
#[derive(Clone, Debug)]
pub(crate) struct RegionTracker {
    hits: VecDeque<SymbolHit>,
    in_region: bool,
}

impl RegionTracker {
    /// A tracker for paired hits (see [`pair_hits`]).
    pub(crate) fn new(paired: Vec<SymbolHit>) -> Self {
        RegionTracker {
            hits: paired.into(),
            in_region: false,
        }
    }

    /// The decision for the next event, in input order.
    pub(crate) fn should_write(&mut self, event: &Event<'_>) -> bool {
        let (Some(hd), Event::Sample(s)) = (self.hits.front(), event) else {
            return self.in_region;
        };
        if s.time == hd.time {
            let matches = match &s.data {
                SampleData::Branch(b) => {
                    b.kind == Some(BranchKind::Call) && b.dst.display_name() == hd.symbol
                }
                SampleData::Callstack(_) => true,
                _ => false,
            };
            if matches {
                self.hits.pop_front();
                self.in_region = !self.in_region;
            }
        }
        self.in_region
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(kind: HitKind, t: i64) -> SymbolHit {
        SymbolHit {
            kind,
            symbol: "s".into(),
            time: Time(t),
        }
    }

    #[test]
    fn pairing() {
        use HitKind::*;
        let times = |v: Vec<SymbolHit>| v.iter().map(|h| h.time.0).collect::<Vec<_>>();
        assert_eq!(times(pair_hits(vec![h(Start, 1), h(Stop, 2)])), vec![1, 2]);
        assert_eq!(
            times(pair_hits(vec![h(Start, 1), h(Start, 2), h(Stop, 3)])),
            vec![2, 3]
        );
        assert_eq!(
            times(pair_hits(vec![
                h(Stop, 1),
                h(Stop, 2),
                h(Start, 3),
                h(Stop, 4)
            ])),
            vec![3, 4]
        );
        assert_eq!(
            times(pair_hits(vec![h(Stop, 1), h(Start, 2)])),
            Vec::<i64>::new()
        );
        assert_eq!(times(pair_hits(vec![h(Start, 1)])), Vec::<i64>::new());
        assert!(RangeFilter::parse("a..b").is_some());
        assert!(RangeFilter::parse("a..").is_none());
        assert!(RangeFilter::parse("ab").is_none());
    }
}
