//! Tracing sessions: start, the background flusher, stop, process exit,
//! panics and fork.
//!
//! A session owns the memtrace [`Writer`]s (one per domain slot in use), the
//! [`Symbolizer`] and the map from sample keys to object ids. All of that sits
//! behind one mutex, [`SESSION`], which only the background thread, a
//! sampling thread draining an overfull queue, `stop_tracing` and the exit
//! hook take; allocating threads only ever lock their own slot's queue.
//!
//! Lock order: `SESSION`, then a slot queue. Nobody waits for `SESSION`
//! while holding a slot queue.
//!
//! The background thread drains the queues and flushes every writer that got
//! events about once a second (or as often as asked: `MEMTRACE_FLUSH_MS`, for
//! a reader that follows the trace), so a killed process loses about one
//! second of events; queues past a soft limit wake it early. A panic hook flushes the
//! trace (and with `panic = "abort"` closes it) before the process may die
//! without running the exit hook; see [`at_panic`].

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracekit_memtrace::{
    AllocationSource, DomainId, Info, Location as MtLocation, LocationCode, ObjId, Timestamp,
    WriteError, Writer, WriterOptions,
};

use crate::Error;
use crate::slots::{self, Record, SlotId};
use crate::symbolize::Symbolizer;
use crate::thread::Internal;
use crate::{clock, sampler, table};

/// `generation << 1 | active`. The generation counts sessions (0: none yet).
static STATE: AtomicU64 = AtomicU64::new(0);
/// Set in a forked child: tracing is over for good in this process.
static FORKED: AtomicBool = AtomicBool::new(false);
/// The session's rate, as [`sampler::Rate::to_bits`].
static RATE: AtomicU64 = AtomicU64::new(0);
/// Next sample key.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// The background thread's alarm clock: `true` = work to do now.
static WAKE: Mutex<bool> = Mutex::new(false);
static WAKE_CV: Condvar = Condvar::new();

static HOOKS: Once = Once::new();
/// Set once the panic hook is installed.
static PANIC_HOOK: AtomicBool = AtomicBool::new(false);

/// How long a panicking thread waits for the session lock before it gives up
/// flushing. The lock's holder may be loading debug information, which can
/// take seconds for a large program, or be stuck behind the panicking thread
/// (see [`at_panic`]).
const PANIC_FLUSH_WAIT: Duration = Duration::from_secs(5);

/// How often the background thread writes out what was sampled, in
/// milliseconds ([`set_flush_interval`]): once a second unless asked.
static FLUSH_MS: AtomicU64 = AtomicU64::new(1000);

/// Makes the background thread write out what was sampled every `interval`
/// (at least a millisecond), so that a reader following the trace while the
/// program runs (`tracekit view --follow`) sees it within about that.
pub(crate) fn set_flush_interval(interval: Duration) {
    let ms = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    FLUSH_MS.store(ms, Ordering::Relaxed);
    wake();
}

/// The state a sampling thread needs, read with one atomic load.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Active {
    pub(crate) generation: u32,
    pub(crate) rate: sampler::Rate,
}

/// The active session, if any (and not in a forked child).
#[inline]
pub(crate) fn active() -> Option<Active> {
    let s = STATE.load(Ordering::Acquire);
    if s & 1 == 0 || FORKED.load(Ordering::Relaxed) {
        return None;
    }
    Some(Active {
        generation: (s >> 1) as u32,
        rate: sampler::Rate::from_bits(RATE.load(Ordering::Relaxed)),
    })
}

/// A fresh sample key.
pub(crate) fn next_key() -> u64 {
    NEXT_KEY.fetch_add(1, Ordering::Relaxed)
}

/// Statistics of a finished session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Alloc events written.
    pub allocs: u64,
    /// Collect events written.
    pub collects: u64,
    /// Distinct location codes symbolized.
    pub codes: u64,
}

