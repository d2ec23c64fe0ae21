//! The tables an export writes, every column with its type and unit: the one
//! description from which the Parquet schemas are made and the README's schema
//! section is rendered ([`markdown`]; a test keeps the two equal).
//!
//! Types are Parquet's: `string` (UTF-8; names that are not UTF-8 in the trace are
//! converted lossily), `int32`, `int64`, `double`, `boolean`. Every table starts with
//! `trace_id`, which joins it to `traces`.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// A column: name, type, whether it can be null, and what it holds.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// The column's name.
    pub name: &'static str,
    /// Its type.
    pub ty: Type,
    /// Whether it can be null.
    pub nullable: bool,
    /// What it holds, with the unit.
    pub doc: &'static str,
}

/// A column type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// UTF-8 text.
    String,
    /// A 32-bit signed integer.
    Int32,
    /// A 64-bit signed integer.
    Int64,
    /// A 64-bit float.
    Double,
    /// A boolean.
    Boolean,
}

impl Type {
    fn arrow(self) -> DataType {
        match self {
            Type::String => DataType::Utf8,
            Type::Int32 => DataType::Int32,
            Type::Int64 => DataType::Int64,
            Type::Double => DataType::Float64,
            Type::Boolean => DataType::Boolean,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Double => "double",
            Type::Boolean => "boolean",
        }
    }
}

/// A table: its name (its folder in the dataset), what a row is, and its columns.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// The table's name.
    pub name: &'static str,
    /// What one row stands for.
    pub row: &'static str,
    /// Its columns, `trace_id` first.
    pub columns: &'static [Column],
}

impl Table {
    /// The table's Arrow schema.
    pub fn schema(&self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
            .collect();
        Arc::new(Schema::new(fields))
    }
}

const fn col(name: &'static str, ty: Type, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: false,
        doc,
    }
}

const fn opt(name: &'static str, ty: Type, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: true,
        doc,
    }
}

const TRACE_ID: Column = col(
    "trace_id",
    Type::String,
    "the trace (16 hex digits, a hash of the file's bytes)",
);

/// One row per exported trace.
pub const TRACES: Table = Table {
    name: "traces",
    row: "exported trace",
    columns: &[
        TRACE_ID,
        col("kind", Type::String, "`memtrace`, `fxt` or `perf`"),
        col("file", Type::String, "the input's path, as given to export"),
        opt(
            "format_version",
            Type::Int32,
            "memtrace format version (1, 2 or 3)",
        ),
        opt(
            "executable",
            Type::String,
            "memtrace: the executable's path; FXT: the first process's name",
        ),
        opt("host", Type::String, "memtrace: the host name"),
        opt(
            "pid",
            Type::Int64,
            "memtrace: the process id; FXT: the first process's koid",
        ),
        opt(
            "start_time_us",
            Type::Int64,
            "memtrace: when tracing started, microseconds since the Unix epoch",
        ),
        col(
            "duration_us",
            Type::Int64,
            "time of the last event, microseconds from the start",
        ),
        opt(
            "sample_rate",
            Type::Double,
            "memtrace: the probability that a word allocated is sampled",
        ),
        opt("word_size", Type::Int32, "memtrace: bits in a word"),
        opt(
            "bytes_per_sample",
            Type::Double,
            "memtrace: bytes one sample stands for, `word_size / 8 / sample_rate`",
        ),
        opt(
            "context",
            Type::String,
            "memtrace: the context string the program gave",
        ),
        col(
            "events",
            Type::Int64,
            "events read (memtrace: allocs, promotes and collects; FXT: event records; perf: samples)",
        ),
    ],
};

/// One row per sampled allocation of a memtrace trace.
pub const ALLOCATIONS: Table = Table {
    name: "allocations",
    row: "sampled allocation (memtrace)",
    columns: &[
        TRACE_ID,
        col("obj_id", Type::Int64, "the object's id in the trace"),
        col(
            "domain",
            Type::Int32,
            "the OCaml domain (a Rust program's thread) that allocated it",
        ),
        col(
            "time_us",
            Type::Int64,
            "when it was allocated, microseconds from the trace's start",
        ),
        col("source", Type::String, "`minor`, `major` or `external`"),
        col("nsamples", Type::Int64, "samples that hit it (at least 1)"),
        col(
            "length_words",
            Type::Int64,
            "its size in words, header excluded",
        ),
        col(
            "estimated_bytes",
            Type::Double,
            "bytes it stands for, `nsamples * bytes_per_sample`",
        ),
        col(
            "promoted",
            Type::Boolean,
            "whether it was promoted to the major heap",
        ),
        opt(
            "promote_time_us",
            Type::Int64,
            "when it was promoted, microseconds from the start",
        ),
        opt(
            "collect_time_us",
            Type::Int64,
            "when it was collected (or freed); null if it lived to the end",
        ),
        col(
            "backtrace_id",
            Type::Int64,
            "its backtrace, in `backtraces`",
        ),
        col(
            "site",
            Type::String,
            "its allocation site as `tracekit memtrace top` names it: the innermost frame outside the Rust standard library (`function@file:line:start-end`, generic arguments left out)",
        ),
    ],
};

/// One row per frame of each distinct backtrace of a memtrace trace.
pub const BACKTRACES: Table = Table {
    name: "backtraces",
    row: "frame of each distinct backtrace (memtrace)",
    columns: &[
        TRACE_ID,
        col("backtrace_id", Type::Int64, "the backtrace"),
        col(
            "position",
            Type::Int32,
            "0 for the allocation site (innermost), then outward to the entry point; inlined frames count",
        ),
        col(
            "location_id",
            Type::Int64,
            "the frame's source location, in `locations`",
        ),
    ],
};

