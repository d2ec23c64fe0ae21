//! An FXT trace as the tables `traces`, `slices`, `instants` and `counters`
//! ([`crate::schema`]).
//!
//! One pass over the records. Duration begins wait on their thread's stack for their
//! end (a slice's depth is its place on that stack), complete events are slices at
//! once, async begins wait for the end with their id; what is still open at the end
//! of the trace is written with a null duration. Each numeric argument of a counter
//! event is one row. Threads and processes are named by the kernel object records
//! seen so far. Times are nanoseconds of the trace's clock (its ticks converted
//! with the initialization record's rate).

use arrow_array::builder::StringBuilder;
use rustc_hash::FxHashMap;
use tracekit_fxt::format::{EventKind, ObjectType};
use tracekit_fxt::read::{Args, Reader, Record, Records};
use tracekit_timeline::args_json;

use crate::schema::{COUNTERS, INSTANTS, SLICES, TRACES};
use crate::table::{F64, I64, OptI32, OptI64, TableWriter, columns};
use crate::traces::{self, TraceRow};
use crate::{ExportOptions, Result, Summary, TraceFiles};

columns!(
    /// `slices` after `trace_id`.
    SliceCols {
        pid: I64,
        tid: I64,
        process: StringBuilder,
        thread: StringBuilder,
        name: StringBuilder,
        category: StringBuilder,
        start_ns: I64,
        duration_ns: OptI64,
        depth: OptI32,
        async_id: OptI64,
        args: StringBuilder,
    }
);

columns!(
    /// `instants` after `trace_id`.
    InstantCols {
        pid: I64,
        tid: I64,
        process: StringBuilder,
        thread: StringBuilder,
        name: StringBuilder,
        category: StringBuilder,
        time_ns: I64,
        args: StringBuilder,
    }
);

columns!(
    /// `counters` after `trace_id`.
    CounterCols {
        pid: I64,
        tid: I64,
        name: StringBuilder,
        category: StringBuilder,
        counter_id: I64,
        time_ns: I64,
        series: StringBuilder,
        value: F64,
    }
);

/// A slice waiting for its end.
struct Open {
    pid: u64,
    tid: u64,
    name: String,
    category: String,
    start_ns: u64,
    args: String,
}

