//! Reading and writing speed, on traces this benchmark generates itself
//! (the synthetic model program of `tracekit_memtrace::synth`).
//!
//! * `read/*`: a full pass with and without backtraces, as events/s and as
//!   MB/s, on a shallow (20-frame) and a deep (1000-frame) trace, and on a
//!   real-shaped one: 5 M events of the recursive model, 520 frames deep on
//!   average, whose codewords mix as an OCaml compiler trace's do (the
//!   others are mostly single hits); `owned` is the same pass copying every
//!   backtrace (a baseline for lending them).
//! * `write/alloc_20_frames`: ns per allocation with 20-frame backtraces
//!   that share prefixes, as a tracer writes them.
//!
//! Reading speed against the target in `docs/performance.md`:
//! `cargo bench -p tracekit-memtrace --bench memtrace -- read_events --warm-up-time 1 --measurement-time 4`
//! (`read_bytes` gives the same passes as MB/s). For instruction counts
//! of one pass: `valgrind --tool=callgrind --toggle-collect='read_speed::pass'
//! target/release/examples/read_speed 1000 100000 1 bt`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_memtrace::synth::{
    Rng, SynthConfig, synth_code, synth_info, synth_locations, write_synthetic,
};
use tracekit_memtrace::{AllocationSource, Event, LocationCode, Reader, Timedelta, Writer};

fn trace(depth: usize, allocs: u64, recursive: bool) -> Vec<u8> {
    let config = SynthConfig {
        allocs,
        depth,
        recursive,
        ..SynthConfig::default()
    };
    write_synthetic(Vec::new(), &config).unwrap()
}

fn count(reader: &mut Reader<'_>, parse_backtraces: bool) -> (u64, u64) {
    let mut events = reader.events(parse_backtraces);
    let (mut n, mut frames) = (0u64, 0u64);
    while let Some(item) = events.next_event() {
        let (_, ev) = item.unwrap();
        n += 1;
        if let Event::Alloc(a) = &ev {
            frames += a.backtrace.len() as u64;
            if let Some(leaf) = a.backtrace.last() {
                frames = frames.wrapping_add(leaf.get() as u64 & 1);
            }
        }
    }
    (n, frames)
}

fn read(c: &mut Criterion) {
    for (name, depth, allocs, recursive) in [
        ("20_frames", 20, 400_000, false),
        ("1000_frames", 1000, 100_000, false),
        ("recursive_5M_events", 700, 2_800_000, true),
    ] {
        let data = trace(depth, allocs, recursive);
        let mut reader = Reader::from_bytes(&data).unwrap();
        let (events, frames) = count(&mut reader, true);
        eprintln!(
            "read/{name}: {} bytes, {events} events, {:.1} frames per event",
            data.len(),
            frames as f64 / events as f64
        );
        for (unit, throughput) in [
            ("events", Throughput::Elements(events)),
            ("bytes", Throughput::Bytes(data.len() as u64)),
        ] {
            let mut g = c.benchmark_group(format!("read_{unit}/{name}"));
            g.throughput(throughput);
            g.sample_size(if recursive { 10 } else { 20 });
            g.bench_function("with_backtraces", |b| {
                b.iter(|| black_box(count(&mut reader, true)))
            });
            g.bench_function("without_backtraces", |b| {
                b.iter(|| black_box(count(&mut reader, false)))
            });
            if unit == "events" {
                g.bench_function("owned_copies", |b| {
                    b.iter(|| {
                        let n = reader.events(true).owned().map(|r| r.unwrap()).fold(
                            0usize,
                            |n, (_, e)| {
                                n + match e {
                                    Event::Alloc(a) => a.backtrace.len(),
                                    _ => 1,
                                }
                            },
                        );
                        black_box(n)
                    })
                });
            }
            g.finish();
        }
    }
}

fn write(c: &mut Criterion) {
    // 100k 20-frame call stacks from a random walk: consecutive stacks share
    // all but their innermost few frames.
    let mut rng = Rng::new(3);
    let mut stack: Vec<LocationCode> = Vec::new();
    let mut stacks: Vec<Vec<LocationCode>> = Vec::new();
    for _ in 0..100_000 {
        stack.truncate(stack.len().saturating_sub(rng.below(4) as usize));
        while stack.len() < 20 {
            stack.push(synth_code(rng.below(400) as u32, rng.below(4) as u32));
        }
        stacks.push(stack.iter().rev().copied().collect());
    }
    let info = synth_info();
    let mut out = Vec::with_capacity(16 << 20);
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Elements(stacks.len() as u64));
    g.sample_size(20);
    g.bench_function("alloc_20_frames", |b| {
        b.iter(|| {
            out.clear();
            let mut w = Writer::new(&mut out, &info).unwrap();
            for (i, s) in stacks.iter().enumerate() {
                let t = info.start_time.offset(Timedelta::from_micros(i as i64 / 4));
                w.put_alloc(
                    t,
                    1 + (i as u64 & 15),
                    1,
                    AllocationSource::Minor,
                    s,
                    synth_locations,
                )
                .unwrap();
            }
            w.flush().unwrap();
            drop(w);
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(benches, read, write);
criterion_main!(benches);
