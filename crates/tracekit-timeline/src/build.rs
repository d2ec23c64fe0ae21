//! The one pass over an FXT trace's records that builds a [`Timeline`]: event
//! records (instant, counter, duration begin, end and complete, async begin and
//! end) and kernel object records (the names of processes and threads).
//!
//! Async slices are laid on async tracks of their process in one of two ways:
//!
//! - **by task**, where the producer says which task each slice runs within:
//!   tracekit-tracing's async begin records carry `within` (the async id of
//!   the task polling the span) and `parent` (the span it was made under).
//!   Following `within`, else `parent`, from async slice to async slice up to
//!   one that links to none gives the slice's task; each task has its own
//!   track, named by the task's slice and its arguments (`handler worker=3`),
//!   so that a job can be followed among the others. Past
//!   [`MAX_TASK_TRACKS`] tasks in a process, the later ones are laid by name.
//! - **by name** otherwise, as Perfetto groups them: one track per name, its
//!   slices packed into as few lanes as overlap needs.

use rustc_hash::FxHashMap;
use tracekit_fxt::format::{ArgValue, EventKind, ObjectType};
use tracekit_fxt::read::{Args, ReadError, Record, Records, Warning};

use tracekit_columns::{Grow, Slab, Spill, Store};

use crate::lane::{Columns, Lane, OPEN, Slice};
use crate::{Counter, Flow, FlowPhase, FlowPoint, Instant, Timeline, Track, TrackKind};

/// Distinct strings, each once.
#[derive(Clone, Default)]
struct Strings {
    ids: FxHashMap<Box<[u8]>, u32>,
    texts: Vec<Box<str>>,
}

impl Strings {
    fn id(&mut self, bytes: &[u8]) -> u32 {
        if let Some(&id) = self.ids.get(bytes) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts
            .push(String::from_utf8_lossy(bytes).into_owned().into_boxed_str());
        self.ids.insert(bytes.into(), id);
        id
    }
}

/// Argument sets as JSON objects, each once in one text: id 0 is `{}`. The
/// text and where each set starts grow as the builder's columns do
/// ([`Builder::spilling`]): a trace whose every slice has arguments has as
/// many sets as slices.
#[derive(Clone)]
struct ArgSets {
    text: Grow<u8>,
    /// Where each set starts in `text`, and where the last ends.
    at: Grow<u64>,
}

impl ArgSets {
    fn spilling(spill: &Spill) -> ArgSets {
        let mut sets = ArgSets {
            text: Grow::new(spill),
            at: Grow::new(spill),
        };
        sets.text.extend_from_slice(b"{}");
        sets.at.extend_from_slice(&[0, 2]);
        sets
    }

    /// The text of set `i`, if there is one.
    fn get(&self, i: u32) -> Option<&str> {
        crate::arg_set(&self.text, &self.at, i)
    }

    fn add(&mut self, args: Args<'_>) -> u32 {
        if args.is_empty() {
            return 0;
        }
        self.text
            .extend_from_slice(crate::args_json(args).as_bytes());
        self.at.push(self.text.len() as u64);
        (self.at.len() - 2) as u32
    }

    /// The set of `first`'s arguments then `then`'s: a slice's begin record's
    /// and its end record's (values recorded while it ran, the allocations
    /// made inside it).
    fn merge(&mut self, first: u32, then: u32) -> u32 {
        let (Some(a), Some(b)) = (self.get(first), self.get(then)) else {
            return first;
        };
        if then == 0 || b.len() <= 2 {
            return first;
        }
        if first == 0 || a.len() <= 2 {
            return then;
        }
        // `{..a..}` and `{..b..}` make `{..a..,..b..}`.
        let merged = format!("{},{}", &a[..a.len() - 1], &b[1..]);
        self.text.extend_from_slice(merged.as_bytes());
        self.at.push(self.text.len() as u64);
        (self.at.len() - 2) as u32
    }
}

/// A slice as a thread's build keeps it: a [`Slice`]'s fields and the order
/// it was read in (modulo 2^32), so that it has no padding and can grow in a
/// file ([`Grow`]), and sorts in place ([`row_order`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Row {
    start: u64,
    end: u64,
    name: u32,
    category: u32,
    args: u32,
    seq: u32,
}

/// A duration begin or end among a thread's marks, as read: the time, and the
/// begin (an index in `begins`) or [`END`]; an end's arguments (an id in the
/// argument sets) third.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Mark {
    time: u64,
    begin: u32,
    end_args: u32,
}

tracekit_columns::plain_struct!(Row {
    start: u64,
    end: u64,
    name: u32,
    category: u32,
    args: u32,
    seq: u32,
});
tracekit_columns::plain_struct!(Mark {
    time: u64,
    begin: u32,
    end_args: u32,
});

impl From<Slice> for Row {
    /// `s`, its order read not set yet ([`ThreadBuild::push_slice`] sets it).
    fn from(s: Slice) -> Row {
        Row {
            start: s.start,
            end: s.end,
            name: s.name,
            category: s.category,
            args: s.args,
            seq: 0,
        }
    }
}

/// A flow event as it is read: its thread (pid, tid), time and phase.
type FlowEvent = ((u64, u64), u64, FlowPhase);

/// A thread's slices and instants as they are read, grown in files when the
/// builder spills ([`Builder::spilling`]).
#[derive(Clone)]
struct ThreadBuild {
    /// Duration begins and ends, in the order read.
    marks: Grow<Mark>,
    begins: Grow<Row>,
    slices: Grow<Row>,
    instants: Vec<Instant>,
}

/// The build of thread `key`, made if it is new.
fn thread<'t>(
    threads: &'t mut FxHashMap<(u64, u64), ThreadBuild>,
    key: (u64, u64),
    spill: &Spill,
) -> &'t mut ThreadBuild {
    threads
        .entry(key)
        .or_insert_with(|| ThreadBuild::new(spill))
}

