//! Writes N events through the fast path into a discarding in-memory destination, for
//! CPU-time measurements under `perf stat` when wall-clock benchmarks are too noisy:
//! `write_loop [instant|pair32|pair64|stores] N`.

use std::hint::black_box;

use tracekit_fxt::format::Koid;
use tracekit_fxt::write::fast::{EventHeader, Int32, Int64};
use tracekit_fxt::write::{DiscardDestination, Writer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "instant".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000_000);
    let mut w = Writer::new(DiscardDestination::new(1 << 20))?;
    let t = w.set_thread_slot(0, Koid(1), Koid(2))?;
    let (c, name, k1, k2) = (
        w.intern("c")?,
        w.intern("n")?,
        w.intern("a")?,
        w.intern("b")?,
    );
    match mode.as_str() {
        "instant" => {
            let h = EventHeader::<()>::instant(t, c, name);
            for ts in 0..n {
                w.emit(&h, ts, ())?;
            }
        }
        "pair32" => {
            let b = EventHeader::<(Int32, Int32)>::duration_begin(t, c, name);
            let e = EventHeader::<(Int32, Int32)>::duration_end(t, c, name);
            for ts in 0..n / 2 {
                let v = ts as i32;
                w.emit(&b, ts, (Int32(k1, v), Int32(k2, v)))?;
                w.emit(&e, ts + 1, (Int32(k1, v), Int32(k2, v)))?;
            }
        }
        "pair64" => {
            let b = EventHeader::<(Int64, Int64)>::duration_begin(t, c, name);
            let e = EventHeader::<(Int64, Int64)>::duration_end(t, c, name);
            for ts in 0..n / 2 {
                let v = ts as i64;
                w.emit(&b, ts, (Int64(k1, v), Int64(k2, v)))?;
                w.emit(&e, ts + 1, (Int64(k1, v), Int64(k2, v)))?;
            }
        }
        _ => {
            // Baseline: two 8-byte stores per event into a reused buffer.
            let mut buf = vec![0u8; 1 << 20];
            let mut pos = 0;
            for ts in 0..n {
                if pos + 16 > buf.len() {
                    pos = 0;
                }
                buf[pos..pos + 8].copy_from_slice(&0x1234u64.to_le_bytes());
                buf[pos + 8..pos + 16].copy_from_slice(&ts.to_le_bytes());
                pos += 16;
            }
            black_box(&buf);
        }
    }
    black_box(w.destination().discarded());
    Ok(())
}
