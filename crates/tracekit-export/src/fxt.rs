//! An FXT trace as the tables `traces`, `slices`, `instants` and `counters`
//! ([`crate::schema`]).
//!
//! The rows are those of the trace's timeline ([`tracekit_timeline::Timeline`],
//! built by [`build_timeline`]), the one `tracekit view`, `fxt top` and `fxt
//! slices` answer from: duration
//! begins and ends paired per thread in the order of their times, complete
//! events, async begins and ends matched by name and id; a slice's depth is its
//! lane (nesting in time), an async slice has its id and no depth; what is
//! still open at the end of the trace has a null duration. Each numeric
//! argument of a counter event is one row. Threads and processes are named by
//! the trace's kernel object records. Times are nanoseconds of the trace's
//! clock (its ticks converted with the initialization record's rate). Rows go
//! by thread (process and thread koids, each process's async slices after its
//! threads), then depth, then time.

use arrow_array::builder::StringBuilder;
use tracekit_fxt::read::Reader;
use tracekit_timeline::TrackKind;
use tracekit_timeline::lane::OPEN;
use tracekit_timeline::open::build_timeline;

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

/// Exports the FXT trace `bytes` into `files`.
pub fn export(bytes: &[u8], files: &mut TraceFiles, options: &ExportOptions) -> Result<Summary> {
    let built = build_timeline(
        &mut Reader::new(bytes),
        true,
        &tracekit_columns::Spill::memory(),
        &mut |_| {},
    );
    let (events, t) = (built.events(), built.timeline);
    if let Some(e) = t.error() {
        return Err((*e).into());
    }
    let batch = options.row_group_rows;
    let mut slices: TableWriter<SliceCols> =
        TableWriter::new(files, SLICES.name, SLICES.schema(), batch)?;
    let mut instants: TableWriter<InstantCols> =
        TableWriter::new(files, INSTANTS.name, INSTANTS.schema(), batch)?;
    let mut counters: TableWriter<CounterCols> =
        TableWriter::new(files, COUNTERS.name, COUNTERS.schema(), batch)?;
    for track in t.tracks() {
        let (pid, tid) = (track.pid, track.tid);
        let process = t.process_name(pid);
        let thread = match track.kind {
            TrackKind::Thread => track.name.map(|n| t.string(n)),
            TrackKind::Async => None,
        };
        for (depth, lane) in track.lanes.iter().enumerate() {
            for i in 0..lane.len() {
                let Some(s) = lane.get(i) else { continue };
                let c = &mut slices.cols;
                c.pid.append_value(pid as i64);
                c.tid.append_value(tid as i64);
                c.process.append_option(process);
                c.thread.append_option(thread);
                c.name.append_value(t.string(s.name));
                c.category.append_value(t.string(s.category));
                c.start_ns.append_value(s.start as i64);
                c.duration_ns
                    .append_option((s.end != OPEN).then(|| s.end.saturating_sub(s.start) as i64));
                let (depth, id) = match track.kind {
                    TrackKind::Thread => (Some(depth as i32), None),
                    TrackKind::Async => (None, lane.id(i).map(|id| id as i64)),
                };
                c.depth.append_option(depth);
                c.async_id.append_option(id);
                c.args.append_value(t.args(s.args));
                slices.row_done()?;
            }
        }
        for x in &track.instants {
            let c = &mut instants.cols;
            c.pid.append_value(pid as i64);
            c.tid.append_value(tid as i64);
            c.process.append_option(process);
            c.thread.append_option(thread);
            c.name.append_value(t.string(x.name));
            c.category.append_value(t.string(x.category));
            c.time_ns.append_value(x.time as i64);
            c.args.append_value(t.args(x.args));
            instants.row_done()?;
        }
    }
    for series in t.counters() {
        for ((&time, &value), &tid) in series.times.iter().zip(&series.values).zip(&series.threads)
        {
            let c = &mut counters.cols;
            c.pid.append_value(series.pid as i64);
            c.tid.append_value(tid as i64);
            c.name.append_value(t.string(series.name));
            c.category.append_value(t.string(series.category));
            c.counter_id.append_value(series.id as i64);
            c.time_ns.append_value(time as i64);
            c.series.append_value(t.string(series.series));
            c.value.append_value(value);
            counters.row_done()?;
        }
    }
    let warnings = t.warnings().iter().map(|w| w.to_string()).collect();
    let first_process = t
        .processes()
        .iter()
        .find_map(|&(pid, name)| Some((pid, t.string(name?).to_string())));
    let duration = match (t.first_ns(), t.last_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    let traces = traces::write(
        files,
        TraceRow {
            kind: "fxt",
            file: options.file.clone(),
            executable: first_process.as_ref().map(|p| p.1.clone()),
            pid: first_process.as_ref().map(|p| p.0 as i64),
            duration_us: (duration / 1000) as i64,
            events: events as i64,
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
