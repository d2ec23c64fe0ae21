//! The `tracekit memtrace` subcommands as a user runs them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tracekit_testutil::scratch;

use crate::TRACEKIT;

#[test]
fn sample_then_info_and_dump() {
    let tmp = scratch();
    let path = tmp.join("sample.ctf");
    let out = TRACEKIT.run(&[
        "memtrace",
        "sample",
        path.to_str().unwrap(),
        "--allocs",
        "2000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = TRACEKIT.run(&["memtrace", "info", path.to_str().unwrap()]);
    assert!(info.status.success());
    let text = String::from_utf8(info.stdout).unwrap();
    assert!(text.contains("format:          memtrace v003"), "{text}");
    assert!(text.contains("2000 allocs"), "{text}");
    let json = TRACEKIT.run(&["memtrace", "info", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["allocs"], 2000);
    assert_eq!(v["format_version"], 3);
    let dump = TRACEKIT.run(&["memtrace", "dump", path.to_str().unwrap()]);
    assert!(dump.status.success());
    let dump = String::from_utf8(dump.stdout).unwrap();
    assert!(dump.starts_with("# memtrace-dump 1\n"));
    assert!(
        dump.contains(" allocs=2000 "),
        "{}",
        dump.lines().last().unwrap()
    );
}

#[test]
fn missing_and_foreign_files_give_one_line_errors() {
    let out = TRACEKIT.run(&["memtrace", "dump", "/nonexistent/trace.ctf"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot open /nonexistent/trace.ctf"),
        "{err}"
    );

    let tmp = scratch();
    let path = tmp.join("not-a-trace.txt");
    std::fs::write(
        &path,
        "hello, this is not a trace at all, but it is long enough to hold a header\n",
    )
    .unwrap();
    let out = TRACEKIT.run(&["memtrace", "info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("not-a-trace.txt: not a memtrace trace") && err.contains("it is text"),
        "{err}"
    );
}

#[test]
fn damaged_trace_prints_events_then_error() {
    let tmp = scratch();
    let src = tmp.join("whole.ctf");
    TRACEKIT.run(&[
        "memtrace",
        "sample",
        src.to_str().unwrap(),
        "--allocs",
        "3000",
    ]);
    let bytes = std::fs::read(&src).unwrap();
    // Flip a byte inside the second packet's events: decoding stops there.
    let mut damaged = bytes.clone();
    let at = bytes.len() / 2;
    damaged[at] ^= 0xff;
    damaged[at + 1] ^= 0xff;
    let path = tmp.join("damaged.ctf");
    std::fs::write(&path, &damaged).unwrap();
    let out = TRACEKIT.run(&["memtrace", "dump", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(2) {
        assert!(
            stdout.lines().any(|l| l.starts_with("error: ")),
            "{stdout:.500}"
        );
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    } else {
        // The flipped bytes happened to decode; the dump still ended cleanly.
        assert!(out.status.success());
    }
    assert!(stdout.lines().last().unwrap().starts_with("# summary: "));
}

#[test]
fn corpus_dump_and_copy() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    let tmp = scratch();
    let trace = dir.join("traces/external_truncated_v2.ctf");
    let out = TRACEKIT.run(&["memtrace", "dump", trace.to_str().unwrap()]);
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("skipping truncated packet"), "{err}");

    let copy = tmp.join("copy.ctf");
    let src = dir.join("traces/lists_hashtbl_v2.ctf");
    let out = TRACEKIT.run(&[
        "memtrace",
        "copy",
        src.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read(dir.join("traces/lists_hashtbl_v3copy.ctf")).unwrap();
    assert!(std::fs::read(&copy).unwrap() == expected);

    let v2 = tmp.join("copy_v2.ctf");
    let out = TRACEKIT.run(&[
        "memtrace",
        "copy",
        "--format-version",
        "2",
        src.to_str().unwrap(),
        v2.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    // A v2 copy of a v0.2.3 trace is the original, byte for byte.
    assert!(std::fs::read(&v2).unwrap() == std::fs::read(&src).unwrap());

    let domains = dir.join("traces/synth_domains_v3.ctf");
    let bad = tmp.join("copy_domains_v2.ctf");
    let out = TRACEKIT.run(&[
        "memtrace",
        "copy",
        "--format-version",
        "2",
        domains.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!bad.exists(), "a failed copy leaves no partial output");
}
