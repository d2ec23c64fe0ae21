//! Exact heap counting for tests: what dhat-rs's heap testing is used for,
//! with the tracer already installed as the global allocator, and scoped so
//! that tests of one binary run side by side under the default harness.
//!
//! With [`Tracer`](crate::Tracer) as the global allocator (the crate docs
//! show a test doing so); without it nothing is counted and every figure
//! stays 0.
//!
//! While a [`Counting`] guard from [`start`] lives, every allocation of the
//! thread that called it is counted, with no sampling: each block allocated
//! then is remembered with its size until it is freed (on any thread), so
//! that [`HeapStats::get`] gives the bytes and blocks allocated since
//! [`start`], those live now and the most that were live at once. Other
//! threads are not counted, so the test harness's threads and the tests
//! running beside it change nothing; a thread the test starts joins the
//! count with [`Counting::scope`] and [`Scope::enter`]. [`start_global`]
//! counts every thread that has no count of its own instead (one at a time:
//! it waits while another global guard lives), for whole-program checks.
//! [`assert_allocs`] runs a closure counted and checks its blocks and bytes.
//!
//! A block allocated before the count began and freed after it changes
//! nothing; a block still live when its count ends is forgotten. A `realloc`
//! counts as a free of the old block and an allocation of the new one, as
//! the sampling does. The tracer's own allocations are not counted.
//!
//! Counting is off until a count starts: then the allocator's fast path pays
//! one load of a global flag. Counted, an allocation takes a lock and a hash
//! table insertion: slow, and meant for tests.

use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::thread;

/// Whether any count is on: read on every allocation and free.
pub(crate) static COUNTING: AtomicBool = AtomicBool::new(false);

/// Whether the global count is on: a thread without a count of its own then
/// still counts. Read, with the thread's own count, before any lock, so that
/// the threads no count is about (the harness's, the other tests') do not
/// wait on the counts' lock.
static GLOBAL_ON: AtomicBool = AtomicBool::new(false);

/// How many counted blocks are live: a free takes the counts' lock only
/// while some are, to find its block among them.
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// Held by the [`start_global`] guard: one global count at a time.
static GLOBAL_SESSION: Mutex<()> = Mutex::new(());

/// The global count's id; the threads' counts are numbered from 1.
const GLOBAL: u64 = u64::MAX;

static STATE: Mutex<State> = Mutex::new(State {
    counts: Vec::new(),
    live: None,
    next: 1,
    ended: 0,
    global_last: None,
});

struct State {
    /// The counts on: id and figures.
    counts: Vec<(u64, HeapStats)>,
    /// The counted blocks still live: address, then the count and size.
    live: Option<HashMap<usize, (u64, usize)>>,
    /// The next count's id.
    next: u64,
    /// How many counts have ended, to tell the latest ended one.
    ended: u64,
    /// The global count's figures when it ended, and when (in `ended`).
    global_last: Option<(u64, HeapStats)>,
}

impl State {
    fn stats(&mut self, id: u64) -> Option<&mut HeapStats> {
        self.counts
            .iter_mut()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s)
    }
}

thread_local! {
    /// The count this thread's allocations go to (0: none of its own). Const
    /// and without a destructor, as every thread local the allocator reads.
    static SCOPE: Cell<u64> = const { Cell::new(0) };
    /// The figures of the last count this thread ended, and when.
    static LAST: Cell<Option<(u64, HeapStats)>> = const { Cell::new(None) };
}

/// The heap as counted (all zero before the first count).
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

    /// The figures of the count the calling thread's allocations go to: its
    /// own ([`start`], or a [`Scope`] it entered), else the global one
    /// ([`start_global`]) while it is on; with none on, the last that ended
    /// of its own and the global one, as they were when it ended.
    pub fn get() -> HeapStats {
        let _internal = thread::Internal::enter();
        let mut s = lock(&STATE);
        for id in [SCOPE.with(Cell::get), GLOBAL] {
            if let Some(stats) = s.stats(id) {
                return *stats;
            }
        }
        let own = LAST.with(Cell::get);
        match (own, s.global_last) {
            (Some(a), Some(b)) => {
                if a.0 > b.0 {
                    a.1
                } else {
                    b.1
                }
            }
            (Some((_, stats)), None) | (None, Some((_, stats))) => stats,
            (None, None) => HeapStats::ZERO,
        }
    }
}

/// A count of the calling thread's allocations, on while this lives.
#[derive(Debug)]
#[must_use = "dropping the guard stops counting at once"]
pub struct Counting {
    id: u64,
    /// The count the thread's allocations went to before.
    outer: u64,
    /// A thread's count ends on its thread.
    _thread: PhantomData<*const ()>,
}

/// A count of every thread's allocations but those counted on their own, on
/// while this lives.
#[derive(Debug)]
#[must_use = "dropping the guard stops counting at once"]
pub struct GlobalCounting {
    _session: MutexGuard<'static, ()>,
}

/// A count that other threads can join ([`Counting::scope`]).
#[derive(Clone, Copy, Debug)]
pub struct Scope {
    id: u64,
}

/// A thread's allocations going to another thread's count, while this lives
/// ([`Scope::enter`]).
#[derive(Debug)]
#[must_use = "dropping the guard stops counting this thread"]
pub struct Entered {
    outer: u64,
    _thread: PhantomData<*const ()>,
}

/// Starts counting the calling thread's allocations exactly, from zero.
/// Counts started while it lives (on this thread) take its place until they
/// end.
pub fn start() -> Counting {
    let id = begin(|s| {
        let id = s.next;
        s.next += 1;
        id
    });
    let outer = SCOPE.with(|c| c.replace(id));
    Counting {
        id,
        outer,
        _thread: PhantomData,
    }
}