/// A duration end among a thread's marks.
const END: u32 = u32::MAX;

impl ThreadBuild {
    fn new(spill: &Spill) -> ThreadBuild {
        ThreadBuild {
            marks: Grow::new(spill),
            begins: Grow::new(spill),
            slices: Grow::new(spill),
            instants: Vec::new(),
        }
    }

    /// Adds slice `s` after those read so far, numbered in the order read
    /// (wrapping: only slices of equal times 2^32 apart are ordered otherwise
    /// than read).
    fn push_slice(&mut self, s: Row) {
        let seq = self.slices.len() as u32;
        self.slices.push(Row { seq, ..s });
    }

    /// Pairs the duration begins and ends into slices, in the order of their
    /// times (a writer may write them out of order: magic-trace writes the
    /// begins of the frames already on the stack when tracing started at the
    /// end of the trace, at time 0), each end closing the latest begin still
    /// open, as the Perfetto importer sorts and matches them. Marks of one time
    /// stay in the order read. An end without a begin (the trace started
    /// inside a slice) closes nothing; begins still open at the end are open
    /// slices.
    fn pair(&mut self, arg_sets: &mut ArgSets) {
        let spill = self.marks.spill().clone();
        let mut marks = std::mem::replace(&mut self.marks, Grow::new(&spill));
        if !marks.is_sorted_by_key(|m| m.time) {
            marks.sort_by_key(|m| m.time);
        }
        let mut open: Vec<u32> = Vec::new();
        for m in marks.iter() {
            match m.begin {
                END => {
                    if let Some(&s) = open.pop().and_then(|b| self.begins.get(b as usize)) {
                        let args = match m.end_args {
                            0 => s.args,
                            e => arg_sets.merge(s.args, e),
                        };
                        self.push_slice(Row {
                            end: m.time,
                            args,
                            ..s
                        });
                    }
                }
                b => open.push(b),
            }
        }
        drop(marks);
        let begins = std::mem::replace(&mut self.begins, Grow::new(&spill));
        for b in open {
            if let Some(&s) = begins.get(b as usize) {
                self.push_slice(s);
            }
        }
    }
}

/// A timeline as its records are read: what [`Timeline::build`] reads in one
/// go, read in as many as the records come in when a trace is followed while
/// it is written ([`Builder::read`] again), and made into a timeline at any
/// point ([`Builder::timeline`]) without reading again.
#[derive(Clone)]
pub struct Builder {
    strings: Strings,
    arg_sets: ArgSets,
    // Process and thread names apart: a process's main thread has the
    // process's own id on Linux (perf, the tracing layer), so one map would
    // give the process its main thread's name.
    process_names: FxHashMap<u64, u32>,
    names: FxHashMap<u64, u32>,
    /// Threads' memtrace domains (`memtrace_domain` on their records).
    heap_domains: FxHashMap<u64, u16>,
    pids: FxHashMap<u64, ()>,
    threads: FxHashMap<(u64, u64), ThreadBuild>,
    asyncs: FxHashMap<(u64, u32, u64), Slice>,
    /// Per process and async id, the async id the slice runs within (its
    /// `within` argument, else its `parent`).
    async_links: FxHashMap<(u64, u64), u64>,
    // Per process and name: a track per kind of async task, as Perfetto
    // groups async slices by name; each slice with its id.
    async_slices: FxHashMap<(u64, u32), Vec<(Slice, u64)>>,
    counters: Vec<Counter>,
    counter_of: FxHashMap<(u64, u32, u64, u32), usize>,
    // Flows by id, their events' threads as (pid, tid) until tracks are numbered.
    open_flows: FxHashMap<u64, Vec<FlowEvent>>,
    flows: Vec<(u64, Vec<FlowEvent>)>,
    first: u64,
    last: u64,
    records: u64,
    monotonic: Option<(u64, u64)>,
    error: Option<ReadError>,
    /// Where threads' slices and lanes grow.
    spill: Spill,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::spilling(&Spill::memory())
    }
}

impl Builder {
    /// A builder whose threads' slices and lanes grow as `spill` says: in
    /// files of its folder rather than in memory, so that they cost the
    /// process no memory of its own however large the trace
    /// ([`tracekit_columns::spill`]).
    pub fn spilling(spill: &Spill) -> Builder {
        Builder {
            strings: Strings::default(),
            arg_sets: ArgSets::spilling(spill),
            process_names: FxHashMap::default(),
            names: FxHashMap::default(),
            heap_domains: FxHashMap::default(),
            pids: FxHashMap::default(),
            threads: FxHashMap::default(),
            asyncs: FxHashMap::default(),
            async_links: FxHashMap::default(),
            async_slices: FxHashMap::default(),
            counters: Vec::new(),
            counter_of: FxHashMap::default(),
            open_flows: FxHashMap::default(),
            flows: Vec::new(),
            first: u64::MAX,
            last: 0,
            records: 0,
            monotonic: None,
            error: None,
            spill: spill.clone(),
        }
    }
}

impl Timeline {
    /// Reads every record of `reader` into a timeline; `progress` hears the
    /// input position now and then. Damage ends the timeline where it starts
    /// ([`Timeline::error`]).
    pub fn build(reader: &mut dyn Records, progress: &mut dyn FnMut(u64)) -> Timeline {
        Timeline::build_spilling(reader, &Spill::memory(), progress)
    }

    /// [`Timeline::build`], its threads' slices and lanes grown as `spill`
    /// says ([`Builder::spilling`]).
    pub fn build_spilling(
        reader: &mut dyn Records,
        spill: &Spill,
        progress: &mut dyn FnMut(u64),
    ) -> Timeline {
        let mut builder = Builder::spilling(spill);
        builder.read(reader, progress);
        builder.finish(reader.warnings().to_vec())
    }
}

impl Builder {
    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether damage ended the records.
    pub fn is_damaged(&self) -> bool {
        self.error.is_some()
    }

