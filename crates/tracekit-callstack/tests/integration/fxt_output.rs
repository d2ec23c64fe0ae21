//! The FXT sink against the transcript sink: every transcript case of the corpus,
//! decoded to FXT and read back strictly with `tracekit-fxt`, gives the same slices
//! as the transcript (and names its processes and threads).

#![allow(clippy::unwrap_used)]

use tracekit_callstack::decode::Decoder;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::span::to_string_hum;
use tracekit_callstack::transcript::{self, TranscriptOptions};
use tracekit_callstack::writer::{Config, TraceScope};
use tracekit_fxt::format::EventKind;
use tracekit_fxt::read::{ReadOptions, Reader, Record};
use tracekit_fxt::write::{VecDestination, Writer};

fn to_fxt(input: &str, scope: TraceScope) -> Vec<u8> {
    let writer = Writer::new(VecDestination::new()).unwrap();
    let config = Config {
        scope,
        annotate_inferred_start_times: true,
        ..Config::default()
    };
    let mut d = Decoder::new(FxtSink::new(writer), config, None);
    d.feed(input, 0);
    let (sink, stats, _) = d.finish();
    assert_eq!(stats.unparsed, 0);
    sink.finish().unwrap().into_vec()
}

/// Transcript lines from FXT events, as the transcript sink would print them.
fn fxt_lines(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let mut r = Reader::with_options(bytes, ReadOptions::strict());
    let mut lines = Vec::new();
    let mut names = Vec::new();
    let line =
        |t: u64, what: &str, name: &str| format!("-> {:>8} {what} {name}", to_string_hum(t as i64));
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Event(e) => {
                let name = e.name.to_string();
                let hidden = name == "branch-misses" || name == "cache-misses";
                match e.kind {
                    EventKind::DurationBegin if !hidden => {
                        lines.push(line(e.ticks, "BEGIN", &name))
                    }
                    EventKind::DurationEnd if !hidden => lines.push(line(e.ticks, "END  ", &name)),
                    EventKind::DurationComplete { end_ticks } if !hidden => {
                        lines.push(line(e.ticks, "BEGIN", &name));
                        lines.push(line(end_ticks, "END  ", &name));
                    }
                    EventKind::Instant => {
                        lines.push(line(e.ticks, "BEGIN", &name));
                        lines.push(format!("->          END   {name}"));
                    }
                    _ => {}
                }
            }
            Record::KernelObject(o) => names.push(o.name.to_string()),
            _ => {}
        }
    }
    (lines, names)
}

#[test]
fn fxt_matches_transcript() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".args"))
        else {
            continue;
        };
        let args = std::fs::read_to_string(&path).unwrap();
        if !args.contains("harness=transcript")
            || !args.contains("ocaml_eh=absent")
            || !args.contains("filter=none")
        {
            continue;
        }
        let scope = if args.contains("trace_scope=user+kernel") {
            TraceScope::UserAndKernel
        } else {
            TraceScope::User
        };
        let input = std::fs::read_to_string(dir.join(format!("{name}.perf"))).unwrap();
        let t = transcript::run(
            &input,
            &TranscriptOptions {
                scope,
                echo: false,
                ..TranscriptOptions::default()
            },
        );
        let expected: Vec<String> = t.stdout.lines().map(String::from).collect();
        // The transcript harness shifts times to the first event; the decoder's time
        // base is the first event, so both start at zero.
        let (got, names) = fxt_lines(&to_fxt(&input, scope));
        assert_eq!(got, expected, "{name}");
        assert!(
            names.iter().any(|n| n.starts_with("[pid=")),
            "{name}: {names:?}"
        );
        // magic-trace's layout has no comm: threads are named by their tid.
        assert!(
            names.iter().any(|n| n.starts_with("[tid=")),
            "{name}: {names:?}"
        );
        checked += 1;
    }
    assert_eq!(
        checked, 13,
        "transcript cases without OCaml traps or filters"
    );
}
