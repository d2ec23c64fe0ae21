//! Stress: 8 threads make millions of allocations, reallocations and frees,
//! a third of them freed on another thread, with tracing on. The run must
//! finish (a watchdog aborts after two minutes), and the trace must be valid,
//! with every sampled block of the churn collected.

mod common;

use std::sync::mpsc;
use std::time::Duration;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

const THREADS: usize = 8;
const OPS_PER_THREAD: usize = 400_000;

#[inline(never)]
fn churn(seed: u64, to_next: mpsc::Sender<Vec<u8>>, from_prev: mpsc::Receiver<Vec<u8>>) -> u64 {
    let mut x = seed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut sum = 0u64;
    for i in 0..OPS_PER_THREAD {
        let r = next();
        let size = match r % 16 {
            0 => 4096 + (r >> 8) as usize % 60_000,
            1..=4 => 64 + (r >> 8) as usize % 512,
            _ => 1 + (r >> 8) as usize % 48,
        };
        let mut v = vec![i as u8; size];
        if r % 7 == 0 {
            // Grow in place or move: realloc of possibly sampled blocks.
            v.resize(size * 3, 1);
        }
        match r % 3 {
            0 => {
                let _ = to_next.send(v);
            }
            1 => held.push(v),
            _ => sum += v.len() as u64,
        }
        if held.len() > 64 {
            held.swap_remove((r >> 20) as usize % held.len());
        }
        while let Ok(v) = from_prev.try_recv() {
            sum += v.len() as u64;
        }
    }
    drop(to_next);
    // Drain what the previous thread still sends, until it hangs up.
    while let Ok(v) = from_prev.recv() {
        sum += v.len() as u64;
    }
    sum + held.len() as u64
}

fn main() {
    let scratch = tracekit_testutil::scratch();
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(120));
        eprintln!("stress: no progress after 120 s (deadlock?)");
        std::process::abort();
    });
    let path = scratch.join("stress.ctf");
    let guard = tracekit_alloc::start_tracing(&path, 5e-3).expect("start tracing");
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel()).unzip();
    let mut receivers: Vec<Option<mpsc::Receiver<Vec<u8>>>> =
        receivers.into_iter().map(Some).collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let to_next = senders[(i + 1) % THREADS].clone();
            let from_prev = receivers[i].take().expect("receiver");
            std::thread::spawn(move || churn(0x9E37_79B9 + i as u64 * 7919, to_next, from_prev))
        })
        .collect();
    drop(senders);
    let total: u64 = handles.into_iter().map(|h| h.join().expect("worker")).sum();
    let stats = guard.stop().expect("stop tracing");
    println!("stress: churned {total} bytes; {stats:?}");

    let trace = common::read_trace(&path);
    assert_eq!(trace.warnings, 0);
    assert!(trace.allocs.len() as u64 == stats.allocs);
    assert!(
        trace.allocs.len() > 20_000,
        "only {} samples",
        trace.allocs.len()
    );
    let churned: Vec<_> = trace
        .allocs
        .iter()
        .filter(|a| {
            a.backtrace.iter().any(|c| {
                trace.locations.get(c).is_some_and(|ls| {
                    ls.iter()
                        .any(|l| l.defname.to_str_lossy().ends_with("stress::churn"))
                })
            })
        })
        .collect();
    let leaked = churned.iter().filter(|a| !a.collected).count();
    println!(
        "stress: {} samples ({} in churn, {leaked} of those not collected), {} collects, {} domains",
        trace.allocs.len(),
        churned.len(),
        trace.collects,
        trace
            .allocs
            .iter()
            .map(|a| a.domain)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    assert!(churned.len() as f64 > 0.9 * trace.allocs.len() as f64);
    assert_eq!(
        leaked, 0,
        "every churned block is freed before tracing stops"
    );
    println!("1 passed, 0 failed");
}
