//! The benches' real-shaped FXT trace, also written to a file by
//! `examples/timeline_bench.rs`: nested complete slices on 16 threads, per
//! thread trees of slices up to 7 deep, each written when it ends (as a tracing
//! library writes complete events), names among 200.

use tracekit_fxt::format::{Koid, StringId, ThreadId};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::{Destination, Initialization, Writer, WriterOptions};

/// Small deterministic generator (xorshift), so that every run writes the same trace.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Writes a slice starting at `start` with its children; its end.
fn tree<D: Destination>(
    w: &mut Writer<D>,
    thread: ThreadId,
    names: &[StringId],
    rng: &mut Rng,
    start: u64,
    depth: u32,
    written: &mut u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut t = start + rng.below(50);
    let children = if depth < 6 { rng.below(4) } else { 0 };
    for _ in 0..children {
        t = tree(w, thread, names, rng, t, depth + 1, written)? + rng.below(100);
    }
    let end = t + 100 + rng.below(2_000);
    let name = names[rng.below(names.len() as u64) as usize];
    w.duration_complete(thread, names[0], name, start, end, &[])?;
    *written += 1;
    Ok(end)
}

/// Writes at least `slices` slices (nanosecond ticks) to `out`; how many.
pub fn nested_trace<W: std::io::Write>(
    out: W,
    slices: u64,
) -> Result<(W, u64), Box<dyn std::error::Error>> {
    let init = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(IoDestination::new(out), &init)?;
    let mut threads = Vec::new();
    for slot in 0..16u8 {
        let (pid, tid) = (Koid(1000), Koid(1001 + u64::from(slot)));
        if slot == 0 {
            w.set_process_name(pid, "bench")?;
        }
        w.set_thread_name(pid, tid, format!("worker {slot}").as_str())?;
        threads.push(w.set_thread_slot(slot, pid, tid)?);
    }
    let mut names = Vec::new();
    for i in 0..200 {
        names.push(w.intern(&format!("function_{i:03}"))?);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut clocks = vec![1_000u64; threads.len()];
    let mut written = 0;
    while written < slices {
        for (i, &thread) in threads.iter().enumerate() {
            clocks[i] = tree(&mut w, thread, &names, &mut rng, clocks[i], 0, &mut written)?
                + rng.below(500);
        }
    }
    Ok((w.finish_io()?, written))
}
