//! A [`tracing_subscriber::Layer`] that writes the spans and events of Rust's
//! `tracing` ecosystem as a Fuchsia trace format (FXT) file, for Perfetto and
//! magic-trace.org: the Rust counterpart of Jane Street's OCaml `tracing` library.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! let (layer, guard) = tracekit_tracing::FxtLayer::file("trace.fxt")?;
//! tracing_subscriber::registry().with(layer).init();
//! // ... the program; the trace is complete when `guard` is dropped.
//! drop(guard);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Or, as memtrace does for allocations, only when the environment asks
//! (`TRACEKIT_FXT=trace.fxt`): [`init_if_requested`].
//!
//! What becomes what:
//!
//! | `tracing` | FXT |
//! |---|---|
//! | a span entered, then exited | duration begin and end on the entering thread, with the span's fields (and later `record`s) as arguments |
//! | a span entered on more than one thread (an async task) | also an async begin (at its first entry) and async end (when it closes), correlated by the span's id, which Perfetto draws as one track |
//! | an event | an instant with its fields as arguments (`message` names it) |
//! | a span's or event's target | the category |
//! | a span's or event's level | argument `level` |
//! | `follows_from` | a flow from the followed span's last slice to the follower's next |
//! | threads | thread records named after the Rust thread, under the process (named after the executable, with arguments `clock_ticks` and `clock_monotonic_ns`: one tick and the `CLOCK_MONOTONIC` time it was, which joins what tracekit-alloc recorded) |
//! | what the program allocated while a span was entered, with `tracekit-alloc` tracing its heap | arguments `allocated_bytes` and `allocations` on the slice's end record (the `alloc` feature, on by default) |
//!
//! Field values keep their type: `i64` (`int32` when it fits), `u64` (`uint32`), `f64`
//! (`double`), `bool`, strings and `Debug` values (`string`), and a span's field
//! declared `field::Empty` is `null` until recorded. Names of spans, targets and
//! fields, which `tracing` gives as `&'static str`, are interned in the trace's
//! string table once; string values (and event messages) of up to 64 bytes are
//! interned from the second time a thread writes them, so a repeated message costs a
//! ref, not its text.
//!
//! **Per-thread buffers**: each thread writes its records into its own 64 KiB buffer,
//! with no lock and no shared write on the hot path; a full buffer goes to the writer
//! thread, which appends it to the file. Strings and thread records, rare, are
//! registered under a lock and written ahead of the buffers that use them. A
//! thread's partial buffer is handed over when the thread exits, and every live
//! thread's when the [`FlushGuard`] is dropped or flushed or the program panics (a
//! panic hook does it), idle threads included (an async runtime's parked workers),
//! without waiting for them to exit; a process killed outright loses at most the
//! partial buffer of each thread. A span entered again on a thread is written from
//! that thread's cache of the spans it entered, without a registry lookup.
//! Timestamps come from the CPU's time-stamp counter where it is invariant
//! (calibrated against the monotonic clock when the layer is made), else from the
//! monotonic clock.
//!
//! The library never panics or aborts its user's program: an I/O error stops the
//! trace with one warning on standard error.

use rustc_hash::FxHashMap as HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

mod alloc;
mod barrier;
mod fields;
mod layer;
mod local;
mod lock;
mod registry;
mod span;
mod writer;

use lock::Slot;
use registry::Registry;
use tracekit_fxt::format::{ArgValue, Koid, ObjectType, RawArg, StringRef};
use tracekit_fxt::write::clock::Clock;
use tracekit_fxt::write::{VecDestination, Writer, WriterOptions};
use writer::{FileWriter, Message, flush, hand_over_threads, install_panic_hook};

/// `CLOCK_MONOTONIC` in nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always
    // supported on Linux, and on failure `ts` simply stays zero.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The environment variable [`init_if_requested`] reads.
pub const ENV: &str = "TRACEKIT_FXT";

