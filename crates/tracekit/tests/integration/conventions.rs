//! The command line's conventions, across the subcommands: `-o FILE` wherever a
//! file is written (the older positional kept) with one default name per kind and
//! the format following `--json`/`--svg` or the name; `-q`; `--limit`; diagnostics
//! said once (`fxt check` counts, SQL errors, unknown query names); warnings about
//! times after a trace's end and browsers that did not start; exit codes on
//! damaged inputs as the README states them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tracekit_testutil::{scratch, stderr, stdout};

use crate::{TRACEKIT, diff_line, folded_weights};

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_written_file_takes_dash_o_the_old_positional_and_a_default_name() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(
        d,
        &["memtrace", "sample", "-o", "a.ctf", "--allocs", "2000"],
    );
    TRACEKIT.ok_in(d, &["memtrace", "sample", "b.ctf", "--allocs", "100"]);
    TRACEKIT.ok_in(d, &["memtrace", "sample", "--allocs", "100"]);
    TRACEKIT.ok_in(d, &["memtrace", "copy", "a.ctf", "-o", "c.ctf"]);
    TRACEKIT.ok_in(d, &["memtrace", "copy", "a.ctf", "d.ctf"]);
    TRACEKIT.ok_in(d, &["memtrace", "copy", "a.ctf"]);
    TRACEKIT.ok_in(d, &["memtrace", "to-fxt", "a.ctf"]);
    TRACEKIT.ok_in(d, &["fxt", "copy", "a.fxt", "--output", "e.fxt"]);
    TRACEKIT.ok_in(d, &["fxt", "copy", "a.fxt", "f.fxt"]);
    TRACEKIT.ok_in(d, &["fxt", "copy", "a.fxt"]);
    TRACEKIT.ok_in(d, &["fxt", "to-json", "a.fxt", "-o", "g.json"]);
    TRACEKIT.ok_in(d, &["fxt", "to-json", "a.fxt", "h.json"]);
    TRACEKIT.ok_in(d, &["fxt", "to-json", "a.fxt"]);
    for name in [
        "a.ctf",
        "b.ctf",
        "trace.ctf",
        "c.ctf",
        "d.ctf",
        "a.copy.ctf",
        "a.fxt",
        "e.fxt",
        "f.fxt",
        "a.copy.fxt",
        "g.json",
        "h.json",
        "a.json",
    ] {
        assert!(d.join(name).is_file(), "{name} missing");
    }
    assert_eq!(
        std::fs::read(d.join("c.ctf")).unwrap(),
        std::fs::read(d.join("d.ctf")).unwrap()
    );
    assert_eq!(read(d.join("g.json")), read(d.join("a.json")));
    let json = stdout(&TRACEKIT.ok_in(d, &["fxt", "to-json", "a.fxt", "-o", "-"]));
    assert_eq!(json, read(d.join("g.json")));
    // Both spellings at once are refused by the parser.
    let o = TRACEKIT.run_in(d, &["memtrace", "copy", "a.ctf", "x.ctf", "-o", "y.ctf"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_name_that_says_another_format_is_refused_before_anything_is_written() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(
        d,
        &["memtrace", "sample", "-o", "a.ctf", "--allocs", "2000"],
    );
    TRACEKIT.ok_in(d, &["memtrace", "to-fxt", "a.ctf", "-o", "a.fxt"]);
    for (args, named) in [
        (&["fxt", "to-json", "a.fxt", "-o", "x.svg"][..], "x.svg"),
        (&["fxt", "copy", "a.fxt", "-o", "x.json"][..], "x.json"),
        (&["memtrace", "copy", "a.ctf", "-o", "x.fxt"][..], "x.fxt"),
        (&["memtrace", "to-fxt", "a.ctf", "-o", "x.ctf"][..], "x.ctf"),
        (
            &["memtrace", "flamegraph", "a.ctf", "--json", "-o", "x.svg"][..],
            "x.svg",
        ),
        (
            &["memtrace", "timeline", "a.ctf", "--json", "-o", "x.svg"][..],
            "x.svg",
        ),
    ] {
        let o = TRACEKIT.run_in(d, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("error: {named}: this command writes ")),
            "{err}"
        );
        assert!(err.contains("but the name says"), "{err}");
        assert!(!d.join(named).exists(), "{args:?} wrote {named}");
    }
}

