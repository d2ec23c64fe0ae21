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
//! | threads | thread records named after the Rust thread, under the process (named after the executable) |
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
use std::cell::RefCell;
use std::cell::UnsafeCell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod barrier;
mod clock;
use clock::Clock;

use tracekit_fxt::format::{ArgValue, EventKind, Koid, RawArg, StringId, StringRef, ThreadRef};
use tracekit_fxt::write::{
    Destination, DestinationError, EncodedArgs, Initialization, VecDestination, Writer,
    WriterOptions,
};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Field, Level, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Bytes of a thread's buffer.
const BUFFER: usize = 64 * 1024;

/// The environment variable [`init_if_requested`] reads.
pub const ENV: &str = "TRACEKIT_FXT";

/// What goes to the writer thread.
enum Message {
    /// A thread's records.
    Records(Vec<u8>),
    /// Write everything received so far to the file, then answer.
    Flush(mpsc::Sender<()>),
    /// Write everything received so far and end, though threads the guard could
    /// not reach may still hold senders.
    Stop,
}

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
    threads: Mutex<Vec<Weak<Slot>>>,
    /// Held while a thread flushes the others' buffers: one flusher at a time.
    flushing: Mutex<()>,
    /// Spans some thread keeps in its cache of entered spans and not closed yet:
    /// while there are none, closing a span needs no lookup.
    cached: AtomicU64,
}

/// Spare buffers kept at most.
const SPARE: usize = 32;

/// The string table and thread records, encoded as they are registered.
struct Registry {
    writer: Option<Writer<VecDestination>>,
    strings: HashMap<Box<str>, StringId>,
    full: bool,
    /// The next thread-table slot (255 of them; later threads are written inline).
    next_slot: u16,
}

static NEXT_LAYER: AtomicU64 = AtomicU64::new(1);

impl Registry {
    /// The id of `s`, registering it; `None` once the table is full.
    fn intern(&mut self, s: &str) -> Option<StringId> {
        if let Some(&id) = self.strings.get(s) {
            return Some(id);
        }
        if self.full {
            return None;
        }
        let id = self.writer.as_mut()?.intern(s).ok();
        match id {
            Some(id) => {
                self.strings.insert(s.into(), id);
                Some(id)
            }
            None => {
                self.full = true;
                None
            }
        }
    }

    /// A new thread's ref: named (an interned name: Jane Street's reader refuses
    /// inline ones) and given a thread-table slot while there are some (the same
    /// reader refuses inline thread refs).
    fn thread(&mut self, pid: u64, tid: u64, name: &str) -> ThreadRef {
        let inline = ThreadRef::Inline {
            process: Koid(pid),
            thread: Koid(tid),
        };
        let name = match self.intern(name) {
            Some(id) => StringRef::Index(id),
            None => StringRef::inline(name),
        };
        let Some(w) = self.writer.as_mut() else {
            return inline;
        };
        let _ = w.set_thread_name(Koid(pid), Koid(tid), name);
        let Ok(slot) = u8::try_from(self.next_slot) else {
            return inline;
        };
        match w.set_thread_slot(slot, Koid(pid), Koid(tid)) {
            Ok(id) => {
                self.next_slot += 1;
                ThreadRef::Index(id)
            }
            Err(_) => inline,
        }
    }

    /// The records registered since the last call.
    fn take(&mut self) -> Vec<u8> {
        let Some(w) = self.writer.as_mut() else {
            return Vec::new();
        };
        let _ = w.flush();
        let bytes = std::mem::take(w.destination_mut());
        bytes.into_vec()
    }
}

/// A thread's buffer: a [`Destination`] that hands each full buffer to the writer
/// thread.
struct ThreadBuffer {
    bytes: Vec<u8>,
    sender: Option<mpsc::Sender<Message>>,
    shared: Arc<Shared>,
}

impl Destination for ThreadBuffer {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        let size = BUFFER.max(min_capacity);
        if filled > 0 {
            let spare = (self.shared.spare.lock().ok())
                .and_then(|mut s| s.pop())
                .filter(|b| b.len() >= size)
                .unwrap_or_else(|| vec![0; size]);
            let mut full = std::mem::replace(&mut self.bytes, spare);
            full.truncate(filled);
            if let Some(s) = &self.sender
                && s.send(Message::Records(full)).is_err()
            {
                self.sender = None;
            }
        } else if self.bytes.len() < size {
            self.bytes.resize(size, 0);
        }
        Ok(0)
    }
}

