//! Writer fast path (ns/event) and reader throughput (records/s, MB/s).
//!
//! Writer: events go to a `DiscardDestination` (an in-memory buffer that is reused
//! when full, like `black_hole_destination` in Jane Street's `tracing`) with caller-supplied
//! timestamps, 1024 events per iteration. Baselines in the same run: the general
//! (`&[Arg]`) path, and two plain 8-byte stores per event into a slice.
//!
//! Each loop checks every write's result, as a caller does (`?`), keeps its timestamp
//! (and the baseline its position) in a local, and hands the writer to `black_box` once per batch so that no write
//! can be optimised away. (Earlier loops measured the harness rather than the
//! writer; how, and what it cost, is in `docs/performance.md`.)
//!
//! `TRACEKIT_CORPUS=../shared/corpus cargo bench -p tracekit-fxt --bench fxt -- --warm-up-time 1 --measurement-time 3`
//!
//! Reader: the corpus magic-trace file (needs `TRACEKIT_CORPUS`).
//!
//! Chrome JSON (`to_json/shaped`): `fxt to-json`'s conversion (into `io::sink`)
//! against `fxt stats`' read of the same trace, in input MB/s (the target:
//! the conversion at half the read speed or more). The trace is the real-shaped one of
//! `benches/common` (1 M events, 40 MB; `examples/shaped_trace` writes it to a file).
//!
//! On a shared, loaded machine wall-clock medians mostly measure the scheduler; the
//! examples `write_loop` and `read_loop` run the same loops for CPU-time measurement:
//! `perf stat -e task-clock target/release/examples/write_loop pair32 200000000`.

use std::hint::black_box;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_fxt::format::{Arg, ArgValue, Koid};
use tracekit_fxt::read::{Reader, Record, StreamReader};
use tracekit_fxt::write::fast::{EventHeader, Int32, Int64};
use tracekit_fxt::write::{DiscardDestination, Writer};

const BATCH: u64 = 1024;

/// What a caller does with each write's result (`?`): check it.
#[inline(always)]
fn check<E: std::fmt::Display>(r: Result<(), E>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

fn writer() -> Writer<DiscardDestination> {
    match Writer::new(DiscardDestination::new(1 << 20)) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    }
}

