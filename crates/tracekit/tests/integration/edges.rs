//! What a user meets first: outputs that never destroy inputs or leave partial
//! files, write errors and closed pipes, wrong inputs named as such, standard
//! input streamed, and the messages of the common mistakes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use tracekit_testutil::{scratch, stderr, stdout};

use crate::TRACEKIT;

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Writes a synthetic memtrace trace `name` into `dir`.
fn sample(dir: &Path, name: &str, allocs: u32) -> PathBuf {
    let o = TRACEKIT.run_in(
        dir,
        &["memtrace", "sample", name, "--allocs", &allocs.to_string()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(name)
}

/// A small FXT trace `name` in `dir` (the memtrace sample converted).
fn fxt(dir: &Path, name: &str) -> PathBuf {
    sample(dir, "for-fxt.ctf", 3000);
    let o = TRACEKIT.run_in(dir, &["memtrace", "to-fxt", "for-fxt.ctf", "-o", name]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(dir.join("for-fxt.ctf")).unwrap();
    dir.join(name)
}

/// `perf script` text of magic-trace's corpus (or `None` without the corpus).
fn perf_text() -> Option<PathBuf> {
    tracekit_testutil::corpus_path("magic-trace/hello_world_userspace.perf")
}

fn png(dir: &Path) -> PathBuf {
    let p = dir.join("x.png");
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    bytes.extend_from_slice(&[0x1f, 0x15, 0xc4, 0x89]);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = scratch();
    let a = sample(&dir, "a.ctf", 2000);
    let original = std::fs::read(&a).unwrap();
    std::os::unix::fs::symlink("a.ctf", dir.join("link.ctf")).unwrap();
    std::fs::hard_link(&a, dir.join("hard.ctf")).unwrap();
    std::fs::create_dir(dir.join("x")).unwrap();
    let d = fxt(&dir, "d.fxt");
    let d_bytes = std::fs::read(&d).unwrap();
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["memtrace", "copy", "a.ctf", "a.ctf"],
        vec!["memtrace", "copy", "a.ctf", "link.ctf"],
        vec!["memtrace", "copy", "hard.ctf", "a.ctf"],
        vec!["memtrace", "copy", "a.ctf", "./x/../a.ctf"],
        vec!["memtrace", "to-fxt", "a.ctf", "-o", "link.ctf"],
        vec!["fxt", "copy", "d.fxt", "d.fxt"],
        vec!["fxt", "to-json", "d.fxt", "./x/../d.fxt"],
    ];
    let perf_in = perf_text().map(|p| {
        std::fs::copy(p, dir.join("x.perf")).unwrap();
        dir.join("x.perf")
    });
    if perf_in.is_some() {
        cases.push(vec!["perf", "decode", "x.perf", "-o", "x.perf"]);
        cases.push(vec![
            "perf",
            "decode",
            "x.perf",
            "--transcript",
            "-o",
            "x.perf",
        ]);
    }
    let perf_bytes = perf_in.as_ref().map(|p| std::fs::read(p).unwrap());
    for args in &cases {
        let o = TRACEKIT.run_in(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("error: refusing to write ")
                && stderr(&o).contains("it is the same file as the input"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(&a).unwrap(), original, "{args:?}");
        assert_eq!(std::fs::read(&d).unwrap(), d_bytes, "{args:?}");
        if let (Some(p), Some(b)) = (&perf_in, &perf_bytes) {
            assert_eq!(&std::fs::read(p).unwrap(), b, "{args:?}");
        }
    }
    // `perf decode x.fxt` would by default write x.fxt: refused too.
    if let Some(p) = &perf_in {
        std::fs::rename(p, dir.join("y.fxt")).unwrap();
        let o = TRACEKIT.run_in(&dir, &["perf", "decode", "y.fxt"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    }
}

#[test]
fn a_failed_command_leaves_the_previous_output_and_no_partial_file() {
    let dir = scratch();
    let good = sample(&dir, "good.ctf", 3000);
    // A trace that ends inside a packet header: decoding fails at its end.
    let mut bytes = std::fs::read(&good).unwrap();
    bytes.extend_from_slice(&[0xC1, 0x1F, 0xFC, 0xC1, 0, 0]);
    std::fs::write(dir.join("bad.ctf"), &bytes).unwrap();
    // An FXT trace with a record of size 0 in the middle.
    let d = fxt(&dir, "d.fxt");
    let mut fxt_bytes = std::fs::read(&d).unwrap();
    let mid = (fxt_bytes.len() / 16) * 8;
    fxt_bytes.splice(mid..mid, [0u8; 8]);
    std::fs::write(dir.join("bad.fxt"), &fxt_bytes).unwrap();
    std::fs::write(
        dir.join("junk.perf"),
        "nothing here is perf script output\n",
    )
    .unwrap();
    for name in ["out.ctf", "out.json", "out.fxt", "trace.fxt"] {
        std::fs::write(dir.join(name), "previous").unwrap();
    }
    let before = listing(&dir);
    for args in [
        vec!["memtrace", "copy", "bad.ctf", "out.ctf"],
        vec!["fxt", "to-json", "bad.fxt", "out.json"],
        vec!["fxt", "copy", "bad.fxt", "out.fxt"],
        vec!["perf", "decode", "junk.perf", "-o", "trace.fxt"],
        vec![
            "perf",
            "decode",
            "junk.perf",
            "--transcript",
            "-o",
            "out.json",
        ],
    ] {
        let o = TRACEKIT.run_in(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("error: "), "{args:?}: {e}");
        if args.contains(&"bad.fxt") {
            // The input is named, and the reason given once.
            assert!(e.starts_with("error: bad.fxt: at byte "), "{args:?}: {e}");
            assert_eq!(e.matches("record of size 0").count(), 1, "{args:?}: {e}");
        }
        for name in ["out.ctf", "out.json", "out.fxt", "trace.fxt"] {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).unwrap(),
                "previous",
                "{args:?} changed {name}"
            );
        }
        assert_eq!(listing(&dir), before, "{args:?} left a file behind");
    }
    // A success replaces the file in one step.
    let o = TRACEKIT.run_in(&dir, &["memtrace", "copy", "good.ctf", "out.ctf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(std::fs::read(dir.join("out.ctf")).unwrap(), b"previous");
    assert_eq!(listing(&dir), before);
}

/// Waits until `dir` holds a name starting with `prefix`.
fn wait_for_file(dir: &Path, prefix: &str, child: &mut Child) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if listing(dir).iter().any(|n| n.starts_with(prefix)) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn ctrl_c_leaves_the_previous_output_and_no_partial_file() {
    let dir = scratch();
    let d = fxt(&dir, "d.fxt");
    let bytes = std::fs::read(&d).unwrap();
    std::fs::write(dir.join("out.json"), "previous").unwrap();
    let before = listing(&dir);
    let mut child = TRACEKIT
        .command()
        .current_dir(&dir)
        .args(["fxt", "to-json", "-", "out.json"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // Half the trace, and the pipe held open: the command is mid-way.
    input.write_all(&bytes[..bytes.len() / 2]).unwrap();
    input.flush().unwrap();
    assert!(
        wait_for_file(&dir, ".out.json.", &mut child),
        "the temporary output never appeared"
    );
    // SAFETY: sends SIGINT to our own child, which is alive (not yet waited for).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    drop(input);
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        std::fs::read_to_string(dir.join("out.json")).unwrap(),
        "previous"
    );
    assert_eq!(listing(&dir), before);
}

#[test]
fn write_errors_name_the_output() {
    if !Path::new("/dev/full").exists() {
        eprintln!("SKIPPED: no /dev/full here");
        return;
    }
    let dir = scratch();
    sample(&dir, "a.ctf", 3000);
    fxt(&dir, "d.fxt");
    let mut to_file = vec![
        vec!["fxt", "to-json", "d.fxt", "/dev/full"],
        vec!["fxt", "copy", "d.fxt", "/dev/full"],
        vec!["memtrace", "to-fxt", "a.ctf", "-o", "/dev/full"],
        vec!["memtrace", "sample", "/dev/full", "--allocs", "1000"],
        vec!["memtrace", "copy", "a.ctf", "/dev/full"],
    ];
    if perf_text().is_some() {
        std::fs::copy(perf_text().unwrap(), dir.join("x.perf")).unwrap();
        to_file.push(vec!["perf", "decode", "x.perf", "-o", "/dev/full"]);
    }
    for args in &to_file {
        let o = TRACEKIT.run_in(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("error: writing /dev/full: No space left on device"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let mut to_stdout = vec![
        vec!["memtrace", "dump", "a.ctf"],
        vec!["memtrace", "info", "a.ctf"],
        vec!["memtrace", "info", "a.ctf", "--json"],
        vec!["memtrace", "top", "a.ctf"],
        vec!["memtrace", "top", "a.ctf", "--json"],
        vec!["memtrace", "timeline", "a.ctf"],
        vec!["memtrace", "flamegraph", "a.ctf"],
        vec!["memtrace", "diff", "a.ctf", "a.ctf"],
        vec!["fxt", "dump", "d.fxt"],
        vec!["fxt", "check", "d.fxt"],
        vec!["fxt", "stats", "d.fxt"],
        vec!["fxt", "to-json", "d.fxt", "-"],
    ];
    if perf_text().is_some() {
        to_stdout.push(vec!["perf", "decode", "x.perf", "--transcript"]);
    }
    for args in &to_stdout {
        let o = TRACEKIT
            .command()
            .current_dir(&dir)
            .args(args)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("error: writing standard output: No space left on device"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = scratch();
    sample(&dir, "a.ctf", 20_000);
    fxt(&dir, "d.fxt");
    let mut cases = vec![
        vec!["memtrace", "top", "a.ctf", "--json"],
        vec!["memtrace", "top", "a.ctf"],
        vec!["memtrace", "timeline", "a.ctf"],
        vec!["memtrace", "flamegraph", "a.ctf"],
        vec!["memtrace", "info", "a.ctf", "--json"],
        vec!["memtrace", "dump", "a.ctf"],
        vec!["fxt", "dump", "d.fxt"],
        vec!["fxt", "stats", "d.fxt"],
        vec!["fxt", "to-json", "d.fxt", "-"],
        vec!["fxt", "to-json", "-", "-"],
    ];
    if perf_text().is_some() {
        std::fs::copy(perf_text().unwrap(), dir.join("x.perf")).unwrap();
        cases.push(vec!["perf", "decode", "x.perf", "--transcript"]);
    }
    for args in &cases {
        let stdin = if args.contains(&"-") {
            Stdio::from(std::fs::File::open(dir.join("d.fxt")).unwrap())
        } else {
            Stdio::null()
        };
        let mut child = TRACEKIT
            .command()
            .current_dir(&dir)
            .args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| head -c 0`: the reader goes away before reading anything.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            o.status.code() == Some(0) || o.status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {:?} {}",
            o.status,
            stderr(&o)
        );
        assert_eq!(stderr(&o), "", "{args:?}");
    }
}

#[test]
fn wrong_kinds_of_input_are_named() {
    let dir = scratch();
    sample(&dir, "a.ctf", 1000);
    fxt(&dir, "d.fxt");
    png(&dir);
    std::fs::write(dir.join("empty"), "").unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["fxt", "dump", "a.ctf"],
            "a.ctf: not an FXT file (no magic record)",
            "memtrace trace: use `tracekit memtrace`",
        ),
        (
            &["fxt", "dump", "x.png"],
            "x.png: not an FXT file",
            "PNG image",
        ),
        (
            &["fxt", "check", "empty"],
            "empty: not an FXT file",
            "it is empty",
        ),
        (
            &["fxt", "stats", "a.ctf"],
            "not an FXT file",
            "memtrace trace",
        ),
        (
            &["fxt", "to-json", "x.png", "o.json"],
            "not an FXT file",
            "PNG image",
        ),
        (
            &["fxt", "copy", "empty", "o.fxt"],
            "not an FXT file",
            "it is empty",
        ),
        (
            &["memtrace", "dump", "d.fxt"],
            "d.fxt: not a memtrace trace",
            "FXT trace: use `tracekit fxt`",
        ),
        (
            &["memtrace", "info", "x.png"],
            "x.png: not a memtrace trace",
            "PNG image",
        ),
        (
            &["memtrace", "top", "empty"],
            "empty: not a memtrace trace",
            "it is empty",
        ),
        (
            &["memtrace", "copy", "d.fxt", "o.ctf"],
            "not a memtrace trace",
            "FXT trace",
        ),
        (
            &["perf", "decode", "x.png"],
            "x.png: not `perf script` text or a perf.data file",
            "PNG image",
        ),
        (
            &["perf", "decode", "a.ctf"],
            "not `perf script` text",
            "memtrace trace",
        ),
        (
            &["perf", "decode", "d.fxt", "--transcript"],
            "not `perf script` text",
            "FXT trace",
        ),
        (
            &["perf", "decode", "empty"],
            "empty: not `perf script` text",
            "it is empty",
        ),
        (&["perf", "decode", "/tmp"], "/tmp is a directory", ""),
        (&["memtrace", "dump", "/tmp"], "/tmp is a directory", ""),
        (
            &["fxt", "dump", "missing.fxt"],
            "cannot open missing.fxt",
            "No such file",
        ),
    ];
    for (args, what, kind) in cases {
        let o = TRACEKIT.run_in(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.starts_with("error: ") && e.contains(what) && e.contains(kind),
            "{args:?}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert_eq!(stdout(&o), "", "{args:?} printed data");
    }
    // Nothing was written by the refused conversions.
    assert!(!dir.join("o.json").exists() && !dir.join("o.fxt").exists());
}

#[test]
fn perf_input_without_a_record_fails() {
    let dir = scratch();
    std::fs::write(
        dir.join("junk.txt"),
        "hello\nthis is text, not perf output\n",
    )
    .unwrap();
    for args in [
        vec!["perf", "decode", "junk.txt", "-o", "out.fxt"],
        vec!["perf", "decode", "junk.txt", "--transcript"],
    ] {
        let o = TRACEKIT.run_in(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("error: junk.txt: none of its 2 records is perf script output"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!dir.join("out.fxt").exists());
}

/// Feeds the first part of `input` to `tracekit ARGS` on stdin, holding the pipe
/// open, and checks that output arrives before the rest is sent; then the whole
/// output must equal `expected`.
fn streams(dir: &Path, args: &[&str], input: &[u8], first_part: usize, expected: &str) {
    let mut child = TRACEKIT
        .command()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // The output is read on a thread of its own, chunk by chunk.
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    stdin.write_all(&input[..first_part]).unwrap();
    stdin.flush().unwrap();
    let mut all = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while all.len() < 64 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(chunk) => all.extend_from_slice(&chunk),
            Err(_) => break,
        }
    }
    let early = all.len();
    // Whatever happened, let the command finish so the test cannot hang.
    stdin.write_all(&input[first_part..]).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    all.extend(rx.try_iter().flatten());
    assert!(
        early >= 64,
        "{args:?}: no output before the input ended (got {early} bytes)"
    );
    assert!(status.success(), "{args:?}");
    assert_eq!(String::from_utf8(all).unwrap(), expected, "{args:?}");
}

#[test]
fn standard_input_is_streamed() {
    let dir = scratch();
    let d = fxt(&dir, "d.fxt");
    let bytes = std::fs::read(&d).unwrap();
    let expected = stdout(&TRACEKIT.run_in(&dir, &["fxt", "dump", "d.fxt"]));
    streams(
        &dir,
        &["fxt", "dump", "-"],
        &bytes,
        bytes.len() / 10,
        &expected,
    );
    let a = sample(&dir, "a.ctf", 20_000);
    let bytes = std::fs::read(&a).unwrap();
    let expected = stdout(&TRACEKIT.run_in(&dir, &["memtrace", "dump", "a.ctf"]));
    streams(
        &dir,
        &["memtrace", "dump", "-"],
        &bytes,
        bytes.len() / 10,
        &expected,
    );
    if let Some(p) = perf_text() {
        let bytes = std::fs::read(&p).unwrap();
        let expected = stdout(&TRACEKIT.run_in(
            &dir,
            &["perf", "decode", "--transcript", p.to_str().unwrap()],
        ));
        // Cut at a line end so the first part holds whole records.
        let cut = bytes[..bytes.len() / 10]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap()
            + 1;
        streams(
            &dir,
            &["perf", "decode", "--transcript", "-"],
            &bytes,
            cut,
            &expected,
        );
    }
    // copy reads standard input the same way.
    let o = TRACEKIT
        .command()
        .current_dir(&dir)
        .args(["memtrace", "copy", "-", "b.ctf"])
        .stdin(std::fs::File::open(&a).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&TRACEKIT.run_in(&dir, &["memtrace", "dump", "b.ctf"])),
        stdout(&TRACEKIT.run_in(&dir, &["memtrace", "dump", "a.ctf"]))
    );
    // Analyses read standard input too.
    let from_file = stdout(&TRACEKIT.run_in(&dir, &["memtrace", "top", "a.ctf", "--json"]));
    let o = TRACEKIT
        .command()
        .current_dir(&dir)
        .args(["memtrace", "top", "-", "--json"])
        .stdin(std::fs::File::open(&a).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let json = |text: &str, path: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["trace"]["path"], path);
        v["trace"]["path"] = serde_json::Value::Null;
        v
    };
    assert!(
        json(&stdout(&o), "standard input") == json(&from_file, "a.ctf"),
        "top of standard input differs from top of the file"
    );
}

#[test]
fn names_over_fxt_s_limit_are_cut_not_fatal() {
    let dir = scratch();
    let long = format!("std::vector<{}>::push_back", "Template<".repeat(4000));
    let text = format!(
        "1/1 1.000000000: 1 branches:u: call 10 main+0x0 (/bin/x) => 20 {long}+0x0 (/bin/x)\n\
         1/1 1.000000100: 1 branches:u: return 24 {long}+0x4 (/bin/x) => 14 main+0x4 (/bin/x)\n"
    );
    std::fs::write(dir.join("long.perf"), text).unwrap();
    let o = TRACEKIT.run_in(&dir, &["perf", "decode", "long.perf", "-o", "long.fxt"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: 1 names longer than FXT's 32,000 bytes were cut"),
        "{}",
        stderr(&o)
    );
    let check = TRACEKIT.run_in(&dir, &["fxt", "check", "long.fxt"]);
    assert!(check.status.success(), "{}", stdout(&check));
}

#[test]
fn messages_say_what_happened() {
    let dir = scratch();
    sample(&dir, "a.ctf", 3000);
    // `info` prints the start time as a date.
    let info = stdout(&TRACEKIT.run_in(&dir, &["memtrace", "info", "a.ctf"]));
    let line = info.lines().find(|l| l.starts_with("start time:")).unwrap();
    let date = line.trim_start_matches("start time:").trim();
    assert!(
        date.len() >= 20 && date.as_bytes()[4] == b'-' && date.contains('T') && date.ends_with('Z'),
        "{line}"
    );
    // `top` says what one sample stands for in words.
    let top = stdout(&TRACEKIT.run_in(&dir, &["memtrace", "top", "a.ctf"]));
    assert!(
        top.contains("each sample stands for ") && top.contains(" words (8 bytes each) = "),
        "{top}"
    );
    assert!(!top.contains("1/"), "{top}");
    // A diff of a trace with itself says there is no difference.
    let diff = stdout(&TRACEKIT.run_in(&dir, &["memtrace", "diff", "a.ctf", "a.ctf"]));
    assert!(diff.contains("no difference"), "{diff}");
    let other = sample(&dir, "b.ctf", 4000);
    let diff = stdout(&TRACEKIT.run_in(
        &dir,
        &["memtrace", "diff", "a.ctf", other.to_str().unwrap()],
    ));
    assert!(!diff.contains("no difference"), "{diff}");
    // `perf record` of a program that does not exist says so before running perf.
    let o = TRACEKIT.run_in(
        &dir,
        &["perf", "record", "-o", "rec", "--", "./missing-program"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: cannot run ./missing-program"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("rec/perf.data").exists());
}

#[test]
fn top_says_when_sites_have_no_source_lines() {
    use tracekit_memtrace::{
        AllocationSource, DomainId, Info, Location, LocationCode, Timestamp, Writer,
    };
    let dir = scratch();
    for (name, line) in [("nolines.ctf", 0), ("lines.ctf", 12)] {
        let info = Info {
            sample_rate: 1e-4,
            word_size: 64,
            executable_name: "app".into(),
            host_name: "h".into(),
            ocaml_runtime_params: "".into(),
            pid: 1,
            initial_domain: DomainId::MAIN,
            start_time: Timestamp::from_micros(1_700_000_000_000_000),
            context: None,
        };
        let file = std::fs::File::create(dir.join(name)).unwrap();
        let mut w = Writer::new(file, &info).unwrap();
        for i in 0..50 {
            let stack = [LocationCode::new(1), LocationCode::new(2)];
            w.put_alloc(
                Timestamp::from_micros(1_700_000_000_000_000 + i),
                4,
                1,
                AllocationSource::External,
                &stack,
                |code: LocationCode| {
                    vec![Location {
                        filename: "app".into(),
                        line,
                        start_char: 0,
                        end_char: 0,
                        defname: format!("app::f{}", code.get()).into(),
                    }]
                },
            )
            .unwrap();
        }
        w.close().unwrap();
    }
    let o = TRACEKIT.run_in(&dir, &["memtrace", "top", "nolines.ctf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no source line")
            && stderr(&o).contains("debug = \"line-tables-only\""),
        "{}",
        stderr(&o)
    );
    let o = TRACEKIT.run_in(&dir, &["memtrace", "top", "lines.ctf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}
