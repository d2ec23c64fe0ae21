//! A program whose stacks are deeper than tracekit-alloc keeps (1,024
//! frames), traced by the naming tests: `dive` recurses 1,500 deep and
//! allocates at the bottom, `shallow` allocates just under `main`. A cut
//! stack starts at a `[truncated N frames]` root in every output, where
//! a shallow one starts at `main`.
//!
//! ```sh
//! MEMTRACE=deep.ctf MEMTRACE_RATE=1 cargo run --release -p tracekit-alloc-demo --bin deepstack
//! ```

use std::hint::black_box;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

/// How deep `dive` goes.
const DEPTH: u32 = 1500;

#[inline(never)]
fn dive(depth: u32) -> Vec<u64> {
    if depth == 0 {
        return vec![7; 5000];
    }
    let v = dive(depth - 1);
    // Not a tail call: each level keeps its frame.
    black_box(&v);
    v
}

#[inline(never)]
fn shallow() -> Vec<u64> {
    vec![1; 5000]
}

fn main() {
    tracekit_alloc::trace_if_requested();
    for _ in 0..5 {
        black_box(dive(black_box(DEPTH)));
        black_box(shallow());
    }
    println!("deepstack: done");
}
