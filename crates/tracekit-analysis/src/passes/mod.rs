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

use tracekit_columns::Spill;
use tracekit_memtrace::{Info, LocationTable, ReadError, Reader, Timedelta};

use crate::analyzer::{Options, Profile};
use crate::curve::Peak;
use crate::filter::Filter;
use crate::frames::{FrameTree, Hide};
use crate::report::FoldOptions;
use objects::AllocationSet;

#[doc(hidden)]
pub use crate::analyzer::Threads;
pub use drive::{Pass, decode_side_only};

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
/// tables (`tables::Tables`), decoded once. A pass gives the same [`Pass`]
/// over either.
pub trait Source {
    /// The trace's header.
    fn info(&self) -> &Info;
    /// The trace's locations (every one, once a pass has read the whole trace).
    fn locations(&self) -> &LocationTable;
    /// The trace's size in bytes, the scale of progress positions.
    fn size_bytes(&self) -> u64;
    /// One analysis pass with `options`, its filter's clauses on objects' lives
    /// already decided ([`Options::objects`]; [`analyze`] decides them).
    /// `progress` hears `stage` at position 0, then now and then the byte position
    /// reached.
    fn pass(&mut self, options: Options, stage: Stage, progress: Progress<'_>) -> Pass;
    /// The allocations (by ordinal) whose objects' lives pass `filter`'s clauses on
    /// them.
    fn objects(&mut self, filter: &Filter, progress: &mut dyn FnMut(u64)) -> Arc<AllocationSet>;
    /// The time of the trace's last event: a quick pass without backtraces,
    /// unless the source knows it already.
    fn end(&mut self, progress: Progress<'_>) -> Timedelta {
        let quick = Options {
            backtraces: false,
            timeline_buckets: 0,
            ..Options::default()
        };
        self.pass(quick, Stage::Analysing, progress).profile.end
    }
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

    fn pass(&mut self, options: Options, stage: Stage, progress: Progress<'_>) -> Pass {
        progress(stage, 0);
        let mut position = |pos| progress(stage, pos);
        let two = match options.threads {
            Threads::One => false,
            Threads::Two => true,
            Threads::Auto => std::thread::available_parallelism().is_ok_and(|n| n.get() > 1),
        };
        // Location clauses match locations as backtraces are decoded, which only the
        // one-thread pass does.
        if two && options.filter.location_mask().is_none() {
            drive::two_threads(self, options, &mut position)
        } else {
            drive::one_thread(self, options, &mut position)
        }
    }

    fn objects(&mut self, filter: &Filter, progress: &mut dyn FnMut(u64)) -> Arc<AllocationSet> {
        objects::passing(self, filter, progress)
    }
}

/// A source (a trace's [`Reader`], or its tables) whose passes grow their
/// large tables where `spill` says ([`Options::spill`]: the backtrace trie,
/// the live objects, the sites' counts), whatever the options they are given
/// say: a pass that runs beside a build of the trace's tables then holds none
/// of them in memory, nor does a query over millions of whole backtraces.
pub struct Spilling<S> {
    /// The source read.
    pub source: S,
    /// Where each pass grows its tables.
    pub spill: Spill,
}

impl<S: Source> Source for Spilling<S> {
    fn info(&self) -> &Info {
        self.source.info()
    }

    fn locations(&self) -> &LocationTable {
        self.source.locations()
    }

    fn size_bytes(&self) -> u64 {
        self.source.size_bytes()
    }

    fn pass(&mut self, mut options: Options, stage: Stage, progress: Progress<'_>) -> Pass {
        options.spill = self.spill.clone();
        self.source.pass(options, stage, progress)
    }

    fn objects(&mut self, filter: &Filter, progress: &mut dyn FnMut(u64)) -> Arc<AllocationSet> {
        self.source.objects(filter, progress)
    }

    fn end(&mut self, progress: Progress<'_>) -> Timedelta {
        self.source.end(progress)
    }

