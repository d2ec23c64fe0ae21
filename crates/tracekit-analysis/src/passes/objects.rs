//! A filter's clauses on an object's whole life (when it was collected, how long it
//! lived, whether it was live in a time range), which the analysis cannot decide when
//! it meets the allocation: a quick pass without backtraces first finds which
//! allocations pass them, as a set of allocation ordinals (the n-th allocation
//! event of the trace) that the analysis's pass then consults.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tracekit_memtrace::{Event, Reader, Timedelta};

pub use crate::allocations::AllocationSet;
use crate::filter::Filter;

/// The allocations of `reader`'s trace whose objects pass `filter`'s clauses on
/// lives, from a pass
/// without backtraces; `progress` hears the byte position now and then. A read
/// error ends the pass: the objects not collected by then count as never collected.
pub fn passing(
    reader: &mut Reader<'_>,
    filter: &Filter,
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
                && filter.keeps_life(t, Some(time.max(t)), end)
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
        if filter.keeps_life(t, None, end) {
            set.insert(n);
        }
    }
    Arc::new(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
