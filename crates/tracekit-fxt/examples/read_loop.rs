//! Reads a trace many times (for profiling the reader): `read_loop FILE [N] [raw|resolved]`.

use tracekit_fxt::read::{Reader, Record};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: read_loop FILE [N] [raw|resolved]");
        std::process::exit(2);
    };
    let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mode = args.next().unwrap_or_else(|| "resolved".into());
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let mut total = 0u64;
    for _ in 0..n {
        let mut r = Reader::new(&data);
        if mode == "frame" {
            // The floor: only the record headers.
            let mut pos = 0;
            while let Some(h) = data.get(pos..).and_then(|b| b.first_chunk::<8>()) {
                let h = u64::from_le_bytes(*h);
                pos += (((h >> 4) & 0xFFF) as usize).max(1) * 8;
                total += std::hint::black_box(h) & 1;
            }
        } else if mode == "raw" {
            while let Ok(Some(rec)) = r.next_raw() {
                std::hint::black_box(&rec);
                total += 1;
            }
        } else {
            while let Ok(Some(rec)) = r.next_record() {
                if let Record::Event(e) = rec {
                    for a in e.args.iter() {
                        std::hint::black_box(a);
                    }
                }
                total += 1;
            }
        }
    }
    println!("{total} records");
}
