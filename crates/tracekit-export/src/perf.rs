//! A sampled perf.data recording as the tables `traces` and `samples`
//! ([`crate::schema`]): one row per sample with its call stack, named as `tracekit
//! perf flamegraph` names frames (the perf.data reader of `tracekit-perf`: DWARF or
//! frame-pointer stacks, symbols from the recorded objects and their debug files).
//! The stack is a string of frames, root first, separated by `;`: a flame graph
//! tool's folded form (`tracekit_callstack::folded`, whose rule makes a `;` in a
//! name `:`), and what SQL groups on; the leaf is the last frame, named by the same
//! rule.

use arrow_array::builder::StringBuilder;
use tracekit_callstack::event::{Event, SampleData};
use tracekit_callstack::folded;
use tracekit_perf::data::{PerfData, ReadOptions};

use crate::schema::{SAMPLES, TRACES};
use crate::table::{I32, I64, OptI64, TableWriter, columns};
use crate::traces::{self, TraceRow};
use crate::{Error, ExportOptions, Result, Summary, TraceFiles};

columns!(
    /// `samples` after `trace_id`.
    SampleCols {
        pid: OptI64,
        tid: OptI64,
        thread: StringBuilder,
        time_ns: I64,
        stack: StringBuilder,
        leaf: StringBuilder,
        depth: I32,
    }
);

/// Exports the perf.data recording `bytes` into `files`.
pub fn export(bytes: &[u8], files: &mut TraceFiles, options: &ExportOptions) -> Result<Summary> {
    let name = options.file.clone();
    let perf_error = |e: tracekit_perf::Error| Error::Perf(e.to_string());
    let data = PerfData::from_reader(std::io::Cursor::new(bytes), name, bytes.len() as u64)
        .map_err(perf_error)?;
    let batch = options.row_group_rows;
    let mut samples: TableWriter<SampleCols> =
        TableWriter::new(files, SAMPLES.name, SAMPLES.schema(), batch)?;
    let (mut stack, mut frame) = (String::new(), String::new());
    let (mut first, mut last, mut count) = (i64::MAX, i64::MIN, 0i64);
    let mut failed = None;
    let stats = data
        .samples(
            &ReadOptions::default(),
            |_| {},
            |event| {
                let Event::Sample(s) = event else { return };
                let SampleData::Callstack(frames) = &s.data else {
                    return;
                };
                if failed.is_some() {
                    return;
                }
                stack.clear();
                for f in frames.iter() {
                    frame.clear();
                    f.write_display_name(&mut frame);
                    folded::push_frame(&mut stack, &frame);
                }
                let time = s.time.ns();
                (first, last, count) = (first.min(time), last.max(time), count + 1);
                let c = &mut samples.cols;
                c.pid.append_option(s.thread.pid.map(i64::from));
                c.tid.append_option(s.thread.tid.map(i64::from));
                c.thread.append_option(s.comm);
                c.time_ns.append_value(time);
                c.stack.append_value(&stack);
                c.leaf
                    .append_option(frames.last().map(|_| folded::frame(&frame)));
                c.depth.append_value(frames.len() as i32);
                if let Err(e) = samples.row_done() {
                    failed = Some(e);
                }
            },
        )
        .map_err(perf_error)?;
    if let Some(e) = failed {
        return Err(e);
    }
    let warnings = if stats.lost > 0 {
        vec![format!("perf lost {} records while recording", stats.lost)]
    } else {
        Vec::new()
    };

    let traces = traces::write(
        files,
        TraceRow {
            kind: "perf",
            file: options.file.clone(),
            duration_us: if count > 0 { (last - first) / 1000 } else { 0 },
            events: count,
            ..TraceRow::default()
        },
    )?;
    let rows = vec![(TRACES.name, traces), (SAMPLES.name, samples.finish()?)];
    Ok(Summary {
        trace_id: Some(files.trace_id()),
        rows,
        warnings,
    })
}