    /// Reads `reader`'s records until it has no more (for now, if it reads
    /// a trace still being written) or damage ends them; `progress` hears the
    /// input position now and then. After damage it reads nothing more.
    pub fn read(&mut self, reader: &mut dyn Records, progress: &mut dyn FnMut(u64)) {
        if self.error.is_some() {
            return;
        }
        let Builder {
            strings,
            arg_sets,
            process_names,
            names,
            heap_domains,
            pids,
            threads,
            asyncs,
            async_links,
            async_slices,
            counters,
            counter_of,
            open_flows,
            flows,
            first,
            last,
            records,
            monotonic,
            error,
            spill,
        } = self;
        loop {
            let entry = match reader.next_entry() {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(e) => {
                    *error = Some(e);
                    break;
                }
            };
            *records += 1;
            if *records & 0xFFFF == 0 {
                progress(entry.offset);
            }
            let e = match entry.record {
                Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                    process_names.insert(o.koid.0, strings.id(o.name.as_bytes()));
                    // The tracing layer's clock anchor: a tick and the
                    // monotonic time it was.
                    let arg = |name: &str| {
                        o.args.iter().find_map(|a| match a.value {
                            ArgValue::UInt64(v) if a.name.as_bytes() == name.as_bytes() => Some(v),
                            _ => None,
                        })
                    };
                    if let (Some(ticks), Some(ns)) = (arg("clock_ticks"), arg("clock_monotonic_ns"))
                    {
                        monotonic.get_or_insert((entry.tick_rate.ns(ticks), ns));
                    }
                    continue;
                }
                Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                    names.insert(o.koid.0, strings.id(o.name.as_bytes()));
                    // The thread's heap in a memtrace trace of the same run
                    // (tracekit-tracing with tracekit-alloc).
                    let domain = o.args.iter().find_map(|a| match a.value {
                        ArgValue::UInt64(v) if a.name.as_bytes() == b"memtrace_domain" => {
                            u16::try_from(v).ok()
                        }
                        _ => None,
                    });
                    if let Some(d) = domain {
                        heap_domains.insert(o.koid.0, d);
                    }
                    continue;
                }
                Record::Event(e) => e,
                _ => continue,
            };
            let (pid, tid) = (e.thread.process.0, e.thread.thread.0);
            pids.insert(pid, ());
            let time = entry.tick_rate.ns(e.ticks);
            *first = (*first).min(time);
            *last = (*last).max(time);
            let name = strings.id(e.name.as_bytes());
            let category = strings.id(e.category.as_bytes());
            // The arguments of what starts a slice, or of an instant.
            let args = match e.kind {
                EventKind::DurationBegin
                | EventKind::DurationComplete { .. }
                | EventKind::AsyncBegin { .. }
                | EventKind::Instant => arg_sets.add(e.args),
                _ => 0,
            };
            let begun = Slice {
                start: time,
                end: OPEN,
                name,
                category,
                args,
            };
            match e.kind {
                EventKind::DurationBegin => {
                    let t = thread(threads, (pid, tid), spill);
                    // Past u32::MAX - 1 begins on one thread, the rest are lost
                    // rather than taken for ends.
                    if let Ok(b) = u32::try_from(t.begins.len())
                        && b != END
                    {
                        t.marks.push(Mark {
                            time,
                            begin: b,
                            end_args: 0,
                        });
                        t.begins.push(begun.into());
                    }
                }
                EventKind::DurationEnd => {
                    let end_args = arg_sets.add(e.args);
                    thread(threads, (pid, tid), spill).marks.push(Mark {
                        time,
                        begin: END,
                        end_args,
                    });
                }
                EventKind::DurationComplete { end_ticks } => {
                    let end = entry.tick_rate.ns(end_ticks).max(time);
                    *last = (*last).max(end);
                    let t = thread(threads, (pid, tid), spill);
                    t.push_slice(Slice { end, ..begun }.into());
                }
                EventKind::AsyncBegin { id } => {
                    let link = |key: &[u8]| {
                        e.args.iter().find_map(|a| match a.value {
                            ArgValue::UInt64(v) if a.name.as_bytes() == key => Some(v),
                            ArgValue::UInt32(v) if a.name.as_bytes() == key => Some(v.into()),
                            _ => None,
                        })
                    };
                    if let Some(to) = link(b"within").or_else(|| link(b"parent")) {
                        async_links.insert((pid, id), to);
                    }
                    // A second begin of a slice still open: the first one's end
                    // is not known, so it stays open rather than lost.
                    if let Some(earlier) = asyncs.insert((pid, name, id), begun) {
                        async_slices
                            .entry((pid, earlier.name))
                            .or_default()
                            .push((earlier, id));
                    }
                }
                EventKind::AsyncEnd { id } => {
                    if let Some(s) = asyncs.remove(&(pid, name, id)) {
                        let s = Slice {
                            end: time.max(s.start),
                            ..s
                        };
                        async_slices.entry((pid, s.name)).or_default().push((s, id));
                    }
                }
                EventKind::Instant => {
                    let t = thread(threads, (pid, tid), spill);
                    t.instants.push(Instant {
                        time,
                        name,
                        category,
                        args,
                    });
                }
                EventKind::Counter { id } => {
                    for a in e.args.iter() {
                        let Some(value) = a.value.as_f64() else {
                            continue;
                        };
                        let series = strings.id(a.name.as_bytes());
                        let at = *counter_of
                            .entry((pid, name, id, series))
                            .or_insert_with(|| {
                                counters.push(Counter {
                                    pid,
                                    name,
                                    category,
                                    id,
                                    series,
                                    times: Vec::new(),
                                    values: Vec::new(),
                                    threads: Vec::new(),
                                });
                                counters.len() - 1
                            });
                        counters[at].times.push(time);
                        counters[at].values.push(value);
                        counters[at].threads.push(tid);
                    }
                }
                EventKind::FlowBegin { id }
                | EventKind::FlowStep { id }
                | EventKind::FlowEnd { id } => {
                    // The flow's thread gets a track even with nothing else on it.
                    thread(threads, (pid, tid), spill);
                    let phase = match e.kind {
                        EventKind::FlowBegin { .. } => FlowPhase::Begin,
                        EventKind::FlowStep { .. } => FlowPhase::Step,
                        _ => FlowPhase::End,
                    };
                    if phase == FlowPhase::Begin
                        && let Some(earlier) = open_flows.remove(&id)
                    {
                        flows.push((id, earlier));
                    }
                    open_flows
                        .entry(id)
                        .or_default()
                        .push(((pid, tid), time, phase));
                    if phase == FlowPhase::End
                        && let Some(done) = open_flows.remove(&id)
                    {
                        flows.push((id, done));
                    }
                }
                EventKind::AsyncInstant { .. } => {}
            }
        }
        progress(reader.position());
    }

    /// The timeline of the records read so far, the builder kept to read
    /// more: what [`Builder::finish`] makes of a copy.
    ///
    /// Each thread's marks and slices are sorted here in the builder first,
    /// as [`Builder::finish`] sorts them (stably, so equal keys stay in the
    /// order read, as they would in one sort of everything): the next copy
    /// then holds one sorted run and what was read since, which the sort
    /// merges in about a pass rather than sorting all again.
    pub fn timeline(&mut self, warnings: Vec<Warning>) -> Timeline {
        for t in self.threads.values_mut() {
            if !t.marks.is_sorted_by_key(|m| m.time) {
                t.marks.sort_by_key(|m| m.time);
            }
            t.slices.sort_by_key(row_order);
        }
        self.clone().finish(warnings)
    }

    /// The timeline of the records read, with the reader's `warnings`.
    pub fn finish(self, warnings: Vec<Warning>) -> Timeline {
        let Builder {
            mut strings,
            mut arg_sets,
            process_names,
            names,
            heap_domains,
            pids,
            threads,
            asyncs,
            async_links,
            mut async_slices,
            mut counters,
            counter_of: _,
            open_flows,
            mut flows,
            first,
            last,
            records,
            monotonic,
            error,
            spill: _,
        } = self;
        // Async slices still open at the end.
        for ((pid, _, id), s) in asyncs {
            async_slices.entry((pid, s.name)).or_default().push((s, id));
        }

        // Each track with where it goes among its process's: threads, then
        // async tracks by name, then tasks by their start.
        let mut keyed: Vec<(u64, Track)> = Vec::new();
        for ((pid, tid), mut t) in threads {
            t.pair(&mut arg_sets);
            // Stable: instants of one time stay in the order of their records.
            t.instants.sort_by_key(|i| i.time);
            keyed.push((
                0,
                Track {
                    kind: TrackKind::Thread,
                    pid,
                    tid,
                    name: names.get(&tid).copied(),
                    heap_domain: heap_domains.get(&tid).copied(),
                    lanes: nested(t.slices),
                    instants: t.instants,
                },
            ));
        }
        for AsyncGroup {
            pid,
            name,
            task_start,
            slices,
        } in async_groups(async_slices, &async_links)
        {
            let name = match task_start {
                Some(_) => task_name(&mut strings, &arg_sets, &slices),
                None => Some(name),
            };
            let order = task_start.map_or(0, |s| s.saturating_add(1));
            keyed.push((
                order,
                Track {
                    kind: TrackKind::Async,
                    pid,
                    tid: 0,
                    name,
                    heap_domain: None,
                    lanes: by_depth(&slices),
                    instants: Vec::new(),
                },
            ));
        }
        keyed.sort_by(|(oa, a), (ob, b)| {
            let key = |o: u64, t: &Track| (t.pid, t.kind == TrackKind::Async, o, t.tid);
            (key(*oa, a).cmp(&key(*ob, b))).then_with(|| {
                let name = |t: &Track| t.name.and_then(|n| strings.texts.get(n as usize));
                name(a).cmp(&name(b))
            })
        });
        let tracks: Vec<Track> = keyed.into_iter().map(|(_, t)| t).collect();
        flows.extend(open_flows);
        let track_of: FxHashMap<(u64, u64), usize> = tracks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.kind == TrackKind::Thread)
            .map(|(i, t)| ((t.pid, t.tid), i))
            .collect();
        let mut flows: Vec<Flow> = flows
            .into_iter()
            .map(|(id, points)| Flow {
                id,
                points: points
                    .into_iter()
                    .filter_map(|(thread, time, phase)| {
                        Some(FlowPoint {
                            track: *track_of.get(&thread)?,
                            time,
                            phase,
                        })
                    })
                    .collect(),
            })
            .collect();
        flows.sort_by_key(|f| (f.points.first().map(|p| p.time), f.id));
        let mut processes: Vec<(u64, Option<u32>)> = pids
            .into_keys()
            .map(|pid| (pid, process_names.get(&pid).copied()))
            .collect();
        processes.sort_unstable();
        counters.sort_by_key(|c| (c.pid, c.name, c.id, c.series));
        let first_ns = (first <= last).then_some(first);
        Timeline {
            strings: strings.texts,
            args_text: arg_sets.text.finish(),
            args_at: arg_sets.at.finish(),
            processes,
            tracks,
            counters,
            flows,
            first_ns,
            last_ns: first_ns.map(|_| last),
            records,
            warnings,
            error,
            has_allocations: Default::default(),
            monotonic,
        }
    }
}

