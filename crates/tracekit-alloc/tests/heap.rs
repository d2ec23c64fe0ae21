//! Exact heap counting (`tracekit_alloc::testing`) against allocation
//! sequences whose counts are known: single blocks, reallocations, blocks
//! of threads started before a global count, a peak, and blocks allocated
//! before counting began. Its own process without a test harness, so that
//! nothing else allocates while the global count counts every thread.

use std::hint::black_box;
use std::sync::{Arc, Barrier};

use tracekit_alloc::{HeapStats, testing};

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

fn stats(total: (u64, u64), curr: (u64, u64), max: (u64, u64)) -> HeapStats {
    HeapStats {
        total_bytes: total.0,
        total_blocks: total.1,
        curr_bytes: curr.0,
        curr_blocks: curr.1,
        max_bytes: max.0,
        max_blocks: max.1,
    }
}

fn one_block() {
    let counting = testing::start();
    let v: Vec<u8> = black_box(Vec::with_capacity(1000));
    assert_eq!(HeapStats::get(), stats((1000, 1), (1000, 1), (1000, 1)));
    drop(v);
    assert_eq!(HeapStats::get(), stats((1000, 1), (0, 0), (1000, 1)));
    drop(counting);
    // Stopped, the counts stay as they were and nothing more is counted.
    black_box(vec![1u8; 10]);
    assert_eq!(HeapStats::get().total_blocks, 1);
}

fn reallocation() {
    let counting = testing::start();
    let mut v: Vec<u8> = black_box(Vec::with_capacity(100));
    v.reserve_exact(1000);
    assert_eq!(v.capacity(), 1000);
    // A free of the 100 bytes, then an allocation of 1000.
    assert_eq!(HeapStats::get(), stats((1100, 2), (1000, 1), (1000, 1)));
    v.shrink_to(10);
    assert_eq!(HeapStats::get(), stats((1110, 3), (10, 1), (1000, 1)));
    drop(v);
    drop(counting);
}

fn threads_started_before() {
    const THREADS: usize = 4;
    const BLOCKS: usize = 10;
    let started = Arc::new(Barrier::new(THREADS + 1));
    let allocated = Arc::new(Barrier::new(THREADS + 1));
    let checked = Arc::new(Barrier::new(THREADS + 1));
    let freed = Arc::new(Barrier::new(THREADS + 1));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (started, allocated) = (started.clone(), allocated.clone());
            let (checked, freed) = (checked.clone(), freed.clone());
            std::thread::spawn(move || {
                let mut kept: Vec<Box<[u8; 4096]>> = Vec::with_capacity(BLOCKS);
                started.wait();
                for _ in 0..BLOCKS {
                    kept.push(black_box(Box::new([7u8; 4096])));
                }
                allocated.wait();
                checked.wait();
                drop(kept);
                freed.wait();
            })
        })
        .collect();
    // Every thread is waiting, its own allocations done.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let counting = testing::start_global();
    started.wait();
    allocated.wait();
    let n = (THREADS * BLOCKS) as u64;
    assert_eq!(
        HeapStats::get(),
        stats((n * 4096, n), (n * 4096, n), (n * 4096, n))
    );
    checked.wait();
    freed.wait();
    // The threads' `kept` vectors were allocated before counting: their
    // frees count nothing.
    assert_eq!(
        HeapStats::get(),
        stats((n * 4096, n), (0, 0), (n * 4096, n))
    );
    drop(counting);
    for h in handles {
        h.join().expect("thread");
    }
}

fn peak() {
    let before: Vec<u8> = black_box(vec![1; 5000]);
    let counting = testing::start();
    for _ in 0..10 {
        black_box(vec![2u8; 1 << 20]);
    }
    let kept: Vec<u8> = black_box(vec![3; 300]);
    drop(before);
    let s = HeapStats::get();
    assert_eq!(s, stats((10 * (1 << 20) + 300, 11), (300, 1), (1 << 20, 1)));
    assert!(s.max_bytes < 10 << 20, "peak under 10 MiB");
    drop((kept, counting));
}

fn main() {
    one_block();
    reallocation();
    threads_started_before();
    peak();
    println!("heap: 4 scenarios passed");
}
