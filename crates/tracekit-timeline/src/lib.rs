//! FXT timelines as tables: a trace decoded once into per-track columns, from
//! which a viewer asks what a viewport shows, at any size of trace.
//!
//! A viewer of a large trace cannot hold every record in the browser (the
//! Perfetto UI stops at about 2 GB, magic-trace's viewer well before). The
//! server keeps the trace as a [`Timeline`] and answers, for a time range of a
//! track drawn on N pixels, one record per slice of at least a pixel and one
//! merged run per pixel for the rest ([`Lane::window`]): the answer is
//! bounded by the pixels, not by the trace.
//!
//! What the one pass over the records ([`Timeline::build`]) keeps:
//!
//! | table | per | what |
//! | --- | --- | --- |
//! | tracks | thread, and process with async slices | pid, tid, name (from kernel object records), and lanes |
//! | lanes | track and depth | the slices at that depth ([`lane`]): start, end, name, category, arguments |
//! | instants | thread track | time, name, category, arguments |
//! | counters | process, name, counter id and argument | times, values and threads |
//! | flows | flow (a begin and what follows with its id) | per event its thread's track, time and phase |
//! | strings | distinct name or category | its text (lossy UTF-8) |
//! | arguments | slice begun or instant with arguments | a JSON object ([`args_json`]), all in one text |
//!
//! A thread's slices are those of its duration begin/end pairs and of its
//! complete events; their depths come from nesting in time (a slice that
//! starts inside another, before it ends, is one deeper), which a trace of
//! complete events alone does not state. A process's async slices (begin and
//! end matched by name and id) are on a track of their own, each in the first
//! lane free when it starts. Times are nanoseconds of the trace's clock. A
//! slice without an end is open until the end of the trace ([`lane::OPEN`]).
//! A flow begin starts a flow of its id (ending one still open with it), steps
//! and an end follow it; a step or end without a begin starts one too.
//!
//! What a viewer asks of it beside viewports: the slices of a selection by
//! name ([`Timeline::selection`]), and the next or previous slice whose name
//! matches a search ([`Timeline::find`]).
//!
//! A trace that stops at damage gives the timeline of the records before it
//! ([`Timeline::error`]).
//!
//! Front ends build it through [`open::build_timeline`]: progress, the trace's
//! counts, the warnings the reader did not keep, and a mapped file's pages let
//! go as the pass goes.
//!
//! The `file` module writes a timeline as bytes and reads it back
//! ([`Timeline::write_to`], [`Timeline::read_from`]), so that a viewer can keep
//! it between runs.

#![deny(missing_docs)]

pub mod allocated;
mod build;
mod file;
pub mod follow;
pub mod lane;
pub mod open;
pub mod report;
mod select;

pub use build::Builder;
pub use file::FileError;
pub use select::{Flame, FlameNode, NameTotals, Position};

use tracekit_columns::Store;
use tracekit_fxt::format::ArgValue;
use tracekit_fxt::read::{Args, ReadError, Warning};

use lane::Lane;

/// The kind of a track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackKind {
    /// A thread's slices and instants.
    Thread,
    /// A process's async slices.
    Async,
}

impl TrackKind {
    /// How answers name it: `thread` or `async`.
    pub fn name(self) -> &'static str {
        match self {
            TrackKind::Thread => "thread",
            TrackKind::Async => "async",
        }
    }
}

/// An instant event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instant {
    /// When, nanoseconds.
    pub time: u64,
    /// Name, in the timeline's strings.
    pub name: u32,
    /// Category, in the timeline's strings.
    pub category: u32,
    /// Its arguments, in the timeline's arguments ([`Timeline::args`]).
    pub args: u32,
}

