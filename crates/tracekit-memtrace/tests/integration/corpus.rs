//! Conformance with the memtrace corpus (`$TRACEKIT_CORPUS/memtrace`): every
//! trace dumps exactly as the reference reader dumped it, and re-encoding
//! reproduces the reference writer's bytes.
//!
//! Skipped when `TRACEKIT_CORPUS` is unset; fails when it is set and a file
//! is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;

use tracekit_memtrace::dump::write_dump;
use tracekit_memtrace::{Reader, StreamReader, WriterOptions, copy_trace, copy_trace_stream};

struct Row {
    trace: String,
    expected_dump: String,
    dump_lines: usize,
    exit_status: u8,
    expected_stderr: String,
}

fn manifest(dir: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("manifest.tsv")).expect("manifest.tsv");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 7, "manifest row {l:?}");
            Row {
                trace: f[0].into(),
                expected_dump: f[2].into(),
                dump_lines: f[4].parse().unwrap(),
                exit_status: f[5].parse().unwrap(),
                expected_stderr: f[6].into(),
            }
        })
        .collect()
}

fn read_expected(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  got      {x:.300}\n  expected {y:.300}", i + 1);
        }
    }
    format!(
        "line counts differ: got {}, expected {}",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn every_corpus_trace_dumps_like_the_reference() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    let rows = manifest(&dir);
    assert!(!rows.is_empty());
    let mut passed = 0;
    for row in &rows {
        let mut reader = Reader::open(dir.join(&row.trace)).unwrap();
        let mut out = Vec::new();
        let mut warnings = Vec::new();
        let outcome = write_dump(&mut reader, &mut out, |w| warnings.push(*w), |_| {}).unwrap();
        let expected = read_expected(&dir.join(&row.expected_dump));
        assert_eq!(
            expected.iter().filter(|&&b| b == b'\n').count(),
            row.dump_lines,
            "{}: expected dump line count",
            row.trace
        );
        if row.exit_status == 2 {
            assert!(
                outcome.failure.is_some(),
                "{}: the reference reader fails here",
                row.trace
            );
            let cut = |d: &[u8]| -> Vec<u8> {
                let text = d.split(|&b| b == b'\n');
                let mut keep = Vec::new();
                for line in text {
                    if line.starts_with(b"error:") {
                        break;
                    }
                    keep.extend_from_slice(line);
                    keep.push(b'\n');
                }
                keep
            };
            let (got, want) = (cut(&out), cut(&expected));
            assert!(
                got == want,
                "{}: {}",
                row.trace,
                first_difference(&got, &want)
            );
        } else {
            assert!(
                outcome.failure.is_none(),
                "{}: {:?}",
                row.trace,
                outcome.failure
            );
            assert!(
                out == expected,
                "{}: {}",
                row.trace,
                first_difference(&out, &expected)
            );
        }
        if row.expected_stderr == "-" {
            assert!(
                warnings.is_empty(),
                "{}: unexpected warnings {warnings:?}",
                row.trace
            );
        } else {
            let stderr = std::fs::read_to_string(dir.join(&row.expected_stderr)).unwrap();
            assert_eq!(
                warnings.len(),
                stderr.lines().count(),
                "{}: {warnings:?}",
                row.trace
            );
        }
        passed += 1;
    }
    eprintln!(
        "conformance: {passed} of {} traces dump byte-identically",
        rows.len()
    );
}

#[test]
fn copy_of_lists_hashtbl_v2_is_byte_identical_to_the_reference_copy() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    let mut reader = Reader::open(dir.join("traces/lists_hashtbl_v2.ctf")).unwrap();
    let (out, warnings) = copy_trace(&mut reader, Vec::new(), WriterOptions::new()).unwrap();
    assert!(warnings.is_empty());
    let expected = std::fs::read(dir.join("traces/lists_hashtbl_v3copy.ctf")).unwrap();
    assert_eq!(out.len(), expected.len());
    assert!(
        out == expected,
        "copy differs from lists_hashtbl_v3copy.ctf"
    );
}

#[test]
fn copying_a_v3_copy_reproduces_it() {
    // A v3 trace that the reference wrote event by event is a fixed point of
    // copying. (synth_domains_v3 is not: its generator asked for
    // `next_alloc_id` at chunk boundaries, which flushes at an earlier time.)
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    for name in ["lists_hashtbl_v3copy", "mixed_v3", "empty_v3"] {
        let path = dir.join(format!("traces/{name}.ctf"));
        let expected = std::fs::read(&path).unwrap();
        let mut reader = Reader::open(&path).unwrap();
        let (out, _) = copy_trace(&mut reader, Vec::new(), WriterOptions::new()).unwrap();
        if name == "empty_v3" {
            // The copier flushes once more than `Writer.close` did.
            assert!(out.starts_with(&expected), "{name}");
            continue;
        }
        assert!(
            out == expected,
            "{name}: copy differs ({} vs {} bytes)",
            out.len(),
            expected.len()
        );
    }
}

#[test]
fn every_corpus_trace_copies_to_a_trace_that_dumps_the_same() {
    // Including synth_v2, whose truncated backtrace is followed by a common
    // prefix beyond it (dump lines 12018-12019): the copy stores that
    // prefix too, rather than the one it would compute.
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    for row in manifest(&dir) {
        let data = std::fs::read(dir.join(&row.trace)).unwrap();
        let dump = |bytes: &[u8]| {
            let mut reader = Reader::from_bytes(bytes).unwrap();
            let mut text = Vec::new();
            let mut warnings = Vec::new();
            let o = write_dump(&mut reader, &mut text, |w| warnings.push(*w), |_| {}).unwrap();
            (text, o.failure, warnings)
        };
        let (text, failure, warnings) = dump(&data);
        assert!(failure.is_none(), "{}", row.trace);
        let mut reader = Reader::from_bytes(&data).unwrap();
        let (copy, copy_warnings) =
            copy_trace(&mut reader, Vec::new(), WriterOptions::new()).unwrap();
        assert_eq!(copy_warnings, warnings, "{}", row.trace);
        let (copied, failure, warnings) = dump(&copy);
        assert!(failure.is_none() && warnings.is_empty(), "{}", row.trace);
        assert!(
            copied == text,
            "{}: {}",
            row.trace,
            first_difference(&copied, &text)
        );
        // The same bytes from a stream.
        let mut stream = StreamReader::new(&data[..], true).unwrap();
        let (streamed, _) =
            copy_trace_stream(&mut stream, Vec::new(), WriterOptions::new()).unwrap();
        assert!(streamed == copy, "{}: streamed copy differs", row.trace);
    }
}
