//! A memtrace trace as the tables `traces`, `allocations`, `backtraces` and
//! `locations` ([`crate::schema`]).
//!
//! One pass over the events. A backtrace is interned in a prefix tree (one node per
//! distinct prefix, stepping only over the entries past the alloc's common prefix)
//! and its rows are written the first time an allocation uses it; a location code's
//! locations are written the first time a backtrace holds it. An allocation's row is
//! written when its object is collected, or at the end for the objects that lived to
//! it, so the export keeps the live sampled objects and nothing else of the events.
//! Packets the reader skips (a forked child's, a truncated last one) are reported as
//! warnings, as `tracekit memtrace dump` reports them.

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
};
use rustc_hash::FxHashMap;
use tracekit_analysis::backtrace::Backtraces;
use tracekit_memtrace::{AllocationSource, Event, LocationCode, LocationLookup, Reader};

use crate::schema::{ALLOCATIONS, BACKTRACES, LOCATIONS, TRACES};
use crate::table::{TableWriter, columns};
use crate::traces::{self, TraceRow};
use crate::{ExportOptions, Result, Summary, TraceFiles};

columns!(
    /// `allocations` after `trace_id`.
    AllocCols {
        obj_id: Int64Builder,
        domain: Int32Builder,
        time_us: Int64Builder,
        source: StringBuilder,
        nsamples: Int64Builder,
        length_words: Int64Builder,
        estimated_bytes: Float64Builder,
        promoted: BooleanBuilder,
        promote_time_us: Int64Builder,
        collect_time_us: Int64Builder,
        backtrace_id: Int64Builder,
    }
);

columns!(
    /// `backtraces` after `trace_id`.
    BacktraceCols {
        backtrace_id: Int64Builder,
        position: Int32Builder,
        location_id: Int64Builder,
    }
);

columns!(
    /// `locations` after `trace_id`.
    LocationCols {
        location_id: Int64Builder,
        code: Int64Builder,
        function: StringBuilder,
        file: StringBuilder,
        line: Int32Builder,
        start_column: Int32Builder,
        end_column: Int32Builder,
        label: StringBuilder,
    }
);

/// A sampled object not collected yet: its row but for the collect time.
struct Live {
    domain: u16,
    time_us: i64,
    source: AllocationSource,
    nsamples: u64,
    length: u64,
    promote_time_us: Option<i64>,
    backtrace_id: u32,
}

