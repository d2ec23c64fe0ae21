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
//! (`double`), `bool`, strings and `Debug` values (`string`). Names of spans,
//! targets and fields, which `tracing` gives as `&'static str`, are interned in the
//! trace's string table once.
//!
//! **Per-thread buffers**: each thread writes its records into its own 64 KiB buffer,
//! with no lock and no shared write on the hot path; a full buffer goes to the writer
//! thread, which appends it to the file. Strings and thread records, rare, are
//! registered under a lock and written ahead of the buffers that use them. A
//! thread's partial buffer is handed over when the thread exits, and the calling
//! thread's when the [`FlushGuard`] is dropped or the program panics (a panic hook
//! does it); a process killed outright loses at most the partial buffer of each
//! thread. Timestamps are nanoseconds of the monotonic clock since the layer was
//! made.
//!
//! The library never panics or aborts its user's program: an I/O error stops the
//! trace with one warning on standard error.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

mod clock;
use clock::Clock;

use tracekit_fxt::format::{ArgValue, EventKind, Koid, RawArg, StringId, StringRef, ThreadRef};
use tracekit_fxt::write::{
    Destination, DestinationError, Initialization, VecDestination, Writer, WriterOptions,
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
    layer: u64,
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
    shared: Arc<Shared>,
    /// Scratch for argument values that are not `&'static`.
    text: String,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread's last records.
        let _ = self.writer.flush();
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

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
    /// Writes what the calling thread and the writer thread hold, now.
    pub fn flush(&self) {
        flush(&self.shared);
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        flush(&self.shared);
        self.shared.stopped.store(true, Ordering::Release);
        if let Ok(mut s) = self.shared.sender.lock() {
            s.take();
        }
        // Our own thread's sender keeps the channel open: drop this thread's state.
        LOCAL.with(|l| {
            if let Ok(mut l) = l.try_borrow_mut()
                && l.as_ref().is_some_and(|l| l.layer == self.shared.id)
            {
                l.take();
            }
        });
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Hands the calling thread's partial buffer over and waits for the writer thread
/// to write all it has.
fn flush(shared: &Shared) {
    LOCAL.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && let Some(l) = l.as_mut()
            && l.layer == shared.id
        {
            let _ = l.writer.flush();
        }
    });
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
        });
        let file = FileWriter {
            out,
            shared: shared.clone(),
            failed: false,
        };
        let writer = std::thread::Builder::new()
            .name("tracekit-fxt-writer".into())
            .spawn(move || file.run(receiver))?;
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
    fn with_local(&self, f: impl FnOnce(&mut Local)) {
        if self.shared.stopped.load(Ordering::Relaxed) {
            return;
        }
        let _ = LOCAL.try_with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return;
            };
            if slot.as_ref().is_none_or(|l| l.layer != self.shared.id) {
                *slot = self.new_local();
            }
            if let Some(local) = slot.as_mut() {
                f(local);
            }
        });
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
            layer: self.shared.id,
            writer,
            thread,
            strings: HashMap::default(),
            callsites: HashMap::default(),
            entered: Vec::new(),
            late: HashMap::default(),
            shared: self.shared.clone(),
            text: String::new(),
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
    /// The thread it was first entered on (0: none yet), and when, for the async
    /// track. Atomics, so that entering takes the extensions' read lock only.
    first_thread: AtomicU64,
    first_enter: AtomicU64,
    moved: AtomicBool,
    /// Flows from spans it follows, ended at its next entry (`has_flows` says
    /// whether there are any without taking the lock).
    flows: Mutex<Vec<u64>>,
    has_flows: AtomicBool,
}

