//! Edges of tracing, each checked on a child process running the `edges`
//! example: whatever goes wrong with the trace, the traced program runs on
//! with its output and exit status intact, and the tracer says so once on
//! stderr.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn run(binary: &Path, mode: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary);
    cmd.arg(mode)
        .env_remove("MEMTRACE")
        .env_remove("MEMTRACE_RATE")
        .env_remove("RUST_BACKTRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the edges example")
}

/// The tracer's lines on stderr.
fn tracer_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("tracekit-alloc: "))
        .map(str::to_owned)
        .collect()
}

/// The program exited 0 and printed its last line.
fn assert_ran_to_the_end(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}, stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "edges: done\n");
}

fn one_warning(out: &Output, needles: &[&str]) {
    let lines = tracer_lines(out);
    assert_eq!(lines.len(), 1, "tracer lines: {lines:?}");
    for n in needles {
        assert!(lines[0].contains(n), "{:?} lacks {n:?}", lines[0]);
    }
}

#[test]
fn invalid_rate_warns_and_runs_untraced() {
    let trace = common::temp_path("bad-rate.ctf");
    let out = run(
        &common::example("edges"),
        "work",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "potato"),
        ],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["MEMTRACE_RATE=\"potato\"", "runs untraced"]);
    assert!(!trace.exists(), "no trace is started");
}

#[test]
fn unwritable_path_warns_and_runs_untraced() {
    let out = run(
        &common::example("edges"),
        "work",
        &[("MEMTRACE", "/nonexistent-tracekit-dir/trace.ctf")],
    );
    assert_ran_to_the_end(&out);
    one_warning(
        &out,
        &[
            "cannot open trace file /nonexistent-tracekit-dir/trace.ctf",
            "runs untraced",
        ],
    );
}

#[test]
fn dev_full_warns_and_runs_untraced() {
    let out = run(
        &common::example("edges"),
        "work",
        &[("MEMTRACE", "/dev/full"), ("MEMTRACE_RATE", "1.0")],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["/dev/full", "No space left on device"]);
}

#[test]
fn disk_full_while_tracing_warns_once_and_keeps_what_was_written() {
    let trace = common::temp_path("disk-full.ctf");
    let out = run(
        &common::example("edges"),
        "disk-full",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["No space left on device", "tracing stopped"]);
    // What the flush before the disk filled wrote is a valid trace.
    let t = common::read_trace(&trace);
    assert_eq!(t.allocs.iter().filter(|a| a.length == 4321).count(), 10);
}

#[test]
fn panic_with_abort_leaves_a_trace_with_the_last_events() {
    let trace = common::temp_path("panic-abort.ctf");
    let out = run(
        &common::example_plain_abort("edges"),
        "panic",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("edges: deliberate panic"),
        "the previous hook ran: {stderr}"
    );
    // Allocated microseconds before the panic, long before the periodic
    // flush: only the panic hook can have written them.
    let t = common::read_trace(&trace);
    assert_eq!(t.warnings, 0);
    let marked: Vec<_> = t.allocs.iter().filter(|a| a.length == 4321).collect();
    assert_eq!(marked.len(), 10);
    for a in marked {
        let names: Vec<String> = a
            .backtrace
            .iter()
            .flat_map(|c| t.locations.get(c).into_iter().flatten())
            .map(|l| l.defname.to_str_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n == "edges::marker_blocks"),
            "backtrace {names:?}"
        );
    }
}
