//! Heap checks as users write them: several `#[test]`s of one binary, run side
//! by side by the default harness, each asserting exact counts of its own
//! thread (`tracekit_alloc::testing::start`) while the others allocate. The
//! last test runs this binary again, many times (`TRACEKIT_HEAP_RUNS`, 200 by
//! default), so that a count that another thread can reach shows up.

use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};

use tracekit_alloc::{HeapStats, testing};

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

/// (total bytes, total blocks, bytes live now, blocks live now).
fn figures() -> (u64, u64, u64, u64) {
    let s = HeapStats::get();
    (s.total_bytes, s.total_blocks, s.curr_bytes, s.curr_blocks)
}

#[test]
fn one_block() {
    let v = testing::assert_allocs(1, 1000, || black_box(Vec::<u8>::with_capacity(1000)));
    drop(v);
}

#[test]
fn many_blocks_freed() {
    let counting = testing::start();
    for _ in 0..2000 {
        drop(black_box(vec![0u8; 512]));
    }
    let kept: Vec<String> = (0..100).map(|_| String::with_capacity(24)).collect();
    // The strings (24 bytes each) and the vector of them (100 × 24 bytes).
    assert_eq!(figures(), (2000 * 512 + 2 * 2400, 2101, 4800, 101));
    let peak = HeapStats::get();
    assert_eq!((peak.max_bytes, peak.max_blocks), (4800, 101));
    drop((kept, counting));
}

#[test]
fn other_threads_allocate_meanwhile() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // Two threads allocating hard the whole time are not counted.
    let (stop, running) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let noise: Vec<_> = (0..2)
        .map(|_| {
            let (stop, running) = (Arc::clone(&stop), Arc::clone(&running));
            std::thread::spawn(move || {
                running.fetch_add(1, Ordering::SeqCst);
                while !stop.load(Ordering::Relaxed) {
                    black_box(vec![1u8; 100]);
                }
            })
        })
        .collect();
    while running.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now();
    }
    let counting = testing::start();
    for _ in 0..20_000 {
        black_box(Box::new([0u64; 4]));
    }
    assert_eq!(figures(), (20_000 * 32, 20_000, 0, 0));
    drop(counting);
    stop.store(true, Ordering::Relaxed);
    for t in noise {
        t.join().expect("noise thread");
    }
}

#[test]
fn a_thread_joins_the_count() {
    // Started before the count, so that starting it is not counted.
    let scope: Arc<Mutex<Option<testing::Scope>>> = Arc::new(Mutex::new(None));
    let (go, done) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let helper = {
        let (scope, go, done) = (Arc::clone(&scope), Arc::clone(&go), Arc::clone(&done));
        std::thread::spawn(move || {
            go.wait();
            let entered = scope.lock().expect("scope").map(testing::Scope::enter);
            let block = black_box(vec![3u8; 4096]);
            drop(entered);
            // Out of the count again: not counted.
            black_box(vec![4u8; 10]);
            done.wait();
            block
        })
    };
    let counting = testing::start();
    *scope.lock().expect("scope") = Some(counting.scope());
    go.wait();
    done.wait();
    assert_eq!(figures(), (4096, 1, 4096, 1));
    // Freed here, it leaves the count it was allocated in.
    drop(helper.join().expect("helper"));
    assert_eq!(figures(), (4096, 1, 0, 0));
    drop(counting);
}

#[test]
#[should_panic(
    expected = "expected 1 blocks of 10 bytes in all, counted 1 blocks of 1000 bytes \
                           (+0 blocks, +990 bytes)"
)]
fn a_wrong_count_says_by_how_much() {
    testing::assert_allocs(1, 10, || black_box(Vec::<u8>::with_capacity(1000)));
}

/// Runs this binary's other tests again, many times, each run in parallel
/// under the default harness; every run must pass.
#[test]
fn every_run_of_the_others_passes() {
    if std::env::var_os("TRACEKIT_HEAP_CHILD").is_some() {
        return;
    }
    let runs: usize = std::env::var("TRACEKIT_HEAP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let exe = std::env::current_exe().expect("this test binary");
    for run in 1..=runs {
        let out = std::process::Command::new(&exe)
            .args(["--skip", "every_run_of_the_others_passes", "--quiet"])
            .env("TRACEKIT_HEAP_CHILD", "1")
            .output()
            .expect("running the tests again");
        assert!(
            out.status.success(),
            "run {run} of {runs} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
