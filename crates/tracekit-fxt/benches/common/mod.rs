//! A real-shaped FXT trace for the benches and `examples/shaped_trace.rs`: a few
//! threads in two processes, nested duration slices with a handful of arguments
//! (integers, a double, interned string refs), instants, complete events and counters,
//! names and categories interned once, as a tracing library writes them.

use tracekit_fxt::format::{Arg, ArgValue, Koid, StringRef};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::{Initialization, Writer, WriterOptions};

/// Small deterministic generator (xorshift), so that every run writes the same trace.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A trace of about `events` events (nanosecond ticks).
pub fn shaped_trace(events: u64) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let init = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(IoDestination::new(Vec::new()), &init)?;
    let mut threads = Vec::new();
    for (slot, (pid, tid)) in [(100, 101), (100, 102), (100, 103), (200, 201)]
        .into_iter()
        .enumerate()
    {
        let (pid, tid) = (Koid(pid), Koid(tid));
        w.set_process_name(pid, format!("server-{}", pid.0).as_str())?;
        w.set_thread_name(pid, tid, format!("worker {}", tid.0).as_str())?;
        threads.push(w.set_thread_slot(slot as u8, pid, tid)?);
    }
    let cats = ["app", "io", "db", "rpc"].map(|c| w.intern(c));
    let cats: Vec<_> = cats.into_iter().collect::<Result<_, _>>()?;
    let mut names = Vec::new();
    for verb in [
        "parse", "load", "store", "render", "send", "wait", "hash", "sort",
    ] {
        for noun in ["request", "row", "page", "frame", "block", "batch"] {
            names.push(w.intern(&format!("{verb}_{noun}"))?);
        }
    }
    let keys = ["size", "id", "ratio", "path", "ok", "count"].map(|k| w.intern(k));
    let [size, id, ratio, path, ok, count] = keys;
    let (size, id, ratio, path, ok, count) = (size?, id?, ratio?, path?, ok?, count?);
    let mut paths = Vec::new();
    for i in 0..32 {
        paths.push(w.intern(&format!("/srv/data/shard-{i:02}/index.db"))?);
    }
    let (live, queue) = (w.intern("live objects")?, w.intern("queue depth")?);

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ts = 1_000u64;
    let mut written = 0u64;
    while written < events {
        let thread = threads[rng.below(threads.len() as u64) as usize];
        let cat = cats[rng.below(cats.len() as u64) as usize];
        // A slice with two nested children, an instant inside.
        let outer = names[rng.below(names.len() as u64) as usize];
        let n = rng.next();
        let args = [
            Arg::new(size, ArgValue::UInt64(n >> 40)),
            Arg::new(id, ArgValue::Int64((n & 0xffff_ffff) as i64)),
            Arg::new(
                path,
                ArgValue::String(StringRef::Index(paths[(n % 32) as usize])),
            ),
        ];
        w.duration_begin(thread, cat, outer, ts, &args)?;
        written += 1;
        for _ in 0..2 {
            ts += 50 + rng.below(500);
            let inner = names[rng.below(names.len() as u64) as usize];
            let args = [
                Arg::new(count, ArgValue::Int32(rng.below(1000) as i32)),
                Arg::new(ratio, ArgValue::Double(rng.below(10_000) as f64 / 7.0)),
            ];
            let end = ts + 20 + rng.below(2000);
            w.duration_complete(thread, cat, inner, ts, end, &args)?;
            ts = end;
            written += 1;
        }
        let args = [
            Arg::new(ok, ArgValue::Bool(rng.below(8) != 0)),
            Arg::new(id, ArgValue::UInt32(rng.below(1 << 20) as u32)),
        ];
        w.instant(thread, cat, names[0], ts, &args)?;
        ts += 10 + rng.below(100);
        w.duration_end(thread, cat, outer, ts, &[])?;
        written += 2;
        if rng.below(16) == 0 {
            let args = [
                Arg::new(live, ArgValue::Int64(rng.below(1 << 30) as i64)),
                Arg::new(queue, ArgValue::Int64(rng.below(64) as i64)),
            ];
            w.counter(thread, cats[0], live, ts, 1, &args)?;
            written += 1;
        }
        ts += rng.below(200);
    }
    Ok(w.finish_io()?)
}
