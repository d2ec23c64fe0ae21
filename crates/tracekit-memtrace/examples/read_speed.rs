//! Times full passes over a trace: a synthetic one,
//! `read_speed [depth] [allocs] [passes] [mode: both|bt|nobt]` (depth `r500`:
//! the recursive model, 500 frames deep), or a trace file,
//! `read_speed FILE.ctf [passes] [mode]`.
//!
//! For instruction counts of the passes alone (the reader's hot loop):
//! `valgrind --tool=callgrind --toggle-collect='read_speed::pass'
//! target/release/examples/read_speed 20 400000 1 bt`, or with a corpus
//! trace in place of `20 400000`.
#![allow(clippy::unwrap_used, missing_docs)]
use std::time::Instant;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
use tracekit_memtrace::{Event, Reader};
fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let recursive = args.first().is_some_and(|a| a.starts_with('r'));
    if recursive {
        args[0].remove(0);
    }
    // A first argument that is not a number names a trace file.
    let file = match args.first() {
        Some(a) if a.parse::<u64>().is_err() => Some(args.remove(0)),
        _ => None,
    };
    let num = |i: usize, d: u64| args.get(i).map_or(d, |a| a.parse().unwrap());
    let (data, rest) = match file {
        Some(path) => (std::fs::read(path).unwrap(), 0),
        None => {
            let config = SynthConfig {
                depth: num(0, 20) as usize,
                allocs: num(1, 400_000),
                recursive,
                ..SynthConfig::default()
            };
            (write_synthetic(Vec::new(), &config).unwrap(), 2)
        }
    };
    let passes = num(rest, 4);
    let modes: &[bool] = match args.get(rest + 1).map(String::as_str) {
        Some("bt") => &[true],
        Some("nobt") => &[false],
        _ => &[true, false],
    };
    let mut reader = Reader::from_bytes(&data).unwrap();
    for _ in 0..passes {
        for &bt in modes {
            let t = Instant::now();
            let (n, f) = pass(&mut reader, bt);
            let s = t.elapsed().as_secs_f64();
            println!(
                "bt={bt} {n} events {f} frames {:.1} ms {:.1} Mev/s {:.0} MB/s",
                s * 1e3,
                n as f64 / s / 1e6,
                data.len() as f64 / s / 1e6
            );
        }
    }
}

#[inline(never)]
fn pass(reader: &mut Reader<'_>, bt: bool) -> (u64, u64) {
    let mut n = 0u64;
    let mut f = 0u64;
    let mut ev = reader.events(bt);
    while let Some(item) = ev.next_event() {
        let (_, e) = item.unwrap();
        n += 1;
        if let Event::Alloc(a) = &e {
            f += a.backtrace.len() as u64;
        }
    }
    (n, f)
}
