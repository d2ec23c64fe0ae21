//! Where the trace writer's output goes: one method per kind of output, so that the
//! transcript printer (conformance tests), the FXT writer (users) and test recorders
//! plug in the same way (magic-trace's `Trace_writer_intf.S_trace`).
//!
//! Times are mapped times: nanoseconds since the trace's base time.

use crate::event::{Address, Time};
use crate::symbol::SymbolId;

/// A process (track group) allocated by a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessRef(pub u32);

/// A thread (track) allocated by a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrackRef(pub u32);

/// An argument value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgValue<'a> {
    /// A signed integer.
    Int(i64),
    /// A code address.
    Pointer(Address),
    /// A string.
    Str(&'a str),
}

/// A named argument attached to a slice or counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg<'a> {
    /// The argument's name.
    pub name: &'a str,
    /// Its value.
    pub value: ArgValue<'a>,
}

impl<'a> Arg<'a> {
    /// An integer argument.
    pub fn int(name: &'a str, v: i64) -> Self {
        Arg {
            name,
            value: ArgValue::Int(v),
        }
    }
    /// A pointer argument.
    pub fn pointer(name: &'a str, v: Address) -> Self {
        Arg {
            name,
            value: ArgValue::Pointer(v),
        }
    }
    /// A string argument.
    pub fn str(name: &'a str, v: &'a str) -> Self {
        Arg {
            name,
            value: ArgValue::Str(v),
        }
    }
}