/// One track of the timeline.
#[derive(Clone, Debug)]
pub struct Track {
    /// Thread or async.
    pub kind: TrackKind,
    /// The process's koid.
    pub pid: u64,
    /// The thread's koid (0 for an async track).
    pub tid: u64,
    /// The thread's name, from a kernel object record, or the name of an
    /// async track's slices (a process has an async track per name, as
    /// Perfetto groups them: a kind of task), in the timeline's strings.
    pub name: Option<u32>,
    /// A thread's memtrace domain: where a trace of the same run's heap
    /// (tracekit-alloc's, joined with `--heap`) writes the thread's
    /// allocations, from its record's `memtrace_domain` argument.
    pub heap_domain: Option<u16>,
    /// Its slices, a lane per depth (or per async lane), outermost first.
    pub lanes: Vec<Lane>,
    /// Its instants, by time.
    pub instants: Vec<Instant>,
}

impl Track {
    /// Slices on the track.
    pub fn slices(&self) -> usize {
        self.lanes.iter().map(Lane::len).sum()
    }
}

/// Where a flow event is in a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowPhase {
    /// Its first event.
    Begin,
    /// An event between.
    Step,
    /// Its last event.
    End,
}

/// One event of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPoint {
    /// The track of the thread it is on (an index in [`Timeline::tracks`]).
    pub track: usize,
    /// When, nanoseconds.
    pub time: u64,
    /// Which event it is.
    pub phase: FlowPhase,
}

/// A flow: work handed from one place to another, the events of one flow id
/// from a begin to an end (or to the end of the trace), in the order read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The flow id.
    pub id: u64,
    /// Its events.
    pub points: Vec<FlowPoint>,
}

/// One series of a counter.
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    /// The process's koid.
    pub pid: u64,
    /// The counter's name, in the timeline's strings.
    pub name: u32,
    /// The category of its first sample, in the timeline's strings.
    pub category: u32,
    /// The counter id.
    pub id: u64,
    /// The argument that holds the series, in the timeline's strings.
    pub series: u32,
    /// Sample times, nanoseconds, in the order of the records.
    pub times: Vec<u64>,
    /// Values.
    pub values: Vec<f64>,
    /// The thread of each sample, by koid.
    pub threads: Vec<u64>,
}

/// A trace's timeline (see the crate docs).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    strings: Vec<Box<str>>,
    /// Argument sets as JSON objects, one after the other (UTF-8), and where
    /// each starts (the last entry where the last ends): in the cache file's
    /// mapping or spilled, as the lanes, since a trace whose every slice has
    /// arguments (magic-trace's address and symbol) has as many sets.
    args_text: Store<u8>,
    args_at: Store<u64>,
    processes: Vec<(u64, Option<u32>)>,
    tracks: Vec<Track>,
    counters: Vec<Counter>,
    flows: Vec<Flow>,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    records: u64,
    warnings: Vec<Warning>,
    error: Option<ReadError>,
    /// Whether a slice carries allocations ([`allocated::has_allocations`]),
    /// found on first asking.
    has_allocations: std::sync::OnceLock<bool>,
    /// A time of the trace (ns) and the `CLOCK_MONOTONIC` time it was (ns),
    /// when the trace says (the tracing layer's process record does).
    monotonic: Option<(u64, u64)>,
}

impl Timeline {
    /// The text of string `id` (empty for no such string).
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// The arguments of set `id` (a slice's or an instant's) as a JSON object
    /// (`{}` for none, or no such set).
    pub fn args(&self, id: u32) -> &str {
        arg_set(&self.args_text, &self.args_at, id).unwrap_or("{}")
    }

    /// Whether the trace gives its clock's place on the monotonic clock.
    pub fn on_monotonic_clock(&self) -> bool {
        self.monotonic.is_some()
    }

    /// The trace's time (ns) of `CLOCK_MONOTONIC` time `monotonic_ns`, when
    /// the trace gives its clock's place on the monotonic clock and that time
    /// is not before the trace's clock began.
    pub fn from_monotonic(&self, monotonic_ns: u64) -> Option<u64> {
        let (trace, mono) = self.monotonic?;
        trace.checked_add_signed(monotonic_ns.wrapping_sub(mono) as i64)
    }

