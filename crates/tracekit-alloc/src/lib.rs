//! A sampling global allocator that writes [memtrace] traces: OCaml's
//! `Memtrace.trace_if_requested ()` experience for Rust programs.
//!
//! ```no_run
//! #[global_allocator]
//! static A: tracekit_alloc::Tracer<std::alloc::System> =
//!     tracekit_alloc::Tracer::new(std::alloc::System);
//!
//! fn main() {
//!     tracekit_alloc::trace_if_requested();
//!     // ... the program ...
//! }
//! ```
//!
//! Then `MEMTRACE=trace.ctf ./prog` writes `trace.ctf`, which memtrace's
//! tools and `tracekit memtrace ...` read. `MEMTRACE_RATE` sets the sampling
//! rate (default [`DEFAULT_SAMPLING_RATE`]). For explicit control use
//! [`start_tracing`], which returns a guard that stops and flushes on drop.
//! Whatever goes wrong with the trace (a bad rate, an unwritable path, a
//! full disk), the program runs on: the tracer says so in one line on stderr
//! and steps aside.
//!
//! # Good names, and fast sampling
//!
//! Allocation sites are only as good as the program's debug information. A
//! plain `cargo build --release` has none: sites are then functions without
//! source lines (the tracer warns once when it meets such an executable).
//! Add to the program's `Cargo.toml`
//!
//! ```toml
//! [profile.release]
//! debug = "line-tables-only"
//! ```
//!
//! for files and lines at a small cost in binary size (none at run time),
//! and build with `RUSTFLAGS="-C force-frame-pointers=yes"` for the fast
//! unwinder (see [Unwinding](#unwinding)). With line tables only, an inlined
//! function has a bare name (`make_words`) unless the binary also has an
//! out-of-line copy of it, whose symbol gives its path
//! (`app::words::make_words`); `debug = "limited"` names every inlined
//! function in full, for a larger binary.
//!
//! Frames in system libraries are named from their separate debug files
//! when installed (Debian: `libc6-dbg`, `*-dbgsym`), found by build id or
//! `.gnu_debuglink` under `/usr/lib/debug` (`TRACEKIT_ALLOC_DEBUG_DIR`
//! overrides the directory; empty, it turns them off). Otherwise a frame
//! is named by a symbol only if it lies inside that symbol, and else as
//! `libc.so.6+0x29d8f`: the object and the return address as an address of
//! the object (`addr2line -e <object>` takes it).
//!
//! # What is recorded
//!
//! * **Sampling as in OCaml's memprof.** Every word allocated is sampled with
//!   probability `rate`: each thread counts down the bytes to its next
//!   sampled word, with geometric gaps. An allocation in which the countdown
//!   expires is written as an `External` alloc event with its length in
//!   words (rounded up) and `nsamples`, the number of sampled words in it.
//!   So `sum(nsamples) * 8 / rate` estimates the bytes requested, without
//!   bias. `realloc` counts as a free of the old block and an allocation of
//!   the new size.
//! * **Backtraces** of sampled allocations only, as return addresses
//!   (memtrace location codes), innermost first. See [the unwinding
//!   notes](#unwinding). Each new code is symbolized once, on the background
//!   thread: function (demangled), file, line and column, with one location
//!   per inlined frame (see [Good names](#good-names-and-fast-sampling)). The tracer's own frames and the `__rust_alloc`
//!   shims are left out, so a backtrace ends in the code that allocated
//!   (often `alloc::raw_vec::...` called from the program's function).
//! * **Frees** of sampled blocks (and reallocs of them) are written as
//!   `Collect` events, so the trace knows what is live.
//! * **Threads are domains**: each thread that samples gets its own memtrace
//!   domain (format v3), reused after the thread exits. With more than 64
//!   threads sampling at once, threads share domains. A block freed on
//!   another thread is collected in the domain that allocated it.
//!
//! # Heap checks in tests
//!
//! [`testing::start`] turns on exact counting of the calling thread's
//! allocations (no sampling, no trace file) and [`HeapStats::get`] reads the
//! counts, so that a test can assert "this call allocates exactly one
//! 1000-byte block" or "the peak stays under 10 MiB". Other threads are not
//! counted, so the tests of one binary run side by side under the default
//! harness, each with exact figures; [`testing::Scope`] lets a thread the
//! test starts join its count, and [`testing::start_global`] counts every
//! thread for whole-program checks. [`testing::assert_allocs`] runs a
//! closure counted and checks its blocks and bytes:
//!
//! ```
//! #[global_allocator]
//! static A: tracekit_alloc::Tracer<std::alloc::System> =
//!     tracekit_alloc::Tracer::new(std::alloc::System);
//!
//! let counting = tracekit_alloc::testing::start();
//! let v: Vec<u64> = Vec::with_capacity(125);
//! let stats = tracekit_alloc::HeapStats::get();
//! assert_eq!((stats.total_blocks, stats.total_bytes), (1, 1000));
//! drop(v);
//! assert_eq!(tracekit_alloc::HeapStats::get().curr_bytes, 0);
//! drop(counting);
//!
//! let v = tracekit_alloc::testing::assert_allocs(1, 800, || vec![0u64; 100]);
//! ```
//!
//! # Cost
//!
//! An unsampled allocation costs a thread-local decrement and a branch; an
//! unsampled free costs one load from a 64 KiB filter and a branch (see
//! `table`). Only sampled allocations unwind the stack and queue an event.
//! A background thread symbolizes and writes the queued events about once
//! a second, so a crash or `SIGKILL` loses about one second of events.
//!
//! # Unwinding
//!
//! With frame pointers (`RUSTFLAGS="-C force-frame-pointers=yes"`) the
//! tracer walks the frame-pointer chain, checked against the thread's stack
//! bounds so it never faults. Rust omits frame pointers by default on x86-64,
//! and then the tracer falls back to libgcc's DWARF unwinder, which is about
//! a hundred times slower per frame but still paid only per sample. A probe
//! at the start of tracing decides; `TRACEKIT_ALLOC_UNWIND=fp|dwarf`
//! overrides it.
//!
//! # Safety notes
//!
//! * The tracer's own allocations (queues, writer, symbolizer, background
//!   thread) are never sampled: a per-thread guard sets the countdown out of
//!   reach while tracer code runs. [`in_tracer`] lets allocators stacked
//!   under the tracer tell them apart.
//! * No lock is taken on an unsampled allocation or free. A sampled one
//!   locks only its own domain's queue.
//! * After `fork`, the child stops tracing at once (an `atfork` handler; the
//!   writer's pid check backs it up) and never writes to the parent's file.
//! * An `atexit` hook stops tracing and flushes when the process exits.
//!   A thread started before tracing began notices the session within
//!   256 KiB of its own allocation.
//! * A panic hook, installed when tracing first starts and chained after the
//!   hook installed before it, writes out what was sampled up to the panic.
//!   With `panic = "abort"` it also stops tracing and closes the file, since
//!   the process dies right after; with unwinding, tracing goes on, as the
//!   panic may be caught. A hook set later with `std::panic::set_hook`
//!   replaces it unless it calls the one it got from `take_hook`.
//!
//! [memtrace]: https://github.com/janestreet/memtrace

