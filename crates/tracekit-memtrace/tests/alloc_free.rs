//! Reading allocates nothing per event once the decoder has warmed up (its
//! per-domain caches, backtrace buffer and location table exist). Counted
//! with a global allocator that tallies every allocation of this test binary.

#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
use tracekit_memtrace::{Event, Reader};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards its arguments unchanged to `System` and
// returns its result unchanged, so `System`'s guarantees carry over; the count
// beside it touches no block.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Allocations made while decoding events `skip..` of a pass.
fn steady_state_allocations(
    reader: &mut Reader<'_>,
    parse_backtraces: bool,
    skip: usize,
) -> (u64, usize, u64) {
    let mut events = reader.events(parse_backtraces);
    let mut n = 0usize;
    let mut frames = 0u64;
    let mut start = 0;
    while let Some(item) = events.next_event() {
        let (_, event) = item.unwrap();
        if let Event::Alloc(a) = &event {
            frames += a.backtrace.len() as u64;
        }
        n += 1;
        if n == skip {
            start = allocations();
        }
    }
    (allocations() - start, n, frames)
}

#[test]
fn steady_state_reading_allocates_nothing() {
    let config = SynthConfig {
        allocs: 200_000,
        depth: 30,
        ..SynthConfig::default()
    };
    let trace = write_synthetic(Vec::new(), &config).unwrap();
    let mut reader = Reader::from_bytes(&trace).unwrap();
    // First pass: warms the location table up; only its first tenth may allocate.
    let (first, n, frames) = steady_state_allocations(&mut reader, true, 30_000);
    assert!(
        n > 300_000 && frames > 5_000_000,
        "{n} events, {frames} frames"
    );
    assert_eq!(
        first, 0,
        "allocations after the first 30000 events of the first pass"
    );
    // A later pass allocates only its own decoder state, at the start.
    let (second, _, _) = steady_state_allocations(&mut reader, true, 1000);
    assert_eq!(second, 0, "allocations in the second pass");
    let (no_bt, _, _) = steady_state_allocations(&mut reader, false, 1000);
    assert_eq!(no_bt, 0, "allocations without backtraces");
}