    /// The `CLOCK_MONOTONIC` time (ns) of the trace's time `trace_ns`, when
    /// the trace gives its clock's place on the monotonic clock.
    pub fn to_monotonic(&self, trace_ns: u64) -> Option<u64> {
        let (trace, mono) = self.monotonic?;
        mono.checked_add_signed(trace_ns.wrapping_sub(trace) as i64)
    }

    /// Adds a counter series (a joined trace's: tracekit-alloc's live heap on
    /// the trace's clock), its name and series argument given as text.
    pub fn add_counter(
        &mut self,
        pid: u64,
        name: &str,
        series: &str,
        samples: impl IntoIterator<Item = (u64, f64)>,
    ) {
        let intern = |strings: &mut Vec<Box<str>>, s: &str| -> u32 {
            match strings.iter().position(|t| &**t == s) {
                Some(i) => i as u32,
                None => {
                    strings.push(s.into());
                    (strings.len() - 1) as u32
                }
            }
        };
        let (name, series) = (
            intern(&mut self.strings, name),
            intern(&mut self.strings, series),
        );
        let (times, values): (Vec<u64>, Vec<f64>) = samples.into_iter().unzip();
        self.counters.push(Counter {
            pid,
            name,
            category: 0,
            id: 0,
            series,
            threads: vec![0; times.len()],
            times,
            values,
        });
    }

    /// The processes, by koid, with their names.
    pub fn processes(&self) -> &[(u64, Option<u32>)] {
        &self.processes
    }

    /// The name of process `pid`, from a kernel object record.
    pub fn process_name(&self, pid: u64) -> Option<&str> {
        self.processes
            .iter()
            .find(|(p, _)| *p == pid)
            .and_then(|(_, n)| *n)
            .map(|n| self.string(n))
    }

    /// The tracks: threads by process and thread koid, then each process's
    /// async track after its threads.
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }

    /// The counters' series.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// The flows, by their first event's time.
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    /// Slices on every track.
    pub fn slices(&self) -> usize {
        self.tracks.iter().map(Track::slices).sum()
    }

    /// The earliest time of the trace (a record's, or a slice's end).
    pub fn first_ns(&self) -> Option<u64> {
        self.first_ns
    }

    /// The latest time of the trace.
    pub fn last_ns(&self) -> Option<u64> {
        self.last_ns
    }

    /// Records read.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// What the reader skipped.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Why reading stopped before the end of the trace, if it did.
    pub fn error(&self) -> Option<&ReadError> {
        self.error.as_ref()
    }
}

/// Set `id` of argument sets laid one after the other in `text`, each
/// starting at its entry of `at` and ending at the next's; `None` when there
/// is no such set or its bytes are not UTF-8.
fn arg_set<'t>(text: &'t [u8], at: &[u64], id: u32) -> Option<&'t str> {
    let from = *at.get(id as usize)? as usize;
    let to = *at.get(id as usize + 1)? as usize;
    std::str::from_utf8(text.get(from..to)?).ok()
}

/// Arguments as a JSON object: numbers as numbers (a double that is not finite as
/// a string), strings lossily, pointers as hex strings, koids as numbers, blobs as
/// their size.
pub fn args_json(args: Args<'_>) -> String {
    if args.is_empty() {
        return "{}".to_string();
    }
    let mut map = serde_json::Map::new();
    for a in args.iter() {
        let v = match a.value {
            ArgValue::Null => serde_json::Value::Null,
            ArgValue::Int32(v) => v.into(),
            ArgValue::UInt32(v) => v.into(),
            ArgValue::Int64(v) => v.into(),
            ArgValue::UInt64(v) => v.into(),
            ArgValue::Double(v) => serde_json::Number::from_f64(v)
                .map_or_else(|| v.to_string().into(), serde_json::Value::Number),
            ArgValue::String(s) => s.to_string().into(),
            ArgValue::Pointer(p) => format!("{p:#x}").into(),
            ArgValue::Koid(k) => k.0.into(),
            ArgValue::Bool(b) => b.into(),
            ArgValue::Blob(b) => b.len().into(),
        };
        map.insert(a.name.to_string(), v);
    }
    serde_json::Value::Object(map).to_string()
}