/// The environment variable that makes [`init_if_requested`]'s trace flushed
/// every so many milliseconds ([`FlushGuard::flush_every`]), for a reader that
/// follows it while the program runs.
pub const FLUSH_ENV: &str = "TRACEKIT_FXT_FLUSH_MS";

/// What all threads share: the string and thread registrations, the channel to
/// the writer thread, the clock.
struct Shared {
    /// Records every thread's records may refer to (strings, threads), written to
    /// the file ahead of the next buffer.
    registry: Mutex<Registry>,
    sender: Mutex<Option<mpsc::Sender<Message>>>,
    clock: Clock,
    pid: u64,
    /// Spans entered on more than one thread and not closed yet: while there are
    /// none, closing a span needs no lookup.
    moved: AtomicU64,
    /// The next flow id.
    flows: AtomicU64,
    /// Set once the trace stopped (an I/O error, or the guard dropped).
    stopped: AtomicBool,
    /// Distinguishes layers, so that a thread's buffer belongs to one trace.
    id: u64,
    /// Buffers the writer thread has written, for threads to fill again: a fresh
    /// buffer costs the kernel zeroing its pages (an eighth of a span's cost).
    spare: Mutex<Vec<Vec<u8>>>,
    /// Every thread's state, so that a flush reaches the partial buffers of
    /// threads that are alive but idle (a parked async runtime's workers).
    threads: Mutex<Vec<Weak<Slot<local::Local>>>>,
    /// Held while a thread flushes the others' buffers: one flusher at a time.
    flushing: Mutex<()>,
    /// Spans some thread keeps in its cache of entered spans and not closed yet:
    /// while there are none, closing a span needs no lookup.
    cached: AtomicU64,
}

static NEXT_LAYER: AtomicU64 = AtomicU64::new(1);

/// The layer. See the [crate docs](crate).
pub struct FxtLayer {
    shared: Arc<Shared>,
}

/// Completes the trace when dropped: the dropping thread's records, then
/// everything the writer thread has, are written and the file is flushed.
#[must_use = "the trace is complete only once the guard is dropped"]
pub struct FlushGuard {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

impl FlushGuard {
    /// Writes what every thread and the writer thread hold, now.
    pub fn flush(&self) {
        flush(&self.shared);
    }

    /// From now on also writes what every thread holds every `interval`, from
    /// a thread of its own, until the trace is complete: a reader that follows
    /// the file while the program runs (`tracekit view --follow`) then sees
    /// each record within about `interval`. Without it records reach the file
    /// a thread's 64 KiB buffer at a time. If the thread cannot be started, a
    /// warning says so and the trace goes on without it.
    pub fn flush_every(&self, interval: Duration) {
        let shared = Arc::downgrade(&self.shared);
        let started = std::thread::Builder::new()
            .name("tracekit-fxt-flush".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(interval);
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    if shared.stopped.load(Ordering::Acquire) {
                        return;
                    }
                    flush(&shared);
                }
            });
        if let Err(e) = started {
            eprintln!(
                "tracekit-tracing: cannot start the flushing thread: {e}; flushing when buffers fill"
            );
        }
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        // No new thread state from here on, and none writes more records.
        self.shared.stopped.store(true, Ordering::Release);
        let sender = self.shared.sender.lock().ok().and_then(|mut s| s.take());
        // Every thread's partial buffer, then nothing more from any of them: a
        // thread still alive (an async runtime's worker, parked) must not keep the
        // writer thread waiting.
        hand_over_threads(&self.shared, true);
        if let Some(s) = sender {
            let _ = s.send(Message::Stop);
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Starts a trace written to `file` when the environment variable `TRACEKIT_FXT`
/// names one, as the global subscriber; returns the guard that completes it (keep
/// it until the end of `main`). Nothing happens, and `None` comes back, when the
/// variable is unset, the file cannot be created (a warning says so) or a global
/// subscriber is already set.
pub fn init_if_requested() -> Option<FlushGuard> {
    use tracing_subscriber::layer::SubscriberExt as _;
    let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
    let (layer, guard) = match FxtLayer::file(&path) {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "tracekit-tracing: cannot create {} ({ENV}): {e}; not tracing",
                Path::new(&path).display()
            );
            return None;
        }
    };
    let subscriber = tracing_subscriber::registry().with(layer);
    if tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::new(subscriber))
        .is_err()
    {
        eprintln!("tracekit-tracing: a global subscriber is already set; not tracing");
        return None;
    }
    let flush_ms = std::env::var(FLUSH_ENV).ok().filter(|v| !v.is_empty());
    match flush_ms.map(|v| v.parse::<u64>()) {
        None => {}
        Some(Ok(ms)) if ms > 0 => guard.flush_every(Duration::from_millis(ms)),
        Some(_) => eprintln!(
            "tracekit-tracing: {FLUSH_ENV} is not a number of milliseconds above 0; flushing when buffers fill"
        ),
    }
    Some(guard)
}

