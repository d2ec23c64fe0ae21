//! The cost of entering and exiting a span with two integer fields, of a whole
//! span's life (made, entered, exited, closed), and of an event with two fields,
//! including `tracing`'s own dispatch, side by side in one run: tracekit's layer,
//! `tracing-chrome` and `tracing-perfetto` (each writing a file, fields included),
//! and the registry alone (what any layer costs at least).

use criterion::{Bencher, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tracing_subscriber::prelude::*;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = |name: &str| std::fs::File::create(dir.path().join(name)).expect("a file");
    let (layer, guard) =
        tracekit_tracing::FxtLayer::file(dir.path().join("bench.fxt")).expect("a trace file");
    let (chrome, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .writer(file("bench.json"))
        .include_args(true)
        .build();
    let perfetto =
        tracing_perfetto::PerfettoLayer::new(std::sync::Mutex::new(file("bench.pftrace")))
            .with_debug_annotations(true);
    let subscribers = [
        (
            "registry only",
            tracing::Dispatch::new(tracing_subscriber::registry()),
        ),
        (
            "tracekit-tracing",
            tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        ),
        (
            "tracing-chrome",
            tracing::Dispatch::new(tracing_subscriber::registry().with(chrome)),
        ),
        (
            "tracing-perfetto",
            tracing::Dispatch::new(tracing_subscriber::registry().with(perfetto)),
        ),
    ];

    side_by_side(
        c,
        "enter+exit of a span with 2 int fields",
        &subscribers,
        |b| {
            let span = tracing::info_span!("work", a = 1, b = 7);
            b.iter(|| {
                let _e = span.enter();
            })
        },
    );
    side_by_side(
        c,
        "span made, entered, exited and closed, 2 int fields",
        &subscribers,
        |b| {
            let mut i = 0u64;
            b.iter(|| {
                i += 1;
                let span = tracing::info_span!("work", a = black_box(i), b = 7);
                let _e = span.enter();
            })
        },
    );
    side_by_side(c, "event, 2 fields", &subscribers, |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            tracing::info!(a = black_box(i), b = 7, "tick");
        })
    });
    drop(subscribers);
    drop(guard);
    drop(chrome_guard);
}

/// One benchmark group: `routine` under each subscriber in turn.
fn side_by_side(
    c: &mut Criterion,
    group: &str,
    subscribers: &[(&str, tracing::Dispatch)],
    mut routine: impl FnMut(&mut Bencher<'_>),
) {
    let mut g = c.benchmark_group(group);
    for (name, dispatch) in subscribers {
        tracing::dispatcher::with_default(dispatch, || {
            g.bench_function(*name, &mut routine);
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
