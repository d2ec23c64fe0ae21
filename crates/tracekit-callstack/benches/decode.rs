//! Decode throughput on the largest corpus input (`perf script` lines per second):
//!
//! - `perf_script/parse`: splitting into records and parsing them into events, alone,
//!   with the decoder's caching [`RecordParser`];
//! - `perf_script/parse_uncached`: the same with [`parse_record`], which remembers
//!   nothing between records (what `parse` measured before the parser had caches);
//! - `perf_script/write_null_sink`, `perf_script/write_fxt`: the trace-writer state
//!   machine alone over pre-parsed events, into a sink that drops everything and into
//!   the FXT writer (bytes discarded);
//! - `perf_script/decode_to_fxt`: the whole single-thread decode (parse + state machine
//!   + FXT), [`Decoder::feed`];
//! - `perf_script_wall/decode_to_fxt` and `perf_script_wall/decode_pipelined_to_fxt`:
//!   the single-thread decode and the two-thread one ([`Decoder::feed_pipelined`]) in
//!   wall-clock time, the only fair measure for work spread over threads.
//!
//! The `perf_script` group measures the calling thread's CPU time (set
//! `TRACEKIT_BENCH_WALL=1` for wall-clock time), which other jobs on a shared machine
//! disturb less; `perf_script_wall` always measures wall-clock time, so run it on a
//! quiet machine. MB/s = lines/s x the input's bytes per line (printed at start).
//!
//! `TRACEKIT_CORPUS=/path/to/corpus cargo bench -p tracekit-callstack --bench decode --
//! --warm-up-time 1 --measurement-time 3` (`$TRACEKIT_CORPUS` defaults to
//! `../shared/corpus` beside the workspace).

use std::hint::black_box;

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput, criterion_group};
use tracekit_callstack::decode::Decoder;
use tracekit_callstack::event::{Event, Time};
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::script::{Parsed, RecordParser, Records, parse_record};
use tracekit_callstack::sink::NullSink;
use tracekit_callstack::writer::{Config, TraceWriter};
use tracekit_fxt::write::{DiscardDestination, Writer};

const INPUT: &str = "demo_extra_events__pt_with_branch_and_cache_misses.perf";

fn input() -> String {
    let root = tracekit_testutil::corpus()
        .unwrap_or_else(|| tracekit_testutil::from_root("../shared/corpus"));
    let path = root.join("magic-trace").join(INPUT);
    match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => panic!("benchmark input {}: {e}", path.display()),
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): on a machine shared with
/// other jobs, wall time measures the neighbours as much as the code.
struct ThreadCpuTime;

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, i: Duration) -> Duration {
        thread_cpu_now().saturating_sub(i)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WallTime.formatter()
    }
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let text = input();
    let lines = text.lines().count() as u64;
    eprintln!(
        "input {INPUT}: {} bytes, {lines} lines, {:.1} bytes/line",
        text.len(),
        text.len() as f64 / lines as f64
    );
    let events: Vec<Event<'_>> = Records::new(&text)
        .filter_map(|r| match parse_record(&r, 0) {
            Ok(Parsed::Event(e)) => Some(e),
            _ => None,
        })
        .collect();
    let base = events.iter().find_map(Event::time).unwrap_or(Time::ZERO);

    let mut g = c.benchmark_group("perf_script");
    g.throughput(Throughput::Elements(lines));
    g.bench_function("parse", |b| {
        b.iter(|| {
            let mut n = 0u64;
            let mut parser = RecordParser::new();
            for r in Records::new(black_box(&text)) {
                if let Ok(Parsed::Event(e)) = parser.parse(&r, 0) {
                    n += u64::from(e.time().is_some());
                }
            }
            n
        })
    });
    g.bench_function("parse_uncached", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for r in Records::new(black_box(&text)) {
                if let Ok(Parsed::Event(e)) = parse_record(&r, 0) {
                    n += u64::from(e.time().is_some());
                }
            }
            n
        })
    });
    g.bench_function("write_null_sink", |b| {
        b.iter(|| {
            let mut w = TraceWriter::new(NullSink::default(), Config::default(), base);
            for e in black_box(&events) {
                w.write_event(e, true);
            }
            w.finish().calls
        })
    });
    g.bench_function("write_fxt", |b| {
        b.iter(|| {
            let writer =
                Writer::new(DiscardDestination::new(1 << 16)).unwrap_or_else(|e| panic!("{e}"));
            let mut w = TraceWriter::new(FxtSink::new(writer), Config::default(), base);
            for e in black_box(&events) {
                w.write_event(e, true);
            }
            w.finish().records()
        })
    });
    g.bench_function("decode_to_fxt", |b| {
        b.iter(|| {
            let writer =
                Writer::new(DiscardDestination::new(1 << 16)).unwrap_or_else(|e| panic!("{e}"));
            let mut d = Decoder::new(FxtSink::new(writer), Config::default(), None);
            d.feed(black_box(&text), 0);
            let (sink, stats, _) = d.finish();
            (sink.records(), stats.events)
        })
    });
    g.finish();
}

/// The single-thread and the pipelined decode in wall-clock time.
fn bench_wall(c: &mut Criterion<WallTime>) {
    let text = input();
    let lines = text.lines().count() as u64;
    let mut g = c.benchmark_group("perf_script_wall");
    g.throughput(Throughput::Elements(lines));
    let run = |pipelined: bool| {
        let writer =
            Writer::new(DiscardDestination::new(1 << 16)).unwrap_or_else(|e| panic!("{e}"));
        let mut d = Decoder::new(FxtSink::new(writer), Config::default(), None);
        if pipelined {
            d.feed_pipelined(black_box(&text), 0);
        } else {
            d.feed(black_box(&text), 0);
        }
        let (sink, stats, _) = d.finish();
        (sink.records(), stats.events)
    };
    g.bench_function("decode_to_fxt", |b| b.iter(|| run(false)));
    g.bench_function("decode_pipelined_to_fxt", |b| b.iter(|| run(true)));
    g.finish();
}

fn cpu_time() -> Criterion<ThreadCpuTime> {
    Criterion::default().with_measurement(ThreadCpuTime)
}

criterion_group! {
    name = cpu;
    config = cpu_time();
    targets = bench
}
criterion_group!(wall, bench);
criterion_group!(wall_only, bench_wall);

fn main() {
    // Thread CPU time by default; `TRACEKIT_BENCH_WALL=1` for wall-clock time.
    if std::env::var_os("TRACEKIT_BENCH_WALL").is_some() {
        wall();
    } else {
        cpu();
    }
    wall_only();
    Criterion::default().configure_from_args().final_summary();
}
