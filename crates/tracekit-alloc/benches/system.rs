//! Baseline for `overhead`: the same workloads on the plain System
//! allocator, without tracekit-alloc.

use common::ProcessCpuTime;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common;

fn bench(c: &mut Criterion<ProcessCpuTime>) {
    let mut g = c.benchmark_group("small_allocs");
    g.throughput(Throughput::Elements(common::SMALL_ALLOCS));
    g.bench_function("system", |b| b.iter(common::small_allocs));
    g.finish();
    let mut g = c.benchmark_group("mixed");
    g.bench_function("system", |b| b.iter(common::mixed));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ProcessCpuTime).sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