/// The order of a thread's slices in its lanes: by start, the longer first,
/// then in the order read: a sort by it needs no stable sort's scratch (as
/// many bytes as half the slices), which slices grown in a file would take in
/// memory.
fn row_order(s: &Row) -> (u64, std::cmp::Reverse<u64>, u32) {
    (s.start, std::cmp::Reverse(s.end), s.seq)
}

/// Shows `each` every slice of `slices` (sorted by [`row_order`]) with its
/// depth: one more than the slices still open when it starts.
fn each_depth(slices: &[Row], mut each: impl FnMut(usize, &Row)) {
    // The ends of the slices still open, outermost first.
    let mut stack: Vec<u64> = Vec::new();
    for s in slices {
        while stack.last().is_some_and(|&end| end <= s.start) {
            stack.pop();
        }
        each(stack.len(), s);
        stack.push(s.end);
    }
}

/// A thread's slices in lanes by depth: sorted by start (the longer first
/// between equal starts), each one deeper than every slice still open when it
/// starts. The lanes' columns are laid in one slab (a file of the slices'
/// spill folder, for as many slices): a first pass counts each depth's
/// slices, a second writes them.
fn nested(mut slices: Grow<Row>) -> Vec<Lane> {
    // Equal slices stay in the order they were read (`seq`).
    slices.sort_unstable_by_key(row_order);
    let mut counts: Vec<usize> = Vec::new();
    each_depth(&slices, |d, _| {
        if counts.len() == d {
            counts.push(0);
        }
        counts[d] += 1;
    });
    // Per depth, from `at[d]`: start and end (8 bytes each), then name,
    // category and arguments (4 each, padded to 8): column `k` of a lane of
    // `n` slices is at `column(k, n)` from its start.
    let narrow = |n: usize| (4 * n).next_multiple_of(8);
    let column = |k: usize, n: usize| match k {
        0 | 1 => 8 * n * k,
        _ => 16 * n + (k - 2) * narrow(n),
    };
    // A lane's bytes: where a sixth column would start.
    let lane = |n: usize| column(5, n);
    let at: Vec<usize> = (counts.iter())
        .scan(0, |at, &n| {
            let here = *at;
            *at += lane(n);
            Some(here)
        })
        .collect();
    let mut slab = Slab::new(slices.spill(), counts.iter().map(|&n| lane(n)).sum());
    let mut filled = vec![0usize; counts.len()];
    each_depth(&slices, |d, s| {
        let (base, n, i) = (at[d], counts[d], filled[d]);
        for (k, v) in [s.start, s.end].into_iter().enumerate() {
            let col = slab.values_mut::<u64>(base + column(k, n), n);
            if let Some(x) = col.and_then(|c| c.get_mut(i)) {
                *x = v;
            }
        }
        for (k, v) in [s.name, s.category, s.args].into_iter().enumerate() {
            let col = slab.values_mut::<u32>(base + column(k + 2, n), n);
            if let Some(x) = col.and_then(|c| c.get_mut(i)) {
                *x = v;
            }
        }
        filled[d] += 1;
    });
    drop(slices);
    let shared = slab.freeze();
    (counts.iter().zip(&at))
        .map(|(&n, &base)| {
            // SAFETY: the slab's bytes, shared and never changed again, and
            // within them each column written above.
            let (u64s, u32s) = unsafe {
                let u64s = |k: usize| Store::in_place(&shared, base + column(k, n), n);
                let u32s = |k: usize| Store::in_place(&shared, base + column(k, n), n);
                ((u64s(0), u64s(1)), (u32s(2), u32s(3), u32s(4)))
            };
            let mut lane = Lane::from_columns(Columns {
                start: u64s.0.unwrap_or_default(),
                end: u64s.1.unwrap_or_default(),
                name: u32s.0.unwrap_or_default(),
                category: u32s.1.unwrap_or_default(),
                args: u32s.2.unwrap_or_default(),
                ids: Store::default(),
            });
            lane.finish();
            lane
        })
        .collect()
}

