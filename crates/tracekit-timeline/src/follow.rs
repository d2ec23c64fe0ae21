//! A timeline built as its trace is written: the records a program has
//! written so far are read once, as they come, and the timeline of what is
//! read can be had at any point without reading again.
//!
//! The input is any [`Read`] that fails with [`std::io::ErrorKind::WouldBlock`]
//! where a writer has not written more yet (a followed file); the reader keeps a
//! record cut by the writer's flush and reads it whole once its rest comes.

use std::io::Read;

use tracekit_fxt::read::{Records, StreamReader};
use tracekit_fxt::stats::{Counted, Stats};

use crate::build::Builder;
use crate::open::Built;

/// A timeline followed as its trace is written.
pub struct Follow<R> {
    reader: StreamReader<R>,
    builder: Builder,
    counts: Stats,
}

impl<R: Read> Follow<R> {
    /// Follows the trace `input` gives.
    pub fn new(input: R) -> Follow<R> {
        Follow {
            reader: StreamReader::new(input),
            builder: Builder::default(),
            counts: Stats::default(),
        }
    }

    /// Reads the records the input has now; says whether there were any.
    /// `progress` hears the input position now and then.
    pub fn read(&mut self, progress: &mut dyn FnMut(u64)) -> bool {
        let before = self.builder.records();
        let mut counted = Counted::continuing(&mut self.reader, std::mem::take(&mut self.counts));
        self.builder.read(&mut counted, progress);
        self.counts = counted.into_counts();
        self.builder.records() != before
    }

    /// Whether the input may have more records: it is waiting for the writer,
    /// neither at its end nor at damage.
    pub fn is_waiting(&self) -> bool {
        self.reader.is_waiting() && !self.builder.is_damaged()
    }

    /// Input bytes read, up to the end of the last whole record.
    pub fn position(&self) -> u64 {
        self.reader.position()
    }

    /// The input, to wait on it for more.
    pub fn input(&mut self) -> &mut R {
        self.reader.inner_mut()
    }

    /// The timeline of the records read so far, with their counts as `fxt
    /// stats` gives them.
    pub fn built(&mut self) -> Built {
        let reader: &dyn Records = &self.reader;
        let mut stats = self.counts.clone();
        stats.finish(reader);
        Built {
            timeline: self.builder.timeline(reader.warnings().to_vec()),
            stats: Some(stats),
            unkept_warnings: (reader.warning_count())
                .saturating_sub(reader.warnings().len() as u64),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::open::build_timeline;
    use tracekit_fxt::read::Reader;

    /// What a timeline shows, in a form two timelines compare by.
    fn shown(b: &Built) -> String {
        let t = &b.timeline;
        let mut out = format!("{:?} {:?} {}\n", t.first_ns(), t.last_ns(), t.records());
        for track in t.tracks() {
            for lane in &track.lanes {
                for i in 0..lane.len() {
                    let s = lane.get(i).unwrap();
                    out += &format!("{} {} {} {}\n", s.start, s.end, t.string(s.name), s.args);
                }
            }
        }
        out + &format!("{:?}", b.stats)
    }

    #[test]
    fn a_followed_trace_ends_as_the_whole_trace_reads() {
        let config = tracekit_fxt::synth::SynthConfig {
            slices: 3_000,
            threads: 3,
            seed: 5,
        };
        let (bytes, _) = tracekit_fxt::synth::write_synthetic(Vec::new(), &config).unwrap();
        let whole = build_timeline(
            &mut Reader::new(&bytes),
            true,
            &tracekit_columns::Spill::memory(),
            &mut |_| {},
        );
        let mut follow = Follow::new(tracekit_testutil::Growing::new(bytes, 0));
        let mut earlier = 0;
        loop {
            follow.read(&mut |_| {});
            let now = follow.built();
            // What is read only grows.
            assert!(now.timeline.records() >= earlier);
            earlier = now.timeline.records();
            if !follow.is_waiting() {
                break;
            }
            follow.input().write(997);
        }
        assert_eq!(shown(&follow.built()), shown(&whole));
        assert!(whole.timeline.records() > 3_000);
    }
}
