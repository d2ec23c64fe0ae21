//! The timeline's hot paths on the benches' real-shaped trace (`common`: nested
//! complete slices on 16 threads, 500,000 of them here): building it, and a
//! viewport of every lane on 2,000 pixels, for the whole trace and for a
//! hundredth of it.
//!
//! `cargo bench -p tracekit-timeline --bench timeline -- --warm-up-time 1 --measurement-time 3`
//!
//! At 12.5 M slices (300 MB) `examples/timeline_bench.rs`
//! writes the trace to a file and times the same.

use std::hint::black_box;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_fxt::read::Reader;
use tracekit_timeline::Timeline;

fn benches(c: &mut Criterion) {
    let (bytes, slices) = common::nested_trace(Vec::new(), 500_000).expect("written to memory");
    let mut g = c.benchmark_group("timeline");
    g.throughput(Throughput::Elements(slices));
    g.sample_size(10);
    g.bench_function("build", |b| {
        b.iter(|| Timeline::build(&mut Reader::new(black_box(&bytes)), &mut |_| {}))
    });
    let t = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let (first, last) = (t.first_ns().unwrap_or(0), t.last_ns().unwrap_or(0));
    let mut out = Vec::new();
    for (name, share) in [("window_whole", 1), ("window_hundredth", 100)] {
        let span = (last - first) / share;
        let from = first + (last - first - span) / 2;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut drawn = 0;
                for track in t.tracks() {
                    for lane in &track.lanes {
                        out.clear();
                        lane.window(from, from + span, span.div_ceil(2_000), &mut out);
                        drawn += out.len();
                    }
                }
                black_box(drawn)
            })
        });
    }
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