struct Session {
    generation: u32,
    /// When the session began (its trace's start time), wall-clock µs.
    start_us: i64,
    path: PathBuf,
    pid: i32,
    writers: Vec<Option<Writer<File>>>,
    dirty: Vec<bool>,
    symbolizer: Symbolizer,
    objects: HashMap<u64, ObjId>,
    spare: Vec<u64>,
    callstack: Vec<LocationCode>,
    stats: Stats,
    /// First write error; the session stops writing after it.
    failed: Option<WriteError>,
    thread: Option<JoinHandle<()>>,
}

fn lock_session() -> MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

/// The session lock, if it can be had within `limit`.
fn lock_session_within(limit: Duration) -> Option<MutexGuard<'static, Option<Session>>> {
    let deadline = clock::monotonic_ns().saturating_add(limit.as_nanos() as u64);
    loop {
        match SESSION.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => {}
        }
        if clock::monotonic_ns() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes one line to stderr with a raw `write(2)`: no lock, no allocation
/// beyond the message, so it cannot deadlock with a thread that holds the
/// stderr lock and waits for the tracer. Errors are ignored: there is nowhere
/// else to say anything.
pub(crate) fn report(msg: &str) {
    let line = format!("tracekit-alloc: {msg}\n");
    // SAFETY: writes `line.len()` initialised bytes from a live buffer to fd 2.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Starts a session writing to `path`. The caller checked `rate`.
pub(crate) fn start(path: &Path, rate: f64, context: Option<&str>) -> Result<(), Error> {
    start_inner(path, rate, context)?;
    // The calling thread starts counting now, not after its idle countdown.
    crate::thread::restart_countdown();
    Ok(())
}

fn start_inner(path: &Path, rate: f64, context: Option<&str>) -> Result<(), Error> {
    let _internal = Internal::enter();
    if FORKED.load(Ordering::Relaxed) {
        return Err(Error::ForkedChild);
    }
    install_hooks();
    install_panic_hook();
    let mut guard = lock_session();
    if guard.is_some() {
        return Err(Error::AlreadyTracing);
    }
    let file = open_trace_file(path)?;
    let pid = getpid();
    let start_us = clock::start_session();
    let info = Info {
        sample_rate: rate,
        word_size: 64,
        executable_name: executable_name().into(),
        host_name: host_name().into(),
        // The tracer's own parameters, where OCaml puts OCAMLRUNPARAM.
        ocaml_runtime_params: runtime_params().into(),
        pid: i64::from(pid),
        initial_domain: DomainId::MAIN,
        start_time: Timestamp::from_micros(start_us),
        context: context.map(Into::into),
    };
    let options = WriterOptions::new().getpid(|| i64::from(getpid()));
    let main = Writer::with_options(file, &info, options).map_err(|e| Error::Write {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut writers: Vec<Option<Writer<File>>> = (0..slots::MAX_SLOTS).map(|_| None).collect();
    writers[0] = Some(main);

    // Forget what earlier sessions left behind, then go live.
    slots::reset_all();
    table::clear();
    let generation = ((STATE.load(Ordering::Relaxed) >> 1) as u32)
        .wrapping_add(1)
        .max(1);
    RATE.store(sampler::Rate::new(rate).to_bits(), Ordering::Relaxed);
    // Unnamed to std: a named thread allocates a copy of its name as it
    // starts, before `background` can mark it the tracer's, and that would be
    // sampled. `background` names it for the system instead.
    let thread = std::thread::Builder::new()
        .spawn(move || background(generation))
        .map_err(Error::Thread)?;
    *guard = Some(Session {
        generation,
        start_us,
        path: path.to_path_buf(),
        pid,
        writers,
        dirty: vec![false; slots::MAX_SLOTS],
        symbolizer: Symbolizer::new(),
        objects: HashMap::new(),
        spare: Vec::new(),
        callstack: Vec::new(),
        stats: Stats::default(),
        failed: None,
        thread: Some(thread),
    });
    STATE.store(u64::from(generation) << 1 | 1, Ordering::Release);
    Ok(())
}

/// Stops the active session: writes out everything queued, flushes and closes
/// the file. `join` waits for the background thread to end.
pub(crate) fn stop(join: bool) -> Result<Stats, Error> {
    if FORKED.load(Ordering::Relaxed) {
        // In a forked child the session lock may be held for ever by a
        // parent thread that does not exist here, and so may the writers'.
        return Err(Error::ForkedChild);
    }
    let _internal = Internal::enter();
    finish(lock_session(), join)
}

/// [`stop`] with the session lock taken.
fn finish(mut guard: MutexGuard<'static, Option<Session>>, join: bool) -> Result<Stats, Error> {
    let Some(mut session) = guard.take() else {
        return Err(Error::NotTracing);
    };
    // New samples are no longer recorded.
    STATE.store(u64::from(session.generation) << 1, Ordering::Release);
    let forked = FORKED.load(Ordering::Relaxed) || session.pid != getpid();
    let mut result = Ok(session.stats);
    if !forked {
        session.process();
        let mut first_error = session.failed.take();
        // Close through domain 0 last: closing flushes and shuts the shared
        // file for every domain writer.
        for w in session.writers.iter_mut().skip(1) {
            if let Some(mut w) = w.take()
                && let Err(e) = w.flush()
            {
                first_error.get_or_insert(e);
            }
        }
        if let Some(w) = session.writers[0].take()
            && let Err(e) = w.close()
        {
            first_error.get_or_insert(e);
        }
        if let Some(e) = first_error {
            result = Err(Error::Write {
                path: session.path.clone(),
                source: e,
            });
        } else {
            result = Ok(session.stats);
        }
    } else {
        // A forked child must not write the parent's buffered packets.
        for w in session.writers.iter_mut() {
            if let Some(w) = w.take() {
                std::mem::forget(w);
            }
        }
    }
    let thread = session.thread.take();
    drop(session);
    drop(guard);
    wake();
    if join && let Some(t) = thread {
        let _ = t.join();
    }
    result
}

/// True while a session is active in this process.
pub(crate) fn tracing() -> bool {
    active().is_some()
}

/// Wakes the background thread now.
pub(crate) fn wake() {
    let mut w = WAKE.lock().unwrap_or_else(|e| e.into_inner());
    *w = true;
    WAKE_CV.notify_one();
}

/// Drains the queues on the calling thread (a queue grew past its hard
/// limit faster than the background thread empties them).
pub(crate) fn drain_now() {
    let _internal = Internal::enter();
    let mut guard = lock_session();
    if let Some(s) = guard.as_mut() {
        s.process();
    }
}

fn background(generation: u32) {
    Internal::enter_forever();
    // SAFETY: the name is a NUL-terminated string of 15 bytes, within the
    // system's 16, and `pthread_self` is this running thread.
    unsafe {
        libc::pthread_setname_np(libc::pthread_self(), c"tracekit-alloc".as_ptr());
    }
    loop {
        {
            let w = WAKE.lock().unwrap_or_else(|e| e.into_inner());
            let (mut w, _) = WAKE_CV
                .wait_timeout_while(
                    w,
                    Duration::from_millis(FLUSH_MS.load(Ordering::Relaxed)),
                    |pending| !*pending,
                )
                .unwrap_or_else(|e| e.into_inner());
            *w = false;
        }
        let mut guard = lock_session();
        match guard.as_mut() {
            Some(s) if s.generation == generation => s.process(),
            _ => return,
        }
    }
}

impl Session {
    /// Writes every queued record, then flushes the domains that got events.
    fn process(&mut self) {
        if self.failed.is_some() {
            // Keep the queues from growing; the events cannot be written.
            slots::drain(&mut self.spare, |_, _| {});
            return;
        }
        let mut spare = std::mem::take(&mut self.spare);
        slots::drain(&mut spare, |slot, words| {
            for record in slots::records(words) {
                if let Err(e) = self.write_record(slot, record) {
                    self.fail(e);
                    return;
                }
            }
        });
        self.spare = spare;
        for i in 0..self.writers.len() {
            if std::mem::take(&mut self.dirty[i])
                && let Some(w) = self.writers[i].as_mut()
                && let Err(e) = w.flush()
            {
                self.fail(e);
                return;
            }
        }
    }

    fn fail(&mut self, e: WriteError) {
        if self.failed.is_none() {
            if !matches!(e, WriteError::PidChanged) {
                report(&format!(
                    "error writing {}: {e}; tracing stopped, the program runs on untraced",
                    self.path.display()
                ));
            }
            STATE.store(u64::from(self.generation) << 1, Ordering::Release);
            self.failed = Some(e);
        }
    }

    fn writer(&mut self, slot: SlotId) -> Result<&mut Writer<File>, WriteError> {
        let i = slot.index();
        self.dirty[i] = true;
        domain_writer(&mut self.writers, i, self.start_us)
    }

    fn write_record(&mut self, slot: SlotId, record: Record<'_>) -> Result<(), WriteError> {
        match record {
            Record::Alloc {
                generation,
                key,
                time,
                words,
                nsamples,
                frames,
            } => {
                if generation != self.generation {
                    return Ok(());
                }
                // Trim the tracer's own frames off the innermost end.
                let mut skip = 0;
                while skip < frames.len() && self.symbolizer.code(frames[skip]).internal {
                    skip += 1;
                }
                let mut callstack = std::mem::take(&mut self.callstack);
                callstack.clear();
                callstack.extend(frames[skip..].iter().map(|&f| LocationCode::new(f as i64)));
                let symbolizer = &mut self.symbolizer;
                let writer = {
                    let i = slot.index();
                    self.dirty[i] = true;
                    domain_writer(&mut self.writers, i, self.start_us)?
                };
                let result = writer.put_alloc(
                    Timestamp::from_micros(time),
                    words,
                    nsamples,
                    AllocationSource::External,
                    &callstack,
                    |code: LocationCode| to_memtrace(&symbolizer.code(code.get() as u64).locations),
                );
                self.callstack = callstack;
                let id = result?;
                self.objects.insert(key, id);
                self.stats.allocs += 1;
                self.stats.codes = self.symbolizer.len() as u64;
            }
            Record::Collect {
                generation,
                key,
                time,
            } => {
                if generation != self.generation {
                    return Ok(());
                }
                if let Some(id) = self.objects.remove(&key) {
                    self.writer(slot)?
                        .put_collect(Timestamp::from_micros(time), id)?;
                    self.stats.collects += 1;
                }
            }
        }
        Ok(())
    }
}

/// A code's locations as the trace stores them, shortened when they would
/// not fit in a location event ([`fit`]).
fn to_memtrace(locations: &[crate::symbolize::Location]) -> Vec<MtLocation> {
    let mut locs: Vec<MtLocation> = locations
        .iter()
        .map(|l| MtLocation {
            filename: l.filename.as_str().into(),
            line: l.line,
            // Rust knows a column, not a range: the range is that column.
            start_char: l.column,
            end_char: l.column,
            defname: l.defname.as_str().into(),
        })
        .collect();
    fit(&mut locs);
    locs
}

/// Shortens `locs` (caller first) until a writer sends them as they are:
/// a list too long for a location event would be written as `??` (the
/// format's unknown location), losing the frame and all inlined into it.
/// Deep chains of inlined generic functions (`vec![x; n]` in an iterator
/// closure) reach that. First the generic arguments go from the names; then
/// the standard library's frames between the outermost and the innermost
/// frame not of it (what a site and a stack from `main` are named by); then
/// frames from the middle, outermost and innermost kept.
fn fit(locs: &mut Vec<MtLocation>) {
    if tracekit_memtrace::location_list_fits(locs) {
        return;
    }
    for l in locs.iter_mut() {
        let short = tracekit_symbols::names::short_name(&l.defname.to_string());
        l.defname = short.as_str().into();
    }
    if tracekit_memtrace::location_list_fits(locs) {
        return;
    }
    let is_std = |l: &MtLocation| l.filename.starts_with(b"/rustc/");
    let mut i = 1;
    while i + 1 < locs.len() && !tracekit_memtrace::location_list_fits(locs) {
        let own = locs.iter().rposition(|l| !is_std(l));
        if is_std(&locs[i]) && Some(i) != own {
            locs.remove(i);
        } else {
            i += 1;
        }
    }
    while locs.len() > 2 && !tracekit_memtrace::location_list_fits(locs) {
        locs.remove(locs.len() / 2);
    }
}

/// Opens the trace file as memtrace does: created with mode 0600, locked
/// against a second tracer, then truncated.
fn open_trace_file(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let io_err = |e| Error::Open {
        path: path.to_path_buf(),
        source: e,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(io_err)?;
    // SAFETY: `file` owns a valid descriptor for the duration of the call.
    if unsafe { libc::lockf(file.as_raw_fd(), libc::F_TLOCK, 0) } != 0 {
        return Err(Error::Locked(path.to_path_buf()));
    }
    // Errors ignored, as memtrace does, so that /dev/null works.
    let _ = file.set_len(0);
    Ok(file)
}

/// The writer of domain slot `i`, made on first use from the main writer
/// (slot 0). From the session's start (`start_us`): a thread's first records
/// may be older than what the main writer wrote last, and are not to be dated
/// at it.
fn domain_writer(
    writers: &mut [Option<Writer<File>>],
    i: usize,
    start_us: i64,
) -> Result<&mut Writer<File>, WriteError> {
    if writers.get(i).is_some_and(Option::is_none) {
        let main = writers
            .first()
            .and_then(Option::as_ref)
            .ok_or(WriteError::Closed)?;
        let since = Timestamp::from_micros(start_us);
        let w = main.for_domain_since(DomainId::new(i as u16), since)?;
        writers[i] = Some(w);
    }
    writers
        .get_mut(i)
        .and_then(Option::as_mut)
        .ok_or(WriteError::Closed)
}

fn runtime_params() -> String {
    let unwinder = match crate::unwind::unwinder() {
        crate::Unwinder::FramePointers => "fp",
        crate::Unwinder::Dwarf => "dwarf",
    };
    format!(
        "tracekit-alloc={} unwinder={unwinder} monotonic_offset_us={}",
        env!("CARGO_PKG_VERSION"),
        clock::offset_us()
    )
}

fn executable_name() -> String {
    match std::env::current_exe() {
        Ok(p) => p.to_string_lossy().into_owned(),
        // `args` would panic on an argument that is not UTF-8.
        Err(_) => std::env::args_os()
            .next()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes a
    // NUL-terminated name into it (truncated if needed).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

extern "C" fn at_fork_child() {
    // Only an atomic store: this runs in the child right after fork, where
    // locks held by other parent threads are stuck for ever.
    FORKED.store(true, Ordering::Relaxed);
}

extern "C" fn at_exit() {
    // `exit` called from a signal handler that interrupted the tracer on this
    // thread: the locks it holds would deadlock the flush.
    if FORKED.load(Ordering::Relaxed) || crate::thread::in_tracer() {
        return;
    }
    let _ = stop(false);
}

/// The panic hook's own part, run after the hook installed before it.
///
/// With `panic = "abort"` the process dies as soon as the hooks return, and
/// neither the exit hook nor the background thread get another chance: this
/// stops the session, writing out everything queued, and closes the file.
///
/// With unwinding, the panic may be caught (`catch_unwind`, or a thread that
/// ends while the rest of the program goes on), so stopping would lose the
/// rest of the run. This only writes out what was queued and flushes it, and
/// tracing goes on; a panic that reaches the end of `main` still leaves
/// through `exit` and the exit hook. The flush is not wasted: a panic while
/// unwinding, or one that leaves an `extern "C"` function, aborts right after
/// the hooks, and the file then already holds every event up to the panic.
fn at_panic() {
    if FORKED.load(Ordering::Relaxed) || !tracing() {
        return;
    }
    // The tracer itself panicked (on its background thread or in the
    // bookkeeping of a sample). This thread may hold the session lock or a
    // slot queue's lock, which are not reentrant, and what they guard may be
    // half updated: leave it all alone.
    if crate::thread::in_tracer() {
        return;
    }
    let _internal = Internal::enter();
    // Other holders of the session lock (the background thread, a thread
    // draining a full queue, `stop_tracing`) only wait, while they hold it,
    // for slot queue locks (never held by a thread outside the tracer, and
    // this one is not inside it), the file and the allocator. The allocator
    // is the one way back to this thread: if it panicked inside the wrapped
    // allocator while holding the allocator's own lock, the holder waits
    // for this thread for ever. Hence a bounded wait rather than `lock`.
    let Some(mut guard) = lock_session_within(PANIC_FLUSH_WAIT) else {
        report(
            "could not flush the trace at a panic (the tracer is busy); \
             events since the last flush may be missing",
        );
        return;
    };
    if cfg!(panic = "abort") {
        // Errors were reported when they happened, and the process is going.
        let _ = finish(guard, false);
    } else if let Some(session) = guard.as_mut() {
        session.process();
    }
}

/// Installs the panic hook ([`at_panic`]) once, chained after whatever hook
/// is installed at that point.
fn install_panic_hook() {
    // `take_hook` and `set_hook` panic on a panicking thread (a session
    // started from a destructor while unwinding): a later start installs it.
    if std::thread::panicking() || PANIC_HOOK.swap(true, Ordering::AcqRel) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        at_panic();
    }));
}

fn install_hooks() {
    HOOKS.call_once(|| {
        // SAFETY: both callbacks are `extern "C"` functions with no arguments
        // that live for the whole program; registering them has no other
        // precondition. Failure (out of memory) only loses the hook.
        unsafe {
            libc::pthread_atfork(None, None, Some(at_fork_child));
            libc::atexit(at_exit);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(defname: &str, filename: &str) -> MtLocation {
        MtLocation {
            filename: filename.into(),
            line: 3,
            start_char: 1,
            end_char: 1,
            defname: defname.into(),
        }
    }

    #[test]
    fn a_list_too_long_for_its_event_is_shortened_not_lost() {
        let generic = format!("collect<{}>", "core::iter::Map<u32>, ".repeat(40));
        let std_file = "/rustc/0123456789abcdef/library/alloc/src/vec/mod.rs";
        let mut locs = vec![loc("app::churn", "src/main.rs")];
        locs.extend((0..30).map(|_| loc(&generic, std_file)));
        locs.push(loc("app::churn::{closure#0}", "src/main.rs"));
        locs.extend((0..30).map(|_| loc(&generic, std_file)));
        assert!(!tracekit_memtrace::location_list_fits(&locs));
        fit(&mut locs);
        assert!(tracekit_memtrace::location_list_fits(&locs));
        let names: Vec<String> = locs.iter().map(|l| l.defname.to_string()).collect();
        assert_eq!(names.first().map(String::as_str), Some("app::churn"));
        assert!(
            names.contains(&"app::churn::{closure#0}".to_owned()),
            "{names:?}"
        );
        assert_eq!(names.last().map(String::as_str), Some("collect"));

        // A list that fits is left alone, generic arguments and all.
        let mut small = vec![loc("f<u8>", "src/main.rs"), loc("g", "src/main.rs")];
        fit(&mut small);
        assert_eq!(small[0].defname.to_string(), "f<u8>");
    }
}