    fn fold(&self, profile: &Profile, options: FoldOptions, hide: &Hide) -> FrameTree {
        self.source.fold(profile, options, hide)
    }
}

/// One analysis pass over `source` with `options` (its [`Options::threads`] say on
/// how many threads a reader's pass runs). When the filter has clauses on objects'
/// lives that [`Options::objects`] has not decided, a quick pass decides them first
/// ([`Stage::SelectingObjects`]). `progress` hears [`Stage::Analysing`] at position
/// 0, then now and then the byte position reached.
pub fn analyze(source: &mut dyn Source, options: Options, progress: Progress<'_>) -> Pass {
    let options = decide_objects(source, options, &mut *progress);
    source.pass(options, Stage::Analysing, progress)
}

/// `options` with the allocations its filter's clauses on lives keep, found by
/// `source` unless known or there are none.
fn decide_objects(
    source: &mut dyn Source,
    mut options: Options,
    progress: Progress<'_>,
) -> Options {
    if options.filter.has_life_clauses() && options.objects.is_none() {
        progress(Stage::SelectingObjects, 0);
        let mut at = |pos| progress(Stage::SelectingObjects, pos);
        options.objects = Some(source.objects(&options.filter, &mut at));
    }
    options
}

/// The peak of the whole live heap (no filter): a quick pass without backtraces,
/// repeated with the domains known if the first pass saw domains interleave.
pub fn find_peak(source: &mut dyn Source, progress: Progress<'_>) -> Result<Peak, ReadError> {
    let mut options = Options {
        backtraces: false,
        timeline_buckets: 0,
        ..Options::default()
    };
    let first = source.pass(options.clone(), Stage::FindingPeak, &mut *progress);
    if let Some(e) = first.error {
        return Err(e);
    }
    let peak = first.profile.peak;
    if peak.late_events == 0 {
        return Ok(peak);
    }
    options.domains = peak.domains.clone();
    let second = source.pass(options, Stage::FindingPeak, progress);
    match second.error {
        Some(e) => Err(e),
        None => Ok(second.profile.peak),
    }
}

/// Makes `pass`'s peak exact when its domains interleaved: one more pass (without
/// backtraces unless the location clauses need them) with the domains known upfront.
/// A pass that stopped at damage is left as it is.
pub fn settle_peak(
    source: &mut dyn Source,
    pass: &mut Pass,
    options: &Options,
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
    let again = decide_objects(source, again, &mut *progress);
    let second = source.pass(again, Stage::SettlingPeak, progress);
    if second.error.is_none() {
        pass.profile.peak = second.profile.peak;
    }
}

/// One pass with `options`, its peak made exact ([`analyze`], then [`settle_peak`]).
pub fn settled(source: &mut dyn Source, options: Options, progress: Progress<'_>) -> Pass {
    let options = decide_objects(source, options, &mut *progress);
    let mut pass = analyze(source, options.clone(), &mut *progress);
    settle_peak(source, &mut pass, &options, progress);
    pass
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::backtrace::BacktraceId;
    use crate::sites::{PerSite, Weight};
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
    use tracekit_memtrace::{
        AllocationSource, DomainId, Event, LocationCode, MultiplexedDomains, Timedelta, Timestamp,
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
        let pass = settled(&mut reader, Options::default(), &mut |s, pos| {
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
        let mut pass = |threads, location: &[&str]| {
            let options = Options {
                threads,
                filter: Filter {
                    location: location.iter().map(|l| l.to_string()).collect(),
                    ..Filter::default()
                },
                ..Options::default()
            };
            analyze(&mut reader, options, &mut |_, _| {})
        };
        let all = pass(Threads::Two, &[]);
        let one = pass(Threads::One, &["module_003"]);
        let two = pass(Threads::Two, &["module_003"]);
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
        let clauses =
            |location: &[&str], function: &[&str], forbid: &[&str], forbid_function: &[&str]| {
                let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
                Filter {
                    location: own(location),
                    function: own(function),
                    forbid: own(forbid),
                    forbid_function: own(forbid_function),
                    ..Filter::default()
                }
            };
        let cases = [
            clauses(&["module_003"], &[], &[], &[]),
            clauses(&[], &[], &["module_003"], &[]),
            clauses(&[], &[&function], &[], &[]),
            clauses(&["module_00"], &[], &[".ml:1"], &[&function]),
            clauses(&[], &[&function[..4]], &[], &[]),
        ];
        for filter in cases {
            let contains = |t: &String, frames: &[(String, String)]| {
                frames
                    .iter()
                    .any(|(printed, _)| printed.contains(t.as_str()))
            };
            let in_function =
                |f: &String, frames: &[(String, String)]| frames.iter().any(|(_, d)| d == f);
            let expected: u64 = allocs
                .iter()
                .filter(|(_, f)| {
                    filter.location.iter().all(|t| contains(t, f))
                        && filter.function.iter().all(|n| in_function(n, f))
                        && !filter.forbid.iter().any(|t| contains(t, f))
                        && !filter.forbid_function.iter().any(|n| in_function(n, f))
                })
                .map(|(n, _)| n)
                .sum();
            let options = Options {
                filter: filter.clone(),
                ..Options::default()
            };
            let p = analyze(&mut reader, options, &mut |_, _| {});
            assert_eq!(p.profile.totals.samples, expected, "{filter:?}");
        }
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
            let p = analyze(&mut reader, options, &mut |_, _| {}).profile;
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
        let once = analyze(&mut reader, Options::default(), &mut |_, _| {});
        assert!(once.profile.peak.late_events > 0, "{:?}", once.profile.peak);
        let mut stages = Vec::new();
        let settled = settled(&mut reader, Options::default(), &mut |s, _| stages.push(s));
        assert!(stages.contains(&Stage::SettlingPeak));
        // Only one object was ever live at once.
        assert_eq!(settled.profile.peak.live, 100);
        assert_eq!(settled.profile.peak.late_events, 0);
        assert_eq!(find_peak(&mut reader, &mut |_, _| {}).unwrap().live, 100);
    }

    #[test]
    fn a_table_of_one_weight_keeps_that_weight_and_whole_totals() {
        let config = SynthConfig {
            allocs: 20_000,
            depth: 12,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let live_at = Some(Timedelta::from_micros(30_000));
        for threads in [Threads::One, Threads::Two] {
            let options = |per_site| Options {
                live_at,
                per_site,
                threads,
                ..Options::default()
            };
            let all = analyze(&mut reader, options(PerSite::All), &mut |_, _| {}).profile;
            assert!(all.sites.len() > 1000);
            for w in [Weight::Allocated, Weight::LiveAt, Weight::LiveEnd] {
                let one =
                    analyze(&mut reader, options(PerSite::Counted(w)), &mut |_, _| {}).profile;
                assert_eq!(one.sites.keeps(), PerSite::Counted(w));
                // Without the count, the same weights and no objects.
                let bare =
                    analyze(&mut reader, options(PerSite::Weight(w)), &mut |_, _| {}).profile;
                assert!(bare.sites.iter().all(|(_, c)| w.objects(&c) == 0));
                let weight_of =
                    |p: &Profile| -> Vec<u64> { p.sites.iter().map(|(_, c)| w.of(&c)).collect() };
                assert_eq!(weight_of(&bare), weight_of(&one), "{w:?}");
                assert_eq!(one.totals, all.totals, "{w:?}");
                assert_eq!(one.sites.totals(), all.sites.totals(), "{w:?}");
                let weights = |p: &Profile| -> Vec<(BacktraceId, u64, u64)> {
                    p.sites
                        .iter()
                        .map(|(bt, c)| (bt, w.of(&c), w.objects(&c)))
                        .collect()
                };
                assert_eq!(weights(&one), weights(&all), "{w:?} {threads:?}");
                assert!(
                    weights(&all).iter().any(|&(_, x, n)| x > 0 && n > 0),
                    "{w:?}"
                );
            }
        }
    }
}
