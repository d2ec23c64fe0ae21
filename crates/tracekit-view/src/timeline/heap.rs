//! A program's heap beside its spans: the memtrace trace tracekit-alloc wrote
//! of a program whose spans the tracing layer wrote as FXT, joined onto the
//! spans' timeline as a live-heap counter track of the program's process.
//!
//! Both tracers place their clocks on `CLOCK_MONOTONIC`:
//!
//! | tracer | where | what |
//! |---|---|---|
//! | the tracing layer | the process's kernel object record | `clock_ticks` and `clock_monotonic_ns`: a tick and the monotonic time it was |
//! | tracekit-alloc | the trace's runtime parameters | `monotonic_offset_us=N`: its timestamps (wall-clock microseconds) less the monotonic clock's |
//!
//! An event of the heap at `start_time + t` was at monotonic time
//! `start_time + t - N` microseconds, which the timeline turns into its own
//! time. The counter's samples are the live heap's curve, its peak among them;
//! those from before the spans' clock began (the heap's tracing usually starts
//! first) are left out.
//!
//! By thread, on request: each thread whose record names its memtrace domain
//! (`memtrace_domain`, which tracekit-tracing writes from tracekit-alloc's
//! `thread_domain`; in tracekit-alloc's trace one domain is one thread) also
//! gets a counter of what it allocated that is still live, the same curve of
//! its domain's allocations alone.

use tracekit_analysis::analyzer::Options;
use tracekit_analysis::passes::Source;
use tracekit_analysis::{Filter, passes};
use tracekit_memtrace::Info;
use tracekit_timeline::Timeline;

/// The counter a joined heap is drawn as, and its series.
pub const COUNTER: (&str, &str) = ("live heap", "bytes");

/// Most samples of the live heap's curve drawn.
const POINTS: usize = 4096;

/// Why a heap could not be joined to a timeline.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The timeline's trace does not place its clock on the monotonic clock.
    #[error(
        "the FXT trace does not say where its clock is on the monotonic clock (tracekit-tracing's process record does)"
    )]
    NoClockInFxt,
    /// The memtrace trace does not say where its clock is.
    #[error(
        "the memtrace trace does not say where its clock is on the monotonic clock (tracekit-alloc's runtime parameters do)"
    )]
    NoClockInMemtrace,
    /// Reading the memtrace trace failed.
    #[error("reading the memtrace trace: {0}")]
    Read(String),
}

/// What was joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Joined {
    /// Samples of the counter.
    pub samples: usize,
    /// The live heap's peak, bytes (as `memtrace top --peak` says).
    pub peak_bytes: u64,
    /// Threads given a counter of their own.
    pub threads: usize,
}

/// The counter of the live heap a thread allocated, named by the thread as
/// its track is (`name [tid]`).
pub fn thread_counter(thread: &str, tid: u64) -> String {
    format!("{} of {thread} [{tid}]", COUNTER.0)
}

/// Where a heap trace's clock is on the monotonic clock: its start and what
/// tracekit-alloc's runtime parameters say its timestamps are ahead of it
/// (`monotonic_offset_us`), microseconds.
struct HeapClock {
    start_us: i64,
    offset_us: i64,
}

impl HeapClock {
    fn of(info: &Info) -> Option<HeapClock> {
        let params = info.ocaml_runtime_params.to_str_lossy();
        let offset_us = params
            .split_whitespace()
            .find_map(|p| p.strip_prefix("monotonic_offset_us="))
            .and_then(|v| v.parse().ok())?;
        Some(HeapClock {
            start_us: info.start_time.as_micros(),
            offset_us,
        })
    }

    /// The timeline's time (ns) of the heap's time `micros` from its start.
    fn timeline_ns(&self, timeline: &Timeline, micros: i64) -> Option<u64> {
        let monotonic_us = self
            .start_us
            .checked_add(micros)?
            .checked_sub(self.offset_us)?;
        timeline.from_monotonic(u64::try_from(monotonic_us).ok()?.checked_mul(1000)?)
    }

    /// The heap's time (µs from its start) of the timeline's time `trace_ns`.
    fn heap_us(&self, timeline: &Timeline, trace_ns: u64) -> Option<i64> {
        let monotonic_us = i64::try_from(timeline.to_monotonic(trace_ns)? / 1000).ok()?;
        monotonic_us
            .checked_add(self.offset_us)?
            .checked_sub(self.start_us)
    }
}