/// Exports the memtrace trace `bytes` into `files`.
pub fn export(bytes: &[u8], files: &mut TraceFiles, options: &ExportOptions) -> Result<Summary> {
    let mut reader = Reader::from_bytes(bytes)?;
    let info = reader.info().clone();
    let format_version = reader.format_version();
    let bytes_per_sample = if info.sample_rate.is_finite() && info.sample_rate > 0.0 {
        f64::from(info.word_size) / 8.0 / info.sample_rate
    } else {
        0.0
    };
    let batch = options.row_group_rows;
    let mut allocs: TableWriter<AllocCols> =
        TableWriter::new(files, ALLOCATIONS.name, ALLOCATIONS.schema(), batch)?;
    let mut bts: TableWriter<BacktraceCols> =
        TableWriter::new(files, BACKTRACES.name, BACKTRACES.schema(), batch)?;
    let mut locs: TableWriter<LocationCols> =
        TableWriter::new(files, LOCATIONS.name, LOCATIONS.schema(), batch)?;

    let mut backtraces = Backtraces::new();
    // A code's locations have the ids `first .. first + count`.
    let mut codes: FxHashMap<LocationCode, (u32, u32)> = FxHashMap::default();
    let mut next_location = 0u32;
    let mut live: FxHashMap<u64, Live> = FxHashMap::default();
    let mut path: Vec<LocationCode> = Vec::new();
    let mut frames: Vec<u32> = Vec::new();
    let (mut events, mut last_us) = (0i64, 0i64);

    let mut ev = reader.events(true);
    while let Some(item) = ev.next_event_with_locations() {
        let (dt, event, table) = item?;
        events += 1;
        let time_us = dt.as_micros();
        last_us = last_us.max(time_us);
        match event {
            Event::Alloc(a) => {
                let bt = backtraces.intern(a.domain, a.common_prefix, &a.backtrace);
                if backtraces.site(bt).is_none() {
                    backtraces.set_site(bt, 0);
                    backtraces.codes_into(bt, &mut path);
                    // Frames caller first, each code's locations in the trace's
                    // order (its last is innermost), new codes' locations written.
                    frames.clear();
                    for &code in &path {
                        let (first, count) = match codes.get(&code) {
                            Some(&ids) => ids,
                            None => {
                                let ids = write_locations(&mut locs, table, code, next_location)?;
                                next_location += ids.1;
                                codes.insert(code, ids);
                                ids
                            }
                        };
                        frames.extend(first..first + count);
                    }
                    for (position, &location) in frames.iter().rev().enumerate() {
                        let c = &mut bts.cols;
                        c.backtrace_id.append_value(i64::from(bt.0));
                        c.position.append_value(position as i32);
                        c.location_id.append_value(i64::from(location));
                        bts.row_done()?;
                    }
                }
                let row = Live {
                    domain: a.domain.get(),
                    time_us,
                    source: a.source,
                    nsamples: a.nsamples,
                    length: a.length,
                    promote_time_us: None,
                    backtrace_id: bt.0,
                };
                // An id seen twice (a damaged trace): the first object's row is
                // written as it stands rather than lost.
                if let Some(old) = live.insert(a.obj_id.get(), row) {
                    write_alloc(&mut allocs, a.obj_id.get(), &old, None, bytes_per_sample)?;
                }
            }
            Event::Promote(id, _) => {
                if let Some(l) = live.get_mut(&id.get()) {
                    l.promote_time_us.get_or_insert(time_us);
                }
            }
            Event::Collect(id, _) => {
                if let Some(l) = live.remove(&id.get()) {
                    write_alloc(&mut allocs, id.get(), &l, Some(time_us), bytes_per_sample)?;
                }
            }
        }
    }
    let warnings = ev.warnings().iter().map(|w| w.to_string()).collect();
    drop(ev);
    let mut survivors: Vec<_> = live.into_iter().collect();
    survivors.sort_unstable_by_key(|(id, _)| *id);
    for (id, l) in &survivors {
        write_alloc(&mut allocs, *id, l, None, bytes_per_sample)?;
    }

    let traces = traces::write(
        files,
        TraceRow {
            kind: "memtrace",
            file: options.file.clone(),
            format_version: Some(i32::from(format_version.number())),
            executable: Some(info.executable_name.to_string()),
            host: Some(info.host_name.to_string()),
            pid: Some(info.pid),
            start_time_us: Some(info.start_time.as_micros()),
            duration_us: last_us,
            sample_rate: Some(info.sample_rate),
            word_size: Some(i32::from(info.word_size)),
            bytes_per_sample: Some(bytes_per_sample),
            context: info.context.as_ref().map(|c| c.to_string()),
            events,
        },
    )?;

    let rows = vec![
        (TRACES.name, traces),
        (ALLOCATIONS.name, allocs.finish()?),
        (BACKTRACES.name, bts.finish()?),
        (LOCATIONS.name, locs.finish()?),
    ];
    Ok(Summary {
        trace_id: Some(files.trace_id()),
        rows,
        warnings,
    })
}

/// Writes the locations of `code` with ids from `first`; `(first, count)`. A code the
/// trace never described gets one row with nulls.
fn write_locations(
    locs: &mut TableWriter<LocationCols>,
    table: &dyn LocationLookup,
    code: LocationCode,
    first: u32,
) -> Result<(u32, u32)> {
    let described = table.locations(code).unwrap_or_default();
    let count = described.len().max(1) as u32;
    for i in 0..count {
        let c = &mut locs.cols;
        c.location_id.append_value(i64::from(first + i));
        c.code.append_value(code.get());
        match described.get(i as usize) {
            Some(l) => {
                c.function.append_value(l.defname.to_string());
                c.file.append_value(l.filename.to_string());
                c.line.append_value(l.line as i32);
                c.start_column.append_value(l.start_char as i32);
                c.end_column.append_value(l.end_char as i32);
                c.label.append_value(l.to_string());
            }
            None => {
                c.function.append_null();
                c.file.append_null();
                c.line.append_null();
                c.start_column.append_null();
                c.end_column.append_null();
                c.label.append_value(format!("${code}"));
            }
        }
        locs.row_done()?;
    }
    Ok((first, count))
}

fn write_alloc(
    allocs: &mut TableWriter<AllocCols>,
    obj_id: u64,
    l: &Live,
    collect_time_us: Option<i64>,
    bytes_per_sample: f64,
) -> Result<()> {
    let c = &mut allocs.cols;
    c.obj_id.append_value(obj_id as i64);
    c.domain.append_value(i32::from(l.domain));
    c.time_us.append_value(l.time_us);
    c.source.append_value(l.source.name());
    c.nsamples.append_value(l.nsamples as i64);
    c.length_words.append_value(l.length as i64);
    c.estimated_bytes
        .append_value(l.nsamples as f64 * bytes_per_sample);
    c.promoted.append_value(l.promote_time_us.is_some());
    c.promote_time_us.append_option(l.promote_time_us);
    c.collect_time_us.append_option(collect_time_us);
    c.backtrace_id.append_value(i64::from(l.backtrace_id));
    allocs.row_done()
}
