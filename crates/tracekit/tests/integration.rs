//! The integration tests of `tracekit`, one binary: a module per subject.

/// The `tracekit` binary under test: every module runs it through this.
const TRACEKIT: tracekit_testutil::Program =
    tracekit_testutil::Program::new(env!("CARGO_BIN_EXE_tracekit"));

/// Folded stacks (`stack weight` lines), each stack's weight.
#[allow(clippy::unwrap_used)]
fn folded_weights(text: &str) -> std::collections::BTreeMap<String, u64> {
    let lines = text.lines().map(|l| l.rsplit_once(' ').unwrap());
    lines
        .map(|(s, w)| (s.to_string(), w.parse().unwrap()))
        .collect()
}

/// A differential folded line, `stack A B`: the stack and both weights.
#[allow(clippy::unwrap_used)]
fn diff_line(line: &str) -> (&str, u64, u64) {
    let mut parts = line.rsplitn(3, ' ');
    let (b, a) = (parts.next().unwrap(), parts.next().unwrap());
    (
        parts.next().unwrap(),
        a.parse().unwrap(),
        b.parse().unwrap(),
    )
}

#[path = "integration/conventions.rs"]
mod conventions;
#[path = "../../tracekit-analysis/tests/dump/mod.rs"]
mod dump;
#[path = "integration/edges.rs"]
mod edges;
#[path = "integration/export_cli.rs"]
mod export_cli;
#[path = "integration/features.rs"]
mod features;
#[path = "integration/fxt_cli.rs"]
mod fxt_cli;
#[path = "integration/memory.rs"]
mod memory;
#[path = "integration/memtrace_analysis.rs"]
mod memtrace_analysis;
#[path = "integration/memtrace_cli.rs"]
mod memtrace_cli;
#[path = "integration/naming.rs"]
mod naming;
#[path = "integration/perf_cli.rs"]
mod perf_cli;
#[path = "integration/perf_record.rs"]
mod perf_record;
#[path = "integration/sql_cli.rs"]
mod sql_cli;
#[path = "integration/view.rs"]
mod view;
