//! Passes over a trace, read by `tracekit-memtrace`'s [`Reader`] or from its tables
//! ([`Source`]): [`analyze`] runs one,
//! the others find the peak of the whole live heap before a pass that weighs what is
//! live at it ([`find_peak`]), and make a pass's peak exact when its domains
//! interleaved ([`settle_peak`], [`settled`]).
//!
//! A pass decodes on one thread and analyses on another when the machine has two
//! cores and nothing needs backtrace locations as they are decoded; otherwise on one
//! thread ([`Threads`]). Both give the same [`Pass`].
//!
//! The live heap's peak is found as the events go, per domain. When domains'
//! events interleave in the trace (a multi-domain OCaml 5 program), an event can
//! arrive after a later one of another domain, and the running peak can be off;
//! the pass counts such events ([`Peak::late_events`]) and names the domains. One
//! more pass, told the domains upfront, then finds the exact peak.

pub(crate) mod drive;
pub mod objects;

use std::sync::Arc;

use tracekit_memtrace::{Info, LocationCode, LocationTable, ReadError, Reader, Warning};

use crate::analyzer::{LocationMask, Options, Profile};
use crate::curve::Peak;
use crate::frames::{FrameTree, Hide};
use crate::report::FoldOptions;
use objects::{AllocationSet, LifeClauses};

#[doc(hidden)]
pub use crate::analyzer::Threads;
pub use drive::decode_side_only;

/// How a pass over a trace went.
#[derive(Debug)]
pub struct Pass {
    /// What the analysis found (over the events before `error`, if any).
    pub profile: Profile,
    /// Packets the reader skipped.
    pub warnings: Vec<Warning>,
    /// Why the pass stopped early, if it did.
    pub error: Option<ReadError>,
    /// Events read.
    pub events: u64,
}

/// What a pass is for (or, for [`Stage::Folding`], what follows the passes), for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The pass whose results the report shows.
    Analysing,
    /// A quick pass (no backtraces) for the time of the peak.
    FindingPeak,
    /// A quick pass to make the peak exact.
    SettlingPeak,
    /// After the passes: folding the profile's stacks (reported at the input's end).
    Folding,
    /// A quick pass for the objects whose lives pass the filter's clauses on them.
    SelectingObjects,
}

impl Stage {
    /// A few words for a progress bar.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Analysing => "analysing",
            Stage::FindingPeak => "finding the peak",
            Stage::SettlingPeak => "settling the peak",
            Stage::Folding => "folding",
            Stage::SelectingObjects => "selecting objects",
        }
    }
}

/// Progress of the passes: called when a pass starts (position 0) and now and then
/// with the byte position reached.
pub type Progress<'a> = &'a mut dyn FnMut(Stage, u64);

/// What a pass reads: a trace's [`Reader`], decoding as it goes, or the trace's
/// [`Tables`](crate::tables::Tables), decoded once. A pass gives the same [`Pass`]
/// over either.
pub trait Source {
    /// The trace's header.
    fn info(&self) -> &Info;
    /// The trace's locations (every one, once a pass has read the whole trace).
    fn locations(&self) -> &LocationTable;
    /// The trace's size in bytes, the scale of progress positions.
    fn size_bytes(&self) -> u64;
    /// One analysis pass with `options`; `location` keeps only allocations whose
    /// backtrace locations pass its clauses. `progress` hears `stage` at position 0,
    /// then now and then the byte position reached.
    fn pass(
        &mut self,
        options: Options,
        location: Option<&LocationFilter>,
        stage: Stage,
        progress: Progress<'_>,
    ) -> Pass;
    /// The allocations (by ordinal) whose objects' lives pass `clauses`.
    fn objects(
        &mut self,
        clauses: &LifeClauses,
        progress: &mut dyn FnMut(u64),
    ) -> Arc<AllocationSet>;
    /// The frame tree of `profile`, a pass's over this source
    /// ([`crate::report::fold_tree_hiding`]); a source that keeps what a fold found
    /// between passes may answer it sooner, never otherwise.
    fn fold(&self, profile: &Profile, options: FoldOptions, hide: &Hide) -> FrameTree {
        crate::report::fold_tree_hiding(profile, self.locations(), options, hide)
    }
}

