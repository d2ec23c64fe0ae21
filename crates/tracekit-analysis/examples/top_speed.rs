//! One pass of `top` (or of the reader alone) over a trace file, for instruction
//! counts and CPU-time measurements of the analysis against its reader:
//!
//! `valgrind --tool=callgrind --toggle-collect='top_speed::pass' target/release/examples/top_speed FILE MODE`
//!
//! MODE is `read` (the reader alone, backtraces decoded), `top` (one thread) or
//! `pipelined` (decoding and analysis on two threads). The `top` bench writes its
//! traces to `$TRACEKIT_BENCH_SAVE` for this.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use tracekit_analysis::Options;
use tracekit_analysis::source;
use tracekit_analysis::symbols::FrameSkip;
use tracekit_memtrace::{Event, Reader};

#[inline(never)]
fn pass(reader: &mut Reader<'_>, mode: &str) -> u64 {
    let options = Options {
        leaf_only: true,
        site_skip: FrameSkip::rust_std(),
        timeline_buckets: 0,
        ..Options::default()
    };
    match mode {
        "read" => {
            let mut events = reader.events(true);
            let (mut n, mut leaf) = (0u64, 0i64);
            while let Some(item) = events.next_event() {
                let (_, ev) = item.unwrap();
                n += 1;
                if let Event::Alloc(a) = &ev
                    && let Some(l) = a.backtrace.last()
                {
                    leaf = leaf.wrapping_add(l.get());
                }
            }
            black_box(leaf);
            n
        }
        "top" => source::analyze_reader(reader, options, None, &mut |_| {}).events,
        "pipelined" => source::analyze_reader_pipelined(reader, options, &mut |_| {}).events,
        other => panic!("unknown mode {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&args[1]).unwrap();
    let mut reader = Reader::from_bytes(&data).unwrap();
    let repeat: usize = args.get(3).map_or(1, |r| r.parse().unwrap());
    for _ in 0..repeat {
        let n = pass(&mut reader, &args[2]);
        black_box(n);
    }
}
