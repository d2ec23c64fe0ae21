//! The call-stack state machine: turns branch, sample and error events into begin/end
//! slices per thread (magic-trace's `Trace_writer`, `src/trace_writer.ml` in
//! janestreet/magic-trace).
//!
//! Per perf thread it keeps the current call stack, a stack of inactive call stacks
//! (code interrupted by a system call or an interrupt), the events of the current
//! timestamp (written when time moves on, spread evenly over the calls among them) and
//! the deferred "start events" (frames inferred to have begun before the trace, and
//! calls at time zero) that are only written when the thread ends.
//!
//! Every rule of the reference is here: tr start/end with `[untraced]`, `[syscall]` and
//! `[returned]` frames, tail-call and PLT repair, returns past the known stack (inferred
//! frames, `[unknown]` slices), decode errors (instant, flush, reset), the 1 ns nudge
//! after an error, even spreading with returns taking no time, end of trace, OCaml
//! exception unwinding with and without trap information, Go's `gogo`, trace scopes,
//! TSX transactions, snapshot hits and filter regions. Where the reference raises on an
//! event it thought impossible, this writer warns once and carries on.

use std::collections::VecDeque;

use crate::event::{
    Address, Branch, BranchKind, CountedEvent, DecodeError, Event, Location, SampleData, Thread,
    Time, TraceStateChange,
};
use crate::ocaml::{OcamlExceptionInfo, TrapKind};
use crate::resolved::{self, Frame, Observer, Resolved, ResolvedData};
use crate::sink::{Arg, ProcessRef, Sink, TrackRef};
use crate::symbol::{FxHashMap, SymbolId, SymbolTable};

/// Which address spaces were traced (`-trace-include-kernel`, `-trace-kernel-only`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TraceScope {
    /// User space only (perf's `/u`).
    #[default]
    User,
    /// Kernel only (`/k`).
    Kernel,
    /// User space and kernel (`/uk`).
    #[cfg_attr(feature = "clap", value(name = "user+kernel"))]
    UserAndKernel,
}

/// How many frames from the root of `stack` a new sample's `frames` (root first)
/// leave unchanged: the same address, and for inlined frames, which share their
/// caller's address, the same symbol too.
fn unchanged(stack: &[Frame], frames: &[Frame]) -> usize {
    stack
        .iter()
        .zip(frames)
        .take_while(|(a, b)| a.ip == b.ip && (!(a.inlined || b.inlined) || a.symbol == b.symbol))
        .count()
}

impl TraceScope {
    /// Whether a frame at `ip` belongs to this scope's address spaces.
    pub fn keeps(self, ip: Address) -> bool {
        match self {
            TraceScope::User => !ip.is_kernel(),
            TraceScope::Kernel => ip.is_kernel(),
            TraceScope::UserAndKernel => true,
        }
    }

    /// magic-trace's constructor name.
    pub(crate) fn sexp_name(self) -> &'static str {
        match self {
            TraceScope::User => "Userspace",
            TraceScope::Kernel => "Kernel",
            TraceScope::UserAndKernel => "Userspace_and_kernel",
        }
    }
}

/// Settings of a [`TraceWriter`].
#[derive(Clone, Debug)]
pub struct Config {
    /// The trace scope.
    pub scope: TraceScope,
    /// Append ` [inferred start time]` to the names of inferred frames.
    pub annotate_inferred_start_times: bool,
    /// OCaml trap tables, when known (changes exception unwinding).
    pub ocaml_exception_info: Option<OcamlExceptionInfo>,
    /// Queue TSX transaction events until the transaction commits or aborts.
    pub transactions: bool,
    /// How sampled call stacks become slices.
    pub sample_timing: SampleTiming,
}

/// How sampled call stacks (not branches) become slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleTiming {
    /// Sample-accurate: a sample's stack is open from its timestamp until the next
    /// sample of its thread changes it, and every frame that ends or begins at a sample
    /// does so at that sample's instant. A thread not sampled for more than two
    /// periods was not running: its frames close one period after its last sample
    /// (and at the end of the trace, one period after it), so idle time does not look
    /// like work. Frames outside the trace scope (kernel frames under
    /// [`TraceScope::User`], user frames under [`TraceScope::Kernel`]) are left out.
    Accurate {
        /// The sampling period; `None`: the median of the gaps seen between samples
        /// of one thread (the first 1,024 gaps), and no idle detection before 16 are
        /// known.
        period: Option<Time>,
    },
    /// magic-trace's rule, meant for branches: the calls of one timestamp are spread
    /// over the time to the next event, so a new stack opens as a staircase, and
    /// frames inferred at the end are written last.
    MagicTrace,
}

impl Default for SampleTiming {
    fn default() -> Self {
        SampleTiming::Accurate { period: None }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scope: TraceScope::User,
            annotate_inferred_start_times: false,
            ocaml_exception_info: None,
            transactions: true,
            sample_timing: SampleTiming::default(),
        }
    }
}

/// A breakpoint hit drawn on the "Snapshot symbol hits" track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The symbol whose breakpoint fired.
    pub symbol: String,
    /// When (perf clock).
    pub time: Time,
    /// The thread that hit it.
    pub tid: u32,
    /// Where.
    pub ip: Address,
    /// For the stop indicator: the start time passed by the program (perf clock).
    pub passed_time: Option<Time>,
    /// For the stop indicator: the value passed by the program.
    pub passed_value: Option<i64>,
}