impl Source for Reader<'_> {
    fn info(&self) -> &Info {
        Reader::info(self)
    }

    fn locations(&self) -> &LocationTable {
        Reader::locations(self)
    }

    fn size_bytes(&self) -> u64 {
        Reader::size_bytes(self)
    }

    fn pass(
        &mut self,
        options: Options,
        location: Option<&LocationFilter>,
        stage: Stage,
        progress: Progress<'_>,
    ) -> Pass {
        progress(stage, 0);
        let mut position = |pos| progress(stage, pos);
        let two = match options.threads {
            Threads::One => false,
            Threads::Two => true,
            Threads::Auto => std::thread::available_parallelism().is_ok_and(|n| n.get() > 1),
        };
        // The location filter matches locations as backtraces are decoded, which only
        // the one-thread pass does.
        if two && location.is_none() {
            drive::two_threads(self, options, &mut position)
        } else {
            drive::one_thread(self, options, location, &mut position)
        }
    }

    fn objects(
        &mut self,
        clauses: &LifeClauses,
        progress: &mut dyn FnMut(u64),
    ) -> Arc<AllocationSet> {
        objects::passing(self, clauses, progress)
    }
}

/// One analysis pass over `source` with `options` (its [`Options::threads`] say on
/// how many threads a reader's pass runs). `location` keeps only allocations whose
/// backtrace locations pass its clauses. `progress` hears [`Stage::Analysing`] at
/// position 0, then now and then the byte position reached.
pub fn analyze(
    source: &mut dyn Source,
    options: Options,
    location: Option<&LocationFilter>,
    progress: Progress<'_>,
) -> Pass {
    source.pass(options, location, Stage::Analysing, progress)
}

/// Clauses on the locations of an allocation's backtrace, decided as backtraces are
/// decoded (they need the trace's location table). Locations print as
/// `defname@file:line:start-end`, or `$code` for a code without any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocationFilter {
    /// A frame of the backtrace must match each of these.
    pub require: Vec<FrameMatch>,
    /// No frame of the backtrace may match any of these.
    pub forbid: Vec<FrameMatch>,
}

/// What a frame must be to match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameMatch {
    /// One of its locations, printed, contains the text.
    Contains(String),
    /// One of its locations is in this function (its defname is the text).
    Function(String),
}

/// More location clauses than a filter holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at most {MAX_LOCATION_CLAUSES} location and function clauses, not {0}")]
pub struct TooManyClauses(pub usize);

/// Most clauses of a [`LocationFilter`] (a bit each in [`LocationMask`]).
pub const MAX_LOCATION_CLAUSES: usize = 8;

impl LocationFilter {
    /// Whether there is no clause.
    pub fn is_empty(&self) -> bool {
        self.require.is_empty() && self.forbid.is_empty()
    }

    /// The clauses as the analyser's masks: the required ones first, a bit each.
    pub fn mask(&self) -> Result<LocationMask, TooManyClauses> {
        let n = self.require.len() + self.forbid.len();
        if n > MAX_LOCATION_CLAUSES {
            return Err(TooManyClauses(n));
        }
        let bits = |from: usize, k: usize| ((1u16 << (from + k)) - (1u16 << from)) as u8;
        Ok(LocationMask {
            required: bits(0, self.require.len()),
            forbidden: bits(self.require.len(), self.forbid.len()),
        })
    }

    /// The clauses `code` matches, bits as in [`LocationFilter::mask`].
    pub(crate) fn matches(
        &self,
        table: &tracekit_memtrace::LocationTable,
        code: LocationCode,
    ) -> u8 {
        let locs = table.get(code).unwrap_or(&[]);
        let printed: Vec<String> = match locs.is_empty() {
            true => vec![format!("${}", code.get())],
            false => locs.iter().map(|l| l.to_string()).collect(),
        };
        let hit = |m: &FrameMatch| match m {
            FrameMatch::Contains(text) => printed.iter().any(|p| p.contains(text.as_str())),
            FrameMatch::Function(name) => locs.iter().any(|l| l.defname.to_string() == *name),
        };
        self.require
            .iter()
            .chain(&self.forbid)
            .enumerate()
            .fold(0, |mask, (i, m)| if hit(m) { mask | 1 << i } else { mask })
    }

    /// The clauses in words, for report headers.
    pub fn describe(&self) -> Vec<String> {
        let required = self.require.iter().map(|m| match m {
            FrameMatch::Contains(t) => format!("backtrace location contains {t:?}"),
            FrameMatch::Function(f) => format!("a frame in function {f:?}"),
        });
        let forbidden = self.forbid.iter().map(|m| match m {
            FrameMatch::Contains(t) => format!("no backtrace location contains {t:?}"),
            FrameMatch::Function(f) => format!("no frame in function {f:?}"),
        });
        required.chain(forbidden).collect()
    }
}

/// The peak of the whole live heap (no filter): a quick pass without backtraces,
/// repeated with the domains known if the first pass saw domains interleave.
pub fn find_peak(source: &mut dyn Source, progress: Progress<'_>) -> Result<Peak, ReadError> {
    let mut options = Options {
        backtraces: false,
        timeline_buckets: 0,
        ..Options::default()
    };
    let first = source.pass(options.clone(), None, Stage::FindingPeak, &mut *progress);
    if let Some(e) = first.error {
        return Err(e);
    }
    let peak = first.profile.peak;
    if peak.late_events == 0 {
        return Ok(peak);
    }
    options.domains = peak.domains.clone();
    let second = source.pass(options, None, Stage::FindingPeak, progress);
    match second.error {
        Some(e) => Err(e),
        None => Ok(second.profile.peak),
    }
}

