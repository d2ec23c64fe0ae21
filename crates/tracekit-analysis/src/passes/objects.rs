//! Clauses on an object's whole life (when it was collected, how long it lived,
//! whether it was live in a time range), which the analysis cannot decide when it
//! meets the allocation: a quick pass without backtraces first finds which
//! allocations pass them, as a set of allocation ordinals (the n-th allocation
//! event of the trace) that the analysis's pass then consults.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tracekit_memtrace::{Event, Reader, Timedelta};

/// Clauses on the objects' lives, combined with "and".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifeClauses {
    /// Collected in this time range (inclusive); never-collected objects fail.
    pub collected_between: Option<(Timedelta, Timedelta)>,
    /// Never collected.
    pub never_collected: bool,
    /// Lived this long (inclusive): from allocation to collection, or to the end of
    /// the trace for an object never collected.
    pub lifetime_between: Option<(Timedelta, Timedelta)>,
    /// Live at some time of this range (inclusive): allocated at or before its end,
    /// and collected after its start or never.
    pub live_between: Option<(Timedelta, Timedelta)>,
}

impl LifeClauses {
    /// Whether there is no clause.
    pub fn is_empty(&self) -> bool {
        *self == LifeClauses::default()
    }

    /// Whether an object allocated at `alloc` and collected at `collect` (`None`:
    /// never; the trace ends at `end`) passes every clause.
    pub fn pass(&self, alloc: Timedelta, collect: Option<Timedelta>, end: Timedelta) -> bool {
        let within = |t: Timedelta, (a, b): (Timedelta, Timedelta)| a <= t && t <= b;
        if let Some(range) = self.collected_between
            && !collect.is_some_and(|c| within(c, range))
        {
            return false;
        }
        if self.never_collected && collect.is_some() {
            return false;
        }
        if let Some((lo, hi)) = self.lifetime_between {
            let until = collect.unwrap_or(end).max(alloc);
            let life = Timedelta::from_micros(until.as_micros().saturating_sub(alloc.as_micros()));
            if !(lo <= life && life <= hi) {
                return false;
            }
        }
        if let Some((from, to)) = self.live_between
            && !(alloc <= to && collect.is_none_or(|c| c > from))
        {
            return false;
        }
        true
    }

    /// The clauses in words, for report headers.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((a, b)) = self.collected_between {
            out.push(format!("collected between {a} and {b}"));
        }
        if self.never_collected {
            out.push("never collected".to_string());
        }
        if let Some((a, b)) = self.lifetime_between {
            out.push(format!("living between {a} and {b}"));
        }
        if let Some((a, b)) = self.live_between {
            out.push(format!("live at some time between {a} and {b}"));
        }
        out
    }
}

/// Allocations by ordinal (the n-th allocation event of the trace, from 0): a
/// bit each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocationSet {
    bits: Vec<u64>,
}

impl AllocationSet {
    pub(crate) fn insert(&mut self, n: u64) {
        let (word, bit) = ((n / 64) as usize, n % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << bit;
    }

    /// Whether allocation `n` is in the set.
    #[inline]
    pub fn contains(&self, n: u64) -> bool {
        self.bits
            .get((n / 64) as usize)
            .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }

    /// How many allocations are in the set.
    pub fn len(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The allocations of `reader`'s trace whose objects pass `clauses`, from a pass
/// without backtraces; `progress` hears the byte position now and then. A read
/// error ends the pass: the objects not collected by then count as never collected.
pub fn passing(
    reader: &mut Reader<'_>,
    clauses: &LifeClauses,
    progress: &mut dyn FnMut(u64),
) -> Arc<AllocationSet> {
    // Live objects: id -> (ordinal, allocation time).
    let mut live: FxHashMap<u64, (u64, Timedelta)> = FxHashMap::default();
    let mut set = AllocationSet::default();
    let mut ordinal = 0u64;
    let mut end = Timedelta::default();
    {
        let mut events = reader.events(false);
        let mut count = 0u64;
        while let Some(Ok((time, event))) = events.next_event() {
            end = end.max(time);
            // An object's end: collected, or its id reused (which the analysis
            // takes as the end of the object that had it).
            let ended = match event {
                Event::Alloc(a) => {
                    let old = live.insert(a.obj_id.get(), (ordinal, time));
                    ordinal += 1;
                    old
                }
                Event::Collect(id, _) => live.remove(&id.get()),
                Event::Promote(..) => None,
            };
            if let Some((n, t)) = ended
                && clauses.pass(t, Some(time.max(t)), end)
            {
                set.insert(n);
            }
            count += 1;
            if count & 0xFFFF == 0 {
                progress(events.position());
            }
        }
        progress(events.position());
    }
    for (n, t) in live.into_values() {
        if clauses.pass(t, None, end) {
            set.insert(n);
        }
    }
    Arc::new(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn us(t: i64) -> Timedelta {
        Timedelta::from_micros(t)
    }

    #[test]
    fn clauses_decide_on_the_whole_life() {
        let end = us(100);
        let c = |f: fn(&mut LifeClauses)| {
            let mut l = LifeClauses::default();
            f(&mut l);
            l
        };
        let collected = c(|l| l.collected_between = Some((us(20), us(30))));
        assert!(collected.pass(us(0), Some(us(20)), end));
        assert!(collected.pass(us(0), Some(us(30)), end));
        assert!(!collected.pass(us(0), Some(us(31)), end));
        assert!(!collected.pass(us(0), None, end));
        let never = c(|l| l.never_collected = true);
        assert!(never.pass(us(5), None, end));
        assert!(!never.pass(us(5), Some(us(6)), end));
        let lifetime = c(|l| l.lifetime_between = Some((us(10), us(50))));
        assert!(lifetime.pass(us(0), Some(us(10)), end));
        assert!(!lifetime.pass(us(0), Some(us(9)), end));
        assert!(lifetime.pass(us(60), None, end), "40 until the end");
        assert!(!lifetime.pass(us(20), None, end), "80 until the end");
        let live = c(|l| l.live_between = Some((us(40), us(50))));
        assert!(live.pass(us(10), Some(us(41)), end));
        assert!(
            !live.pass(us(10), Some(us(40)), end),
            "collected at the start"
        );
        assert!(live.pass(us(50), None, end));
        assert!(!live.pass(us(51), None, end));
        assert!(LifeClauses::default().pass(us(1), None, end));
    }

    #[test]
    fn a_set_holds_its_ordinals() {
        let mut s = AllocationSet::default();
        for n in [0, 63, 64, 1000] {
            s.insert(n);
        }
        assert_eq!(s.len(), 4);
        assert!(s.contains(63) && s.contains(1000) && !s.contains(62) && !s.contains(5000));
    }
}