impl FxtLayer {
    /// A layer writing to a new file at `path` (replaced if it exists).
    ///
    /// The file is written a whole buffer of records at a time, unbuffered, so that
    /// a process killed outright leaves only whole records in it.
    pub fn file(path: impl AsRef<Path>) -> io::Result<(FxtLayer, FlushGuard)> {
        FxtLayer::new(File::create(path)?)
    }

    /// A layer writing to `out` on a thread of its own.
    pub fn new<W: Write + Send + 'static>(out: W) -> io::Result<(FxtLayer, FlushGuard)> {
        let clock = Clock::new();
        let options = WriterOptions {
            initialization: Some(clock.initialization()),
            ..WriterOptions::default()
        };
        let header =
            Writer::with_options(VecDestination::new(), &options).map_err(io::Error::other)?;
        let pid = u64::from(std::process::id());
        let name = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "process".to_string());
        let mut registry = Registry {
            writer: Some(header),
            strings: HashMap::default(),
            full: false,
            next_slot: 0,
        };
        if let Some(id) = registry.intern(&name)
            && let Some(w) = registry.writer.as_mut()
        {
            // The process's record also says which tick was which moment of
            // the monotonic clock, so that what other tracers of the process
            // recorded on that clock (tracekit-alloc's heap) joins the spans.
            let (ticks, monotonic) = (clock.now(), monotonic_ns());
            let args = [
                RawArg::new(StringRef::inline("clock_ticks"), ArgValue::UInt64(ticks)),
                RawArg::new(
                    StringRef::inline("clock_monotonic_ns"),
                    ArgValue::UInt64(monotonic),
                ),
            ];
            let _ = w.kernel_object(ObjectType::PROCESS, Koid(pid), StringRef::Index(id), &args);
        }
        let (sender, receiver) = mpsc::channel::<Message>();
        let shared = Arc::new(Shared {
            registry: Mutex::new(registry),
            sender: Mutex::new(Some(sender)),
            clock,
            moved: AtomicU64::new(0),
            flows: AtomicU64::new(1),
            pid,
            stopped: AtomicBool::new(false),
            id: NEXT_LAYER.fetch_add(1, Ordering::Relaxed),
            spare: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            flushing: Mutex::new(()),
            cached: AtomicU64::new(0),
        });
        let file = FileWriter {
            out,
            shared: shared.clone(),
            failed: false,
        };
        let writer = std::thread::Builder::new()
            .name("tracekit-fxt-writer".into())
            .spawn(move || file.run(receiver))?;
        // Once per process, so that flushes reach idle threads' buffers.
        barrier::register();
        install_panic_hook(&shared);
        let guard = FlushGuard {
            shared: shared.clone(),
            writer: Some(writer),
        };
        Ok((FxtLayer { shared }, guard))
    }
}

/// The README's Rust snippets (this crate's and tracekit-alloc's), compiled
/// and run as doc-tests, so that they compile as pasted.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSnippets;
