//! The pipelined decode writes the same FXT bytes and counts as the single-thread one on
//! every corpus input, cut into many small pieces so that both threads take part.

#![allow(clippy::unwrap_used)]

use tracekit_callstack::decode::{DecodeStats, Decoder};
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::script::{RecordParser, Records, parse_record};
use tracekit_callstack::writer::Config;
use tracekit_fxt::write::{VecDestination, Writer};

fn decode(text: &str, piece: Option<usize>) -> (Vec<u8>, DecodeStats) {
    let writer = Writer::new(VecDestination::new()).unwrap();
    let mut d = Decoder::new(FxtSink::new(writer), Config::default(), None);
    match piece {
        None => d.feed(text, 7),
        Some(p) => d.feed_in_pieces(text, 7, p),
    }
    let (sink, stats, _) = d.finish();
    (sink.finish().unwrap().into_vec(), stats)
}

#[test]
fn pipelined_matches_single_thread_on_corpus() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "perf") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let single = decode(&text, None);
        for piece in [1, 300, 4096] {
            assert_eq!(
                decode(&text, Some(piece)),
                single,
                "{} in pieces of {piece}",
                path.display()
            );
        }
        n += 1;
    }
    assert_eq!(n, 42, "corpus inputs found");
}

#[test]
fn caching_parser_matches_parse_record_on_corpus() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let mut records = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "perf") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut parser = RecordParser::new();
        for rec in Records::new(&text) {
            assert_eq!(
                parser.parse(&rec, 3),
                parse_record(&rec, 3),
                "{} at {}",
                path.display(),
                rec.offset
            );
            records += 1;
        }
    }
    assert!(records > 30_000, "{records} records");
}