/// The writer thread's end: the output, and whether it failed.
struct FileWriter<W> {
    out: W,
    shared: Arc<Shared>,
    failed: bool,
}

impl<W: Write> FileWriter<W> {
    /// Writes what the threads send until they are all gone, then what is left.
    fn run(mut self, receiver: mpsc::Receiver<Message>) {
        for message in receiver {
            match message {
                Message::Records(bytes) => {
                    self.write(&bytes, false);
                    self.recycle(bytes);
                }
                Message::Flush(ack) => {
                    self.write(&[], true);
                    let _ = ack.send(());
                }
                Message::Stop => break,
            }
        }
        self.write(&[], true);
    }

    /// Writes the records registered since the last write, then `records`, in one
    /// write (so that a killed process leaves only whole records), and flushes if
    /// `flush`. The first error stops the trace, with one warning.
    fn write(&mut self, records: &[u8], flush: bool) {
        if self.failed {
            return;
        }
        let mut all = (self.shared.registry.lock().ok())
            .map(|mut r| r.take())
            .unwrap_or_default();
        let written = if all.is_empty() {
            self.out.write_all(records)
        } else {
            all.extend_from_slice(records);
            self.out.write_all(&all)
        };
        let result = written.and_then(|()| if flush { self.out.flush() } else { Ok(()) });
        if let Err(e) = result {
            self.failed = true;
            self.shared.stopped.store(true, Ordering::Release);
            eprintln!("tracekit-tracing: cannot write the trace: {e}; tracing stops");
        }
    }

    /// Keeps a written buffer for a thread to fill again.
    fn recycle(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() >= BUFFER
            && let Ok(mut spare) = self.shared.spare.lock()
            && spare.len() < SPARE
        {
            bytes.resize(BUFFER, 0);
            spare.push(bytes);
        }
    }
}

/// A thread's state for one layer.
struct Local {
    writer: Writer<ThreadBuffer>,
    thread: ThreadRef,
    /// Interned `&'static str`s by address.
    strings: HashMap<(usize, usize), Option<StringId>>,
    /// The string refs of each callsite's name, target, level and fields, by the
    /// address of its metadata: one lookup per span or event.
    callsites: HashMap<usize, Callsite>,
    /// The spans entered on this thread and not exited: id, name, category.
    entered: Vec<(u64, StringRef<'static>, StringRef<'static>)>,
    /// Values recorded while a span was entered here, for its end record.
    late: HashMap<u64, Vec<(StringRef<'static>, Value)>>,
    /// Spans entered here more than once: see [`CachedSpan`].
    spans: Box<[Option<CachedSpan>]>,
    shared: Arc<Shared>,
    /// Scratch for argument values that are not `&'static`.
    text: String,
    /// String values seen on this thread: interned from their second time on.
    values: HashMap<Box<str>, Seen>,
}

/// What a thread knows of a short string value.
#[derive(Clone, Copy)]
enum Seen {
    /// Seen once, written inline.
    Once,
    /// Interned: written as a ref from now on.
    Interned(StringId),
    /// Seen again once the string table was full: always inline.
    Inline,
}

/// String values up to this many bytes are interned when they repeat (longer
/// ones rarely do, and cost more to hash than a ref saves).
const INTERNED_VALUE: usize = 64;

/// Distinct string values a thread remembers, so that values that never repeat
/// (ids, timestamps) cannot grow its memory without bound.
const SEEN_VALUES: usize = 4096;

impl Drop for Local {
    fn drop(&mut self) {
        // The thread's last records.
        let _ = self.writer.flush();
    }
}

/// A thread's state, reachable from other threads so that a flush can hand over
/// its partial buffer (a thread alive but idle, such as a parked async runtime's
/// worker, would otherwise hold its last records until it exits).
///
/// The owner marks itself `busy` with a plain store and then checks `flushing`; a
/// flusher sets `flushing`, runs the heavy fence of [`barrier`] (which orders the
/// owner's store before its load, as a locked instruction would) and waits for
/// `busy` to clear. So either the owner sees `flushing` and backs off, or the
/// flusher sees `busy` and waits: never both inside. The hot path pays two plain
/// stores and a load instead of an atomic swap, which cost as much as reading the
/// clock.
struct Slot {
    /// The layer this state belongs to.
    layer: u64,
    /// Written by the owning thread only.
    busy: AtomicBool,
    /// Written by a flushing thread only (one at a time: `Shared::flushing`).
    flushing: AtomicBool,
    local: UnsafeCell<Local>,
}

// SAFETY: `local` is only reached through a `Locked`, of which the protocol above
// allows one at a time, so sharing a `Slot` between threads shares no
// unsynchronised access; `Local` itself is `Send`.
unsafe impl Sync for Slot {}

/// The `&mut Local` of a slot while its owner or a flusher holds it; released on
/// drop, also when unwinding.
struct Locked<'a> {
    slot: &'a Slot,
    /// Held by a flusher (else by the owner).
    flusher: bool,
}

