//! One pass of `top` (or of the reader alone) over a trace file, for instruction
//! counts and CPU-time measurements of the analysis against its reader:
//!
//! `valgrind --tool=callgrind --toggle-collect='top_speed::pass' target/release/examples/top_speed FILE MODE`
//!
//! MODE is `read` (the reader alone, backtraces decoded, as the bench's baseline),
//! `read_all` (the same using every field of every event), `top` (one thread),
//! `pipelined` (decoding and analysis on two threads), `produce` (the decoding thread
//! of `pipelined` alone, its batches dropped) or `pipelined_by_backtrace` (`pipelined`
//! interning whole backtraces, as `top --by backtrace` does). The `top` bench writes
//! its traces to `$TRACEKIT_BENCH_SAVE` for this. An optional third argument repeats
//! the pass and prints the median and fastest wall time per pass.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use tracekit_analysis::passes::decode_side_only;
use tracekit_analysis::symbols::FrameSkip;
use tracekit_analysis::{Options, Threads, analyze};
use tracekit_memtrace::{Event, Reader};

fn options() -> Options {
    Options {
        leaf_only: true,
        site_skip: FrameSkip::rust_std(),
        timeline_buckets: 0,
        ..Options::default()
    }
}

/// The reader alone, as the `top` bench's `read` baseline: each backtrace's leaf.
#[inline(never)]
fn read(reader: &mut Reader<'_>) -> u64 {
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

/// The reader with every field of every event used.
#[inline(never)]
fn read_all(reader: &mut Reader<'_>) -> u64 {
    let mut events = reader.events(true);
    let (mut n, mut sum) = (0u64, 0u64);
    while let Some(item) = events.next_event() {
        let (dt, ev) = item.unwrap();
        n += 1;
        sum = sum.wrapping_add(dt.as_micros() as u64);
        match &ev {
            Event::Alloc(a) => {
                sum = sum
                    .wrapping_add(a.obj_id.get())
                    .wrapping_add(a.length)
                    .wrapping_add(a.nsamples)
                    .wrapping_add(a.source as u64)
                    .wrapping_add(u64::from(a.domain.get()))
                    .wrapping_add(a.backtrace.last().map_or(0, |l| l.get() as u64));
            }
            Event::Promote(id, d) | Event::Collect(id, d) => {
                sum = sum.wrapping_add(id.get()).wrapping_add(u64::from(d.get()));
            }
        }
    }
    black_box(sum);
    n
}

/// One `top` pass on `threads` threads; its events.
fn analyze_on(reader: &mut Reader<'_>, options: Options, threads: Threads) -> u64 {
    analyze(reader, Options { threads, ..options }, &mut |_, _| {}).events
}

#[inline(never)]
fn top(reader: &mut Reader<'_>) -> u64 {
    analyze_on(reader, options(), Threads::One)
}

#[inline(never)]
fn pipelined(reader: &mut Reader<'_>) -> u64 {
    analyze_on(reader, options(), Threads::Two)
}

#[inline(never)]
fn pipelined_by_backtrace(reader: &mut Reader<'_>) -> u64 {
    let options = Options {
        leaf_only: false,
        ..options()
    };
    analyze_on(reader, options, Threads::Two)
}

#[inline(never)]
fn produce(reader: &mut Reader<'_>) -> u64 {
    decode_side_only(reader, &options())
}

#[inline(never)]
fn pass(reader: &mut Reader<'_>, mode: &str) -> u64 {
    match mode {
        "read" => read(reader),
        "read_all" => read_all(reader),
        "top" => top(reader),
        "pipelined" => pipelined(reader),
        "produce" => produce(reader),
        "pipelined_by_backtrace" => pipelined_by_backtrace(reader),
        other => panic!("unknown mode {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&args[1]).unwrap();
    let mut reader = Reader::from_bytes(&data).unwrap();
    let repeat: usize = args.get(3).map_or(1, |r| r.parse().unwrap());
    let mut ms = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let t = std::time::Instant::now();
        let n = pass(&mut reader, &args[2]);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        black_box(n);
    }
    if repeat > 1 {
        // Wall time per pass: the median and the fastest, as the spread on a shared
        // machine is wide.
        ms.sort_by(f64::total_cmp);
        eprintln!(
            "{}: median {:.1} ms, min {:.1} ms over {repeat} passes",
            args[2],
            ms[repeat / 2],
            ms[0]
        );
    }
}
