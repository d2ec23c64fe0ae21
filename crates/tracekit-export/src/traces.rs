//! The `traces` table: one row per export, written by each exporter from what its
//! format knows (a null where it knows nothing).

use arrow_array::builder::StringBuilder;

use crate::schema::TRACES;
use crate::table::{self, I64, OptF64, OptI32, OptI64, columns};
use crate::{Result, TraceFiles};

columns!(
    /// `traces` after `trace_id`.
    TraceCols {
        kind: StringBuilder,
        file: StringBuilder,
        format_version: OptI32,
        executable: StringBuilder,
        host: StringBuilder,
        pid: OptI64,
        start_time_us: OptI64,
        duration_us: I64,
        sample_rate: OptF64,
        word_size: OptI32,
        bytes_per_sample: OptF64,
        context: StringBuilder,
        events: I64,
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
    let mut c = TraceCols::default();
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
    table::write_small(files, TRACES.name, TRACES.schema(), c, 1)
}
