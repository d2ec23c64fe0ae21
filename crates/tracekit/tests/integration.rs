//! The integration tests of `tracekit`, one binary: a module per subject.

#[path = "../../tracekit-analysis/tests/dump/mod.rs"]
mod dump;
mod edges;
mod export_cli;
mod features;
mod fxt_cli;
mod memory;
mod memtrace_analysis;
mod memtrace_cli;
mod perf_cli;
mod perf_record;
mod sql_cli;
mod view;
