//! The allocation-heavy workloads both overhead benchmarks run.

use std::collections::HashMap;
use std::hint::black_box;

/// Allocations (and as many frees) per `small_allocs` iteration.
pub const SMALL_ALLOCS: u64 = 1000;

/// 1000 allocate-then-free pairs of 32-byte boxes: the allocator's fast
/// path and little else.
#[inline(never)]
pub fn small_allocs() {
    for i in 0..SMALL_ALLOCS {
        let b = Box::new([i as u8; 32]);
        black_box(&b);
    }
}

/// A mixed allocation-heavy job: strings built with `format!`, a hash map
/// of them, vectors grown by `push`, then everything dropped.
#[inline(never)]
pub fn mixed() -> usize {
    let mut words: Vec<String> = Vec::new();
    for i in 0..500u32 {
        words.push(format!("key-{i}-{}", i.wrapping_mul(2_654_435_761)));
    }
    let mut map: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        let v = map.entry(w.as_str()).or_default();
        for j in 0..(i % 16) as u32 {
            v.push(j);
        }
    }
    black_box(map.len() + words.len())
}

/// Process CPU time (all threads, the tracer's background thread included),
/// in nanoseconds. Unlike wall time it does not count the time this process
/// waits for a core, which on a shared 2-core machine is most of the noise.
pub struct ProcessCpuTime;

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock always exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl criterion::measurement::Measurement for ProcessCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        process_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        process_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn criterion::measurement::ValueFormatter {
        &NanosFormatter
    }
}

struct NanosFormatter;

impl criterion::measurement::ValueFormatter for NanosFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e-3, "µs")
        } else if typical < 1e9 {
            (1e-6, "ms")
        } else {
            (1e-9, "s")
        };
        for v in values.iter_mut() {
            *v *= factor;
        }
        unit
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &criterion::Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let n = match throughput {
            criterion::Throughput::Elements(n)
            | criterion::Throughput::ElementsAndBytes { elements: n, .. } => *n as f64,
            criterion::Throughput::Bytes(n) | criterion::Throughput::BytesDecimal(n) => *n as f64,
            _ => 1.0,
        };
        for v in values.iter_mut() {
            // ns per element.
            *v /= n;
        }
        "ns/elem (CPU)"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
