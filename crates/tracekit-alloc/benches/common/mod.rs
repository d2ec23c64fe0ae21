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