use std::alloc::{GlobalAlloc, Layout};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

mod clock;
mod sampler;
mod session;
mod slots;
mod symbolize;
mod table;
pub mod testing;
mod thread;
mod unwind;

pub use session::Stats;
pub use testing::HeapStats;
pub use unwind::Unwinder;

/// memtrace's default sampling rate (per word).
pub const DEFAULT_SAMPLING_RATE: f64 = 1e-5;

/// A [`GlobalAlloc`] that samples the allocations it passes to `A`.
///
/// It records nothing until tracing starts ([`trace_if_requested`],
/// [`start_tracing`]).
#[derive(Debug, Default)]
pub struct Tracer<A> {
    inner: A,
}

impl<A> Tracer<A> {
    /// Wraps `inner`.
    pub const fn new(inner: A) -> Tracer<A> {
        Tracer { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

// SAFETY: every method forwards to `inner` with the caller's arguments
// unchanged and returns its result unchanged, so `inner`'s guarantees carry
// over. The bookkeeping around the calls never touches the blocks.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tracer<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { self.inner.alloc(layout) };
        if thread::charge(layout.size()) {
            on_countdown_expired(p, layout.size());
        }
        if testing::COUNTING.load(Ordering::Relaxed) {
            testing::on_alloc(p, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if thread::charge(layout.size()) {
            on_countdown_expired(p, layout.size());
        }
        if testing::COUNTING.load(Ordering::Relaxed) {
            testing::on_alloc(p, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if table::may_contain(ptr) {
            on_possibly_sampled_free(ptr);
        }
        // Before the block is freed: then its address may be handed out again.
        if testing::COUNTING.load(Ordering::Relaxed) {
            testing::on_free(ptr);
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if testing::COUNTING.load(Ordering::Relaxed) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { self.realloc_counted(ptr, layout, new_size) };
        }
        if table::may_contain(ptr) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { self.realloc_possibly_sampled(ptr, layout, new_size) };
        }
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if thread::charge(new_size) {
            on_countdown_expired(p, new_size);
        }
        p
    }
}

impl<A: GlobalAlloc> Tracer<A> {
    /// `realloc` while counting ([`testing`]): a free of the old block and
    /// an allocation of the new one, or nothing if it fails.
    ///
    /// # Safety
    ///
    /// The caller upholds [`GlobalAlloc::realloc`]'s contract.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_counted(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        testing::on_free(ptr);
        let p = if table::may_contain(ptr) {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { self.realloc_possibly_sampled(ptr, layout, new_size) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
            if thread::charge(new_size) {
                on_countdown_expired(p, new_size);
            }
            p
        };
        match p.is_null() {
            true => testing::on_realloc_failed(ptr, layout.size()),
            false => testing::on_alloc(p, new_size),
        }
        p
    }

    /// `realloc` of a block the filter could not rule out.
    ///
    /// # Safety
    ///
    /// The caller upholds [`GlobalAlloc::realloc`]'s contract.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_possibly_sampled(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        // Take the entry out first: once the inner realloc returns, another
        // thread may be handed the old address and sample it.
        let entry = table::remove(ptr);
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if p.is_null() {
            // The old block is still live and still sampled.
            if let Some(e) = entry {
                table::insert(ptr, e);
            }
            return p;
        }
        if let Some(e) = entry {
            collect(e);
        }
        if thread::charge(new_size) {
            on_countdown_expired(p, new_size);
        }
        p
    }
}

/// The slow path of an allocation: the thread's countdown expired.
#[cold]
#[inline(never)]
fn on_countdown_expired(ptr: *mut u8, size: usize) {
    let mut l = thread::local();
    if l.internal {
        thread::set_countdown(thread::COUNTDOWN_INTERNAL);
        return;
    }
    let Some(active) = session::active() else {
        l.seen_generation = 0;
        thread::set_local(l);
        thread::set_countdown(thread::COUNTDOWN_IDLE);
        return;
    };
    thread::seed_rng(&mut l);
    let mut countdown = thread::countdown();
    if l.seen_generation != active.generation {
        // First allocation of this thread in this session: start from a
        // fresh gap, as if the countdown had been drawn just before it.
        l.seen_generation = active.generation;
        countdown = active.rate.draw_gap_bytes(&mut l.rng) - size as i64;
        if countdown > 0 {
            thread::set_local(l);
            thread::set_countdown(countdown);
            return;
        }
    }
    let (nsamples, next) = sampler::charge_expired(countdown, active.rate, &mut l.rng);
    thread::set_local(l);
    thread::set_countdown(next);
    if !ptr.is_null() {
        record_alloc(ptr, size, nsamples, active.generation);
    }
}

#[inline(never)]
fn record_alloc(ptr: *mut u8, size: usize, nsamples: u64, generation: u32) {
    let _internal = thread::Internal::enter();
    let mut frames = [0usize; unwind::MAX_FRAMES];
    let n = unwind::capture(&mut frames);
    let key = session::next_key();
    let slot = thread::slot();
    let entry = table::Entry {
        key,
        slot,
        generation: generation as u16,
    };
    if !table::insert(ptr, entry) {
        // The table is full (over a billion live sampled blocks): without an
        // entry the free could not be written, so the sample is dropped.
        return;
    }
    thread::add_sampled(nsamples);
    let backlog = slots::push_alloc(
        slot,
        generation,
        key,
        sampler::words_for(size),
        nsamples,
        &frames[..n],
    );
    act_on(backlog);
}

fn act_on(backlog: slots::Backlog) {
    match backlog {
        slots::Backlog::Fine => {}
        slots::Backlog::Wake => session::wake(),
        slots::Backlog::Drain => session::drain_now(),
    }
}

/// The slow path of a free: the filter could not rule the block out.
#[cold]
#[inline(never)]
fn on_possibly_sampled_free(ptr: *mut u8) {
    if let Some(e) = table::remove(ptr) {
        collect(e);
    }
}

/// Queues the collect of a sampled block, if its session is still on.
fn collect(e: table::Entry) {
    let Some(active) = session::active() else {
        return;
    };
    if active.generation as u16 != e.generation {
        return;
    }
    let _internal = thread::Internal::enter();
    let backlog = slots::push_collect(e.slot, active.generation, e.key);
    act_on(backlog);
}

/// Why tracing could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The sampling rate is not in (0, 1].
    #[error("sampling rate {0} is not in (0, 1]")]
    InvalidRate(f64),
    /// `MEMTRACE_RATE` is not a number.
    #[error("MEMTRACE_RATE={0:?} is not a number in (0, 1]")]
    InvalidRateVariable(String),
    /// `MEMTRACE_FLUSH_MS` is not a number of milliseconds above 0.
    #[error("MEMTRACE_FLUSH_MS={0:?} is not a number of milliseconds above 0")]
    InvalidFlushVariable(String),
    /// A session is already active.
    #[error("already tracing")]
    AlreadyTracing,
    /// No session is active.
    #[error("not tracing")]
    NotTracing,
    /// This process is a forked child of a traced process.
    #[error("cannot trace in a forked child of a traced process")]
    ForkedChild,
    /// The trace file could not be opened.
    #[error("cannot open trace file {path}: {source}")]
    Open {
        /// The trace file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Another process holds the trace file's lock.
    #[error("trace file {0} is locked: is another process tracing to it?")]
    Locked(PathBuf),
    /// Writing the trace failed; tracing stopped at that point.
    #[error("error writing trace file {path}: {source}")]
    Write {
        /// The trace file.
        path: PathBuf,
        /// The cause.
        source: tracekit_memtrace::WriteError,
    },
    /// The background thread could not be started.
    #[error("cannot start the tracer's thread: {0}")]
    Thread(std::io::Error),
}

fn check_rate(rate: f64) -> Result<f64, Error> {
    if rate > 0.0 && rate <= 1.0 {
        Ok(rate)
    } else {
        Err(Error::InvalidRate(rate))
    }
}

/// Starts tracing to `path`, sampling each allocated word with probability
/// `rate` (in (0, 1]; memtrace's default is [`DEFAULT_SAMPLING_RATE`]).
///
/// The file is created with mode 0600, locked (a second tracer on the same
/// file fails with [`Error::Locked`]) and truncated. Tracing stops, and the
/// file is flushed and closed, when the returned guard is dropped or
/// [`TraceGuard::stop`]ped, or when the process exits.
///
/// The program's global allocator must be a [`Tracer`], or nothing is
/// sampled.
pub fn start_tracing(path: impl AsRef<Path>, rate: f64) -> Result<TraceGuard, Error> {
    session::start(path.as_ref(), check_rate(rate)?, None)?;
    Ok(TraceGuard { _private: () })
}

/// Like [`start_tracing`], with the trace's `context` string set.
pub fn start_tracing_with_context(
    path: impl AsRef<Path>,
    rate: f64,
    context: &str,
) -> Result<TraceGuard, Error> {
    session::start(path.as_ref(), check_rate(rate)?, Some(context))?;
    Ok(TraceGuard { _private: () })
}

/// Makes the tracer write out what it sampled every `interval` (once a second
/// by default), so that a reader following the trace while the program runs
/// (`tracekit view --follow`) sees its allocations within about that;
/// [`trace_if_requested`] takes it from `MEMTRACE_FLUSH_MS`. Shorter intervals
/// write smaller packets: more bytes of headers, more system calls.
pub fn set_flush_interval(interval: std::time::Duration) {
    session::set_flush_interval(interval);
}

/// Stops the active session and flushes its trace; see [`start_tracing`].
#[derive(Debug)]
#[must_use = "dropping the guard stops tracing at once"]
pub struct TraceGuard {
    _private: (),
}

impl TraceGuard {
    /// Stops tracing, writes out everything sampled and closes the file.
    pub fn stop(self) -> Result<Stats, Error> {
        std::mem::forget(self);
        session::stop(true)
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        let _ = session::stop(true);
    }
}

/// Starts tracing if the `MEMTRACE` environment variable names a file, as
/// OCaml's `Memtrace.trace_if_requested` does. `MEMTRACE_RATE` gives the
/// rate (default [`DEFAULT_SAMPLING_RATE`]). Tracing runs until the process
/// exits.
///
/// Tracing never takes the program down. When it cannot start (a
/// `MEMTRACE_RATE` that is not a number in (0, 1], a trace file that cannot
/// be created or written, ...), this writes one line on stderr, starting
/// with `tracekit-alloc: `, and returns: the program runs on untraced.
/// Unlike memtrace, which raises `Invalid_argument`, it does not fail, since
/// a memory trace is rarely worth a program that does not run. A write error
/// later on (a full disk) likewise stops tracing with one line on stderr.
/// Use [`try_trace_if_requested`] to handle the errors yourself.
pub fn trace_if_requested() {
    if let Err(e) = try_trace_if_requested() {
        session::report(&format!("{e}; the program runs untraced"));
    }
}

/// Like [`trace_if_requested`], returning errors. `Ok(true)` means tracing
/// started, `Ok(false)` that `MEMTRACE` is unset or empty.
///
/// When the process has no thread but the caller and the tracer's own,
/// `MEMTRACE` is then removed from the environment, so that child processes
/// are not traced to the same file (as memtrace does). With other threads
/// running, changing the environment is not safe and the variable is left
/// alone; a child would then find the file locked and fail with
/// [`Error::Locked`].
pub fn try_trace_if_requested() -> Result<bool, Error> {
    let path = match std::env::var_os("MEMTRACE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => return Ok(false),
    };
    let rate = match std::env::var("MEMTRACE_RATE") {
        Ok(s) if !s.is_empty() => match s.trim().parse::<f64>() {
            Ok(r) if r > 0.0 && r <= 1.0 => r,
            _ => return Err(Error::InvalidRateVariable(s)),
        },
        _ => DEFAULT_SAMPLING_RATE,
    };
    let flush = match std::env::var("MEMTRACE_FLUSH_MS") {
        Ok(s) if !s.is_empty() => match s.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Some(std::time::Duration::from_millis(ms)),
            _ => return Err(Error::InvalidFlushVariable(s)),
        },
        _ => None,
    };
    session::start(&path, rate, None)?;
    if let Some(interval) = flush {
        set_flush_interval(interval);
    }
    // What follows allocates (a directory listing, the variable's name as a C
    // string): the tracer's own work, not the program's, so not sampled.
    let _internal = thread::Internal::enter();
    if single_threaded() {
        // SAFETY: `remove_var` must not run while another thread reads or
        // writes the environment. Besides this thread the process has at most
        // one other, the tracer's background thread that `session::start`
        // spawned just above (checked just above), and no other can appear
        // meanwhile: only an application thread could create one, and this is
        // the only one. The background thread reads no environment variable
        // (it writes queued events, symbolizes and flushes; the symbolizer
        // read its variable on this thread, in `session::start`), except
        // `RUST_BACKTRACE` should it panic, through `std::env`, whose lock
        // `remove_var` takes too.
        unsafe { std::env::remove_var("MEMTRACE") };
    }
    Ok(true)
}

/// True when the calling thread is the only thread of the process besides,
/// while a session is active, the tracer's background thread.
fn single_threaded() -> bool {
    match std::fs::read_dir("/proc/self/task") {
        Ok(d) => {
            // Counts the calling thread too.
            let n = d.count();
            n <= 2 && session::tracing() || n <= 1
        }
        Err(_) => false,
    }
}

/// Stops the active session, however it was started, and flushes its trace.
pub fn stop_tracing() -> Result<Stats, Error> {
    session::stop(true)
}

/// True while a session is active.
pub fn currently_tracing() -> bool {
    session::tracing()
}

/// The calling thread's sampled allocations so far, over every session: the
/// difference of two readings is what the thread allocated between them. The
/// `tracing` layer (`tracekit-tracing`) takes one at a span's entry and one at
/// its exit, to give each span the allocations made inside it; the counts are
/// kept on the sampled path only, so the allocator's fast path pays nothing
/// for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSampled {
    /// Samples: each stands for [`bytes_per_sample`] bytes.
    pub samples: u64,
    /// Allocations sampled: at rate 1 (`MEMTRACE_RATE=1`) every allocation.
    pub allocations: u64,
}

impl ThreadSampled {
    /// What was sampled since `earlier`, a reading of the same thread.
    pub fn since(self, earlier: ThreadSampled) -> ThreadSampled {
        ThreadSampled {
            samples: self.samples.wrapping_sub(earlier.samples),
            allocations: self.allocations.wrapping_sub(earlier.allocations),
        }
    }
}

/// The calling thread's [`ThreadSampled`] now.
#[inline]
pub fn thread_sampled() -> ThreadSampled {
    let (samples, allocations) = thread::sampled();
    ThreadSampled {
        samples,
        allocations,
    }
}

/// The memtrace domain the calling thread's sampled allocations are written
/// under, while a session is active (claimed now if the thread has sampled
/// nothing yet): in the trace one domain is one thread, while at most 64
/// threads sample at once. A tracer of the same program's spans records it
/// with the thread (tracekit-tracing does, as the thread record's argument
/// `memtrace_domain`), so that a viewer can show each thread's heap.
pub fn thread_domain() -> Option<u16> {
    session::active()?;
    // Claiming registers the slot's release at the thread's exit, which may
    // allocate: the tracer's own work.
    let _internal = thread::Internal::enter();
    u16::try_from(thread::slot().index()).ok()
}

/// The bytes one sample stands for in the active session, as memtrace
/// estimates them (a word over the rate: 8 at rate 1, where every word is
/// sampled); `None` while no session is active.
pub fn bytes_per_sample() -> Option<f64> {
    session::active().map(|a| 8.0 / a.rate.rate())
}

/// True while the current thread runs the tracer's own code: the tracer's
/// background thread, or the bookkeeping of a sampled allocation or free.
///
/// An allocator wrapped by [`Tracer`] (for instance one that counts bytes)
/// can use this to leave the tracer's own allocations out.
pub fn in_tracer() -> bool {
    thread::in_tracer()
}

/// The unwinder this process uses for sampled backtraces.
pub fn unwinder() -> Unwinder {
    unwind::unwinder()
}

/// Entry points for robustness tests of the internal parsers; not part of
/// the API.
#[doc(hidden)]
pub mod __fuzz {
    /// Parses ELF program headers from `bytes`, as the symbolizer does
    /// (`tracekit_symbols::elf`).
    pub fn elf(bytes: &[u8]) {
        let _ = tracekit_symbols::elf::program_headers_end(bytes);
        let _ = tracekit_symbols::elf::load_segments(bytes);
    }

    /// Parses one `/proc/self/maps` line.
    pub fn maps_line(line: &str) {
        let _ = crate::symbolize::parse_maps_line(line);
    }

    /// Decodes raw queue records.
    pub fn records(words: &[u64]) {
        for r in crate::slots::records(words) {
            std::hint::black_box(r);
        }
    }
}
