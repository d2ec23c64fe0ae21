//! Writer fast path (ns/event) and reader throughput (records/s, MB/s).
//!
//! Writer: events go to a `DiscardDestination` (an in-memory buffer that is reused
//! when full, like the seed's black-hole destination) with caller-supplied
//! timestamps, 1024 events per iteration. Baselines in the same run: the general
//! (`&[Arg]`) path, and two plain 8-byte stores per event into a slice.
//!
//! Reader: the corpus magic-trace file (needs `TRACEKIT_CORPUS`).
//!
//! On a shared, loaded machine wall-clock medians mostly measure the scheduler; the
//! examples `write_loop` and `read_loop` run the same loops for CPU-time measurement:
//! `perf stat -e task-clock target/release/examples/write_loop pair32 200000000`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_fxt::format::{Arg, ArgValue, Koid};
use tracekit_fxt::read::{Reader, Record, StreamReader};
use tracekit_fxt::write::fast::{EventHeader, Int32, Int64};
use tracekit_fxt::write::{DiscardDestination, Writer};

const BATCH: u64 = 1024;

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
            for _ in 0..BATCH {
                ts += 1;
                let _ = black_box(w.emit(&instant, ts, ()));
            }
        })
    });

    let begin = EventHeader::<(Int32, Int32)>::duration_begin(thread, cat, name);
    let end = EventHeader::<(Int32, Int32)>::duration_end(thread, cat, name);
    g.bench_function("duration_pair_2_int32_args", |b| {
        b.iter(|| {
            for i in 0..BATCH / 2 {
                ts += 1;
                let v = i as i32;
                let _ = black_box(w.emit(&begin, ts, (Int32(k1, v), Int32(k2, v))));
                let _ = black_box(w.emit(&end, ts + 1, (Int32(k1, v), Int32(k2, v))));
            }
        })
    });

    let begin64 = EventHeader::<(Int64, Int64)>::duration_begin(thread, cat, name);
    let end64 = EventHeader::<(Int64, Int64)>::duration_end(thread, cat, name);
    g.bench_function("duration_pair_2_int64_args", |b| {
        b.iter(|| {
            for i in 0..BATCH / 2 {
                ts += 1;
                let v = i as i64;
                let _ = black_box(w.emit(&begin64, ts, (Int64(k1, v), Int64(k2, v))));
                let _ = black_box(w.emit(&end64, ts + 1, (Int64(k1, v), Int64(k2, v))));
            }
        })
    });

    // Baseline: the general path, arguments as values.
    g.bench_function("general_path_duration_pair_2_int32_args", |b| {
        b.iter(|| {
            for i in 0..BATCH / 2 {
                ts += 1;
                let v = i as i32;
                let args = [
                    Arg::new(k1, ArgValue::Int32(v)),
                    Arg::new(k2, ArgValue::Int32(v)),
                ];
                let _ = black_box(w.duration_begin(thread, cat, name, ts, &args));
                let _ = black_box(w.duration_end(thread, cat, name, ts + 1, &args));
            }
        })
    });

    // Baseline: two plain stores per event into a reused buffer (the floor).
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0usize;
    let word = instant.word();
    g.bench_function("baseline_two_stores", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                ts += 1;
                if pos + 16 > buf.len() {
                    pos = 0;
                }
                buf[pos..pos + 8].copy_from_slice(&word.to_le_bytes());
                buf[pos + 8..pos + 16].copy_from_slice(&ts.to_le_bytes());
                pos += 16;
            }
            black_box(&buf);
        })
    });
    g.finish();
    black_box(w.destination().discarded());
}

fn read_benches(c: &mut Criterion) {
    let Some(dir) = std::env::var_os("TRACEKIT_CORPUS") else {
        eprintln!("TRACEKIT_CORPUS unset: skipping reader benches");
        return;
    };
    let path = std::path::Path::new(&dir).join("fxt/magic_trace_sample.fxt");
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

criterion_group!(benches, write_benches, read_benches);
criterion_main!(benches);