/// Tasks a process's async slices may be laid by, each on its own track;
/// past them, by name.
pub const MAX_TASK_TRACKS: usize = 1024;

/// The slices of one async track.
struct AsyncGroup {
    pid: u64,
    /// The slices' name (a track by name), or the first slice's.
    name: u32,
    /// For a task's track, when the task's first slice starts.
    task_start: Option<u64>,
    /// Its slices, by depth for a task's track (all at depth 0 on a track by
    /// name).
    slices: Vec<Placed>,
}

/// An async slice, its id and its depth under its task (0: the task's own).
type Placed = (Slice, u64, u32);

/// Async slices grouped into tracks: by task in a process whose slices link
/// to the task they run within (`links`), by name otherwise.
fn async_groups(
    by_name: FxHashMap<(u64, u32), Vec<(Slice, u64)>>,
    links: &FxHashMap<(u64, u64), u64>,
) -> Vec<AsyncGroup> {
    let linked: FxHashMap<u64, ()> = links.keys().map(|&(pid, _)| (pid, ())).collect();
    let mut groups = Vec::new();
    let mut by_pid: FxHashMap<u64, Vec<(Slice, u64)>> = FxHashMap::default();
    for ((pid, name), slices) in by_name {
        if linked.contains_key(&pid) {
            by_pid.entry(pid).or_default().extend(slices);
        } else {
            groups.push(AsyncGroup {
                pid,
                name,
                task_start: None,
                slices: slices.into_iter().map(|(s, id)| (s, id, 0)).collect(),
            });
        }
    }
    for (pid, slices) in by_pid {
        let ids: FxHashMap<u64, ()> = slices.iter().map(|&(_, id)| (id, ())).collect();
        // Up the links while they name a slice of the process; a bound on
        // the steps, as links that go round would never end.
        let task = |id: u64| {
            let (mut at, mut depth) = (id, 0);
            while depth < 64 {
                match links.get(&(pid, at)) {
                    Some(&to) if to != at && ids.contains_key(&to) => (at, depth) = (to, depth + 1),
                    _ => break,
                }
            }
            (at, depth)
        };
        let mut tasks: FxHashMap<u64, Vec<Placed>> = FxHashMap::default();
        for (s, id) in slices {
            let (task, depth) = task(id);
            tasks.entry(task).or_default().push((s, id, depth));
        }
        // Each task's first start, its id and its slices with their depths.
        let mut tasks: Vec<(u64, u64, Vec<Placed>)> = tasks
            .into_iter()
            .map(|(task, mut slices)| {
                slices.sort_by_key(|&(s, _, depth)| (depth, s.start));
                (slices.first().map_or(0, |(s, ..)| s.start), task, slices)
            })
            .collect();
        tasks.sort_unstable_by_key(|&(start, task, _)| (start, task));
        let mut rest: FxHashMap<u32, Vec<Placed>> = FxHashMap::default();
        for (i, (start, _, slices)) in tasks.into_iter().enumerate() {
            if i < MAX_TASK_TRACKS {
                groups.push(AsyncGroup {
                    pid,
                    name: slices.first().map_or(0, |(s, ..)| s.name),
                    task_start: Some(start),
                    slices,
                });
            } else {
                for (s, id, _) in slices {
                    rest.entry(s.name).or_default().push((s, id, 0));
                }
            }
        }
        groups.extend(rest.into_iter().map(|(name, slices)| AsyncGroup {
            pid,
            name,
            task_start: None,
            slices,
        }));
    }
    groups
}