impl Slot {
    /// The state, for the owning thread: `None` while a flusher holds it, or when
    /// the owner re-enters (a `tracing` call made while the layer works).
    #[inline(always)]
    fn lock(&self) -> Option<Locked<'_>> {
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        self.busy.store(true, Ordering::Relaxed);
        // With the flusher's heavy fence, orders the store above before the load
        // below.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        if self.flushing.load(Ordering::Acquire) {
            self.busy.store(false, Ordering::Release);
            return None;
        }
        Some(Locked {
            slot: self,
            flusher: false,
        })
    }

    /// The state, for another thread (holding `Shared::flushing`), waiting up to
    /// `patience` for its owner to finish a record; `None` when the fence is not
    /// available or the owner does not finish in time.
    fn lock_from_elsewhere(&self, patience: Duration) -> Option<Locked<'_>> {
        self.flushing.store(true, Ordering::Relaxed);
        let locked = Locked {
            slot: self,
            flusher: true,
        };
        if !barrier::heavy() {
            return None;
        }
        let start = Instant::now();
        while self.busy.load(Ordering::Acquire) {
            if start.elapsed() > patience {
                return None;
            }
            std::thread::yield_now();
        }
        Some(locked)
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = Local;
    fn deref(&self) -> &Local {
        // SAFETY: this `Locked` holds the slot (see `Slot`), so no other reference
        // to `local` exists.
        unsafe { &*self.slot.local.get() }
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Local {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through it.
        unsafe { &mut *self.slot.local.get() }
    }
}

impl Drop for Locked<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.flusher {
            self.slot.flushing.store(false, Ordering::Release);
        } else {
            self.slot.busy.store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Arc<Slot>>> = const { RefCell::new(None) };
}

/// How long a flush waits for a thread that is writing a record: far longer than
/// any record takes, short enough that a thread stuck inside the layer (a panic
/// there) cannot hold the program's exit.
const PATIENCE: Duration = Duration::from_millis(100);

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

/// Hands every thread's partial buffer to the writer thread (and, when
/// `disconnect`, closes each thread's way to it).
fn hand_over_threads(shared: &Shared, disconnect: bool) {
    let Ok(_one_flusher) = shared.flushing.lock() else {
        return;
    };
    let slots: Vec<Arc<Slot>> = match shared.threads.lock() {
        Ok(mut threads) => {
            threads.retain(|t| t.strong_count() > 0);
            threads.iter().filter_map(Weak::upgrade).collect()
        }
        Err(_) => Vec::new(),
    };
    // The calling thread's own state needs no fence.
    let own = LOCAL
        .try_with(|l| l.try_borrow().ok().and_then(|l| l.clone()))
        .ok()
        .flatten();
    for slot in slots {
        let locked = match &own {
            Some(own) if Arc::ptr_eq(own, &slot) => slot.lock(),
            _ => slot.lock_from_elsewhere(PATIENCE),
        };
        if let Some(mut local) = locked {
            let _ = local.writer.flush();
            if disconnect {
                local.writer.destination_mut().sender = None;
            }
        }
    }
}