fn write_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Elements(BATCH));

    let mut w = writer();
    let thread = w.set_thread_slot(0, Koid(1), Koid(2)).ok();
    let (Some(thread), Ok(cat), Ok(name), Ok(k1), Ok(k2)) = (
        thread,
        w.intern("bench"),
        w.intern("work"),
        w.intern("a"),
        w.intern("b"),
    ) else {
        panic!("setup failed");
    };

    let instant = EventHeader::<()>::instant(thread, cat, name);
    let mut ts = 0u64;
    g.bench_function("instant_no_args", |b| {
        b.iter(|| {
            let mut t = ts;
            for _ in 0..BATCH {
                t += 1;
                check(w.emit(&instant, t, ()));
            }
            ts = t;
            black_box(&mut w);
        })
    });

    let begin = EventHeader::<(Int32, Int32)>::duration_begin(thread, cat, name);
    let end = EventHeader::<(Int32, Int32)>::duration_end(thread, cat, name);
    g.bench_function("duration_pair_2_int32_args", |b| {
        b.iter(|| {
            let mut t = ts;
            for i in 0..BATCH / 2 {
                t += 1;
                let v = i as i32;
                check(w.emit(&begin, t, (Int32(k1, v), Int32(k2, v))));
                check(w.emit(&end, t + 1, (Int32(k1, v), Int32(k2, v))));
            }
            ts = t;
            black_box(&mut w);
        })
    });

    let begin64 = EventHeader::<(Int64, Int64)>::duration_begin(thread, cat, name);
    let end64 = EventHeader::<(Int64, Int64)>::duration_end(thread, cat, name);
    g.bench_function("duration_pair_2_int64_args", |b| {
        b.iter(|| {
            let mut t = ts;
            for i in 0..BATCH / 2 {
                t += 1;
                let v = i as i64;
                check(w.emit(&begin64, t, (Int64(k1, v), Int64(k2, v))));
                check(w.emit(&end64, t + 1, (Int64(k1, v), Int64(k2, v))));
            }
            ts = t;
            black_box(&mut w);
        })
    });

    // Baseline: the general path, arguments as values.
    g.bench_function("general_path_duration_pair_2_int32_args", |b| {
        b.iter(|| {
            let mut t = ts;
            for i in 0..BATCH / 2 {
                t += 1;
                let v = i as i32;
                let args = [
                    Arg::new(k1, ArgValue::Int32(v)),
                    Arg::new(k2, ArgValue::Int32(v)),
                ];
                check(w.duration_begin(thread, cat, name, t, &args));
                check(w.duration_end(thread, cat, name, t + 1, &args));
            }
            ts = t;
            black_box(&mut w);
        })
    });

    // Baseline: two plain stores per event into a reused buffer (the floor).
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0usize;
    let word = instant.word();
    g.bench_function("baseline_two_stores", |b| {
        b.iter(|| {
            let (mut t, mut p) = (ts, pos);
            for _ in 0..BATCH {
                t += 1;
                if p + 16 > buf.len() {
                    p = 0;
                }
                buf[p..p + 8].copy_from_slice(&word.to_le_bytes());
                buf[p + 8..p + 16].copy_from_slice(&t.to_le_bytes());
                p += 16;
            }
            (ts, pos) = (t, p);
            black_box(&buf);
        })
    });
    g.finish();
    black_box(w.destination().discarded());
}

fn read_benches(c: &mut Criterion) {
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        eprintln!("TRACEKIT_CORPUS unset: skipping reader benches");
        return;
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut records = 0u64;
    let mut r = Reader::new(&data);
    while let Ok(Some(_)) = r.next_raw() {
        records += 1;
    }
    eprintln!(
        "magic_trace_sample.fxt: {} bytes, {records} records",
        data.len()
    );

    let mut g = c.benchmark_group("read_magic_trace");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("raw", |b| {
        b.iter(|| {
            let mut r = Reader::new(&data);
            let mut n = 0u64;
            while let Ok(Some(rec)) = r.next_raw() {
                black_box(&rec);
                n += 1;
            }
            n
        })
    });
    g.bench_function("resolved_with_args", |b| {
        b.iter(|| {
            let mut r = Reader::new(&data);
            let mut n = 0u64;
            while let Ok(Some(rec)) = r.next_record() {
                if let Record::Event(e) = rec {
                    for a in e.args.iter() {
                        black_box(a);
                    }
                    black_box(e.name);
                }
                n += 1;
            }
            n
        })
    });
    g.bench_function("stream_resolved", |b| {
        b.iter(|| {
            let mut r = StreamReader::new(&data[..]);
            let mut n = 0u64;
            while let Ok(Some(rec)) = r.next_record() {
                black_box(&rec);
                n += 1;
            }
            n
        })
    });
    g.finish();
}

fn chrome_benches(c: &mut Criterion) {
    use tracekit_fxt::chrome::write_chrome_json;
    use tracekit_fxt::stats::Stats;
    let data = common::shaped_trace(1_000_000).expect("write the shaped trace");
    let mut g = c.benchmark_group("to_json/shaped");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("stats", |b| {
        b.iter(|| black_box(Stats::collect(&mut Reader::new(&data), |_| {}).expect("read")))
    });
    g.bench_function("to_json", |b| {
        b.iter(|| {
            let mut out = std::io::sink();
            black_box(
                write_chrome_json(&mut Reader::new(&data), &mut out, |_| {}).expect("convert"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, write_benches, read_benches, chrome_benches);
criterion_main!(benches);
