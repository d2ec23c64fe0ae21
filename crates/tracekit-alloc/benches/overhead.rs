//! Overhead of tracekit-alloc on allocation-heavy code: tracing off, then on
//! at memtrace's default rate (1e-5) and at 1e-4 and 1e-3. The plain-System
//! baseline is the `system` benchmark, run by the same `cargo bench`.
//!
//! ```sh
//! cargo bench -p tracekit-alloc
//! ```

use common::ProcessCpuTime;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

fn bench(c: &mut Criterion<ProcessCpuTime>) {
    let path =
        std::env::temp_dir().join(format!("tracekit-alloc-bench-{}.ctf", std::process::id()));
    let settings: [(&str, Option<f64>); 4] = [
        ("tracer_off", None),
        ("tracer_on_1e-5_default", Some(1e-5)),
        ("tracer_on_1e-4", Some(1e-4)),
        ("tracer_on_1e-3", Some(1e-3)),
    ];
    for (name, rate) in settings {
        let guard = rate.map(|r| tracekit_alloc::start_tracing(&path, r).expect("start tracing"));
        let mut g = c.benchmark_group("small_allocs");
        g.throughput(Throughput::Elements(common::SMALL_ALLOCS));
        g.bench_function(name, |b| b.iter(common::small_allocs));
        g.finish();
        let mut g = c.benchmark_group("mixed");
        g.bench_function(name, |b| b.iter(common::mixed));
        g.finish();
        if let Some(g) = guard {
            let stats = g.stop().expect("stop tracing");
            eprintln!(
                "{name}: {stats:?}, unwinder {:?}",
                tracekit_alloc::unwinder()
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ProcessCpuTime).sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
