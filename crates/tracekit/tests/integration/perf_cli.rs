//! `tracekit perf decode` from the command line: transcripts of corpus cases, bad input.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;

use tracekit_callstack::transcript::normalize;
use tracekit_testutil::scratch;

use crate::TRACEKIT;

/// The transcript printed by the CLI (stderr first, as the corpus expects).
fn cli_transcript(args: &[&str], stdin: Option<&Path>) -> String {
    let mut cmd = TRACEKIT.command();
    cmd.args(["perf", "decode", "--transcript"]).args(args);
    if let Some(p) = stdin {
        cmd.stdin(std::fs::File::open(p).unwrap());
    } else {
        cmd.stdin(Stdio::null());
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut s = String::from_utf8(out.stderr).unwrap();
    s.push_str(&String::from_utf8(out.stdout).unwrap());
    s
}

#[test]
fn transcripts_of_corpus_cases() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    for (name, extra) in [
        ("decode_errors__memmove", &[][..]),
        ("page_fault", &["--scope", "user+kernel"][..]),
        ("simple_gogo", &[][..]),
        ("c_demo_sampling", &[][..]),
        (
            "ocaml_exceptions__raise_notrace",
            &[
                "--ocaml-pushtraps",
                "0x41100b",
                "--ocaml-poptraps",
                "0x411026",
                "--ocaml-entertraps",
                "0x411030",
            ][..],
        ),
    ] {
        let input = dir.join(format!("{name}.perf"));
        let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
        // magic-trace's own timing, which its transcripts record.
        let mut args = vec![input.to_str().unwrap(), "--magic-trace-compat"];
        args.extend_from_slice(extra);
        assert_eq!(
            normalize(&cli_transcript(&args, None)),
            expected,
            "{name} (file)"
        );
        // The same from stdin.
        assert_eq!(
            normalize(&cli_transcript(&args[1..], Some(&input))),
            expected,
            "{name} (stdin)"
        );
    }
}

#[test]
fn filtered_transcript() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let input = dir.join("test__filtered_trace.perf");
    let expected = std::fs::read_to_string(dir.join("test__filtered_trace.expected")).unwrap();
    let got = cli_transcript(
        &[
            input.to_str().unwrap(),
            "--no-echo",
            "--filter",
            "start_trigger..stop_trigger",
        ],
        None,
    );
    // The CLI annotates inferred frames in transcripts; this case was made without.
    let got = got.replace(" [inferred start time]", "");
    assert_eq!(normalize(&got), expected);
}

#[test]
fn garbage_is_reported_not_fatal() {
    let dir = scratch();
    let input = dir.join("garbage.txt");
    std::fs::write(
        &input,
        &b"hello\n\tworld\n1/1 1.000000000: 1 branches:u: call 10 a+0x0 (x) => 20 b+0x0 (x)\n\xff\xfe\n"[..],
    )
    .unwrap();
    let out = TRACEKIT
        .command()
        .args(["perf", "decode", "--transcript", "--no-echo"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipping unrecognized perf output"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("BEGIN b"), "{stdout}");
}

#[test]
fn missing_input_is_a_clear_error() {
    let out = TRACEKIT
        .command()
        .args(["perf", "decode", "--transcript", "/nonexistent/perf.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: cannot open /nonexistent/perf.txt"),
        "{stderr}"
    );
}

/// Begin/end balance and process names of an FXT file, read strictly.
fn fxt_summary(bytes: &[u8]) -> (u64, u64, Vec<String>) {
    use tracekit_fxt::format::EventKind;
    use tracekit_fxt::read::{ReadOptions, Reader, Record};
    let mut r = Reader::with_options(bytes, ReadOptions::strict());
    let (mut begins, mut ends) = (0, 0);
    let mut names = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Event(e) => match e.kind {
                EventKind::DurationBegin => begins += 1,
                EventKind::DurationEnd => ends += 1,
                _ => {}
            },
            Record::KernelObject(o) => names.push(format!("{} koid={}", o.name, o.koid.0)),
            _ => {}
        }
    }
    (begins, ends, names)
}

#[test]
fn decodes_to_fxt_plain_and_gzip() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let tmp = scratch();
    let input = dir.join("hello_world_userspace.perf");
    let plain = tmp.join("hw.fxt");
    let gz = tmp.join("hw.fxt.gz");
    for out in [&plain, &gz] {
        let o = TRACEKIT
            .command()
            .args(["perf", "decode"])
            .arg(&input)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("decoded 8841 records"));
    }
    let bytes = std::fs::read(&plain).unwrap();
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
        &mut unzipped,
    )
    .unwrap();
    assert_eq!(bytes, unzipped);
    // tracekit's own strict checker finds nothing any known reader would reject.
    let check = TRACEKIT
        .command()
        .args(["fxt", "check"])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let (begins, ends, names) = fxt_summary(&bytes);
    assert!(begins > 100);
    assert_eq!(begins, ends, "every slice that begins ends");
    // The process and its thread have their real ids as koids; the thread is named
    // by its tid where the text gives no command name.
    assert!(
        names.contains(&"[pid=30549] koid=30549".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"[tid=30549] koid=30549".to_string()),
        "{names:?}"
    );

    // PyPI `fxt` reads it too, and sees the same slices.
    if let Some((slices, names)) = tracekit_testutil::pyfxt_slices(&plain) {
        assert_eq!(slices, begins, "PyPI fxt sees every slice");
        assert_eq!(names, ["[pid=30549]"]);
    }
}
