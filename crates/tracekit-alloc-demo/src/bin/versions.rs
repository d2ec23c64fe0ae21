//! One program in three versions, traced with tracekit-alloc, for comparing
//! traces: the version is the first argument.
//!
//! * `base`: parses records, renders pages and indexes keys;
//! * `grown`: `parse_records` keeps a copy of every record, allocating three
//!   times the bytes; nothing else changes;
//! * `moved`: `render_pages` allocates its pages from other lines of the same
//!   function, the same bytes as `base`, as an edit that moves code does.
//!
//! ```sh
//! MEMTRACE=base.ctf MEMTRACE_RATE=0.01 versions base
//! MEMTRACE=grown.ctf MEMTRACE_RATE=0.01 versions grown
//! tracekit memtrace diff --by function base.ctf grown.ctf
//! ```

use std::hint::black_box;

#[global_allocator]
static ALLOCATOR: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    Base,
    Grown,
    Moved,
}

/// Records as strings; in `grown`, each kept twice more as byte copies.
#[inline(never)]
fn parse_records(n: usize, version: Version) -> usize {
    let mut total = 0;
    for i in 0..n {
        let record = format!("record {i:08} with a payload of some length {:>40}", i * 7);
        total += black_box(&record).len();
        if version == Version::Grown {
            let copy: Vec<u8> = record.as_bytes().to_vec();
            let again: Vec<u8> = black_box(&copy).clone();
            total += black_box(again).len();
        }
    }
    total
}

/// Page buffers, from one line or (in `moved`) another of this function.
#[inline(never)]
fn render_pages(n: usize, version: Version) -> usize {
    let mut total = 0;
    for i in 0..n {
        let len = 4096 + (i % 16) * 256;
        if version == Version::Moved {
            let page = vec![2u8; len];
            total += black_box(page).len();
        } else {
            let page = vec![1u8; len];
            total += black_box(page).len();
        }
    }
    total
}

/// Keys in a sorted vector, the same in every version.
#[inline(never)]
fn index_keys(n: usize) -> usize {
    let mut keys: Vec<u64> = Vec::new();
    for i in 0..n as u64 {
        keys.push(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    keys.sort_unstable();
    black_box(keys).len()
}

fn main() {
    tracekit_alloc::trace_if_requested();
    let version = match std::env::args().nth(1).as_deref() {
        Some("base") | None => Version::Base,
        Some("grown") => Version::Grown,
        Some("moved") => Version::Moved,
        Some(other) => {
            eprintln!("versions: unknown version {other:?}: base, grown or moved");
            std::process::exit(2);
        }
    };
    let mut total = 0;
    for _ in 0..20 {
        total += parse_records(2_000, version);
        total += render_pages(200, version);
        total += index_keys(20_000);
    }
    black_box(total);
}
