//! `tracekit memtrace to-fxt` against `tracekit memtrace timeline` on the same trace
//! (the target: to-fxt within 1.5x of timeline), on the random model of
//! `tracekit memtrace sample` with 2.8 M allocations (over 5 M events, deep stacks that
//! move at every allocation: the case where interning backtraces costs most).
//!
//! * `timeline`: [`TimelineQuery::run`], the pass without backtraces, and its points.
//! * `to_fxt`: `FxtQuery::run` and [`fxt::write_trace`] into memory, with the CLI's
//!   defaults (20 big allocations, 2000 points).
//!
//! Both are reported as events/s; `to_fxt / timeline` is the figure of the issue.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_analysis::Filter;
use tracekit_analysis::fxt;
use tracekit_analysis::query::{FxtQuery, TimelineQuery};
use tracekit_memtrace::Reader;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

fn bench(c: &mut Criterion) {
    let config = SynthConfig {
        allocs: 2_800_000,
        ..SynthConfig::default()
    };
    let data = write_synthetic(Vec::new(), &config).unwrap();
    let mut reader = Reader::from_bytes(&data).unwrap();
    let timeline = TimelineQuery {
        points: 500,
        filter: Filter::default(),
    };
    let query = FxtQuery {
        big: 20,
        points: 2000,
        naming: Default::default(),
        filter: Filter::default(),
    };
    let events = timeline
        .run(&mut reader, &mut |_, _| {})
        .unwrap()
        .pass
        .events;
    assert!(events >= 5_000_000, "{events} events");
    eprintln!("sample: {} bytes, {events} events", data.len());
    let mut g = c.benchmark_group("to_fxt/sample");
    g.throughput(Throughput::Elements(events));
    g.sample_size(10);
    g.bench_function("timeline", |b| {
        b.iter(|| {
            let answer = timeline.run(&mut reader, &mut |_, _| {}).unwrap();
            black_box(answer.points.len())
        })
    });
    g.bench_function("to_fxt", |b| {
        b.iter(|| {
            let pass = query.run(&mut reader, &mut |_, _| {}).unwrap();
            let (out, summary) = fxt::write_trace(
                Vec::new(),
                &pass.profile,
                reader.locations(),
                reader.info(),
                &query.fxt_options(),
            )
            .unwrap();
            black_box((out.len(), summary))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
