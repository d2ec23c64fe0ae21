//! A small program as a Rust user writes one, traced by tracekit-alloc's
//! `naming` tests: what its sites, frames and stacks are called.
//!
//! ```sh
//! MEMTRACE=heapdemo.ctf cargo run --release -p tracekit-alloc-demo --bin heapdemo
//! ```
//!
//! Six allocating functions, each with a shape the names must survive:
//!
//! * `churn`: a closure mapping over a range into `vec![i as u8; 65536]`
//!   (a non-zero fill, which goes through `alloc::vec::from_elem`), the
//!   biggest allocator;
//! * `tables`: a closure of another function, so that the two closures only
//!   differ by the function they are in; builds strings into a generic
//!   container (`Vec<String>` collected from a `Map<Range<u32>, ..>`);
//! * `churn_with_closure`: a closure bound to a name and called in a loop
//!   (`"x".repeat(..)`), inlined into its function, so that nothing but
//!   its place in the code says whose closure it is;
//! * `grow`: a vector pushed to, whose first block and later ones come
//!   from one line through different paths inside the standard library;
//! * `nest`: direct recursion 150 deep, allocating at the bottom;
//! * `ping` and `pong`: indirect recursion 60 deep (120 frames), allocating
//!   at the bottom.
//!
//! Both are deeper than a screen's flame graph and shallower than the
//! tracer's 1,024 frames, so their stacks reach `main`.
//!
//! The strings of one last `tables(500)` are never freed (live at the end).
//! Runs with `MEMTRACE_RATE` as given (the tests sample every word) and
//! prints `heapdemo: done`.

use std::hint::black_box;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

/// Bytes in each of `churn`'s blocks.
const CHURN_BYTES: usize = 65536;

#[inline(never)]
fn churn(n: u32) -> Vec<Vec<u8>> {
    let blocks: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8 | 1; CHURN_BYTES]).collect();
    black_box(&blocks);
    blocks
}

#[inline(never)]
fn tables(n: u32) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("row number {i:08}")).collect();
    black_box(&names);
    names
}

#[inline(never)]
fn churn_with_closure(n: usize) -> usize {
    let make = |i: usize| "x".repeat(100 + i % 7);
    let mut total = 0;
    for i in 0..n {
        total += black_box(make(i)).len();
    }
    total
}

#[inline(never)]
fn grow(n: u64) -> Vec<u64> {
    let mut v = Vec::new();
    for i in 0..n {
        v.push(black_box(i));
    }
    v
}

#[inline(never)]
fn nest(depth: u32) -> Vec<u64> {
    if depth == 0 {
        return vec![3; 10_000];
    }
    let v = nest(depth - 1);
    // Not a tail call: each level keeps its frame.
    black_box(&v);
    v
}

#[inline(never)]
fn ping(depth: u32) -> Vec<u64> {
    if depth == 0 {
        return vec![5; 20_000];
    }
    let v = pong(depth - 1);
    black_box(&v);
    v
}

#[inline(never)]
fn pong(depth: u32) -> Vec<u64> {
    let v = ping(depth);
    black_box(&v);
    v
}

fn main() {
    tracekit_alloc::trace_if_requested();
    let mut kept = 0usize;
    for _ in 0..20 {
        kept += black_box(churn(16)).len();
        kept += black_box(tables(2000)).len();
        kept += black_box(nest(150)).len();
        kept += black_box(ping(60)).len();
        kept += churn_with_closure(300);
        kept += black_box(grow(1000)).len();
    }
    black_box(kept);
    // Still live at the end: what a heap profile's `inuse` counts.
    black_box(Box::leak(Box::new(tables(500))));
    println!("heapdemo: done");
}
