//! Runs one stage of the decode in a loop over a `perf script` file, for profiling with
//! callgrind (`--toggle-collect='*run_stage*'` counts only the stage) or `perf stat`;
//! the criterion bench is `benches/decode.rs`.
//!
//! `cargo run --release -p tracekit-callstack --example decode_loop -- STAGE FILE [N]`
//! where STAGE is `parse` (the decoder's parser), `parse_uncached` ([`parse_record`]),
//! `decode` (single thread) or `pipelined`.

use tracekit_callstack::decode::Decoder;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::script::{Parsed, RecordParser, Records, parse_record};
use tracekit_callstack::writer::Config;
use tracekit_fxt::write::{DiscardDestination, Writer};

#[inline(never)]
fn run_stage(stage: &str, text: &str) -> u64 {
    let mut total = 0;
    match stage {
        "parse" | "parse_uncached" => {
            let mut parser = RecordParser::new();
            for r in Records::new(text) {
                let parsed = if stage == "parse" {
                    parser.parse(&r, 0)
                } else {
                    parse_record(&r, 0)
                };
                if let Ok(Parsed::Event(e)) = parsed {
                    total += u64::from(e.time().is_some());
                }
            }
        }
        "decode" | "pipelined" => {
            let writer =
                Writer::new(DiscardDestination::new(1 << 16)).unwrap_or_else(|e| panic!("{e}"));
            let mut d = Decoder::new(FxtSink::new(writer), Config::default(), None);
            if stage == "pipelined" {
                d.feed_pipelined(text, 0);
            } else {
                d.feed(text, 0);
            }
            let (_, stats, _) = d.finish();
            total += stats.events;
        }
        other => panic!("unknown stage {other}"),
    }
    total
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(stage), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: decode_loop parse|parse_uncached|decode|pipelined FILE [N]");
        std::process::exit(2);
    };
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut total = 0u64;
    for _ in 0..n {
        total += run_stage(stage, &text);
    }
    println!("{total}");
}
