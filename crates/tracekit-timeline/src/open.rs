//! A timeline built in one pass over a trace's records, with what a front end
//! shows beside it: the trace's counts (as `fxt stats` gives them, when asked
//! for) and how many of the reader's warnings it counted without keeping.
//!
//! Every front end that builds a timeline (the viewer, `fxt top` and `fxt
//! slices`, the Parquet export) builds it here. Progress goes to a callback,
//! so that a command line draws its bar; over a trace's bytes, the bytes the
//! pass is done with go to another, so that a mapped file's pages are let go
//! and the trace is not resident beside its timeline.

use std::ops::Range;

use tracekit_columns::Spill;
use tracekit_fxt::read::{Reader, Records};
use tracekit_fxt::stats::{Counted, Stats};

use crate::Timeline;

/// A timeline and what its pass found beside it.
#[derive(Debug)]
pub struct Built {
    /// The timeline; cut short at damage ([`Timeline::error`]).
    pub timeline: Timeline,
    /// The trace's counts, when they were asked for.
    pub stats: Option<Stats>,
    /// The reader's warnings beyond those it kept ([`Timeline::warnings`]).
    pub unkept_warnings: u64,
}

impl Built {
    /// The events counted, 0 when the counts were not asked for.
    pub fn events(&self) -> u64 {
        self.stats
            .as_ref()
            .map_or(0, |s| s.event_types.values().sum())
    }
}

/// Builds the timeline of `reader`'s records; with `with_stats`, counts them
/// too (which costs a map update per record). Threads' slices and lanes grow
/// as `spill` says ([`Timeline::build_spilling`]). `progress` hears the input
/// position now and then.
pub fn build_timeline(
    reader: &mut dyn Records,
    with_stats: bool,
    spill: &Spill,
    progress: &mut dyn FnMut(u64),
) -> Built {
    let (timeline, stats) = match with_stats {
        true => {
            let mut counted = Counted::new(reader);
            let timeline = Timeline::build_spilling(&mut counted, spill, progress);
            (timeline, Some(counted.stats()))
        }
        false => (Timeline::build_spilling(reader, spill, progress), None),
    };
    let unkept_warnings = reader
        .warning_count()
        .saturating_sub(reader.warnings().len() as u64);
    Built {
        timeline,
        stats,
        unkept_warnings,
    }
}

/// [`build_timeline`] over a trace's `bytes`; `release` hears, as the pass
/// goes, the range of bytes it is done with (from the start), for a mapped
/// file to let those pages go.
pub fn build_timeline_releasing(
    bytes: &[u8],
    with_stats: bool,
    spill: &Spill,
    progress: &mut dyn FnMut(u64),
    release: &mut dyn FnMut(Range<usize>),
) -> Built {
    let mut reader = Reader::new(bytes);
    build_timeline(&mut reader, with_stats, spill, &mut |pos| {
        progress(pos);
        release(0..usize::try_from(pos).unwrap_or(usize::MAX));
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_fxt::read::ReadOptions;
    use tracekit_fxt::write::{VecDestination, Writer};

    /// A trace of one thread with two nested duration slices.
    fn trace() -> Vec<u8> {
        use tracekit_fxt::format::Koid;
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let th = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
        let cat = w.intern("cat").unwrap();
        let (outer, inner) = (w.intern("outer").unwrap(), w.intern("inner").unwrap());
        w.duration_begin(th, cat, outer, 10, &[]).unwrap();
        w.duration_begin(th, cat, inner, 20, &[]).unwrap();
        w.duration_end(th, cat, inner, 30, &[]).unwrap();
        w.duration_end(th, cat, outer, 40, &[]).unwrap();
        w.finish().unwrap().into_vec()
    }

    #[test]
    fn counts_only_when_asked_and_hears_progress_to_the_end() {
        let bytes = trace();
        let mut last = 0;
        let built = build_timeline(
            &mut Reader::new(&bytes),
            false,
            &Spill::memory(),
            &mut |p| last = p,
        );
        assert!(built.stats.is_none());
        assert_eq!(built.events(), 0);
        assert_eq!(last, bytes.len() as u64);
        assert_eq!(built.timeline.tracks().len(), 1);
        assert_eq!(built.timeline.tracks()[0].lanes.len(), 2);
        let counted = build_timeline(
            &mut Reader::new(&bytes),
            true,
            &Spill::memory(),
            &mut |_| {},
        );
        assert_eq!(counted.events(), 4);
        assert_eq!(counted.timeline.records(), built.timeline.records());
    }

    #[test]
    fn the_bytes_read_are_released_from_the_start() {
        let bytes = trace();
        let mut released = Vec::new();
        let built =
            build_timeline_releasing(&bytes, true, &Spill::memory(), &mut |_| {}, &mut |r| {
                released.push(r)
            });
        assert_eq!(released.last(), Some(&(0..bytes.len())));
        assert!(released.iter().all(|r| r.start == 0));
        assert_eq!(built.unkept_warnings, 0);
    }

    #[test]
    fn warnings_beyond_those_kept_are_counted() {
        let mut bytes = trace();
        // Cut inside the last record: one warning, counted and not kept.
        bytes.truncate(bytes.len() - 3);
        let options = ReadOptions {
            max_warnings: 0,
            ..ReadOptions::default()
        };
        let mut reader = Reader::with_options(&bytes, options);
        let built = build_timeline(&mut reader, false, &Spill::memory(), &mut |_| {});
        assert!(built.timeline.warnings().is_empty());
        assert_eq!(built.unkept_warnings, 1);
    }
}