/// Hands every thread's partial buffer over and waits for the writer thread to
/// write all it has.
fn flush(shared: &Shared) {
    hand_over_threads(shared, false);
    let sender = shared.sender.lock().ok().and_then(|s| s.clone());
    if let Some(s) = sender {
        let (ack, done) = mpsc::channel();
        if s.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv();
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
            initialization: Some(Initialization::new(clock.ticks_per_second())),
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
            let _ = w.set_process_name(Koid(pid), StringRef::Index(id));
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

    /// Runs `f` with the calling thread's state, made on first use; not at all once
    /// the trace stopped or while the thread is already inside (a `tracing` call
    /// made by the layer itself).
    #[inline]
    fn with_local<R>(&self, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        if self.shared.stopped.load(Ordering::Relaxed) {
            return None;
        }
        LOCAL
            .try_with(|cell| {
                {
                    let slot = cell.try_borrow().ok()?;
                    if let Some(slot) = slot.as_ref()
                        && slot.layer == self.shared.id
                    {
                        let mut local = slot.lock()?;
                        return Some(f(&mut local));
                    }
                }
                let new = Arc::new(Slot {
                    layer: self.shared.id,
                    busy: AtomicBool::new(false),
                    flushing: AtomicBool::new(false),
                    local: UnsafeCell::new(self.new_local()?),
                });
                if let Ok(mut threads) = self.shared.threads.lock() {
                    threads.retain(|t| t.strong_count() > 0);
                    threads.push(Arc::downgrade(&new));
                }
                let mut slot = cell.try_borrow_mut().ok()?;
                let slot = slot.insert(new);
                let mut local = slot.lock()?;
                Some(f(&mut local))
            })
            .ok()
            .flatten()
    }

    fn new_local(&self) -> Option<Local> {
        let sender = self.shared.sender.lock().ok()?.clone()?;
        let tid = current_tid();
        let current = std::thread::current();
        let name = match current.name() {
            Some(n) => n.to_string(),
            None => format!("thread {tid}"),
        };
        let thread = self
            .shared
            .registry
            .lock()
            .ok()?
            .thread(self.shared.pid, tid, &name);
        let buffer = ThreadBuffer {
            bytes: vec![0; BUFFER],
            sender: Some(sender),
            shared: self.shared.clone(),
        };
        let writer = Writer::without_header(buffer).ok()?;
        Some(Local {
            writer,
            thread,
            strings: HashMap::default(),
            callsites: HashMap::default(),
            entered: Vec::new(),
            late: HashMap::default(),
            spans: std::iter::repeat_with(|| None).take(SPAN_CACHE).collect(),
            shared: self.shared.clone(),
            text: String::new(),
            values: HashMap::default(),
        })
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        self.shared.clock.now()
    }
}

/// The kernel's id of the calling thread (FXT thread koids are the real tids).
fn current_tid() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u64::try_from(tid).unwrap_or(0)
}

/// A callsite's strings as refs.
struct Callsite {
    name: StringRef<'static>,
    category: StringRef<'static>,
    /// The argument name `level`, and the callsite's level as its value.
    level_key: StringRef<'static>,
    level: StringRef<'static>,
    /// By field index.
    fields: Vec<StringRef<'static>>,
}

impl Local {
    /// Writes the begin record of span `id` entered at `ticks` if this thread has
    /// it in its cache, unchanged since (no values recorded, no flows to end, not a
    /// closed span whose id was reused); false when the registry must be asked.
    #[inline]
    fn enter_cached(&mut self, id: u64, ticks: u64) -> bool {
        let Some(c) = &self.spans[id as usize % SPAN_CACHE] else {
            return false;
        };
        let s = &c.state;
        if c.id != id
            || s.closed.load(Ordering::Acquire)
            || s.has_flows.load(Ordering::Relaxed)
            || s.version.load(Ordering::Acquire) != c.version
        {
            return false;
        }
        self.entered.push((id, c.name, c.category));
        let _ = self.writer.write_event_encoded(
            EventKind::DurationBegin,
            self.thread,
            c.category,
            c.name,
            ticks,
            &c.encoded,
        );
        true
    }