/// A task's track name: its own slice's name (the first of the track's, the
/// task's own where it has one) and the slice's arguments but those that
/// link it or count what it allocated, `handler worker=3`; the async id
/// where it has no others.
fn task_name(strings: &mut Strings, arg_sets: &ArgSets, slices: &[Placed]) -> Option<u32> {
    let &(first, id, _) = slices.first()?;
    let name = strings.texts.get(first.name as usize)?.to_string();
    let json = (arg_sets.get(first.args))
        .and_then(|t| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(t).ok())
        .unwrap_or_default();
    const LEFT_OUT: [&str; 5] = [
        "level",
        "parent",
        "within",
        "allocated_bytes",
        "allocations",
    ];
    let fields: Vec<String> = json
        .iter()
        .filter(|(k, v)| !v.is_null() && !LEFT_OUT.contains(&k.as_str()))
        .take(2)
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect();
    let label = match fields.is_empty() {
        true => format!("{name} #{id}"),
        false => format!("{name} {}", fields.join(" ")),
    };
    Some(strings.id(label.as_bytes()))
}

/// An async track's slices in lanes by their depth under the task (the
/// task's own first, then what runs within it, and so on; a track by name is
/// all one depth), each depth in as few lanes as [`packed`] gives. The
/// slices come in runs of one depth.
fn by_depth(slices: &[Placed]) -> Vec<Lane> {
    (slices.chunk_by(|a, b| a.2 == b.2))
        .flat_map(|run| packed(run.iter().map(|&(s, id, _)| (s, id)).collect()))
        .collect()
}