/// Something worth telling the user; [`std::fmt::Display`] gives magic-trace's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// perf reported a decode error.
    DecodeError {
        /// perf's message.
        message: String,
        /// Where, when known.
        ip: Option<Address>,
    },
    /// A decode error arrived inside a TSX transaction; its queued events were dropped.
    DroppedTransaction,
    /// An event that cannot happen in the configured trace scope.
    ScopeViolation {
        /// The scope.
        scope: TraceScope,
        /// The event, as an S-expression.
        event: String,
    },
    /// A branch the reference treats as impossible; it was handled as described.
    UnexpectedBranch {
        /// The event, as an S-expression.
        event: String,
        /// What was done instead.
        handled_as: &'static str,
    },
    /// OCaml trap tracking found a stack depth it did not expect (printed once).
    TrapDepth {
        /// The unexpected depth.
        depth: i64,
    },
    /// The input names threads without their process (perf script's default
    /// layout): threads are grouped into processes by command name (printed once).
    GroupedByCommand,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::DecodeError { message, ip: None } => write!(
                f,
                "Warning: perf reported an error decoding the trace: '{message}'"
            ),
            Warning::DecodeError {
                message,
                ip: Some(ip),
            } => write!(
                f,
                "Warning: perf reported an error decoding the trace: '{message}' @ IP {ip}."
            ),
            Warning::DroppedTransaction => write!(
                f,
                "Warning: error received during transaction, dropping all transaction events"
            ),
            Warning::ScopeViolation { scope, event } => write!(
                f,
                "(\"BUG: assumptions violated, saw an unexpected event for this trace mode\" (trace_scope {}) (event {event}))",
                scope.sexp_name()
            ),
            Warning::UnexpectedBranch { event, handled_as } => write!(
                f,
                "Warning: unexpected branch, handled as {handled_as}: {event}"
            ),
            Warning::TrapDepth { depth } => write!(
                f,
                "(\"WARNING: expected callstack depth to be the same going into a [try] block as when leaving it, but it wasn't. Did Intel Processor Trace drop some data? Will attempt to recover. Further errors will be suppressed.\\n\" (depth {depth}))"
            ),
            Warning::GroupedByCommand => write!(
                f,
                "Warning: the input gives no process ids (perf script's default fields): threads are grouped into processes by command name"
            ),
        }
    }
}

#[derive(Clone, Debug)]
struct Callstack {
    frames: Vec<Frame>,
    create_time: Time,
}