/// One row per source location of a memtrace trace.
pub const LOCATIONS: Table = Table {
    name: "locations",
    row: "source location (memtrace)",
    columns: &[
        TRACE_ID,
        col("location_id", Type::Int64, "the location"),
        col(
            "code",
            Type::Int64,
            "the trace's location code; a code with inlined frames has several locations",
        ),
        opt(
            "function",
            Type::String,
            "the enclosing definition, as the trace names it (generic arguments kept); null for a code the trace never described",
        ),
        opt(
            "name",
            Type::String,
            "the function as tracekit's reports, flame graphs, pprof profiles and the view name it by default (generic arguments dropped, closures under their functions); null for a code the trace never described",
        ),
        opt("file", Type::String, "the source file"),
        opt("line", Type::Int32, "the line"),
        opt("start_column", Type::Int32, "the first column"),
        opt("end_column", Type::Int32, "the last column"),
        opt(
            "label",
            Type::String,
            "`function@file:line:start-end`, as the trace names it (generic arguments kept; `allocations.site` is the name `tracekit memtrace top` shows)",
        ),
    ],
};

/// One row per slice of an FXT trace.
pub const SLICES: Table = Table {
    name: "slices",
    row: "slice: a duration begin and its end, a complete event, or an async begin and its end (FXT)",
    columns: &[
        TRACE_ID,
        col("pid", Type::Int64, "the process's koid"),
        col(
            "tid",
            Type::Int64,
            "the thread's koid (0 for an async slice: it is on one of its process's async tracks)",
        ),
        opt("process", Type::String, "the process's name"),
        opt("thread", Type::String, "the thread's name"),
        col("name", Type::String, "the slice's name"),
        col("category", Type::String, "its category"),
        col(
            "start_ns",
            Type::Int64,
            "when it began, nanoseconds of the trace's clock",
        ),
        opt(
            "duration_ns",
            Type::Int64,
            "how long it lasted, nanoseconds; null if still open at the end",
        ),
        opt(
            "depth",
            Type::Int32,
            "nesting on its thread, 0 outermost; null for an async slice",
        ),
        opt(
            "async_id",
            Type::Int64,
            "the async correlation id; null for a thread slice",
        ),
        col(
            "args",
            Type::String,
            "the begin record's arguments as a JSON object",
        ),
    ],
};

/// One row per instant event of an FXT trace.
pub const INSTANTS: Table = Table {
    name: "instants",
    row: "instant event (FXT)",
    columns: &[
        TRACE_ID,
        col("pid", Type::Int64, "the process's koid"),
        col("tid", Type::Int64, "the thread's koid"),
        opt("process", Type::String, "the process's name"),
        opt("thread", Type::String, "the thread's name"),
        col("name", Type::String, "the event's name"),
        col("category", Type::String, "its category"),
        col(
            "time_ns",
            Type::Int64,
            "when, nanoseconds of the trace's clock",
        ),
        col("args", Type::String, "its arguments as a JSON object"),
    ],
};

/// One row per numeric argument of each counter event of an FXT trace.
pub const COUNTERS: Table = Table {
    name: "counters",
    row: "numeric argument of each counter event (FXT)",
    columns: &[
        TRACE_ID,
        col("pid", Type::Int64, "the process's koid"),
        col("tid", Type::Int64, "the thread's koid"),
        col("name", Type::String, "the counter's name"),
        col("category", Type::String, "its category"),
        col("counter_id", Type::Int64, "the counter id"),
        col(
            "time_ns",
            Type::Int64,
            "when, nanoseconds of the trace's clock",
        ),
        col("series", Type::String, "the argument's name"),
        col("value", Type::Double, "its value"),
    ],
};

/// One row per sample of a perf.data recording.
pub const SAMPLES: Table = Table {
    name: "samples",
    row: "sample of a perf.data recording, with its call stack",
    columns: &[
        TRACE_ID,
        opt("pid", Type::Int64, "the process id"),
        opt("tid", Type::Int64, "the thread id"),
        opt("thread", Type::String, "the thread's name (`comm`)"),
        col("time_ns", Type::Int64, "when, nanoseconds of perf's clock"),
        col(
            "stack",
            Type::String,
            "the call stack, root first, frames separated by `;` (the folded form of flame graph tools)",
        ),
        opt(
            "leaf",
            Type::String,
            "the innermost frame; null for an empty stack",
        ),
        col(
            "depth",
            Type::Int32,
            "frames in the stack, inlined ones included",
        ),
    ],
};

/// Every table, in the order the README lists them.
pub const TABLES: &[Table] = &[
    TRACES,
    ALLOCATIONS,
    BACKTRACES,
    LOCATIONS,
    SLICES,
    INSTANTS,
    COUNTERS,
    SAMPLES,
];

/// The schema as Markdown: a heading and a column table per table.
pub fn markdown() -> String {
    let mut s = String::new();
    for t in TABLES {
        s.push_str(&format!("`{}`: a row per {}.\n\n", t.name, t.row));
        s.push_str("| column | type | |\n|---|---|---|\n");
        for c in t.columns {
            let null = if c.nullable { ", null" } else { "" };
            s.push_str(&format!(
                "| `{}` | {}{} | {} |\n",
                c.name,
                c.ty.name(),
                null,
                c.doc
            ));
        }
        s.push('\n');
    }
    s
}