/// Async slices in as few lanes as taking the first free one gives: sorted by
/// start, each in the first lane whose last slice has ended.
fn packed(mut slices: Vec<(Slice, u64)>) -> Vec<Lane> {
    slices.sort_by_key(|(s, _)| s.start);
    let mut lanes: Vec<(u64, Lane)> = Vec::new();
    for (s, id) in slices {
        match lanes.iter_mut().find(|(end, _)| *end <= s.start) {
            Some((end, lane)) => {
                *end = s.end;
                lane.push_async(s, id);
            }
            None => {
                let mut lane = Lane::default();
                lane.push_async(s, id);
                lanes.push((s.end, lane));
            }
        }
    }
    lanes
        .into_iter()
        .map(|(_, mut lane)| {
            lane.finish();
            lane
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn slice(start: u64, end: u64, name: u32) -> Slice {
        Slice {
            start,
            end,
            name,
            category: 0,
            args: 0,
        }
    }

    fn mark(time: u64, begin: u32, end_args: u32) -> Mark {
        Mark {
            time,
            begin,
            end_args,
        }
    }

    fn grown(slices: Vec<Slice>) -> Grow<Row> {
        let mut t = ThreadBuild::new(&Spill::memory());
        slices.into_iter().for_each(|s| t.push_slice(s.into()));
        t.slices
    }

    /// A track's slices lane by lane, as start and end.
    type Lanes = Vec<Vec<(u64, u64)>>;

    fn lanes_of(lanes: &[Lane]) -> Lanes {
        lanes
            .iter()
            .map(|l| {
                (0..l.len())
                    .map(|i| (l.get(i).unwrap().start, l.get(i).unwrap().end))
                    .collect()
            })
            .collect()
    }

    type TestWriter = tracekit_fxt::write::Writer<tracekit_fxt::io::IoDestination<Vec<u8>>>;

    /// The tracks of what `write` writes (given the writer, a thread of
    /// process 1 and a category), by name, with their slices lane by lane.
    fn tracks_written(
        write: impl FnOnce(
            &mut TestWriter,
            tracekit_fxt::format::ThreadId,
            tracekit_fxt::format::StringId,
        ),
    ) -> Vec<(String, Lanes)> {
        use tracekit_fxt::format::Koid;
        let mut w = TestWriter::new(tracekit_fxt::io::IoDestination::new(Vec::new())).unwrap();
        let thread = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
        let cat = w.intern("c").unwrap();
        write(&mut w, thread, cat);
        let bytes = w.finish_io().unwrap();
        let t = Timeline::build(&mut tracekit_fxt::read::Reader::new(&bytes), &mut |_| {});
        (t.tracks().iter())
            .map(|tr| (t.string(tr.name.unwrap()).to_string(), lanes_of(&tr.lanes)))
            .collect()
    }

    /// As the tracing layer and perf name them: the main thread has the
    /// process's id, and its name is not the process's.
    #[test]
    fn a_process_keeps_its_name_beside_its_main_thread_of_the_same_id() {
        use tracekit_fxt::format::{Koid, StringRef};
        use tracekit_fxt::io::IoDestination;
        use tracekit_fxt::read::Reader;
        use tracekit_fxt::write::Writer;
        let mut w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        w.set_process_name(Koid(7), StringRef::inline("tasks"))
            .unwrap();
        w.set_thread_name(Koid(7), Koid(7), "main").unwrap();
        let t = w.set_thread_slot(0, Koid(7), Koid(7)).unwrap();
        let (c, n) = (w.intern("cat").unwrap(), w.intern("work").unwrap());
        w.duration_complete(t, c, n, 1, 2, &[]).unwrap();
        let bytes = w.finish_io().unwrap();
        let timeline = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
        assert_eq!(timeline.process_name(7), Some("tasks"));
        let thread = timeline.tracks()[0].name.map(|n| timeline.string(n));
        assert_eq!(thread, Some("main"));
    }

    #[test]
    fn complete_slices_nest_by_time_whatever_their_order() {
        // As a writer of complete events emits them: inner ones first.
        let slices = vec![
            slice(2, 3, 0),
            slice(4, 6, 1),
            slice(1, 8, 2),
            slice(8, 9, 3),
            slice(0, 10, 4),
            slice(5, 5, 5),
            slice(10, OPEN, 6),
        ];
        assert_eq!(
            lanes_of(&nested(grown(slices))),
            [
                vec![(0, 10), (10, OPEN)],
                vec![(1, 8), (8, 9)],
                vec![(2, 3), (4, 6)],
                vec![(5, 5)],
            ]
        );
    }

    /// A slice's arguments are its begin record's then its end record's (the
    /// values recorded while it ran, the allocations made inside it).
    #[test]
    fn an_end_record_s_arguments_join_the_begin_s() {
        let mut sets = ArgSets::spilling(&Spill::memory());
        let push = |sets: &mut ArgSets, json: &str| {
            sets.text.extend_from_slice(json.as_bytes());
            sets.at.push(sets.text.len() as u64);
            (sets.at.len() - 2) as u32
        };
        let begin = push(&mut sets, r#"{"id":7}"#);
        let end = push(&mut sets, r#"{"allocated_bytes":64,"allocations":2}"#);
        let mut t = ThreadBuild::new(&Spill::memory());
        t.marks.push(mark(1, 0, 0));
        t.begins.push(
            Slice {
                args: begin,
                ..slice(1, OPEN, 0)
            }
            .into(),
        );
        t.marks.push(mark(2, 1, 0));
        t.begins.push(slice(2, OPEN, 1).into());
        t.marks.push(mark(3, END, end)); // the inner one, without arguments of its own
        t.marks.push(mark(4, END, 0));
        t.pair(&mut sets);
        let text = |sets: &ArgSets, i: u32| sets.get(i).unwrap().to_owned();
        let inner = t.slices.iter().find(|s| s.name == 1).unwrap();
        let outer = t.slices.iter().find(|s| s.name == 0).unwrap();
        assert_eq!(
            text(&sets, inner.args),
            r#"{"allocated_bytes":64,"allocations":2}"#
        );
        assert_eq!(text(&sets, outer.args), r#"{"id":7}"#);
        let both = sets.merge(begin, end);
        assert_eq!(
            text(&sets, both),
            r#"{"id":7,"allocated_bytes":64,"allocations":2}"#
        );
        assert_eq!(sets.merge(begin, 0), begin);
        assert_eq!(sets.merge(0, end), end);
    }

    /// As magic-trace writes a trace that starts inside frames: their ends
    /// first, their begins (at time 0) last.
    #[test]
    fn begins_and_ends_pair_in_the_order_of_their_times() {
        let mut t = ThreadBuild::new(&Spill::memory());
        let begin = |t: &mut ThreadBuild, time: u64, name: u32| {
            t.marks.push(mark(time, t.begins.len() as u32, 0));
            t.begins.push(slice(time, OPEN, name).into());
        };
        t.marks.push(mark(5, END, 0)); // inner, begun before the trace
        t.marks.push(mark(9, END, 0)); // outer
        begin(&mut t, 10, 2);
        t.marks.push(mark(12, END, 0));
        t.marks.push(mark(13, END, 0)); // closes nothing
        begin(&mut t, 14, 3); // still open
        begin(&mut t, 0, 0); // outer, written last
        begin(&mut t, 0, 1); // inner
        t.pair(&mut ArgSets::spilling(&Spill::memory()));
        let mut got: Vec<(u64, u64, u32)> =
            t.slices.iter().map(|s| (s.start, s.end, s.name)).collect();
        got.sort_unstable();
        assert_eq!(got, [(0, 5, 1), (0, 9, 0), (10, 12, 2), (14, OPEN, 3)]);
    }

    #[test]
    fn async_slices_take_the_first_free_lane() {
        let slices = vec![
            slice(0, 10, 0),
            slice(2, 4, 1),
            slice(5, 12, 2),
            slice(10, 11, 3),
        ];
        let lanes = packed(slices.into_iter().zip(100..).collect());
        assert_eq!(
            lanes_of(&lanes),
            [vec![(0, 10), (10, 11)], vec![(2, 4), (5, 12)]]
        );
        // Each keeps its async id.
        assert_eq!((lanes[0].id(1), lanes[1].id(0)), (Some(103), Some(101)));
    }

    #[test]
    fn an_async_begun_twice_keeps_both() {
        use tracekit_fxt::format::Koid;
        use tracekit_fxt::io::IoDestination;
        use tracekit_fxt::write::Writer;
        let mut w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        let thread = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
        let (cat, name) = (w.intern("c").unwrap(), w.intern("request").unwrap());
        w.async_begin(thread, cat, name, 10, 7, &[]).unwrap();
        w.async_begin(thread, cat, name, 20, 7, &[]).unwrap();
        w.async_end(thread, cat, name, 30, 7, &[]).unwrap();
        let bytes = w.finish_io().unwrap();
        let t = Timeline::build(&mut tracekit_fxt::read::Reader::new(&bytes), &mut |_| {});
        let track = &t.tracks()[0];
        assert_eq!(track.kind, TrackKind::Async);
        assert_eq!(lanes_of(&track.lanes), [vec![(10, OPEN)], vec![(20, 30)]]);
    }

    #[test]
    fn a_process_has_an_async_track_per_name() {
        let tracks = tracks_written(|w, thread, cat| {
            let (request, lookup) = (w.intern("request").unwrap(), w.intern("lookup").unwrap());
            w.async_begin(thread, cat, request, 10, 1, &[]).unwrap();
            w.async_begin(thread, cat, lookup, 11, 2, &[]).unwrap();
            w.async_begin(thread, cat, request, 12, 3, &[]).unwrap();
            for (name, at, id) in [(lookup, 20, 2), (request, 21, 1), (request, 22, 3)] {
                w.async_end(thread, cat, name, at, id, &[]).unwrap();
            }
        });
        assert_eq!(
            tracks,
            [
                ("lookup".to_string(), vec![vec![(11, 20)]]),
                ("request".to_string(), vec![vec![(10, 21)], vec![(12, 22)]])
            ]
        );
    }

    #[test]
    fn a_task_s_slices_share_its_track_named_by_the_task() {
        use tracekit_fxt::format::{RawArg, StringRef};
        let arg =
            |name: &'static str, v: u64| RawArg::new(StringRef::inline(name), ArgValue::UInt64(v));
        let tracks = tracks_written(|w, thread, cat| {
            let [handler, request, lookup] =
                ["handler", "request", "lookup"].map(|n| w.intern(n).unwrap());
            // Two handlers (ids 1 and 2, a field each); request 10 runs
            // within handler 2 and its lookup 11 under it (parent); request
            // 20 runs within a span that is not async, so it is a task of its
            // own, with no fields: its id names it.
            let begins = [
                (handler, 5, 1, vec![arg("worker", 0)]),
                (handler, 6, 2, vec![arg("worker", 1)]),
                (request, 10, 10, vec![arg("parent", 99), arg("within", 2)]),
                (lookup, 11, 11, vec![arg("parent", 10)]),
                (request, 12, 20, vec![arg("within", 98)]),
            ];
            for (name, at, id, args) in begins {
                w.async_begin(thread, cat, name, at, id, &args).unwrap();
            }
            for (name, at, id) in [
                (lookup, 20, 11),
                (request, 21, 10),
                (request, 22, 20),
                (handler, 30, 1),
                (handler, 31, 2),
            ] {
                w.async_end(thread, cat, name, at, id, &[]).unwrap();
            }
        });
        let tracks: Vec<(&str, Lanes)> = tracks
            .iter()
            .map(|(n, l)| (n.as_str(), l.clone()))
            .collect();
        // In the order the tasks start; a task's slices by depth under it.
        assert_eq!(
            tracks,
            [
                ("handler worker=0", vec![vec![(5, 30)]]),
                (
                    "handler worker=1",
                    vec![vec![(6, 31)], vec![(10, 21)], vec![(11, 20)]]
                ),
                ("request #20", vec![vec![(12, 22)]]),
            ]
        );
    }

    #[test]
    fn past_the_task_bound_a_process_s_tasks_are_laid_by_name() {
        use tracekit_fxt::format::{RawArg, StringRef};
        let tasks = MAX_TASK_TRACKS as u64 + 3;
        let tracks = tracks_written(|w, thread, cat| {
            let job = w.intern("job").unwrap();
            let within = [RawArg::new(
                StringRef::inline("within"),
                ArgValue::UInt64(0),
            )];
            for id in 1..=tasks {
                w.async_begin(thread, cat, job, id * 10, id, &within)
                    .unwrap();
                w.async_end(thread, cat, job, id * 10 + 5, id, &[]).unwrap();
            }
        });
        assert_eq!(tracks.len(), MAX_TASK_TRACKS + 1);
        // The by-name track first, with the three latest tasks' slices.
        assert_eq!(tracks[0].0, "job");
        assert_eq!(tracks[0].1.concat().len(), 3);
        assert_eq!(tracks[1].0, "job #1");
        assert_eq!(tracks[MAX_TASK_TRACKS].0, format!("job #{MAX_TASK_TRACKS}"));
        let all: usize = tracks.iter().map(|(_, l)| l.concat().len()).sum();
        assert_eq!(all as u64, tasks);
    }

    #[test]
    fn a_flow_begun_again_is_a_second_flow() {
        use tracekit_fxt::format::Koid;
        use tracekit_fxt::io::IoDestination;
        use tracekit_fxt::write::Writer;
        let mut w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        let (a, b) = (
            w.set_thread_slot(0, Koid(1), Koid(2)).unwrap(),
            w.set_thread_slot(1, Koid(1), Koid(3)).unwrap(),
        );
        w.flow_begin(a, 10, 5).unwrap();
        w.flow_step(b, 12, 5).unwrap();
        w.flow_begin(b, 20, 5).unwrap();
        w.flow_end(a, 30, 5).unwrap();
        w.flow_step(a, 40, 5).unwrap();
        let bytes = w.finish_io().unwrap();
        let t = Timeline::build(&mut tracekit_fxt::read::Reader::new(&bytes), &mut |_| {});
        let flows: Vec<Vec<(u64, u64, FlowPhase)>> = t
            .flows()
            .iter()
            .map(|f| {
                f.points
                    .iter()
                    .map(|p| (t.tracks()[p.track].tid, p.time, p.phase))
                    .collect()
            })
            .collect();
        assert_eq!(
            flows,
            [
                vec![(2, 10, FlowPhase::Begin), (3, 12, FlowPhase::Step)],
                vec![(3, 20, FlowPhase::Begin), (2, 30, FlowPhase::End)],
                // A step after the end starts a flow of its own.
                vec![(2, 40, FlowPhase::Step)],
            ]
        );
    }
}
