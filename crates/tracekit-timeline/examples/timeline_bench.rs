//! The timeline at scale, for docs/performance.md:
//!
//! - `timeline_bench write OUT.fxt [SLICES]` writes the benches' trace of nested
//!   complete slices on 16 threads (default 12,500,000 slices, about 300 MB);
//! - `timeline_bench read FILE.fxt` builds its timeline and times what a
//!   viewer asks: every lane of every track drawn on 2,000 pixels, for the
//!   whole trace and for windows of a tenth, a hundredth and a thousandth of
//!   it, and prints the process's peak memory.

use std::time::Instant;

use tracekit_fxt::read::Reader;
use tracekit_timeline::Timeline;

#[path = "../benches/common/mod.rs"]
mod common;

fn write(out: &str, slices: u64) -> Result<(), Box<dyn std::error::Error>> {
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    let (file, written) = common::nested_trace(file, slices)?;
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    println!(
        "{out}: {written} slices, {} bytes",
        std::fs::metadata(out)?.len()
    );
    Ok(())
}

fn peak_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb / 1024)
}

fn read(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a bench's own input, which nothing changes while it runs.
    let bytes = unsafe { memmap2::Mmap::map(&file)? };
    let started = Instant::now();
    let t = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let lanes: usize = t.tracks().iter().map(|t| t.lanes.len()).sum();
    println!(
        "built in {:.2} s: {} slices on {} tracks, {lanes} lanes, peak {} MB",
        started.elapsed().as_secs_f64(),
        t.slices(),
        t.tracks().len(),
        peak_mb()
    );
    let started = Instant::now();
    let mut file = Vec::new();
    t.write_to(&mut file)?;
    let wrote = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let back = Timeline::read_from(&file)?;
    println!(
        "as a file: {} bytes, written in {wrote:.2} s, read back in {:.2} s",
        file.len(),
        started.elapsed().as_secs_f64()
    );
    drop((back, file));
    let (first, last) = (t.first_ns().unwrap_or(0), t.last_ns().unwrap_or(0));
    let mut out = Vec::new();
    for share in [1, 10, 100, 1000] {
        let span = (last - first) / share;
        let mut times = Vec::new();
        let mut drawn = 0;
        for k in 0..5u64 {
            let from = first + (last - first - span) / 5 * k;
            let started = Instant::now();
            drawn = 0;
            for track in t.tracks() {
                for lane in &track.lanes {
                    out.clear();
                    lane.window(from, from + span, span.div_ceil(2_000), &mut out);
                    drawn += out.len();
                }
            }
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "1/{share} of the trace on 2000 px, every lane: median {:.1} ms ({} drawn)",
            times[2], drawn
        );
    }
    println!("peak {} MB", peak_mb());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", out] => write(out, 12_500_000),
        ["write", out, n] => write(out, n.parse()?),
        ["read", path] => read(path),
        _ => Err("usage: timeline_bench write OUT.fxt [SLICES] | read FILE.fxt".into()),
    }
}