/// Makes `pass`'s peak exact when its domains interleaved: one more pass (without
/// backtraces unless the location filter needs them) with the domains known upfront.
/// A pass that stopped at damage is left as it is.
pub fn settle_peak(
    source: &mut dyn Source,
    pass: &mut Pass,
    options: &Options,
    location: Option<&LocationFilter>,
    progress: Progress<'_>,
) {
    if pass.profile.peak.late_events == 0 || pass.error.is_some() {
        return;
    }
    let again = Options {
        backtraces: false,
        timeline_buckets: 0,
        live_at: None,
        big: 0,
        domains: pass.profile.peak.domains.clone(),
        ..options.clone()
    };
    let second = source.pass(again, location, Stage::SettlingPeak, progress);
    if second.error.is_none() {
        pass.profile.peak = second.profile.peak;
    }
}

/// One pass with `options`, its peak made exact ([`analyze`], then [`settle_peak`]).
pub fn settled(
    source: &mut dyn Source,
    options: Options,
    location: Option<&LocationFilter>,
    progress: Progress<'_>,
) -> Pass {
    let mut pass = analyze(source, options.clone(), location, &mut *progress);
    settle_peak(source, &mut pass, &options, location, progress);
    pass
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
    use tracekit_memtrace::{
        AllocationSource, DomainId, Event, LocationCode, MultiplexedDomains, Timestamp,
    };

    /// Two domains whose events interleave: domain 1's allocation comes first in
    /// the file but at 30 µs, after domain 0's object lived from 10 to 20 µs, so a
    /// running peak in file order sees both live at once, which never happened.
    fn interleaved() -> Vec<u8> {
        let info = tracekit_memtrace::synth::synth_info();
        let t0 = info.start_time.as_micros();
        let mut w = MultiplexedDomains::new(Vec::new(), &info).unwrap();
        let at = |us| Timestamp::from_micros(t0 + us);
        let locs = |_: LocationCode| Vec::<tracekit_memtrace::Location>::new();
        let alloc = |w: &mut MultiplexedDomains<Vec<u8>>, domain: u16, time: i64| {
            let domain = DomainId::new(domain);
            let obj_id = w.next_alloc_id(domain).unwrap();
            let event = Event::Alloc(tracekit_memtrace::Alloc {
                obj_id,
                length: 100,
                domain,
                nsamples: 100,
                source: AllocationSource::Major,
                backtrace: std::borrow::Cow::Borrowed(&[]),
                common_prefix: 0,
            });
            w.put_event(locs, at(time), &event).unwrap();
            obj_id
        };
        alloc(&mut w, 1, 30);
        let id = alloc(&mut w, 0, 10);
        w.put_event(locs, at(20), &Event::Collect(id, DomainId::new(0)))
            .unwrap();
        w.into_inner().unwrap()
    }

    #[test]
    fn stages_are_reported_with_their_positions() {
        let config = SynthConfig {
            allocs: 2000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let mut seen = Vec::new();
        let peak = find_peak(&mut reader, &mut |s, pos| seen.push((s, pos))).unwrap();
        assert_eq!(seen.first(), Some(&(Stage::FindingPeak, 0)));
        assert!(peak.live > 0);
        let mut seen = Vec::new();
        let pass = settled(&mut reader, Options::default(), None, &mut |s, pos| {
            seen.push((s, pos))
        });
        assert_eq!(seen.first(), Some(&(Stage::Analysing, 0)));
        // One domain: nothing to settle, and the same peak as find_peak's.
        assert!(seen.iter().all(|(s, _)| *s == Stage::Analysing));
        assert_eq!(pass.profile.peak.live, peak.live);
        assert_eq!(pass.profile.peak.time, peak.time);
    }

    #[test]
    fn a_location_filter_runs_on_one_thread_whatever_the_threads() {
        let config = SynthConfig {
            allocs: 3000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let mut pass = |threads, location| {
            let options = Options {
                threads,
                ..Options::default()
            };
            analyze(&mut reader, options, location, &mut |_, _| {})
        };
        let module_3 = LocationFilter {
            require: vec![FrameMatch::Contains("module_003".into())],
            forbid: vec![],
        };
        let all = pass(Threads::Two, None);
        let one = pass(Threads::One, Some(&module_3));
        let two = pass(Threads::Two, Some(&module_3));
        assert!(0 < one.profile.totals.allocs);
        assert!(one.profile.totals.allocs < all.profile.totals.allocs);
        assert_eq!(one.profile.totals, two.profile.totals);
        assert_eq!(one.profile.events, two.profile.events);
    }

    #[test]
    fn location_clauses_keep_what_each_backtrace_passes() {
        let config = SynthConfig {
            allocs: 5000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        // The allocations' samples and frames (as printed locations and defnames),
        // read independently of the pass.
        let mut allocs: Vec<(u64, Vec<(String, String)>)> = Vec::new();
        {
            let mut events = reader.events(true);
            while let Some(item) = events.next_event_with_locations() {
                let (_, ev, table) = item.unwrap();
                if let tracekit_memtrace::Event::Alloc(a) = ev {
                    let frames = a
                        .backtrace
                        .iter()
                        .flat_map(|&c| table.get(c).unwrap_or(&[]).iter())
                        .map(|l| (l.to_string(), l.defname.to_string()))
                        .collect();
                    allocs.push((a.nsamples, frames));
                }
            }
        }
        let function = allocs[7].1[2].1.clone();
        let cases = [
            (vec![FrameMatch::Contains("module_003".into())], vec![]),
            (vec![], vec![FrameMatch::Contains("module_003".into())]),
            (vec![FrameMatch::Function(function.clone())], vec![]),
            (
                vec![FrameMatch::Contains("module_00".into())],
                vec![
                    FrameMatch::Function(function.clone()),
                    FrameMatch::Contains(".ml:1".into()),
                ],
            ),
            (
                vec![FrameMatch::Function(function[..4].to_string())],
                vec![],
            ),
        ];
        for (require, forbid) in cases {
            let hit = |m: &FrameMatch, frames: &[(String, String)]| {
                frames.iter().any(|(printed, defname)| match m {
                    FrameMatch::Contains(t) => printed.contains(t.as_str()),
                    FrameMatch::Function(f) => defname == f,
                })
            };
            let expected: u64 = allocs
                .iter()
                .filter(|(_, f)| {
                    require.iter().all(|m| hit(m, f)) && !forbid.iter().any(|m| hit(m, f))
                })
                .map(|(n, _)| n)
                .sum();
            let clauses = LocationFilter { require, forbid };
            let p = analyze(
                &mut reader,
                Options::default(),
                Some(&clauses),
                &mut |_, _| {},
            );
            assert_eq!(p.profile.totals.samples, expected, "{clauses:?}");
        }
        let too_many = LocationFilter {
            require: vec![FrameMatch::Contains("a".into()); MAX_LOCATION_CLAUSES + 1],
            forbid: vec![],
        };
        assert_eq!(
            too_many.mask(),
            Err(TooManyClauses(MAX_LOCATION_CLAUSES + 1))
        );
    }

    #[test]
    fn big_backtraces_alone_are_those_of_a_whole_pass() {
        let config = SynthConfig {
            allocs: 20_000,
            depth: 40,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let mut big = |threads, big_backtraces_only| {
            let options = Options {
                threads,
                big: 50,
                big_backtraces_only,
                ..Options::default()
            };
            let p = analyze(&mut reader, options, None, &mut |_, _| {}).profile;
            let big: Vec<_> = p
                .big
                .iter()
                .map(|b| (b.obj_id, b.time, b.length, p.backtraces.codes(b.backtrace)))
                .collect();
            (big, p.sites.len(), p.peak.live)
        };
        let (whole, sites, peak) = big(Threads::One, false);
        assert!(sites > 1);
        assert_eq!(whole.len(), 50);
        assert!(whole.iter().all(|(.., bt)| !bt.is_empty()));
        for threads in [Threads::One, Threads::Two] {
            let (alone, sites, alone_peak) = big(threads, true);
            assert_eq!(alone, whole, "{threads:?}");
            // Every allocation charged to the empty backtrace.
            assert_eq!(sites, 1, "{threads:?}");
            assert_eq!(alone_peak, peak);
        }
    }

    #[test]
    fn an_interleaved_peak_is_settled() {
        let bytes = interleaved();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let once = analyze(&mut reader, Options::default(), None, &mut |_, _| {});
        assert!(once.profile.peak.late_events > 0, "{:?}", once.profile.peak);
        let mut stages = Vec::new();
        let settled = settled(&mut reader, Options::default(), None, &mut |s, _| {
            stages.push(s)
        });
        assert!(stages.contains(&Stage::SettlingPeak));
        // Only one object was ever live at once.
        assert_eq!(settled.profile.peak.live, 100);
        assert_eq!(settled.profile.peak.late_events, 0);
        assert_eq!(find_peak(&mut reader, &mut |_, _| {}).unwrap().live, 100);
    }
}