#[test]
fn flame_graphs_and_plots_are_written_in_the_format_their_name_says() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(
        d,
        &["memtrace", "sample", "-o", "a.ctf", "--allocs", "2000"],
    );
    TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf", "-o", "f.svg"]);
    assert!(read(d.join("f.svg")).contains("<svg"));
    TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf", "--svg", "old.svg"]);
    assert!(read(d.join("old.svg")).contains("<svg"));
    TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf", "-o", "f.json"]);
    let v: serde_json::Value = serde_json::from_str(&read(d.join("f.json"))).unwrap();
    let printed = stdout(&TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf", "--json"]));
    assert_eq!(
        v,
        serde_json::from_str::<serde_json::Value>(&printed).unwrap()
    );
    TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf", "-o", "f.folded"]);
    let folded = stdout(&TRACEKIT.ok_in(d, &["memtrace", "flamegraph", "a.ctf"]));
    assert_eq!(read(d.join("f.folded")), folded);
    TRACEKIT.ok_in(d, &["memtrace", "timeline", "a.ctf", "-o", "t.svg"]);
    assert!(read(d.join("t.svg")).contains("<svg"));
    TRACEKIT.ok_in(d, &["memtrace", "timeline", "a.ctf", "-o", "t.csv"]);
    let csv = stdout(&TRACEKIT.ok_in(d, &["memtrace", "timeline", "a.ctf"]));
    assert_eq!(read(d.join("t.csv")), csv);

    let Some(perf) = tracekit_testutil::corpus_path("magic-trace/c_demo_sampling.perf") else {
        return;
    };
    let perf = perf.to_str().unwrap();
    TRACEKIT.ok_in(d, &["perf", "flamegraph", perf, "-o", "p.svg"]);
    assert!(read(d.join("p.svg")).contains("<svg"));
    TRACEKIT.ok_in(d, &["perf", "flamegraph", perf, "-o", "p.folded"]);
    let folded = stdout(&TRACEKIT.ok_in(d, &["perf", "flamegraph", perf]));
    assert_eq!(read(d.join("p.folded")), folded);
    let o = TRACEKIT.run_in(d, &["perf", "flamegraph", perf, "-o", "p.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("p.json: this command writes text here, but the name says JSON"));
    assert!(!d.join("p.json").exists());

    // Compared with another recording: each stack with both counts, the
    // baseline's first; normalized, the baseline adds up to this one's total.
    let Some(base) = tracekit_testutil::corpus_path("magic-trace/ocaml_demo_sampling.perf") else {
        return;
    };
    let base = base.to_str().unwrap();
    let (wa, wb) = (
        folded_weights(&stdout(&TRACEKIT.ok_in(d, &["perf", "flamegraph", base]))),
        folded_weights(&folded),
    );
    let sum = |m: &std::collections::BTreeMap<String, u64>| m.values().sum::<u64>();
    for (normalize, total_a) in [(false, sum(&wa)), (true, sum(&wb))] {
        let mut args = vec!["perf", "flamegraph", "--diff", base, perf];
        if normalize {
            args.push("--normalize");
        }
        let diff = stdout(&TRACEKIT.ok_in(d, &args));
        let (mut a, mut b, mut lines) = (0, 0, 0);
        for line in diff.lines() {
            let (stack, na, nb) = diff_line(line);
            assert_eq!(nb, wb.get(stack).copied().unwrap_or(0), "{stack}");
            if !normalize {
                assert_eq!(na, wa.get(stack).copied().unwrap_or(0), "{stack}");
            }
            (a, b, lines) = (a + na, b + nb, lines + 1);
        }
        assert_eq!((a, b), (total_a, sum(&wb)), "normalized: {normalize}");
        let union: std::collections::BTreeSet<&String> = wa.keys().chain(wb.keys()).collect();
        assert_eq!(lines, union.len());
    }
    TRACEKIT.ok_in(
        d,
        &["perf", "flamegraph", "--diff", base, perf, "-o", "d.svg"],
    );
    assert!(read(d.join("d.svg")).contains("red grew, blue shrank"));
}

#[test]
fn quiet_leaves_only_warnings_and_errors_on_stderr() {
    let dir = scratch();
    let d = dir.path();
    let o = TRACEKIT.ok_in(
        d,
        &[
            "memtrace", "sample", "-q", "-o", "a.ctf", "--allocs", "2000",
        ],
    );
    assert_eq!(stderr(&o), "");
    let loud = TRACEKIT.ok_in(d, &["memtrace", "sample", "-o", "b.ctf", "--allocs", "100"]);
    assert!(
        stderr(&loud).starts_with("wrote b.ctf"),
        "{}",
        stderr(&loud)
    );
    TRACEKIT.ok_in(d, &["memtrace", "to-fxt", "a.ctf", "-o", "a.fxt"]);
    // Anywhere on the line.
    for args in [
        &["-q", "fxt", "copy", "a.fxt", "-o", "b.fxt"][..],
        &["fxt", "copy", "-q", "a.fxt", "-o", "c.fxt"][..],
        &["fxt", "to-json", "a.fxt", "-o", "a.json", "--quiet"][..],
        &["export", "-q", "a.ctf", "-o", "dataset"][..],
    ] {
        let o = TRACEKIT.ok_in(d, args);
        assert_eq!(stderr(&o), "", "{args:?}");
    }
    let o = TRACEKIT.ok_in(d, &["fxt", "copy", "a.fxt", "-o", "d.fxt"]);
    assert!(stderr(&o).starts_with("copied "), "{}", stderr(&o));
    // Errors are never quiet.
    let o = TRACEKIT.run_in(d, &["memtrace", "info", "-q", "missing.ctf"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
}

#[test]
fn limit_bounds_every_listing() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(
        d,
        &["memtrace", "sample", "-o", "a.ctf", "--allocs", "2000"],
    );
    TRACEKIT.ok_in(d, &["memtrace", "to-fxt", "a.ctf", "-o", "a.fxt"]);
    for flag in ["--limit", "-n"] {
        let o = TRACEKIT.ok_in(d, &["fxt", "dump", flag, "3", "a.fxt"]);
        assert_eq!(stdout(&o).lines().count(), 3, "{flag}");
    }
    TRACEKIT.ok_in(d, &["export", "-q", "a.ctf", "-o", "dataset"]);
    let sql = "SELECT obj_id FROM allocations ORDER BY obj_id";
    let all = stdout(&TRACEKIT.ok_in(d, &["sql", sql, "--over", "dataset", "--csv"]));
    let two = stdout(&TRACEKIT.ok_in(
        d,
        &["sql", sql, "--over", "dataset", "--csv", "--limit", "2"],
    ));
    assert!(all.lines().count() > 3);
    assert_eq!(
        two.lines().collect::<Vec<_>>(),
        all.lines().take(3).collect::<Vec<_>>()
    );
    let table = stdout(&TRACEKIT.ok_in(d, &["sql", sql, "--over", "dataset", "--limit", "2"]));
    assert!(table.ends_with("(2 rows)\n"), "{table}");
}

/// An FXT trace with `n` log records: a note for every one.
fn logs_trace(path: &Path, n: u64) {
    use tracekit_fxt::format::Koid;
    use tracekit_fxt::write::{VecDestination, Writer};
    let mut w = Writer::new(VecDestination::new()).unwrap();
    let thread = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
    for t in 0..n {
        w.log(thread, t, b"hello").unwrap();
    }
    std::fs::write(path, w.finish().unwrap().into_vec()).unwrap();
}

#[test]
fn fxt_check_says_a_repeated_note_once_with_its_count() {
    let dir = scratch();
    let d = dir.path();
    logs_trace(&d.join("logs.fxt"), 40);
    let o = TRACEKIT.ok_in(d, &["fxt", "check", "logs.fxt"]);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("log record [ignored by: Perfetto, Jane Street] (40 times, first here)"),
        "{out}"
    );
    assert_eq!(stderr(&o), "note: --verbose lists every offset\n");
    let o = TRACEKIT.ok_in(d, &["fxt", "check", "--verbose", "logs.fxt"]);
    let out = stdout(&o);
    assert_eq!(
        out.lines().filter(|l| l.contains(": log record")).count(),
        40,
        "{out}"
    );
    assert_eq!(stderr(&o), "");
    assert!(stderr(&TRACEKIT.ok_in(d, &["-q", "fxt", "check", "logs.fxt"])).is_empty());
}

#[test]
fn sql_errors_are_said_once_and_unknown_names_get_the_closest() {
    let dir = scratch();
    let d = dir.path();
    let o = TRACEKIT.run_in(d, &["sql", "top-site", "--over", "nowhere"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: unknown query 'top-site'; did you mean top-sites\n"
    );
    TRACEKIT.ok_in(d, &["memtrace", "sample", "-o", "a.ctf", "--allocs", "200"]);
    TRACEKIT.ok_in(d, &["export", "-q", "a.ctf", "-o", "dataset"]);
    let o = TRACEKIT.run_in(
        d,
        &["sql", "SELEC obj_id FROM allocations", "--over", "dataset"],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: SQL error: "), "{err}");
    assert_eq!(err.matches("SQL error").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_time_after_the_trace_s_end_is_warned_about() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(
        d,
        &["memtrace", "sample", "-o", "a.ctf", "--allocs", "2000"],
    );
    for cmd in ["top", "flamegraph", "hot-paths"] {
        let o = TRACEKIT.ok_in(d, &["memtrace", cmd, "a.ctf", "--at", "100000s"]);
        let err = stderr(&o);
        let prefix = "warning: a.ctf: --at 100000s is after the trace's end (";
        assert!(err.lines().any(|l| l.starts_with(prefix)), "{cmd}: {err}");
        let o = TRACEKIT.ok_in(d, &["memtrace", cmd, "a.ctf", "--at", "0s"]);
        assert!(!stderr(&o).contains("after the trace's end"), "{cmd}");
    }
}

#[test]
fn view_open_says_when_no_browser_started() {
    let dir = scratch();
    let d = dir.path();
    TRACEKIT.ok_in(d, &["memtrace", "sample", "-o", "a.ctf", "--allocs", "200"]);
    for (browser, says) in [
        ("false", "warning: no browser started (false exited with "),
        (
            "/nonexistent/browser",
            "warning: cannot start /nonexistent/browser: ",
        ),
    ] {
        let mut child = TRACEKIT
            .command()
            .current_dir(d)
            // No tables kept: the note that says where would come before "stopped".
            .args(["memtrace", "view", "a.ctf", "--open", "--no-cache"])
            .env("BROWSER", browser)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        // A server that ignores Ctrl-C would hold the test (and CI) forever:
        // after a minute it is killed, and the test fails on its status.
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if watch.recv_timeout(Duration::from_secs(60)).is_err() {
                // SAFETY: kill(2) takes two integers and touches no memory of
                // ours. The pid is our own child's, which has not ended in a
                // minute: the test says so on `done` right after waiting for it.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        // The first server's stderr is read to its end; the second's is closed
        // first, as when the terminal that started it is gone: stopping must
        // still be clean, not a panic on the message it can no longer write.
        let reading = browser == "false";
        let mut err = reading.then_some(err);
        // At once, as a user's Ctrl-C may come: the warning can be said before
        // the server is up.
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let mut rest = String::new();
        if let Some(err) = err.as_mut() {
            err.read_to_string(&mut rest).unwrap();
        }
        let status = child.wait().unwrap();
        let _ = done.send(());
        watchdog.join().unwrap();
        assert!(line.starts_with(says), "{line}");
        assert!(line.trim_end().ends_with("yourself"), "{line}");
        assert!(
            status.success(),
            "{browser}: {status}; stderr after the warning: {rest}"
        );
        if reading {
            assert_eq!(rest, "stopped\n");
        }
    }
}