    /// The string ref of a `&'static str`: its interned id, or inline once the
    /// table is full.
    #[inline]
    fn string(&mut self, s: &'static str) -> StringRef<'static> {
        let key = (s.as_ptr() as usize, s.len());
        let id = match self.strings.get(&key) {
            Some(&id) => id,
            None => {
                let id = self
                    .shared
                    .registry
                    .lock()
                    .ok()
                    .and_then(|mut r| r.intern(s));
                self.strings.insert(key, id);
                id
            }
        };
        match id {
            Some(id) => StringRef::Index(id),
            None => StringRef::inline(s),
        }
    }

    /// The ref of string value `s` (cut to the format's limit): inline the first
    /// time this thread sees it, interned from the second time on while the string
    /// table has room.
    fn value_string<'v>(&mut self, s: &'v str) -> StringRef<'v> {
        let s = tracekit_fxt::write::truncate_to_limit(s);
        if s.is_empty() || s.len() > INTERNED_VALUE {
            return StringRef::inline(s);
        }
        let seen = match self.values.get(s) {
            Some(&seen) => seen,
            None => {
                if self.values.len() < SEEN_VALUES {
                    self.values.insert(s.into(), Seen::Once);
                }
                return StringRef::inline(s);
            }
        };
        let seen = match seen {
            Seen::Once => {
                let id = (self.shared.registry.lock().ok()).and_then(|mut r| r.intern(s));
                let seen = id.map_or(Seen::Inline, Seen::Interned);
                self.values.insert(s.into(), seen);
                seen
            }
            seen => seen,
        };
        match seen {
            Seen::Interned(id) => StringRef::Index(id),
            _ => StringRef::inline(s),
        }
    }

    /// The FXT value of an event's field, whose text is in `text`.
    fn event_value<'t>(&mut self, v: EventValue, text: &'t str) -> ArgValue<'t, StringRef<'t>> {
        match v {
            EventValue::I64(v) => int_arg(v),
            EventValue::U64(v) => uint_arg(v),
            EventValue::F64(v) => ArgValue::Double(v),
            EventValue::Bool(v) => ArgValue::Bool(v),
            EventValue::Text(a, b) => {
                ArgValue::String(self.value_string(text.get(a..b).unwrap_or_default()))
            }
        }
    }

    /// The FXT value of an owned field value.
    fn value<'v>(&mut self, v: &'v Value) -> ArgValue<'v, StringRef<'v>> {
        match v {
            Value::Null => ArgValue::Null,
            Value::I64(v) => int_arg(*v),
            Value::U64(v) => uint_arg(*v),
            Value::F64(v) => ArgValue::Double(*v),
            Value::Bool(v) => ArgValue::Bool(*v),
            Value::Str(s) => ArgValue::String(self.value_string(s)),
        }
    }

    /// Encodes a span's level and fields (`values`, by field index) into `out`.
    fn encode(
        &mut self,
        meta: &'static Metadata<'static>,
        values: &[(usize, Value)],
        out: &mut EncodedArgs,
    ) {
        let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
        let values = &values[..values.len().min(MAX_FIELDS)];
        for (slot, (_, v)) in raw[1..].iter_mut().zip(values) {
            slot.value = self.value(v);
        }
        let c = self.callsite(meta);
        raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
        for (slot, (field, _)) in raw[1..].iter_mut().zip(values) {
            slot.name = c.fields.get(*field).copied().unwrap_or_default();
        }
        // Fifteen arguments at most, and strings cut to the limit: this cannot fail.
        let _ = out.set(&raw[..values.len() + 1]);
    }

    /// The strings of the callsite of `meta`.
    #[inline]
    fn callsite(&mut self, meta: &'static Metadata<'static>) -> &Callsite {
        let key = meta as *const Metadata<'static> as usize;
        if !self.callsites.contains_key(&key) {
            let c = Callsite {
                name: self.string(meta.name()),
                category: self.string(meta.target()),
                level_key: self.string("level"),
                level: self.string(level_name(meta.level())),
                fields: meta
                    .fields()
                    .iter()
                    .map(|f| self.string(f.name()))
                    .collect(),
            };
            self.callsites.insert(key, c);
        }
        // Inserted above when missing.
        &self.callsites[&key]
    }
}

fn install_panic_hook(shared: &Arc<Shared>) {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    let weak = Arc::downgrade(shared);
    let previous = std::panic::take_hook();
    if INSTALLED.swap(true, Ordering::AcqRel) {
        std::panic::set_hook(previous);
    } else {
        std::panic::set_hook(Box::new(move |info| {
            if let Some(shared) = weak.upgrade() {
                flush(&shared);
            }
            previous(info);
        }));
    }
}

/// A span's fields as arguments (by field index), kept in its extensions.
#[derive(Default)]
struct SpanArgs {
    args: Vec<(usize, Value)>,
    /// The level and `args`, encoded for the span's begin records.
    encoded: EncodedArgs,
    /// What threads read and write while they only hold the extensions' read lock,
    /// and what their caches of entered spans check.
    state: Arc<SpanState>,
}

