//! Edge cases of a traced program, run by tracekit-alloc's `edges` tests.
//!
//! ```sh
//! MEMTRACE=edges.ctf cargo run --release -p tracekit-alloc-demo --bin edges -- work
//! ```
//!
//! Each mode (the first argument) is one situation the tracer must get
//! through without harming the program:
//!
//! * `work`: allocates a little and prints `edges: done`.
//! * `disk-full`: like `work`, but the trace file's descriptor is pointed at
//!   `/dev/full` once tracing runs, as if the disk filled up.
//! * `inline`: `build_grids` allocates ten blocks of 1234 words through
//!   `shapes::Grid::with_cells`, inlined into it (and also kept out of line,
//!   since `main` takes its address), and ten of 2345 words through
//!   `only_inlined`, which is inlined everywhere.
//! * `threads`: two threads allocate five blocks of 4321 words each; prints
//!   `libc <start> <end>`, the addresses where libc is mapped, first.
//! * `panic`: allocates ten blocks of 4321 words in `marker_blocks`, then
//!   panics. Built with `panic = "abort"`, the process dies of `SIGABRT`
//!   at once, before any periodic flush.
//!
//! Every mode starts with `trace_if_requested`, so `MEMTRACE` and
//! `MEMTRACE_RATE` apply, and prints `edges: done` at the end (the `panic`
//! mode never gets there).

use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

/// The length in words (8 bytes) of the blocks the tests look for.
const MARKER_WORDS: usize = 4321;

#[inline(never)]
fn marker_blocks(n: usize) -> Vec<Vec<u64>> {
    let blocks = (0..n).map(|i| vec![i as u64; MARKER_WORDS]).collect();
    // Not a tail call, so that this function's frame is in the backtraces.
    black_box(&blocks);
    blocks
}

mod shapes {
    /// Cells of a grid.
    pub struct Grid {
        pub cells: Vec<u64>,
    }

    impl Grid {
        #[inline(always)]
        pub fn with_cells(n: usize) -> Grid {
            let cells = vec![7; n];
            Grid { cells }
        }
    }
}

#[inline(always)]
fn only_inlined(n: usize) -> Vec<u64> {
    vec![5; n]
}

#[inline(never)]
fn build_grids() -> (Vec<shapes::Grid>, Vec<Vec<u64>>) {
    let mut grids = Vec::new();
    let mut plain = Vec::new();
    for _ in 0..10 {
        grids.push(shapes::Grid::with_cells(1234));
        plain.push(only_inlined(2345));
    }
    black_box(&grids);
    (grids, plain)
}

#[inline(never)]
fn work() -> usize {
    let mut total = 0;
    for i in 0..1000 {
        let s = format!("line {i}");
        total += black_box(s).len();
    }
    total
}

/// Points the trace file's descriptor at `/dev/full`, so that every later
/// write to the trace fails with `ENOSPC`.
fn fill_the_disk(trace: &std::path::Path) {
    use std::os::unix::io::AsRawFd;
    let trace = std::fs::canonicalize(trace).expect("trace file exists");
    let fd = std::fs::read_dir("/proc/self/fd")
        .expect("list descriptors")
        .filter_map(|e| e.ok())
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == trace))
        .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .expect("the trace file is open");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    // SAFETY: both descriptors are open; `dup2` atomically makes `fd` refer
    // to /dev/full, and the tracer's `File` keeps owning `fd`.
    let rc = unsafe { libc::dup2(full.as_raw_fd(), fd) };
    assert_eq!(rc, fd, "dup2");
}

/// Prints where libc is mapped, `libc <start> <end>` in hex, from the first
/// byte of its first mapping to the end of its last.
fn print_libc_range() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read maps");
    let ranges: Vec<(u64, u64)> = maps
        .lines()
        .filter(|l| l.ends_with("/libc.so.6"))
        .filter_map(|l| {
            let (start, end) = l.split(' ').next()?.split_once('-')?;
            Some((
                u64::from_str_radix(start, 16).ok()?,
                u64::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect();
    let start = ranges.iter().map(|r| r.0).min().expect("libc is mapped");
    let end = ranges.iter().map(|r| r.1).max().expect("libc is mapped");
    println!("libc {start:x} {end:x}");
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    // Read before tracing starts: `trace_if_requested` removes it.
    let trace = std::env::var_os("MEMTRACE").map(std::path::PathBuf::from);
    tracekit_alloc::trace_if_requested();
    match mode.as_str() {
        "work" => {
            black_box(work());
            black_box(marker_blocks(10));
        }
        "disk-full" => {
            // Written out by the periodic flush before the disk fills.
            let before = marker_blocks(10);
            std::thread::sleep(Duration::from_millis(1500));
            fill_the_disk(trace.as_deref().expect("MEMTRACE is set"));
            black_box(work());
            // The next flush fails.
            std::thread::sleep(Duration::from_millis(2500));
            black_box(work());
            black_box(before);
        }
        "inline" => {
            black_box(build_grids());
            // Taking the address keeps an out-of-line copy.
            let f: fn(usize) -> shapes::Grid = black_box(shapes::Grid::with_cells);
            black_box(f(3).cells.len());
        }
        "threads" => {
            let threads: Vec<_> = (0..2)
                .map(|_| std::thread::spawn(|| marker_blocks(5)))
                .collect();
            for t in threads {
                black_box(t.join().expect("thread"));
            }
            print_libc_range();
        }
        "panic" => {
            let kept = marker_blocks(10);
            black_box(&kept);
            panic!("edges: deliberate panic");
        }
        _ => {
            eprintln!("usage: edges work|disk-full|inline|threads|panic");
            std::process::exit(2);
        }
    }
    println!("edges: done");
}
