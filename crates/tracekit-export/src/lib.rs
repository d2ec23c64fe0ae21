//! Traces as tables: memtrace allocation traces and FXT timelines exported as
//! Apache Parquet files that SQL engines query directly (DuckDB, Spark, Trino,
//! pyarrow), so that a fleet's traces answer fleet questions ("which call sites grew
//! across all hosts since the last release?").
//!
//! An export writes one Parquet file per table and trace into a directory laid out as
//! a dataset: `DIR/<table>/<trace_id>.parquet`. Engines read each table as one
//! (`read_parquet('DIR/allocations/*.parquet')` in DuckDB,
//! `spark.read.parquet("DIR/allocations")` in Spark). A trace's id is a hash of its
//! bytes, so exporting the same trace again replaces its files instead of adding
//! rows twice, and traces exported on different machines go side by side.
//!
//! Every table has `trace_id` as its first column. Types are signed (Spark reads no
//! unsigned Parquet integers) and times are integers with their unit in the column
//! name. [`schema`] lists every table and column with its type and unit.
//!
//! Memory is bounded: rows are written in row groups of
//! [`ExportOptions::row_group_rows`] as the trace is read. What an export keeps
//! beyond that is what the trace needs to be read at all: for memtrace, the sampled
//! objects still live (an allocation's row is complete once the object is collected,
//! or at the end) and a hash per distinct backtrace; for FXT, the slices
//! still open.

mod dataset;
pub mod fxt;
pub mod memtrace;
pub mod perf;
pub mod schema;
mod table;
mod traces;

use std::fmt;
use std::path::{Path, PathBuf};

use tracekit_columns::fnv::Fnv;

pub use dataset::{MemoryTable, MemoryTables, TraceFiles};

/// A trace's id: a hash of its length and its first and last bytes (a memtrace
/// trace starts with its process's pid, start time and host), shown as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub u64);

impl TraceId {
    /// The id of the trace whose bytes are `bytes`.
    pub fn of(bytes: &[u8]) -> TraceId {
        // FNV-1a: stable across releases and platforms, which a std hasher is not.
        const HEAD: usize = 64 * 1024;
        const TAIL: usize = 4096;
        let head = &bytes[..bytes.len().min(HEAD)];
        let tail = &bytes[bytes.len().saturating_sub(TAIL).max(head.len())..];
        let h = Fnv::new()
            .write(&(bytes.len() as u64).to_le_bytes())
            .write(head)
            .write(tail)
            .finish();
        TraceId(h)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// How to export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Rows per Parquet row group (and per batch handed to the writer): what bounds
    /// the memory the tables take while they are written.
    pub row_group_rows: usize,
    /// The input's name as the `traces` table records it (`file`).
    pub file: String,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            row_group_rows: 256 * 1024,
            file: String::new(),
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The trace's id.
    pub trace_id: Option<TraceId>,
    /// Rows written, by table, in the order the tables were written.
    pub rows: Vec<(&'static str, u64)>,
    /// Problems the reader reported and went past (a damaged packet skipped).
    pub warnings: Vec<String>,
}

impl Summary {
    /// Rows written to `table` (0 if it was not written).
    pub fn rows(&self, table: &str) -> u64 {
        self.rows
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(0, |(_, n)| *n)
    }
}

/// Why an export failed. Nothing of the trace is left in the output directory then.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The memtrace trace could not be read.
    #[error(transparent)]
    Memtrace(#[from] tracekit_memtrace::ReadError),
    /// The FXT file could not be read.
    #[error(transparent)]
    Fxt(#[from] tracekit_fxt::read::ReadError),
    /// The perf.data recording could not be read.
    #[error("{0}")]
    Perf(String),
    /// Writing a table failed. The cause is the error's source, not part of its
    /// message, so that an error chain (`{:#}`) says it once.
    #[error("writing {}", path.display())]
    Write {
        /// The file being written.
        path: PathBuf,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    fn write(path: &Path, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Write {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

/// What kind of trace an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A memtrace trace (`.ctf`).
    Memtrace,
    /// A Fuchsia trace (`.fxt`).
    Fxt,
    /// A sampled perf.data recording.
    Perf,
}

/// Exports trace `bytes` of kind `input` into dataset directory `dir`: every table's
/// file lands at once when all are written, replacing an earlier export of the same
/// trace; on an error nothing of it is left.
pub fn export(bytes: &[u8], input: Input, dir: &Path, options: &ExportOptions) -> Result<Summary> {
    let files = TraceFiles::new(dir, TraceId::of(bytes))?;
    export_into(bytes, input, files, options)
}

/// [`export`] through `files` (made with [`TraceFiles::with_temp_dir`] by a caller
/// that keeps track of its temporary folder).
pub fn export_into(
    bytes: &[u8],
    input: Input,
    mut files: TraceFiles,
    options: &ExportOptions,
) -> Result<Summary> {
    let summary = write_tables(bytes, input, &mut files, options)?;
    files.commit()?;
    Ok(summary)
}

/// The tables of trace `bytes` of kind `input`, as [`export`] writes them but kept
/// in memory: for a query over a trace that writes no file.
pub fn export_to_memory(
    bytes: &[u8],
    input: Input,
    options: &ExportOptions,
) -> Result<(Summary, MemoryTables)> {
    let mut files = TraceFiles::in_memory(TraceId::of(bytes));
    let summary = write_tables(bytes, input, &mut files, options)?;
    Ok((summary, files.into_memory()))
}

/// Writes the tables of trace `bytes` into `files`, leaving them out of place until
/// the caller's [`TraceFiles::commit`]: a command that reports what an interrupt
/// left in the dataset commits where the interrupt cannot cut in.
pub fn write_tables(
    bytes: &[u8],
    input: Input,
    files: &mut TraceFiles,
    options: &ExportOptions,
) -> Result<Summary> {
    match input {
        Input::Memtrace => memtrace::export(bytes, files, options),
        Input::Fxt => fxt::export(bytes, files, options),
        Input::Perf => perf::export(bytes, files, options),
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_are_stable_and_tell_traces_apart() {
        // The value is part of every export: a change would duplicate re-exported
        // traces in a dataset.
        assert_eq!(TraceId::of(b"").to_string(), "a8c7f832281a39c5");
        let mut a = vec![7u8; 100_000];
        let b = a.clone();
        assert_eq!(TraceId::of(&a), TraceId::of(&b));
        // A difference in the tail counts; one in the middle, past the head, does not.
        a[99_999] = 8;
        assert_ne!(TraceId::of(&a), TraceId::of(&b));
        assert_ne!(TraceId::of(&b[..99_999]), TraceId::of(&b));
    }
}