/// A span's bookkeeping across threads, in atomics so that entering takes the
/// extensions' read lock only, or no lock at all for a span in the thread's cache.
#[derive(Default)]
struct SpanState {
    /// The thread it was first entered on (0: none yet), and when, for the async
    /// track.
    first_thread: AtomicU64,
    first_enter: AtomicU64,
    moved: AtomicBool,
    /// Flows from spans it follows, ended at its next entry (`has_flows` says
    /// whether there are any without taking the lock).
    flows: Mutex<Vec<u64>>,
    has_flows: AtomicBool,
    /// Counts `record`s: a cached copy of the encoded arguments older than this
    /// is stale.
    version: AtomicU64,
    /// Some thread keeps it in its cache (counted in `Shared::cached`).
    cached: AtomicBool,
    /// Closed: a cache entry for its id is stale, since the registry reuses ids.
    closed: AtomicBool,
}

/// A span this thread entered before: what its begin record needs, so that
/// entering it again looks nothing up in the registry.
struct CachedSpan {
    id: u64,
    state: Arc<SpanState>,
    /// `state.version` when `encoded` was copied.
    version: u64,
    name: StringRef<'static>,
    category: StringRef<'static>,
    encoded: EncodedArgs,
}

/// Entries of a thread's cache of entered spans, direct-mapped by the id's low
/// bits (the registry's slot within its page).
const SPAN_CACHE: usize = 256;

/// An argument value, owned.
#[derive(Clone, Debug)]
enum Value {
    /// A field declared without a value (`field::Empty`) and not recorded yet.
    Null,
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

/// A signed integer argument: `int32` where it fits, else `int64`.
fn int_arg<'a>(v: i64) -> ArgValue<'a, StringRef<'a>> {
    i32::try_from(v).map_or(ArgValue::Int64(v), ArgValue::Int32)
}

/// An unsigned integer argument: `uint32` where it fits, else `uint64`.
fn uint_arg<'a>(v: u64) -> ArgValue<'a, StringRef<'a>> {
    u32::try_from(v).map_or(ArgValue::UInt64(v), ArgValue::UInt32)
}

/// Collects a span's fields as owned values.
struct Collect<'a>(&'a mut Vec<(usize, Value)>);

impl tracing_core::field::Visit for Collect<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.index(), Value::I64(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.index(), Value::U64(value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.index(), Value::F64(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.index(), Value::Bool(value)));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.index(), Value::Str(value.to_string())));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        let v = i64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::I64);
        self.0.push((field.index(), v));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        let v = u64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::U64);
        self.0.push((field.index(), v));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        self.0.push((field.index(), Value::Str(s)));
    }
}

/// An event's field value: strings are ranges of the thread's scratch text.
#[derive(Clone, Copy)]
enum EventValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Text(usize, usize),
}

/// Collects an event's fields without allocating (strings into `text`).
struct EventFields<'a> {
    text: &'a mut String,
    values: [(usize, EventValue); MAX_FIELDS + 1],
    len: usize,
    /// Where the `message` field is in `values`.
    message: Option<usize>,
}

impl EventFields<'_> {
    fn push(&mut self, field: &Field, v: EventValue) {
        if self.len < self.values.len() {
            if field.name() == "message" {
                self.message = Some(self.len);
            }
            self.values[self.len] = (field.index(), v);
            self.len += 1;
        }
    }

    fn text(&mut self, field: &Field, write: impl FnOnce(&mut String)) {
        let start = self.text.len();
        write(self.text);
        let end = self.text.len();
        self.push(field, EventValue::Text(start, end));
    }
}

impl tracing_core::field::Visit for EventFields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, EventValue::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, EventValue::U64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, EventValue::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, EventValue::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, |t| t.push_str(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, EventValue::I64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.push(field, EventValue::U64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, |t| {
            let _ = write!(t, "{value:?}");
        });
    }
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARN",
        Level::INFO => "INFO",
        Level::DEBUG => "DEBUG",
        Level::TRACE => "TRACE",
    }
}

/// At most this many arguments on a record (the format's limit is 15; one is
/// the level).
const MAX_FIELDS: usize = 14;