/// Starts counting exactly, from zero, the allocations of every thread that
/// has no count of its own. Waits while another [`GlobalCounting`] guard
/// lives.
pub fn start_global() -> GlobalCounting {
    let session = lock(&GLOBAL_SESSION);
    begin(|_| GLOBAL);
    GLOBAL_ON.store(true, Ordering::SeqCst);
    GlobalCounting { _session: session }
}

/// Runs `f` with its thread's allocations counted and checks that it
/// allocated exactly `blocks` blocks of `bytes` bytes in all, panicking with
/// both figures and their difference otherwise; returns what `f` returns.
#[track_caller]
pub fn assert_allocs<R>(blocks: u64, bytes: u64, f: impl FnOnce() -> R) -> R {
    let counting = start();
    let value = f();
    let stats = HeapStats::get();
    drop(counting);
    let (b, n) = (stats.total_blocks, stats.total_bytes);
    if (b, n) != (blocks, bytes) {
        let diff = |got: u64, want: u64| match got.cmp(&want) {
            std::cmp::Ordering::Less => format!("-{}", want - got),
            _ => format!("+{}", got - want),
        };
        panic!(
            "expected {blocks} blocks of {bytes} bytes in all, counted {b} blocks of {n} bytes \
             ({} blocks, {} bytes)",
            diff(b, blocks),
            diff(n, bytes)
        );
    }
    value
}

/// Opens the count `id(state)` names, from zero.
fn begin(id: impl FnOnce(&mut State) -> u64) -> u64 {
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let id = id(&mut s);
    s.counts.push((id, HeapStats::ZERO));
    s.live.get_or_insert_with(HashMap::new);
    COUNTING.store(true, Ordering::SeqCst);
    id
}

/// Closes the count `id`, forgetting its live blocks; returns its figures and
/// when it ended.
fn end(id: u64) -> (u64, HeapStats) {
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let stats = s.stats(id).copied().unwrap_or(HeapStats::ZERO);
    s.counts.retain(|(i, _)| *i != id);
    s.ended += 1;
    let ended = s.ended;
    if s.counts.is_empty() {
        COUNTING.store(false, Ordering::SeqCst);
        LIVE_BLOCKS.store(0, Ordering::SeqCst);
        let live = s.live.take();
        drop(s);
        drop(live);
    } else if let Some(live) = s.live.as_mut() {
        live.retain(|_, (count, _)| *count != id);
        LIVE_BLOCKS.store(live.len(), Ordering::SeqCst);
    }
    (ended, stats)
}

impl Counting {
    /// The count, for other threads to join ([`Scope::enter`]).
    pub fn scope(&self) -> Scope {
        Scope { id: self.id }
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        SCOPE.with(|c| c.set(self.outer));
        let last = end(self.id);
        LAST.with(|c| c.set(Some(last)));
    }
}

impl Drop for GlobalCounting {
    fn drop(&mut self) {
        GLOBAL_ON.store(false, Ordering::SeqCst);
        let last = end(GLOBAL);
        let _internal = thread::Internal::enter();
        lock(&STATE).global_last = Some(last);
    }
}

impl Scope {
    /// Counts the calling thread's allocations in this count while the guard
    /// lives (nothing once the count has ended).
    pub fn enter(self) -> Entered {
        Entered {
            outer: SCOPE.with(|c| c.replace(self.id)),
            _thread: PhantomData,
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        SCOPE.with(|c| c.set(self.outer));
    }
}

/// A lock that a panic elsewhere does not poison: the counts stay usable.
fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The count the calling thread's allocations go to, if one is on.
fn current(s: &mut State) -> Option<u64> {
    let own = SCOPE.with(Cell::get);
    [own, GLOBAL]
        .into_iter()
        .find(|&id| id != 0 && s.stats(id).is_some())
}

/// Counts the block `ptr` of `size` bytes, just allocated.
#[cold]
#[inline(never)]
pub(crate) fn on_alloc(ptr: *mut u8, size: usize) {
    if !ptr.is_null() {
        count(ptr, size, true);
    }
}

/// Remembers the block `ptr` of `size` bytes as live in the calling thread's
/// count; a new block (not one counted again) also adds to the totals.
fn count(ptr: *mut u8, size: usize, new_block: bool) {
    if thread::in_tracer() || (SCOPE.with(Cell::get) == 0 && !GLOBAL_ON.load(Ordering::SeqCst)) {
        return;
    }
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let Some(id) = current(&mut s) else { return };
    if let Some(live) = s.live.as_mut()
        && live.insert(ptr as usize, (id, size)).is_none()
    {
        LIVE_BLOCKS.fetch_add(1, Ordering::SeqCst);
    }
    let Some(stats) = s.stats(id) else { return };
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

/// Uncounts the block `ptr`, about to be freed (by any thread), from the
/// count it was allocated in, if it was counted.
#[cold]
#[inline(never)]
pub(crate) fn on_free(ptr: *mut u8) {
    if thread::in_tracer() || LIVE_BLOCKS.load(Ordering::SeqCst) == 0 {
        return;
    }
    let _internal = thread::Internal::enter();
    let mut s = lock(&STATE);
    let Some((id, size)) = s.live.as_mut().and_then(|l| l.remove(&(ptr as usize))) else {
        return;
    };
    LIVE_BLOCKS.fetch_sub(1, Ordering::SeqCst);
    if let Some(stats) = s.stats(id) {
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
