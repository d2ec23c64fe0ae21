//! The heap a test's thread holds, counted by an allocator a test binary
//! installs ([`PerThread`]): a test measures what its own thread allocates at
//! its highest while the binary's other tests run beside it, on threads of
//! their own.
//!
//! ```text
//! #[global_allocator]
//! static GLOBAL: tracekit_testutil::heap::PerThread = tracekit_testutil::heap::PerThread;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the heap each thread holds, and its highest since
/// [`highest_of`] started counting.
pub struct PerThread;

thread_local! {
    static HELD: Cell<i64> = const { Cell::new(0) };
    static HIGHEST: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    // `try_with`: a thread being torn down has no count left to keep.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = HIGHEST.try_with(|h| h.set(h.get().max(now)));
    });
}

// SAFETY: every method forwards its arguments unchanged to `System` and
// returns its result unchanged, so `System`'s guarantees carry over; the
// counts beside it are thread-locals of constant initialisation, which
// allocate nothing.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as i64);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as i64));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as i64 - layout.size() as i64);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// What `f` gives, and the most heap this thread held beyond what it held
/// before, while `f` ran (counted only where [`PerThread`] is the binary's
/// allocator; 0 elsewhere).
pub fn highest_of<R>(f: impl FnOnce() -> R) -> (R, i64) {
    let before = HELD.with(Cell::get);
    HIGHEST.with(|h| h.set(before));
    let r = f();
    (r, HIGHEST.with(Cell::get) - before)
}