/// Receives the trace writer's output.
///
/// Methods return nothing: a sink that can fail (I/O) keeps its first error and reports
/// it when the caller finishes it, so the state machine stays free of error plumbing.
pub trait Sink {
    /// A new process (one per perf process, plus one for snapshot hits); `pid` is its
    /// real process id when known, which an FXT sink uses as its koid.
    fn add_process(&mut self, name: &str, pid: Option<u32>) -> ProcessRef;
    /// A new thread (track) in a process; `tid` is its real thread id when known.
    fn add_thread(&mut self, process: ProcessRef, name: &str, tid: Option<u32>) -> TrackRef;
    /// A slice begins (a function was entered).
    fn begin(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]);
    /// The innermost open slice named `name` ends.
    fn end(&mut self, track: TrackRef, time: Time, name: &str);
    /// [`Sink::begin`] of a slice named after the interned `symbol` (`name` is its
    /// display name): sinks may cache per symbol instead of looking the name up. Ids come
    /// from the one trace writer feeding the sink, so they are stable for its lifetime.
    fn begin_symbol(
        &mut self,
        track: TrackRef,
        time: Time,
        symbol: SymbolId,
        name: &str,
        args: &[Arg<'_>],
    ) {
        let _ = symbol;
        self.begin(track, time, name, args);
    }
    /// [`Sink::end`] of a slice named after the interned `symbol`.
    fn end_symbol(&mut self, track: TrackRef, time: Time, symbol: SymbolId, name: &str) {
        let _ = symbol;
        self.end(track, time, name);
    }
    /// A slice with both ends known.
    fn complete(&mut self, track: TrackRef, start: Time, end: Time, name: &str, args: &[Arg<'_>]);
    /// A zero-length marker (decode errors).
    fn instant(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]);
    /// A counter value (CPU frequency).
    fn counter(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]);
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn add_process(&mut self, name: &str, pid: Option<u32>) -> ProcessRef {
        (**self).add_process(name, pid)
    }
    fn add_thread(&mut self, process: ProcessRef, name: &str, tid: Option<u32>) -> TrackRef {
        (**self).add_thread(process, name, tid)
    }
    fn begin(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        (**self).begin(track, time, name, args)
    }
    fn end(&mut self, track: TrackRef, time: Time, name: &str) {
        (**self).end(track, time, name)
    }
    fn begin_symbol(
        &mut self,
        track: TrackRef,
        time: Time,
        symbol: SymbolId,
        name: &str,
        args: &[Arg<'_>],
    ) {
        (**self).begin_symbol(track, time, symbol, name, args)
    }
    fn end_symbol(&mut self, track: TrackRef, time: Time, symbol: SymbolId, name: &str) {
        (**self).end_symbol(track, time, symbol, name)
    }
    fn complete(&mut self, track: TrackRef, start: Time, end: Time, name: &str, args: &[Arg<'_>]) {
        (**self).complete(track, start, end, name, args)
    }
    fn instant(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        (**self).instant(track, time, name, args)
    }
    fn counter(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        (**self).counter(track, time, name, args)
    }
}

/// One recorded sink call, for tests and tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// [`Sink::add_process`].
    Process {
        /// The allocated reference.
        process: ProcessRef,
        /// Its name.
        name: String,
        /// Its real process id, when known.
        pid: Option<u32>,
    },
    /// [`Sink::add_thread`].
    Thread {
        /// The allocated reference.
        track: TrackRef,
        /// Its process.
        process: ProcessRef,
        /// Its name.
        name: String,
        /// Its real thread id, when known.
        tid: Option<u32>,
    },
    /// [`Sink::begin`].
    Begin {
        /// Track.
        track: TrackRef,
        /// Time.
        time: Time,
        /// Name.
        name: String,
        /// Arguments, as `name=value` text.
        args: Vec<String>,
    },
    /// [`Sink::end`].
    End {
        /// Track.
        track: TrackRef,
        /// Time.
        time: Time,
        /// Name.
        name: String,
    },
    /// [`Sink::complete`].
    Complete {
        /// Track.
        track: TrackRef,
        /// Start.
        start: Time,
        /// End.
        end: Time,
        /// Name.
        name: String,
        /// Arguments, as `name=value` text.
        args: Vec<String>,
    },
    /// [`Sink::instant`].
    Instant {
        /// Track.
        track: TrackRef,
        /// Time.
        time: Time,
        /// Name.
        name: String,
    },
    /// [`Sink::counter`].
    Counter {
        /// Track.
        track: TrackRef,
        /// Time.
        time: Time,
        /// Name.
        name: String,
        /// Arguments, as `name=value` text.
        args: Vec<String>,
    },
}

fn args_text(args: &[Arg<'_>]) -> Vec<String> {
    args.iter()
        .map(|a| match a.value {
            ArgValue::Int(v) => format!("{}={v}", a.name),
            ArgValue::Pointer(v) => format!("{}={v}", a.name),
            ArgValue::Str(v) => format!("{}={v}", a.name),
        })
        .collect()
}

/// A sink that records every call (tests, debugging).
#[derive(Clone, Debug, Default)]
pub struct RecordingSink {
    /// The calls, in order.
    pub outputs: Vec<Output>,
    next_process: u32,
    next_thread: u32,
}

impl Sink for RecordingSink {
    fn add_process(&mut self, name: &str, pid: Option<u32>) -> ProcessRef {
        self.next_process += 1;
        let process = ProcessRef(self.next_process);
        self.outputs.push(Output::Process {
            process,
            name: name.into(),
            pid,
        });
        process
    }
    fn add_thread(&mut self, process: ProcessRef, name: &str, tid: Option<u32>) -> TrackRef {
        self.next_thread += 1;
        let track = TrackRef(self.next_thread);
        self.outputs.push(Output::Thread {
            track,
            process,
            name: name.into(),
            tid,
        });
        track
    }
    fn begin(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        self.outputs.push(Output::Begin {
            track,
            time,
            name: name.into(),
            args: args_text(args),
        });
    }
    fn end(&mut self, track: TrackRef, time: Time, name: &str) {
        self.outputs.push(Output::End {
            track,
            time,
            name: name.into(),
        });
    }
    fn complete(&mut self, track: TrackRef, start: Time, end: Time, name: &str, args: &[Arg<'_>]) {
        self.outputs.push(Output::Complete {
            track,
            start,
            end,
            name: name.into(),
            args: args_text(args),
        });
    }
    fn instant(&mut self, track: TrackRef, time: Time, name: &str, _args: &[Arg<'_>]) {
        self.outputs.push(Output::Instant {
            track,
            time,
            name: name.into(),
        });
    }
    fn counter(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        self.outputs.push(Output::Counter {
            track,
            time,
            name: name.into(),
            args: args_text(args),
        });
    }
}

/// A sink that discards everything (benchmarks of the state machine alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink {
    /// Number of slice, instant and counter calls received.
    pub calls: u64,
}

impl Sink for NullSink {
    fn add_process(&mut self, _name: &str, _pid: Option<u32>) -> ProcessRef {
        ProcessRef(0)
    }
    fn add_thread(&mut self, _process: ProcessRef, _name: &str, _tid: Option<u32>) -> TrackRef {
        TrackRef(0)
    }
    fn begin(&mut self, _: TrackRef, _: Time, _: &str, _: &[Arg<'_>]) {
        self.calls += 1;
    }
    fn end(&mut self, _: TrackRef, _: Time, _: &str) {
        self.calls += 1;
    }
    fn complete(&mut self, _: TrackRef, _: Time, _: Time, _: &str, _: &[Arg<'_>]) {
        self.calls += 1;
    }
    fn instant(&mut self, _: TrackRef, _: Time, _: &str, _: &[Arg<'_>]) {
        self.calls += 1;
    }
    fn counter(&mut self, _: TrackRef, _: Time, _: &str, _: &[Arg<'_>]) {
        self.calls += 1;
    }
}
