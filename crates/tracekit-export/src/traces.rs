//! The `traces` table: one row per export, written by each exporter from what its
//! format knows (a null where it knows nothing).

use arrow_array::builder::{Float64Builder, Int32Builder, Int64Builder, StringBuilder};

use crate::schema::TRACES;
use crate::table::{TableWriter, columns};
use crate::{Result, TraceFiles};

columns!(
    /// `traces` after `trace_id`.
    TraceCols {
        kind: StringBuilder,
        file: StringBuilder,
        format_version: Int32Builder,
        executable: StringBuilder,
        host: StringBuilder,
        pid: Int64Builder,
        start_time_us: Int64Builder,
        duration_us: Int64Builder,
        sample_rate: Float64Builder,
        word_size: Int32Builder,
        bytes_per_sample: Float64Builder,
        context: StringBuilder,
        events: Int64Builder,
    }
);

/// A trace's row (see [`crate::schema::TRACES`] for each column).
#[derive(Debug, Default)]
pub(crate) struct TraceRow {
    pub(crate) kind: &'static str,
    pub(crate) file: String,
    pub(crate) format_version: Option<i32>,
    pub(crate) executable: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) pid: Option<i64>,
    pub(crate) start_time_us: Option<i64>,
    pub(crate) duration_us: i64,
    pub(crate) sample_rate: Option<f64>,
    pub(crate) word_size: Option<i32>,
    pub(crate) bytes_per_sample: Option<f64>,
    pub(crate) context: Option<String>,
    pub(crate) events: i64,
}

/// Writes the `traces` table of `files`: the one row `row`; the rows written.
pub(crate) fn write(files: &mut TraceFiles, row: TraceRow) -> Result<u64> {
    let mut t: TableWriter<TraceCols> = TableWriter::new(files, TRACES.name, TRACES.schema(), 1)?;
    let c = &mut t.cols;
    c.kind.append_value(row.kind);
    c.file.append_value(row.file);
    c.format_version.append_option(row.format_version);
    c.executable.append_option(row.executable);
    c.host.append_option(row.host);
    c.pid.append_option(row.pid);
    c.start_time_us.append_option(row.start_time_us);
    c.duration_us.append_value(row.duration_us);
    c.sample_rate.append_option(row.sample_rate);
    c.word_size.append_option(row.word_size);
    c.bytes_per_sample.append_option(row.bytes_per_sample);
    c.context.append_option(row.context);
    c.events.append_value(row.events);
    t.row_done()?;
    t.finish()
}