impl Callstack {
    fn new(create_time: Time) -> Self {
        Callstack {
            frames: Vec::new(),
            create_time,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Pending {
    Call { frame: Frame, inferred: bool },
    Ret { symbol: SymbolId },
    RetUnknown { reset: Time },
}

#[derive(Clone, Copy, Debug)]
enum OcamlState {
    /// Counting frames to unwind (no trap tables).
    Counting(i64),
    /// With trap tables: the last destination seen.
    Traps(Option<Address>),
}

struct ThreadState {
    thread: Thread,
    track: TrackRef,
    process: ProcessRef,
    callstack: Callstack,
    inactive: Vec<Callstack>,
    last_decode_error_time: Time,
    ocaml: OcamlState,
    pending: Vec<Pending>,
    pending_time: Time,
    start_events: VecDeque<(Time, Pending)>,
    last_event_time: Time,
    extra_tracks: [Option<TrackRef>; 2],
    /// Sample-accurate timing: the mapped time of the thread's last call-stack sample.
    last_sample: Option<Time>,
}

/// What groups threads into one process: the pid, or without one the command name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ProcessKey {
    Pid(u32),
    Command(Box<str>),
}

/// The sampling period estimated from the gaps between samples of one thread.
#[derive(Debug, Default)]
struct GapEstimate {
    /// Sorted; at most [`GapEstimate::KEPT`].
    gaps: Vec<i64>,
    seen: usize,
}

impl GapEstimate {
    const KEPT: usize = 1024;
    const NEEDED: usize = 16;

    fn add(&mut self, gap: i64) {
        if self.seen < Self::KEPT && gap > 0 {
            let i = self.gaps.partition_point(|&g| g < gap);
            self.gaps.insert(i, gap);
        }
        self.seen += 1;
    }

    fn period(&self) -> Option<Time> {
        (self.gaps.len() >= Self::NEEDED).then(|| Time(self.gaps[self.gaps.len() / 2]))
    }
}

const INFERRED_SUFFIX: &str = " [inferred start time]";

/// The trace writer. Feed it events in input order with [`TraceWriter::write_event`],
/// then call [`TraceWriter::finish`].
pub struct TraceWriter<S: Sink> {
    sink: S,
    config: Config,
    symbols: SymbolTable,
    threads: Vec<ThreadState>,
    index: FxHashMap<Thread, usize>,
    last_thread: Option<(Thread, usize)>,
    base_time: Time,
    in_filtered_region: bool,
    transaction: Vec<(Resolved, bool)>,
    warnings: Vec<Warning>,
    warned_trap_depth: bool,
    warned_unexpected: bool,
    final_flush: bool,
    name_buf: String,
    processes: FxHashMap<ProcessKey, ProcessRef>,
    warned_grouped: bool,
    gaps: GapEstimate,
    /// The in-scope frames of the sample being written (kept for its allocation).
    scratch: Vec<Frame>,
}

impl<S: Sink> TraceWriter<S> {
    /// A writer whose output times are relative to `base_time` (perf clock; usually the
    /// first event's time).
    pub fn new(sink: S, config: Config, base_time: Time) -> Self {
        TraceWriter {
            sink,
            config,
            symbols: SymbolTable::new(),
            threads: Vec::new(),
            index: FxHashMap::default(),
            last_thread: None,
            base_time,
            in_filtered_region: true,
            transaction: Vec::new(),
            warnings: Vec::new(),
            warned_trap_depth: false,
            warned_unexpected: false,
            final_flush: false,
            name_buf: String::new(),
            processes: FxHashMap::default(),
            warned_grouped: false,
            gaps: GapEstimate::default(),
            scratch: Vec::new(),
        }
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, mutably.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The interned symbols.
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    /// Warnings produced since the last call, oldest first.
    pub fn drain_warnings(&mut self) -> std::vec::Drain<'_, Warning> {
        self.warnings.drain(..)
    }

    /// Draws breakpoint hits on a "Snapshot symbol hits" track (magic-trace's trigger
    /// hits). Call before any event.
    pub fn write_hits(&mut self, hits: &[Hit], stop_symbol: &str) {
        if hits.is_empty() {
            return;
        }
        let process = self.sink.add_process("Snapshot symbol hits", None);
        let track = self.sink.add_thread(process, "hits", None);
        for hit in hits {
            let is_stop = hit.symbol == stop_symbol;
            let name = format!("hit {}", hit.symbol);
            let time = self.map_time(hit.time);
            let mut args: Vec<Arg<'_>> = Vec::with_capacity(5);
            if is_stop {
                args.push(Arg::int(
                    "timestamp_passed",
                    hit.passed_time.map_or(0, |t| t.0),
                ));
                args.push(Arg::int("arg", hit.passed_value.unwrap_or(0)));
            }
            args.push(Arg::int("timestamp", hit.time.0));
            args.push(Arg::int("tid", i64::from(hit.tid)));
            args.push(Arg::pointer("ip", hit.ip));
            // The stop indicator's passed time marks the start of the region of interest.
            let start = match hit.passed_time {
                Some(p) if is_stop && p > self.base_time && p < hit.time => self.map_time(p),
                _ => time,
            };
            if self.in_filtered_region {
                self.sink.complete(track, start, time, &name, &args);
            }
        }
    }

    /// Sets the time base (perf clock) before the first event.
    pub fn set_base_time(&mut self, base_time: Time) {
        self.base_time = base_time;
    }

    fn map_time(&self, t: Time) -> Time {
        Time(t.0.wrapping_sub(self.base_time.0))
    }

    fn warn_unexpected(&mut self, event: &Resolved, handled_as: &'static str) {
        if !self.warned_unexpected {
            self.warned_unexpected = true;
            let event = resolved::to_sexp(event);
            self.warnings
                .push(Warning::UnexpectedBranch { event, handled_as });
        }
    }

    // ---- resolving events -------------------------------------------------------------

    fn frame_of(&mut self, loc: &Location<'_>, hint: Option<SymbolId>) -> Frame {
        Frame {
            ip: loc.ip,
            symbol: self.symbols.intern(loc, hint),
            offset: loc.offset,
            inlined: loc.inlined,
        }
    }

    /// `s` resolved against the symbols; `ti` is its thread.
    fn resolve_sample(&mut self, s: &crate::event::Sample<'_>, ti: usize) -> Resolved {
        let data = match &s.data {
            SampleData::Branch(Branch {
                trace_state_change,
                kind,
                src,
                dst,
            }) => {
                // The symbol on top of the stack, which most branches stay within.
                let hint = self.threads[ti].callstack.frames.last().map(|f| f.symbol);
                ResolvedData::Branch {
                    trace_state_change: *trace_state_change,
                    kind: *kind,
                    src_ip: src.ip,
                    dst: self.frame_of(dst, hint),
                }
            }
            SampleData::Power { freq_mhz } => ResolvedData::Power {
                freq_mhz: *freq_mhz,
            },
            SampleData::Callstack(frames) => {
                let mut out = Vec::with_capacity(frames.len());
                for f in frames {
                    out.push(self.frame_of(f, None));
                }
                ResolvedData::Callstack(out)
            }
            SampleData::Counted(e) => ResolvedData::Counted {
                location: self.frame_of(&e.location, None),
                count: e.count,
                name: e.name,
            },
        };
        Resolved {
            thread: s.thread,
            time: s.time,
            in_transaction: s.in_transaction,
            data,
        }
    }

    // ---- the TSX layer ----------------------------------------------------------------

    /// Processes one event. `should_write` is the filter decision (true without
    /// `-filter`).
    pub fn write_event(&mut self, event: &Event<'_>, should_write: bool) {
        self.write_event_observed(event, should_write, &mut ());
    }

    /// [`Self::write_event`], showing `observer` each event processed in the filter's
    /// region (events queued in a TSX transaction are shown when they are processed).
    // Not `#[inline]`: inlined into the decoder's loop it kept resolving and the TSX
    // layer out of line, which cost the FXT decode more (docs/performance.md).
    pub(crate) fn write_event_observed(
        &mut self,
        event: &Event<'_>,
        should_write: bool,
        observer: &mut impl Observer,
    ) {
        match event {
            Event::Sample(s) => {
                let ti = self.thread_index(s.thread, Some(s.time), s.comm);
                let r = self.resolve_sample(s, ti);
                self.write_resolved(r, should_write, observer);
            }
            Event::DecodeError(e) => {
                if self.config.transactions && !self.transaction.is_empty() {
                    self.warnings.push(Warning::DroppedTransaction);
                    self.transaction.clear();
                }
                self.write_error(e, should_write);
            }
        }
    }

    fn write_resolved(&mut self, r: Resolved, should_write: bool, observer: &mut impl Observer) {
        if !self.config.transactions {
            return self.process(&r, should_write, observer);
        }
        let is_abort = matches!(
            r.data,
            ResolvedData::Branch {
                kind: Some(BranchKind::TxAbort),
                ..
            }
        );
        if is_abort {
            self.transaction.clear();
            self.process(&r, should_write, observer);
        } else if r.in_transaction {
            self.transaction.push((r, should_write));
        } else {
            if !self.transaction.is_empty() {
                let queued = std::mem::take(&mut self.transaction);
                for (q, w) in &queued {
                    self.process(q, *w, observer);
                }
            }
            self.process(&r, should_write, observer);
        }
    }

    // ---- threads and time ---------------------------------------------------------------

    fn create_thread(&mut self, thread: Thread, time: Option<Time>, comm: Option<&str>) -> usize {
        let effective = time.map_or(Time::ZERO, |t| self.map_time(t));
        let process = self.process_of(thread, comm);
        let name = match (comm, thread.tid) {
            (Some(c), _) => c.to_string(),
            (None, Some(tid)) => format!("[tid={tid}]"),
            (None, None) => "[unknown thread]".to_string(),
        };
        let track = self.sink.add_thread(process, &name, thread.tid);
        let ocaml = match self.config.ocaml_exception_info {
            Some(_) => OcamlState::Traps(None),
            None => OcamlState::Counting(0),
        };
        let ti = self.threads.len();
        self.threads.push(ThreadState {
            thread,
            track,
            process,
            callstack: Callstack::new(effective),
            inactive: Vec::new(),
            last_decode_error_time: effective,
            ocaml,
            pending: Vec::new(),
            pending_time: Time::ZERO,
            start_events: VecDeque::new(),
            last_event_time: effective,
            extra_tracks: [None; 2],
            last_sample: None,
        });
        self.index.insert(thread, ti);
        ti
    }

    /// The process `thread` belongs to, created on first sight: one per pid, named
    /// after the command of its first thread seen; without a pid (perf script's
    /// default fields print none), one per command name, which a warning says once.
    fn process_of(&mut self, thread: Thread, comm: Option<&str>) -> ProcessRef {
        let key = match thread.pid {
            Some(pid) => ProcessKey::Pid(pid),
            None => ProcessKey::Command(comm.unwrap_or_default().into()),
        };
        if let Some(&p) = self.processes.get(&key) {
            return p;
        }
        if thread.pid.is_none() && thread.tid.is_some() && !self.warned_grouped {
            self.warned_grouped = true;
            self.warnings.push(Warning::GroupedByCommand);
        }
        let name = match (comm, thread.pid) {
            (Some(c), _) => c.to_string(),
            (None, Some(pid)) => format!("[pid={pid}]"),
            (None, None) => "[unknown process]".to_string(),
        };
        let p = self.sink.add_process(&name, thread.pid);
        self.processes.insert(key, p);
        p
    }

    /// The index in `threads` of `thread`, which is created (named after `comm`, if
    /// given) if it is new. Inline for the common case, the thread of the previous event
    /// (the whole function was too large for the compiler to inline).
    #[inline]
    fn thread_index(&mut self, thread: Thread, time: Option<Time>, comm: Option<&str>) -> usize {
        if let Some((_, ti)) = self.last_thread.filter(|&(t, _)| t == thread) {
            return ti;
        }
        self.thread_index_slow(thread, time, comm)
    }

    #[inline(never)]
    fn thread_index_slow(
        &mut self,
        thread: Thread,
        time: Option<Time>,
        comm: Option<&str>,
    ) -> usize {
        let ti = match self.index.get(&thread) {
            Some(&ti) => ti,
            None => self.create_thread(thread, time, comm),
        };
        self.last_thread = Some((thread, ti));
        ti
    }

    /// The mapped time of an event, with the post-error nudge (magic-trace's
    /// `hack_155`: nothing after a decode error shares its timestamp).
    fn event_time(&mut self, ti: usize, time: Option<Time>) -> Time {
        let t = match time {
            Some(time) => {
                let m = self.map_time(time);
                self.threads[ti].last_event_time = m;
                m
            }
            None => self.threads[ti].last_event_time,
        };
        let last_err = self.threads[ti].last_decode_error_time;
        if t == last_err && last_err != Time::ZERO {
            Time(t.0.saturating_add(1))
        } else {
            t
        }
    }

    // ---- writing pending events ---------------------------------------------------------

    fn write_now(&mut self, ti: usize, time: Time, ev: Pending) {
        if !self.in_filtered_region {
            return;
        }
        let track = self.threads[ti].track;
        match ev {
            Pending::Call { frame, inferred } => {
                let display = self.symbols.name(frame.symbol);
                let annotated = inferred && self.config.annotate_inferred_start_times;
                let name = if annotated {
                    self.name_buf.clear();
                    self.name_buf.push_str(display);
                    self.name_buf.push_str(INFERRED_SUFFIX);
                    self.name_buf.as_str()
                } else {
                    display
                };
                let mut args = [
                    Arg::pointer("address", frame.ip),
                    Arg::str("symbol", display),
                    Arg::str("inferred_start_time", "true"),
                    Arg::str("inlined", "true"),
                ];
                let n = match (inferred, frame.inlined) {
                    (false, false) => 2,
                    (true, false) => 3,
                    (false, true) => {
                        args[2] = args[3];
                        3
                    }
                    (true, true) => 4,
                };
                if annotated {
                    self.sink.begin(track, time, name, &args[..n]);
                } else {
                    self.sink
                        .begin_symbol(track, time, frame.symbol, name, &args[..n]);
                }
            }
            Pending::Ret { symbol } => {
                self.sink
                    .end_symbol(track, time, symbol, self.symbols.name(symbol));
            }
            Pending::RetUnknown { reset } => {
                self.sink.complete(track, reset, time, "[unknown]", &[]);
            }
        }
    }

    fn schedule(&mut self, ti: usize, time: Time, ev: Pending) {
        match ev {
            Pending::RetUnknown { .. } | Pending::Call { inferred: true, .. } => {
                self.threads[ti].start_events.push_front((time, ev));
            }
            Pending::Call { .. } if time == Time::ZERO && !self.final_flush => {
                self.threads[ti].start_events.push_back((time, ev));
            }
            _ => self.write_now(ti, time, ev),
        }
    }

    /// Writes the events of the pending timestamp, spreading the time up to `to` evenly
    /// over the calls among them (returns take no time).
    fn flush(&mut self, ti: usize, to: Time) {
        let pending = std::mem::take(&mut self.threads[ti].pending);
        let from = self.threads[ti].pending_time;
        let count = pending
            .iter()
            .filter(|e| matches!(e, Pending::Call { .. }))
            .count() as i64;
        let total = to.0.wrapping_sub(from.0);
        let mut offset: i64 = 0;
        let mut consumed: i64 = 0;
        for &ev in &pending {
            let share = if matches!(ev, Pending::Call { .. }) {
                consumed += 1;
                // OCaml's integer division truncates toward zero, as Rust's does; its
                // arithmetic wraps, as here.
                total.wrapping_sub(offset) / (count - consumed + 1)
            } else {
                0
            };
            let time = Time(from.0.wrapping_add(offset));
            offset = offset.wrapping_add(share);
            self.schedule(ti, time, ev);
        }
        let t = &mut self.threads[ti];
        t.pending_time = to;
        // Keep the allocation.
        let mut pending = pending;
        pending.clear();
        if t.pending.is_empty() {
            t.pending = pending;
        }
    }

    #[inline]
    fn add(&mut self, ti: usize, time: Time, ev: Pending) {
        if time != self.threads[ti].pending_time {
            self.flush(ti, time);
        }
        self.threads[ti].pending.push(ev);
    }

    // ---- stack operations ---------------------------------------------------------------

    fn call(&mut self, ti: usize, time: Time, frame: Frame) {
        self.add(
            ti,
            time,
            Pending::Call {
                frame,
                inferred: false,
            },
        );
        self.threads[ti].callstack.frames.push(frame);
    }

    /// Pops a frame; an empty stack gives an `[unknown]` slice from the stack's creation.
    fn ret_plain(&mut self, ti: usize, time: Time) {
        let t = &mut self.threads[ti];
        let ev = match t.callstack.frames.pop() {
            Some(f) => Pending::Ret { symbol: f.symbol },
            None => Pending::RetUnknown {
                reset: t.callstack.create_time,
            },
        };
        self.add(ti, time, ev);
    }

    /// [`Self::ret_plain`] plus Go's `gogo`: returning from `gogo` resumes next to the
    /// last `runtime.mcall`/`runtime.morestack.abi0`, or starts afresh.
    fn ret(&mut self, ti: usize, time: Time) {
        let returned_from = self.threads[ti].callstack.frames.last().map(|f| f.symbol);
        self.ret_plain(ti, time);
        if returned_from.is_some_and(|sym| self.symbols.is_perf_named(sym, "gogo")) {
            let has_destination = self.threads[ti]
                .callstack
                .frames
                .iter()
                .any(|f| self.is_gogo_destination(f.symbol));
            if has_destination {
                while let Some(top) = self.threads[ti].callstack.frames.last().copied() {
                    self.ret_plain(ti, time);
                    if self.is_gogo_destination(top.symbol) {
                        // Its caller's frame reappears as the jump back is repaired.
                        self.ret_plain(ti, time);
                        break;
                    }
                }
            } else {
                self.end_of_thread(ti, time, false);
            }
        }
    }

    fn is_gogo_destination(&self, s: SymbolId) -> bool {
        self.symbols.is_perf_named(s, "runtime.mcall")
            || self.symbols.is_perf_named(s, "runtime.morestack.abi0")
    }

    fn clear_callstack(&mut self, ti: usize, time: Time) {
        while !self.threads[ti].callstack.frames.is_empty() {
            self.ret_plain(ti, time);
        }
    }

    fn clear_all_callstacks(&mut self, ti: usize, time: Time) {
        loop {
            self.clear_callstack(ti, time);
            match self.threads[ti].inactive.pop() {
                Some(cs) => self.threads[ti].callstack = cs,
                None => break,
            }
        }
    }

    /// A fresh call stack; frames later inferred on it start at `time` for kernel
    /// addresses and at the last decode error otherwise.
    fn set_callstack(&mut self, ti: usize, is_kernel: bool, time: Time) {
        let t = &mut self.threads[ti];
        let create_time = if is_kernel {
            time
        } else {
            t.last_decode_error_time
        };
        t.callstack = Callstack::new(create_time);
    }

    fn end_of_thread(&mut self, ti: usize, time: Time, is_kernel: bool) {
        let to = self.threads[ti].pending_time;
        let start_events = std::mem::take(&mut self.threads[ti].start_events);
        for &(t, ev) in &start_events {
            self.write_now(ti, t, ev);
        }
        self.clear_all_callstacks(ti, time);
        // Calls still pending at time zero (a thread that never got past its first
        // timestamp) are written in order here; magic-trace defers them to a queue that
        // is never written again, leaving ends without begins.
        self.final_flush = true;
        self.flush(ti, to);
        self.final_flush = false;
        self.threads[ti].last_decode_error_time = time;
        self.set_callstack(ti, is_kernel, time);
    }

    /// Makes the top of the stack `frame`'s symbol: repairs tail calls, PLT jumps and
    /// returns into a frame we never saw called.
    fn check_current_symbol(&mut self, ti: usize, time: Time, frame: Frame) {
        match self.threads[ti].callstack.frames.last() {
            Some(top) if top.symbol != frame.symbol => {
                self.ret(ti, time);
                self.call(ti, time, frame);
            }
            Some(_) => {}
            None => {
                // Returned out of a function called before the trace began: it starts
                // when this stack was created, exactly (not spread).
                let create_time = self.threads[ti].callstack.create_time;
                self.schedule(
                    ti,
                    create_time,
                    Pending::Call {
                        frame,
                        inferred: true,
                    },
                );
                self.threads[ti].callstack.frames.push(frame);
            }
        }
    }

    // ---- OCaml ----------------------------------------------------------------------------

    /// A return, counting the frames an exception unwinds when there are no trap tables.
    fn ret_track_exn_data(&mut self, ti: usize, time: Time) {
        if let OcamlState::Counting(n) = self.threads[ti].ocaml {
            let top = self.threads[ti].callstack.frames.last().map(|f| f.symbol);
            if let Some(top) = top {
                let named = |s: &str| self.symbols.is_perf_named(top, s);
                if named("caml_next_frame_descriptor") || named("caml_stash_backtrace") {
                    self.threads[ti].ocaml = OcamlState::Counting(n + 1);
                } else if named("caml_raise_exn") {
                    self.unwind_stack(ti, time, n, -2);
                } else if named("caml_raise_exception") {
                    self.unwind_stack(ti, time, n, 1);
                }
            }
        }
        self.ret_plain(ti, time);
    }

    fn unwind_stack(&mut self, ti: usize, time: Time, frames: i64, diff: i64) {
        let mut i = 0;
        while i <= frames + diff {
            self.ret_plain(ti, time);
            i += 1;
        }
        self.threads[ti].ocaml = OcamlState::Counting(0);
    }

    fn clear_trap_stack(&mut self, ti: usize, time: Time) {
        self.clear_callstack(ti, time);
        let t = &mut self.threads[ti];
        t.callstack = t.inactive.pop().unwrap_or_else(|| Callstack::new(time));
    }

    fn check_current_symbol_track_entertraps(&mut self, ti: usize, time: Time, dst: Frame) {
        let is_entertrap = matches!(
            (&self.config.ocaml_exception_info, self.threads[ti].ocaml),
            (Some(info), OcamlState::Traps(_)) if info.is_entertrap(dst.ip)
        );
        if is_entertrap {
            // Drop the synthetic bottom frame the pushtrap seeded, then leave the trap.
            let frames = &mut self.threads[ti].callstack.frames;
            if !frames.is_empty() {
                frames.remove(0);
            }
            self.clear_trap_stack(ti, time);
        } else {
            self.check_current_symbol(ti, time, dst);
        }
    }

    fn track_traps(&mut self, ti: usize, src_ip: Address, dst: Address, time: Time) {
        let OcamlState::Traps(last) = self.threads[ti].ocaml else {
            return;
        };
        // Taken out for the loop (which needs `self` mutably) and put back after it.
        let info = match last {
            Some(_) => self.config.ocaml_exception_info.take(),
            None => None,
        };
        if let (Some(last), Some(info)) = (last, info) {
            for &(_, kind) in info.traps_in_range(last, src_ip) {
                match kind {
                    TrapKind::Pushtrap => {
                        let t = &mut self.threads[ti];
                        let top = t.callstack.frames.last().copied();
                        let old = std::mem::replace(&mut t.callstack, Callstack::new(time));
                        t.inactive.push(old);
                        // Seeding with the enclosing frame keeps a `try` body without
                        // calls from inferring frames that do not exist.
                        if let Some(top) = top {
                            t.callstack.frames.push(top);
                        }
                    }
                    TrapKind::Poptrap => {
                        let depth = self.threads[ti].callstack.frames.len();
                        if depth != 1 {
                            if !self.warned_trap_depth {
                                self.warned_trap_depth = true;
                                self.warnings.push(Warning::TrapDepth {
                                    depth: depth as i64 - 1,
                                });
                            }
                        } else {
                            self.threads[ti].callstack.frames.pop();
                            self.clear_trap_stack(ti, time);
                        }
                    }
                }
            }
            self.config.ocaml_exception_info = Some(info);
        }
        self.threads[ti].ocaml = OcamlState::Traps(Some(dst));
    }

    // ---- scopes -----------------------------------------------------------------------

    fn assert_scope(&mut self, event: &Resolved, allowed: &[TraceScope]) {
        if !allowed.contains(&self.config.scope) {
            let event = resolved::to_sexp(event);
            self.warnings.push(Warning::ScopeViolation {
                scope: self.config.scope,
                event,
            });
        }
    }

    // ---- filter regions -----------------------------------------------------------------

    /// Inline, as it runs for every event and nearly always returns at once (the slow
    /// part, out of line, would otherwise cost a call and its register saving each time).
    #[inline]
    fn maybe_start_filtered_region(&mut self, should_write: bool, time: Time) {
        if self.in_filtered_region || !should_write {
            return;
        }
        self.start_filtered_region(time);
    }

    #[inline(never)]
    fn start_filtered_region(&mut self, time: Time) {
        for ti in 0..self.threads.len() {
            self.flush(ti, time);
            self.threads[ti].start_events.clear();
        }
        self.in_filtered_region = true;
        for ti in 0..self.threads.len() {
            // Every frame alive at the region's start begins there, marked inferred.
            let mut stacks = std::mem::take(&mut self.threads[ti].inactive);
            let mut current =
                std::mem::replace(&mut self.threads[ti].callstack, Callstack::new(Time::ZERO));
            for cs in stacks.iter_mut().chain(std::iter::once(&mut current)) {
                for &frame in &cs.frames {
                    self.write_now(
                        ti,
                        time,
                        Pending::Call {
                            frame,
                            inferred: true,
                        },
                    );
                }
                cs.create_time = Time(time.0.wrapping_sub(1));
            }
            self.threads[ti].inactive = stacks;
            self.threads[ti].callstack = current;
        }
    }

    fn maybe_stop_filtered_region(&mut self, should_write: bool) {
        if self.in_filtered_region && !should_write {
            self.end_of_trace(None);
            self.in_filtered_region = false;
        }
    }

    // ---- events -------------------------------------------------------------------------

    fn write_error(&mut self, e: &DecodeError<'_>, should_write: bool) {
        let ti = self.thread_index(e.thread, e.time, None);
        let time = self.event_time(ti, e.time);
        self.maybe_start_filtered_region(should_write, time);
        self.maybe_stop_filtered_region(should_write);
        self.warnings.push(Warning::DecodeError {
            message: e.message.to_string(),
            ip: e.ip,
        });
        if self.in_filtered_region {
            let name = format!("[decode error: {}]", e.message);
            let track = self.threads[ti].track;
            self.sink.instant(track, time, &name, &[]);
        }
        let is_kernel = e.ip.is_some_and(Address::is_kernel);
        self.end_of_thread(ti, time, is_kernel);
    }

    fn process(&mut self, r: &Resolved, should_write: bool, observer: &mut impl Observer) {
        let ti = self.thread_index(r.thread, Some(r.time), None);
        let time = self.event_time(ti, Some(r.time));
        self.maybe_start_filtered_region(should_write, time);
        self.maybe_stop_filtered_region(should_write);
        if should_write {
            observer.event(r, &self.threads[ti].callstack.frames, &self.symbols);
        }
        match &r.data {
            ResolvedData::Counted {
                location,
                count,
                name,
            } => {
                let slot = match name {
                    CountedEvent::BranchMisses => 0,
                    CountedEvent::CacheMisses => 1,
                };
                let track = match self.threads[ti].extra_tracks[slot] {
                    Some(t) => t,
                    None => {
                        let process = self.threads[ti].process;
                        let t = self.sink.add_thread(process, name.name(), None);
                        self.threads[ti].extra_tracks[slot] = Some(t);
                        t
                    }
                };
                if self.in_filtered_region {
                    let thread = self.threads[ti].thread;
                    let mut args = vec![
                        Arg::int("timestamp", time.0),
                        Arg::str("symbol", self.symbols.name(location.symbol)),
                        Arg::pointer("addr", location.ip),
                        Arg::int("count", i64::try_from(*count).unwrap_or(i64::MAX)),
                    ];
                    if let Some(pid) = thread.pid {
                        args.push(Arg::int("pid", i64::from(pid)));
                    }
                    if let Some(tid) = thread.tid {
                        args.push(Arg::int("tid", i64::from(tid)));
                    }
                    self.sink.complete(track, time, time, name.name(), &args);
                }
            }
            ResolvedData::Power { freq_mhz } => {
                if self.in_filtered_region {
                    let track = self.threads[ti].track;
                    self.sink.counter(
                        track,
                        time,
                        "CPU",
                        &[Arg::int("freq (MHz)", i64::from(*freq_mhz))],
                    );
                }
            }
            ResolvedData::Callstack(frames) => {
                if let SampleTiming::Accurate { period } = self.config.sample_timing {
                    // The sample's own time: the nudge after decode errors (which
                    // also moves a thread's first event) is for branch traces.
                    let time = self.map_time(r.time);
                    return self.sample_accurate(ti, time, frames, period);
                }
                let stack = &self.threads[ti].callstack.frames;
                let depth = stack.len();
                let matching = unchanged(stack, frames);
                for _ in matching..depth {
                    self.ret(ti, time);
                }
                let depth = self.threads[ti].callstack.frames.len();
                for &frame in frames.iter().skip(depth) {
                    self.call(ti, time, frame);
                }
            }
            ResolvedData::Branch {
                trace_state_change,
                kind,
                src_ip,
                dst,
            } => {
                self.track_traps(ti, *src_ip, dst.ip, time);
                self.branch(ti, time, r, *kind, *trace_state_change, *dst);
            }
        }
    }

    /// A call-stack sample (`frames` root first) under [`SampleTiming::Accurate`].
    fn sample_accurate(&mut self, ti: usize, time: Time, frames: &[Frame], period: Option<Time>) {
        if let Some(last) = self.threads[ti].last_sample {
            let gap = time.0.wrapping_sub(last.0);
            if period.is_none() {
                self.gaps.add(gap);
            }
            if let Some(p) = period.or_else(|| self.gaps.period())
                && gap > p.0.saturating_mul(2)
            {
                // Not sampled for a while: the thread was not running.
                self.close_sampled(ti, Time(last.0.saturating_add(p.0)), 0);
            }
        }
        self.threads[ti].last_sample = Some(time);
        let scope = self.config.scope;
        let mut kept = std::mem::take(&mut self.scratch);
        kept.clear();
        kept.extend(frames.iter().copied().filter(|f| scope.keeps(f.ip)));
        let matching = unchanged(&self.threads[ti].callstack.frames, &kept);
        self.close_sampled(ti, time, matching);
        for &frame in &kept[matching..] {
            let call = Pending::Call {
                frame,
                inferred: false,
            };
            self.write_now(ti, time, call);
            self.threads[ti].callstack.frames.push(frame);
        }
        self.scratch = kept;
    }

    /// Closes the sampled frames of thread `ti` above the outermost `depth` at
    /// `time`, innermost first.
    fn close_sampled(&mut self, ti: usize, time: Time, depth: usize) {
        while self.threads[ti].callstack.frames.len() > depth {
            if let Some(f) = self.threads[ti].callstack.frames.pop() {
                self.write_now(ti, time, Pending::Ret { symbol: f.symbol });
            }
        }
    }

    fn branch(
        &mut self,
        ti: usize,
        time: Time,
        r: &Resolved,
        kind: Option<BranchKind>,
        change: Option<TraceStateChange>,
        dst: Frame,
    ) {
        use BranchKind as K;
        use TraceScope as S;
        use TraceStateChange as C;
        match (kind, change) {
            (Some(K::Call), None | Some(C::End)) => self.call(ti, time, dst),
            (Some(_), Some(C::Start)) => {
                self.warn_unexpected(r, "a trace start");
                self.branch(ti, time, r, None, Some(C::Start), dst);
            }
            (Some(K::Async), None) => self.warn_unexpected(r, "nothing (ignored)"),
            (Some(K::HardwareInterrupt | K::Jump | K::Interrupt | K::TxAbort), Some(C::End)) => {
                self.warn_unexpected(r, "a trace end");
                self.call(ti, time, Frame::synthetic(SymbolId::UNTRACED));
            }
            (None | Some(K::Async), Some(C::End)) => {
                self.call(ti, time, Frame::synthetic(SymbolId::UNTRACED));
            }
            (Some(K::Syscall), Some(C::End)) => {
                self.assert_scope(r, &[S::User]);
                self.call(ti, time, Frame::synthetic(SymbolId::SYSCALL));
            }
            (Some(K::Return), Some(C::End)) => {
                self.call(ti, time, Frame::synthetic(SymbolId::RETURNED));
            }
            (Some(K::Return), None) => {
                self.ret_track_exn_data(ti, time);
                self.check_current_symbol_track_entertraps(ti, time, dst);
            }
            (None, Some(C::Start)) => {
                if self.config.scope == S::Kernel {
                    self.clear_callstack(ti, time);
                    self.set_callstack(ti, dst.ip.is_kernel(), time);
                } else if self.threads[ti].callstack.frames.is_empty() {
                    self.call(ti, time, dst);
                } else {
                    // Tracing resumes where it stopped: pop the synthetic frame, and do
                    // not treat a restart after a page fault as a tail call.
                    self.ret_track_exn_data(ti, time);
                }
            }
            (Some(k @ (K::Syscall | K::HardwareInterrupt)), None) => {
                if k == K::HardwareInterrupt {
                    self.assert_scope(r, &[S::UserAndKernel, S::Kernel]);
                } else {
                    self.assert_scope(r, &[S::UserAndKernel]);
                }
                let t = &mut self.threads[ti];
                let old = std::mem::replace(&mut t.callstack, Callstack::new(Time::ZERO));
                t.inactive.push(old);
                self.set_callstack(ti, dst.ip.is_kernel(), time);
                self.call(ti, time, dst);
            }
            (Some(K::Iret | K::Sysret), Some(C::End)) => {
                self.assert_scope(r, &[S::Kernel]);
                self.clear_callstack(ti, time);
                self.call(ti, time, Frame::synthetic(SymbolId::UNTRACED));
            }
            (Some(k @ (K::Iret | K::Sysret)), None) => {
                if k == K::Iret {
                    self.assert_scope(r, &[S::UserAndKernel, S::Kernel]);
                } else {
                    self.assert_scope(r, &[S::UserAndKernel]);
                }
                self.clear_callstack(ti, time);
                match self.threads[ti].inactive.pop() {
                    Some(cs) => self.threads[ti].callstack = cs,
                    None => {
                        self.set_callstack(ti, dst.ip.is_kernel(), time);
                        self.check_current_symbol(ti, time, dst);
                    }
                }
            }
            (Some(K::TxAbort), None) => self.check_current_symbol(ti, time, dst),
            (Some(K::Jump | K::Interrupt), None) => {
                self.check_current_symbol_track_entertraps(ti, time, dst);
            }
            (None, None) => {}
        }
    }

    // ---- the end --------------------------------------------------------------------------

    /// Ends every thread at its last event (writing deferred start events and closing
    /// all open frames). With `to_time` (the next snapshot's first event), threads
    /// continue from there.
    pub fn end_of_trace(&mut self, to_time: Option<Time>) {
        for ti in 0..self.threads.len() {
            if let SampleTiming::Accurate { period } = self.config.sample_timing
                && let Some(last) = self.threads[ti].last_sample.take()
            {
                // The last sample's stack lasts a period, as every other one does.
                let p = period.or_else(|| self.gaps.period()).unwrap_or(Time::ZERO);
                self.close_sampled(ti, Time(last.0.saturating_add(p.0)), 0);
            }
            let last = self.threads[ti].last_event_time;
            self.end_of_thread(ti, last, false);
            if let Some(to) = to_time {
                let m = self.map_time(to);
                let t = &mut self.threads[ti];
                t.pending_time = m;
                t.last_event_time = m;
                t.callstack.create_time = m;
            }
        }
    }

    /// Ends the trace and returns the sink.
    pub fn finish(mut self) -> S {
        self.end_of_trace(None);
        self.sink
    }
}