/// An argument value, owned.
#[derive(Clone, Debug)]
enum Value {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

impl Value {
    fn raw(&self) -> ArgValue<'_, StringRef<'_>> {
        match self {
            Value::I64(v) => int_arg(*v),
            Value::U64(v) => uint_arg(*v),
            Value::F64(v) => ArgValue::Double(*v),
            Value::Bool(v) => ArgValue::Bool(*v),
            Value::Str(s) => {
                ArgValue::String(StringRef::inline(tracekit_fxt::write::truncate_to_limit(s)))
            }
        }
    }
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

/// The FXT value of an event's field.
fn event_value<'t>(v: EventValue, text: &'t str) -> ArgValue<'t, StringRef<'t>> {
    match v {
        EventValue::I64(v) => int_arg(v),
        EventValue::U64(v) => uint_arg(v),
        EventValue::F64(v) => ArgValue::Double(v),
        EventValue::Bool(v) => ArgValue::Bool(v),
        EventValue::Text(a, b) => ArgValue::String(StringRef::inline(
            tracekit_fxt::write::truncate_to_limit(text.get(a..b).unwrap_or_default()),
        )),
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
        span.extensions_mut().insert(args);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let mut new = Vec::new();
        values.record(&mut Collect(&mut new));
        // Values recorded while the span is entered here go on its end record (the
        // begin is written); all go on its later entries.
        let raw_id = id.into_u64();
        self.with_local(|l| {
            if l.entered.iter().any(|e| e.0 == raw_id) {
                let fields = l.callsite(meta).fields.clone();
                let late = l.late.entry(raw_id).or_default();
                for (field, v) in &new {
                    if let Some(&name) = fields.get(*field) {
                        late.push((name, v.clone()));
                    }
                }
            }
        });
        let mut ext = span.extensions_mut();
        if let Some(args) = ext.get_mut::<SpanArgs>() {
            for (field, v) in new {
                match args.args.iter_mut().find(|(n, _)| *n == field) {
                    Some(slot) => slot.1 = v,
                    None => args.args.push((field, v)),
                }
            }
        }
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
            && let Ok(mut flows) = args.flows.lock()
        {
            flows.push(flow);
            args.has_flows.store(true, Ordering::Relaxed);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let ticks = self.now();
        let ext = span.extensions();
        let Some(args) = ext.get::<SpanArgs>() else {
            return;
        };
        let tid = current_tid_cached();
        let mut went_async = false;
        match args
            .first_thread
            .compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => args.first_enter.store(ticks, Ordering::Relaxed),
            Err(t) if t != tid && !args.moved.swap(true, Ordering::Relaxed) => {
                went_async = true;
                self.shared.moved.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
        let first_enter = args.first_enter.load(Ordering::Relaxed);
        // Flows into this span end at this entry, once.
        let flows = if args.has_flows.load(Ordering::Relaxed)
            && args.has_flows.swap(false, Ordering::Relaxed)
        {
            args.flows
                .lock()
                .map(|mut f| std::mem::take(&mut *f))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category) = (c.name, c.category);
            let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
            raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
            let mut n = 1;
            for (field, v) in args.args.iter().take(MAX_FIELDS) {
                let name = c.fields.get(*field).copied().unwrap_or_default();
                raw[n] = RawArg::new(name, v.raw());
                n += 1;
            }
            let thread = l.thread;
            l.entered.push((id.into_u64(), name, category));
            if went_async {
                let _ = l.writer.write_event(
                    EventKind::AsyncBegin { id: id.into_u64() },
                    thread,
                    category,
                    name,
                    first_enter,
                    &raw[..n],
                );
            }
            let _ = l.writer.write_event(
                EventKind::DurationBegin,
                thread,
                category,
                name,
                ticks,
                &raw[..n],
            );
            for &flow in &flows {
                let kind = EventKind::FlowEnd { id: flow };
                let _ = l
                    .writer
                    .write_event(kind, thread, category, name, ticks, &[]);
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
            let raw: Vec<RawArg<'_>> = late
                .iter()
                .take(MAX_FIELDS)
                .map(|(n, v)| RawArg::new(*n, v.raw()))
                .collect();
            let kind = EventKind::DurationEnd;
            let _ = l
                .writer
                .write_event(kind, thread, category, name, ticks, &raw);
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.shared.moved.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(span) = ctx.span(&id) else { return };
        let moved = span
            .extensions()
            .get::<SpanArgs>()
            .is_some_and(|a| a.moved.load(Ordering::Relaxed));
        if !moved {
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
            let (values, len, message) = (fields.values, fields.len, fields.message);
            let c = l.callsite(meta);
            // The message names the instant; without one, the event's own name.
            let name = match message.map(|i| values[i].1) {
                Some(EventValue::Text(a, b)) => StringRef::inline(
                    tracekit_fxt::write::truncate_to_limit(text.get(a..b).unwrap_or_default()),
                ),
                _ => c.name,
            };
            let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
            raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
            let mut n = 1;
            for (i, &(field, v)) in values[..len].iter().enumerate() {
                if Some(i) == message || n > MAX_FIELDS {
                    continue;
                }
                let field_name = c.fields.get(field).copied().unwrap_or_default();
                raw[n] = RawArg::new(field_name, event_value(v, &text));
                n += 1;
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
