//! Exact heap counting for tests: what dhat-rs's heap testing is used for,
//! with the tracer already installed as the global allocator.
//!
//! With [`Tracer`](crate::Tracer) as the global allocator (the crate docs
//! show a test doing so); without it nothing is counted and every figure
//! stays 0.
//!
//! While a [`Counting`] guard lives, every allocation of the program, on any
//! thread, is counted, with no sampling: each block allocated then is
//! remembered with its size until it is freed, so that [`HeapStats::get`]
//! gives the bytes and blocks allocated since [`start`], those live now and
//! the most that were live at once. A block allocated before [`start`] and
//! freed after it changes nothing. A `realloc` counts as a free of the old
//! block and an allocation of the new one, as the sampling does. The
//! tracer's own allocations are not counted.
//!
//! Counting is off until [`start`]: then the allocator's fast path pays one
//! load of a global flag. Counted, an allocation takes a lock and a hash
//! table insertion: slow, and meant for tests.
//!
//! Every thread is counted, so allocations of tests running at the same
//! time in the same process are counted too: run heap tests in an
//! integration test binary of their own, or one at a time. [`start`] waits
//! while another guard lives, so that two heap tests never count at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::thread;

/// Whether allocations are counted: read on every allocation and free.
pub(crate) static COUNTING: AtomicBool = AtomicBool::new(false);

/// Held by the [`Counting`] guard: one counting at a time.
static SESSION: Mutex<()> = Mutex::new(());

static STATE: Mutex<State> = Mutex::new(State {
    stats: HeapStats::ZERO,
    live: None,
});

struct State {
    stats: HeapStats,
    /// The counted blocks still live: address and size.
    live: Option<HashMap<usize, usize>>,
}

/// The heap as counted since [`start`] (all zero before the first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes allocated.
    pub total_bytes: u64,
    /// Blocks allocated.
    pub total_blocks: u64,
    /// Bytes allocated and not freed yet.
    pub curr_bytes: u64,
    /// Blocks allocated and not freed yet.
    pub curr_blocks: u64,
    /// The most bytes live at once.
    pub max_bytes: u64,
    /// The most blocks live at once (when the bytes were at their most).
    pub max_blocks: u64,
}

impl HeapStats {
    const ZERO: HeapStats = HeapStats {
        total_bytes: 0,
        total_blocks: 0,
        curr_bytes: 0,
        curr_blocks: 0,
        max_bytes: 0,
        max_blocks: 0,
    };

    /// The counts now: since [`start`] while counting, as they were when
    /// counting stopped after it.
    pub fn get() -> HeapStats {
        let _internal = thread::Internal::enter();
        lock(&STATE).stats
    }
}

/// Counting goes on while this lives; dropped, it stops.
#[derive(Debug)]
#[must_use = "dropping the guard stops counting at once"]
pub struct Counting {
    _session: MutexGuard<'static, ()>,
}

/// Starts counting every allocation exactly, from zero. Waits while another
/// [`Counting`] guard lives.
pub fn start() -> Counting {
    let session = lock(&SESSION);
    {
        let _internal = thread::Internal::enter();
        let mut s = lock(&STATE);
        s.stats = HeapStats::ZERO;
        s.live = Some(HashMap::new());
    }
    COUNTING.store(true, Ordering::SeqCst);
    Counting { _session: session }
}

impl Drop for Counting {
    fn drop(&mut self) {
        COUNTING.store(false, Ordering::SeqCst);
        let _internal = thread::Internal::enter();
        let live = lock(&STATE).live.take();
        drop(live);
    }
}

/// A lock that a panic elsewhere does not poison: the counts stay usable.
fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts the block `ptr` of `size` bytes, just allocated.
#[cold]
#[inline(never)]
pub(crate) fn on_alloc(ptr: *mut u8, size: usize) {
    if !ptr.is_null() {
        count(ptr, size, true);
    }
}

/// Remembers the block `ptr` of `size` bytes as live; a new block (not one
/// counted again) also adds to the totals.
fn count(ptr: *mut u8, size: usize, new_block: bool) {
    if thread::in_tracer() {
        return;
    }
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let State { stats, live } = &mut *s;
    let Some(live) = live else { return };
    live.insert(ptr as usize, size);
    let size = size as u64;
    if new_block {
        stats.total_bytes += size;
        stats.total_blocks += 1;
    }
    stats.curr_bytes += size;
    stats.curr_blocks += 1;
    if stats.curr_bytes > stats.max_bytes {
        stats.max_bytes = stats.curr_bytes;
        stats.max_blocks = stats.curr_blocks;
    }
}

/// Uncounts the block `ptr`, about to be freed, if it was counted.
#[cold]
#[inline(never)]
pub(crate) fn on_free(ptr: *mut u8) {
    if thread::in_tracer() {
        return;
    }
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let State { stats, live } = &mut *s;
    if let Some(size) = live.as_mut().and_then(|l| l.remove(&(ptr as usize))) {
        stats.curr_bytes -= size as u64;
        stats.curr_blocks -= 1;
    }
}

/// Counts the block `ptr` of `size` bytes again after [`on_free`] took it
/// out for a `realloc` that failed (the block is still there).
#[cold]
#[inline(never)]
pub(crate) fn on_realloc_failed(ptr: *mut u8, size: usize) {
    count(ptr, size, false);
}