/// Exports the FXT trace `bytes` into `files`.
pub fn export(bytes: &[u8], files: &mut TraceFiles, options: &ExportOptions) -> Result<Summary> {
    let batch = options.row_group_rows;
    let mut slices: TableWriter<SliceCols> =
        TableWriter::new(files, SLICES.name, SLICES.schema(), batch)?;
    let mut instants: TableWriter<InstantCols> =
        TableWriter::new(files, INSTANTS.name, INSTANTS.schema(), batch)?;
    let mut counters: TableWriter<CounterCols> =
        TableWriter::new(files, COUNTERS.name, COUNTERS.schema(), batch)?;
    let mut names: FxHashMap<u64, String> = FxHashMap::default();
    let mut first_process: Option<(u64, String)> = None;
    let mut stacks: FxHashMap<(u64, u64), Vec<Open>> = FxHashMap::default();
    let mut asyncs: FxHashMap<(u64, Vec<u8>, u64), Open> = FxHashMap::default();
    let (mut events, mut first_ns, mut last_ns) = (0i64, u64::MAX, 0u64);

    let mut reader = Reader::new(bytes);
    while let Some(entry) = reader.next_entry()? {
        let ns = |t| entry.tick_rate.ns(t);
        match entry.record {
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                let name = o.name.to_string();
                first_process.get_or_insert((o.koid.0, name.clone()));
                names.insert(o.koid.0, name);
            }
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                names.insert(o.koid.0, o.name.to_string());
            }
            Record::Event(e) => {
                events += 1;
                let (pid, tid) = (e.thread.process.0, e.thread.thread.0);
                let time = ns(e.ticks);
                first_ns = first_ns.min(time);
                last_ns = last_ns.max(time);
                let open = |args: Args<'_>| Open {
                    pid,
                    tid,
                    name: e.name.to_string(),
                    category: e.category.to_string(),
                    start_ns: time,
                    args: args_json(args),
                };
                match e.kind {
                    EventKind::DurationBegin => {
                        stacks.entry((pid, tid)).or_default().push(open(e.args));
                    }
                    EventKind::DurationEnd => {
                        let stack = stacks.entry((pid, tid)).or_default();
                        if let Some(o) = stack.pop() {
                            let depth = stack.len() as i32;
                            write_slice(&mut slices, &names, &o, Some(time), Some(depth), None)?;
                        }
                    }
                    EventKind::DurationComplete { end_ticks } => {
                        let depth = stacks.get(&(pid, tid)).map_or(0, Vec::len) as i32;
                        let end = ns(end_ticks);
                        last_ns = last_ns.max(end);
                        let o = open(e.args);
                        write_slice(&mut slices, &names, &o, Some(end), Some(depth), None)?;
                    }
                    EventKind::AsyncBegin { id } => {
                        let key = (pid, e.name.as_bytes().to_vec(), id);
                        asyncs.insert(key, open(e.args));
                    }
                    EventKind::AsyncEnd { id } => {
                        let key = (pid, e.name.as_bytes().to_vec(), id);
                        if let Some(o) = asyncs.remove(&key) {
                            write_slice(&mut slices, &names, &o, Some(time), None, Some(id))?;
                        }
                    }
                    EventKind::Instant => {
                        let c = &mut instants.cols;
                        c.pid.append_value(pid as i64);
                        c.tid.append_value(tid as i64);
                        c.process.append_option(names.get(&pid));
                        c.thread.append_option(names.get(&tid));
                        c.name.append_value(e.name.to_string());
                        c.category.append_value(e.category.to_string());
                        c.time_ns.append_value(time as i64);
                        c.args.append_value(args_json(e.args));
                        instants.row_done()?;
                    }
                    EventKind::Counter { id } => {
                        for a in e.args.iter() {
                            let Some(value) = a.value.as_f64() else {
                                continue;
                            };
                            let c = &mut counters.cols;
                            c.pid.append_value(pid as i64);
                            c.tid.append_value(tid as i64);
                            c.name.append_value(e.name.to_string());
                            c.category.append_value(e.category.to_string());
                            c.counter_id.append_value(id as i64);
                            c.time_ns.append_value(time as i64);
                            c.series.append_value(a.name.to_string());
                            c.value.append_value(value);
                            counters.row_done()?;
                        }
                    }
                    EventKind::AsyncInstant { .. }
                    | EventKind::FlowBegin { .. }
                    | EventKind::FlowStep { .. }
                    | EventKind::FlowEnd { .. } => {}
                }
            }
            _ => {}
        }
    }
    let warnings = reader.warnings().iter().map(|w| w.to_string()).collect();
    // Still open at the end: a null duration.
    let mut open: Vec<_> = stacks.into_iter().collect();
    open.sort_unstable_by_key(|(k, _)| *k);
    for (_, stack) in open {
        for (depth, o) in stack.iter().enumerate() {
            write_slice(&mut slices, &names, o, None, Some(depth as i32), None)?;
        }
    }
    let mut open: Vec<_> = asyncs.into_iter().collect();
    open.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for ((_, _, id), o) in open {
        write_slice(&mut slices, &names, &o, None, None, Some(id))?;
    }

    let duration = last_ns.saturating_sub(first_ns.min(last_ns));
    let traces = traces::write(
        files,
        TraceRow {
            kind: "fxt",
            file: options.file.clone(),
            executable: first_process.as_ref().map(|p| p.1.clone()),
            pid: first_process.as_ref().map(|p| p.0 as i64),
            duration_us: (duration / 1000) as i64,
            events,
            ..TraceRow::default()
        },
    )?;

    let rows = vec![
        (TRACES.name, traces),
        (SLICES.name, slices.finish()?),
        (INSTANTS.name, instants.finish()?),
        (COUNTERS.name, counters.finish()?),
    ];
    Ok(Summary {
        trace_id: Some(files.trace_id()),
        rows,
        warnings,
    })
}

fn write_slice(
    slices: &mut TableWriter<SliceCols>,
    names: &FxHashMap<u64, String>,
    o: &Open,
    end_ns: Option<u64>,
    depth: Option<i32>,
    async_id: Option<u64>,
) -> Result<()> {
    let c = &mut slices.cols;
    c.pid.append_value(o.pid as i64);
    c.tid.append_value(o.tid as i64);
    c.process.append_option(names.get(&o.pid));
    c.thread.append_option(names.get(&o.tid));
    c.name.append_value(&o.name);
    c.category.append_value(&o.category);
    c.start_ns.append_value(o.start_ns as i64);
    c.duration_ns
        .append_option(end_ns.map(|e| e.saturating_sub(o.start_ns) as i64));
    c.depth.append_option(depth);
    c.async_id.append_option(async_id.map(|id| id as i64));
    c.args.append_value(&o.args);
    slices.row_done()
}