/// The heap trace's time (microseconds from its start) of the timeline's time
/// `trace_ns`, when both place their clocks on the monotonic clock.
pub fn heap_micros(timeline: &Timeline, info: &Info, trace_ns: u64) -> Option<i64> {
    HeapClock::of(info)?.heap_us(timeline, trace_ns)
}

/// Adds the live heap of the memtrace trace `source` reads (a reader, or its
/// tables) to `timeline`, as counter [`COUNTER`] of the traced process; with
/// `by_thread`, also each thread's that names its domain ([`thread_counter`]).
pub fn join_heap(
    timeline: &mut Timeline,
    source: &mut dyn Source,
    by_thread: bool,
) -> Result<Joined, JoinError> {
    let info = source.info().clone();
    let clock = HeapClock::of(&info).ok_or(JoinError::NoClockInMemtrace)?;
    if !timeline.on_monotonic_clock() {
        return Err(JoinError::NoClockInFxt);
    }
    let pid = u64::try_from(info.pid).unwrap_or(0);
    let (samples, peak_bytes) = curve(timeline, source, &clock, Filter::default())?;
    let n = samples.len();
    timeline.add_counter(pid, COUNTER.0, COUNTER.1, samples);
    let mut threads = Vec::new();
    if by_thread {
        for t in timeline.tracks() {
            if let Some(domain) = t.heap_domain {
                let name = t.name.map_or("", |n| timeline.string(n));
                threads.push((thread_counter(name, t.tid), domain));
            }
        }
    }
    for (name, domain) in &threads {
        let filter = Filter {
            domain: vec![*domain],
            ..Filter::default()
        };
        let (samples, _) = curve(timeline, source, &clock, filter)?;
        timeline.add_counter(pid, name, COUNTER.1, samples);
    }
    Ok(Joined {
        samples: n,
        peak_bytes,
        threads: threads.len(),
    })
}

/// The live heap of the allocations `filter` keeps, as samples on the
/// timeline's clock (its peak among them), and that peak in bytes.
fn curve(
    timeline: &Timeline,
    source: &mut dyn Source,
    clock: &HeapClock,
    filter: Filter,
) -> Result<(Vec<(u64, f64)>, u64), JoinError> {
    let options = Options {
        filter,
        ..Options::default()
    };
    // Settled: with several threads the domains interleave, and the peak of
    // one pass may be short of the exact one `memtrace top` gives.
    let pass = passes::settled(source, options, &mut |_, _| {});
    if let Some(e) = pass.error {
        return Err(JoinError::Read(e.to_string()));
    }
    let profile = &pass.profile;
    let bytes = |samples: u64| profile.sampling.bytes(samples) as f64;
    let at = |micros: i64| clock.timeline_ns(timeline, micros);
    // The curve's points are in time order, and so on the timeline's clock;
    // the peak goes in before the points of its time.
    let mut samples: Vec<(u64, f64)> = profile
        .timeline
        .points(POINTS)
        .into_iter()
        .filter_map(|p| Some((at(p.time.as_micros())?, bytes(p.live))))
        .collect();
    let peak = &profile.peak;
    if let Some(t) = at(peak.time.as_micros()) {
        let i = samples.partition_point(|s| s.0 < t);
        samples.insert(i, (t, bytes(peak.live)));
    }
    Ok((samples, profile.sampling.bytes(peak.live)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_memtrace::synth::{SynthConfig, synth_info, write_synthetic};
    use tracekit_memtrace::{Info, Reader, Writer};

    fn trace(info: &Info) -> Vec<u8> {
        Writer::new(Vec::new(), info).unwrap().into_inner().unwrap()
    }

    #[test]
    fn a_heap_joins_only_where_both_clocks_are_placed() {
        // A memtrace trace that does not say where its clock is.
        let config = SynthConfig {
            allocs: 100,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let mut timeline = Timeline::default();
        assert_eq!(
            join_heap(&mut timeline, &mut reader, false),
            Err(JoinError::NoClockInMemtrace)
        );
        // One that does, with a timeline that does not.
        let info = Info {
            ocaml_runtime_params: "tracekit-alloc=0.1.0 unwinder=fp monotonic_offset_us=1700000000"
                .into(),
            ..synth_info()
        };
        let bytes = trace(&info);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        assert_eq!(
            join_heap(&mut timeline, &mut reader, false),
            Err(JoinError::NoClockInFxt)
        );
        assert!(timeline.counters().is_empty());
    }
}