impl<S> tracing_subscriber::Layer<S> for FxtLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut args = SpanArgs::default();
        attrs.record(&mut Collect(&mut args.args));
        // Fields declared without a value (`field::Empty`), to be recorded later:
        // null until then, so that the begin record shows every field.
        for field in attrs.metadata().fields().iter() {
            if !args.args.iter().any(|(i, _)| *i == field.index()) {
                args.args.push((field.index(), Value::Null));
            }
        }
        self.with_local(|l| l.encode(attrs.metadata(), &args.args, &mut args.encoded));
        span.extensions_mut().insert(args);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let mut new = Vec::new();
        values.record(&mut Collect(&mut new));
        let mut ext = span.extensions_mut();
        let Some(args) = ext.get_mut::<SpanArgs>() else {
            return;
        };
        for (field, v) in &new {
            match args.args.iter_mut().find(|(n, _)| n == field) {
                Some(slot) => slot.1 = v.clone(),
                None => args.args.push((*field, v.clone())),
            }
        }
        // Values recorded while the span is entered here go on its end record (the
        // begin is written); all go on its later entries.
        let raw_id = id.into_u64();
        self.with_local(|l| {
            l.encode(meta, &args.args, &mut args.encoded);
            if l.entered.iter().any(|e| e.0 == raw_id) {
                let fields = l.callsite(meta).fields.clone();
                let late = l.late.entry(raw_id).or_default();
                for (field, v) in new {
                    if let Some(&name) = fields.get(field) {
                        late.push((name, v));
                    }
                }
            }
        });
        // Still under the write lock: a thread copying `encoded` into its cache
        // holds the read lock, so it sees the new bytes with the new version.
        args.state.version.fetch_add(1, Ordering::Release);
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        // A flow from the slice open here now (where the link is made, usually in
        // the span followed) to the follower's next entry.
        let Some(span) = ctx.span(id) else { return };
        let Some(followed) = ctx.span(follows) else {
            return;
        };
        let flow = self.shared.flows.fetch_add(1, Ordering::Relaxed);
        let ticks = self.now();
        let meta = followed.metadata();
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category, thread) = (c.name, c.category, l.thread);
            let kind = EventKind::FlowBegin { id: flow };
            let _ = l
                .writer
                .write_event(kind, thread, category, name, ticks, &[]);
        });
        if let Some(args) = span.extensions().get::<SpanArgs>()
            && let Ok(mut flows) = args.state.flows.lock()
        {
            flows.push(flow);
            args.state.has_flows.store(true, Ordering::Relaxed);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let ticks = self.now();
        let raw_id = id.into_u64();
        if self.with_local(|l| l.enter_cached(raw_id, ticks)) == Some(true) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let ext = span.extensions();
        let Some(args) = ext.get::<SpanArgs>() else {
            return;
        };
        let state = &args.state;
        let tid = current_tid_cached();
        let mut went_async = false;
        let mut first_entry = false;
        // Nearly always entered on the thread it was first entered on: a load, not
        // a read-modify-write, tells.
        let first_thread = state.first_thread.load(Ordering::Relaxed);
        if first_thread != tid {
            match state
                .first_thread
                .compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    state.first_enter.store(ticks, Ordering::Relaxed);
                    first_entry = true;
                }
                Err(t) if t != tid && !state.moved.swap(true, Ordering::Relaxed) => {
                    went_async = true;
                    self.shared.moved.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        }
        // Flows into this span end at this entry, once.
        let flows = if state.has_flows.load(Ordering::Relaxed)
            && state.has_flows.swap(false, Ordering::Relaxed)
        {
            state
                .flows
                .lock()
                .map(|mut f| std::mem::take(&mut *f))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category) = (c.name, c.category);
            let thread = l.thread;
            l.entered.push((raw_id, name, category));
            if went_async {
                let first_enter = state.first_enter.load(Ordering::Relaxed);
                let _ = l.writer.write_event_encoded(
                    EventKind::AsyncBegin { id: raw_id },
                    thread,
                    category,
                    name,
                    first_enter,
                    &args.encoded,
                );
            }
            let _ = l.writer.write_event_encoded(
                EventKind::DurationBegin,
                thread,
                category,
                name,
                ticks,
                &args.encoded,
            );
            for &flow in &flows {
                let kind = EventKind::FlowEnd { id: flow };
                let _ = l
                    .writer
                    .write_event(kind, thread, category, name, ticks, &[]);
            }
            // Entered before (here or elsewhere): likely again, so cached. A span
            // entered once is not, and closing it then needs no lookup.
            if !first_entry {
                if !state.cached.swap(true, Ordering::Relaxed) {
                    self.shared.cached.fetch_add(1, Ordering::Relaxed);
                }
                l.spans[raw_id as usize % SPAN_CACHE] = Some(CachedSpan {
                    id: raw_id,
                    state: state.clone(),
                    // Read under the extensions' read lock, which `record` holds
                    // for writing while it changes `encoded` and bumps this.
                    version: state.version.load(Ordering::Acquire),
                    name,
                    category,
                    encoded: args.encoded.clone(),
                });
            }
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let ticks = self.now();
        let id = id.into_u64();
        self.with_local(|l| {
            // Spans exit in the order they were entered, nearly always: the name
            // comes from the thread's stack, without a lookup in the registry.
            let (name, category) = match l.entered.last() {
                Some(&(top, name, category)) if top == id => {
                    l.entered.pop();
                    (name, category)
                }
                _ => match l.entered.iter().rposition(|e| e.0 == id) {
                    Some(i) => {
                        let e = l.entered.remove(i);
                        (e.1, e.2)
                    }
                    None => {
                        let Some(meta) = ctx.metadata(&Id::from_u64(id)) else {
                            return;
                        };
                        let c = l.callsite(meta);
                        (c.name, c.category)
                    }
                },
            };
            let thread = l.thread;
            let late = if l.late.is_empty() {
                Vec::new()
            } else {
                l.late.remove(&id).unwrap_or_default()
            };
            let mut raw = Vec::with_capacity(late.len().min(MAX_FIELDS));
            for (n, v) in late.iter().take(MAX_FIELDS) {
                raw.push(RawArg::new(*n, l.value(v)));
            }
            let kind = EventKind::DurationEnd;
            let _ = l
                .writer
                .write_event(kind, thread, category, name, ticks, &raw);
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.shared.moved.load(Ordering::Relaxed) == 0
            && self.shared.cached.load(Ordering::Relaxed) == 0
        {
            return;
        }
        let Some(span) = ctx.span(&id) else { return };
        let state = match span.extensions().get::<SpanArgs>() {
            Some(a) => a.state.clone(),
            None => return,
        };
        // Before the registry frees the id for another span.
        if state.cached.swap(false, Ordering::Relaxed) {
            state.closed.store(true, Ordering::Release);
            self.shared.cached.fetch_sub(1, Ordering::Relaxed);
        }
        if !state.moved.load(Ordering::Relaxed) {
            return;
        }
        self.shared.moved.fetch_sub(1, Ordering::Relaxed);
        let meta = span.metadata();
        let ticks = self.now();
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category) = (c.name, c.category);
            let _ = l.writer.write_event(
                EventKind::AsyncEnd { id: id.into_u64() },
                l.thread,
                category,
                name,
                ticks,
                &[],
            );
        });
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let ticks = self.now();
        self.with_local(|l| {
            let mut text = std::mem::take(&mut l.text);
            text.clear();
            let mut fields = EventFields {
                text: &mut text,
                values: [(0, EventValue::Bool(false)); MAX_FIELDS + 1],
                len: 0,
                message: None,
            };
            event.record(&mut fields);
            let (values, len, fields_message) = (fields.values, fields.len, fields.message);
            // The message names the instant; without one, the event's own name.
            let message = match fields_message.map(|i| values[i].1) {
                Some(EventValue::Text(a, b)) => {
                    Some(l.value_string(text.get(a..b).unwrap_or_default()))
                }
                _ => None,
            };
            // Values first (interning needs the thread's state), names after.
            let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
            let mut fields = [0; MAX_FIELDS + 1];
            let mut n = 1;
            for (i, &(field, v)) in values[..len].iter().enumerate() {
                if Some(i) == fields_message || n > MAX_FIELDS {
                    continue;
                }
                raw[n].value = l.event_value(v, &text);
                fields[n] = field;
                n += 1;
            }
            let c = l.callsite(meta);
            let name = message.unwrap_or(c.name);
            raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
            for (slot, field) in raw[1..n].iter_mut().zip(&fields[1..n]) {
                slot.name = c.fields.get(*field).copied().unwrap_or_default();
            }
            let category = c.category;
            let thread = l.thread;
            let _ =
                l.writer
                    .write_event(EventKind::Instant, thread, category, name, ticks, &raw[..n]);
            l.text = text;
        });
    }
}

thread_local! {
    static TID: u64 = current_tid();
}

/// The calling thread's tid, read from the kernel once per thread.
fn current_tid_cached() -> u64 {
    TID.try_with(|t| *t).unwrap_or_else(|_| current_tid())
}
