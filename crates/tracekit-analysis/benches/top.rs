//! `top` against the reader it runs on, on generated traces of over 5 M events.
//!
//! * `read`: the reader alone, a full pass decoding backtraces (the baseline).
//! * `top_one_thread`: the same pass feeding the analysis, then the site report
//!   (`report::top`), i.e. what `tracekit memtrace top` does minus printing.
//! * `top`: the same with decoding on this thread and the analysis on a second one
//!   (`Threads::Two`).
//! * `top_by_backtrace`: pipelined, interning whole backtraces, then the report by
//!   whole backtrace (`top --by backtrace`); the others charge allocation sites.
//! * `flamegraph`: the same pass, then the stacks folded through the frame tree and
//!   written as folded text (`tracekit memtrace flamegraph > out.folded`);
//!   `flamegraph_svg` draws the SVG from the tree instead.
//!
//! Both are reported as events/s, so `top / read` is the share of the reader's speed
//! that `top` keeps. Traces, each over 5 M events:
//!
//! * `program`: a model of a real program: a fixed call tree with 3000 allocation
//!   sites (40-frame stacks sharing prefixes), sites chosen with a skewed distribution
//!   and in bursts, objects that mostly die young (generational lifetimes).
//! * `sample`: the random model of `tracekit memtrace sample`, a stress case: every
//!   allocation moves the stack randomly, which yields about 650 000 distinct
//!   backtraces and millions of trie nodes, and objects die in random order (840 000
//!   still live at the end), so the analysis state no longer fits in cache.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracekit_analysis::report::{self, GroupBy, Rank};
use tracekit_analysis::symbols::FrameSkip;
use tracekit_analysis::{Options, Threads, analyze};
use tracekit_memtrace::synth::{
    Rng, SynthConfig, synth_code, synth_info, synth_locations, write_synthetic,
};
use tracekit_memtrace::{AllocationSource, LocationCode, ObjId, Reader, Timedelta, Writer};

/// The `program` model (see the module docs).
fn program_trace(allocs: u64) -> Vec<u8> {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let mut rng = Rng::new(7);
    // A call tree: site s's stack is its parent site's stack plus a few frames.
    let sites = 3000usize;
    let mut stacks: Vec<Vec<LocationCode>> = Vec::with_capacity(sites);
    for s in 0..sites {
        let mut stack = if s < 8 {
            Vec::new()
        } else {
            stacks[rng.below(s as u64) as usize].clone()
        };
        stack.truncate(36);
        while stack.len() < 40 {
            let f = rng.below(400) as u32;
            stack.push(synth_code(f, rng.below(4) as u32));
        }
        stacks.push(stack);
    }
    let callstacks: Vec<Vec<LocationCode>> = stacks
        .iter()
        .map(|s| s.iter().rev().copied().collect())
        .collect();
    // (death time in allocations, id) of live objects, kept sorted by a heap.
    let mut deaths: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64)>> =
        std::collections::BinaryHeap::new();
    let mut time = info.start_time;
    let mut site = 0usize;
    for n in 0..allocs {
        if rng.below(4) == 0 {
            // Skewed: squaring a uniform draw favours low site numbers. (u * u is
            // below 2^32; shifting it by 32, as this once did, made every
            // allocation come from site 0.)
            let u = rng.below(1 << 16);
            site = ((((u * u) >> 16) as usize) * sites) >> 16;
        }
        time = time.offset(Timedelta::from_micros(rng.below(4) as i64));
        let (source, length, nsamples) = match rng.below(100) {
            0..=89 => (AllocationSource::Minor, 1 + rng.below(16), 1),
            90..=97 => (
                AllocationSource::Major,
                256 + rng.below(10_000),
                1 + rng.below(3),
            ),
            _ => (AllocationSource::External, 1 + rng.below(4096), 1),
        };
        let id = w
            .put_alloc(
                time,
                length,
                nsamples,
                source,
                &callstacks[site],
                synth_locations,
            )
            .unwrap();
        let life = match rng.below(100) {
            0..=89 => rng.below(1000),
            90..=98 => rng.below(200_000),
            _ => u64::MAX,
        };
        if life != u64::MAX {
            deaths.push(std::cmp::Reverse((n + life, id.get())));
        }
        while let Some(&std::cmp::Reverse((due, id))) = deaths.peek() {
            if due > n {
                break;
            }
            deaths.pop();
            w.put_collect(time, ObjId::new(id)).unwrap();
        }
    }
    w.into_inner().unwrap()
}

fn count(reader: &mut Reader<'_>) -> u64 {
    let mut events = reader.events(true);
    let mut n = 0u64;
    let mut leaf = 0i64;
    while let Some(item) = events.next_event() {
        let (_, ev) = item.unwrap();
        n += 1;
        if let tracekit_memtrace::Event::Alloc(a) = &ev
            && let Some(l) = a.backtrace.last()
        {
            leaf = leaf.wrapping_add(l.get());
        }
    }
    black_box(leaf);
    n
}

/// What `tracekit memtrace flamegraph` does (frames show functions, weights are
/// allocated bytes), minus the file: the folded text, or the SVG when `svg`.
fn flamegraph(reader: &mut Reader<'_>, svg: bool) -> usize {
    let options = Options {
        timeline_buckets: 0,
        threads: Threads::Two,
        ..Options::default()
    };
    let p = analyze(reader, options, &mut |_, _| {});
    let tree = report::fold_tree(
        &p.profile,
        reader.locations(),
        report::FoldOptions::default(),
    );
    if svg {
        let options = tracekit_analysis::svg::FlameGraphOptions::default();
        tracekit_analysis::svg::flame_graph(&tree, &options).len()
    } else {
        let mut out = std::io::BufWriter::new(std::io::sink());
        tree.write_folded(&mut out).unwrap();
        tree.stacks()
    }
}

fn top(reader: &mut Reader<'_>, pipelined: bool, leaf_only: bool) -> usize {
    // `tracekit memtrace top` (sites by leaf) sets `leaf_only`; `--by backtrace` not.
    // As the CLI's `top` does: sites named past Rust std frames, and no timeline,
    // which the table does not show.
    let skip = FrameSkip::rust_std();
    let options = Options {
        leaf_only,
        site_skip: skip.clone(),
        timeline_buckets: 0,
        threads: if pipelined {
            Threads::Two
        } else {
            Threads::One
        },
        ..Options::default()
    };
    let p = analyze(reader, options, &mut |_, _| {});
    let by = if leaf_only {
        GroupBy::Leaf
    } else {
        GroupBy::Backtrace
    };
    let t = report::top_skipping(
        &p.profile,
        &reader.locations(),
        by,
        Rank::Allocated,
        20,
        &skip,
    );
    t.sites.len()
}

fn bench(c: &mut Criterion) {
    let traces = [
        ("program", program_trace(2_700_000)),
        (
            "sample",
            write_synthetic(
                Vec::new(),
                &SynthConfig {
                    allocs: 2_800_000,
                    ..SynthConfig::default()
                },
            )
            .unwrap(),
        ),
    ];
    if let Some(dir) = std::env::var_os("TRACEKIT_BENCH_SAVE") {
        // For profiling the CLI on the same traces.
        for (name, data) in &traces {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.ctf")), data).unwrap();
        }
    }
    for (name, data) in &traces {
        let mut reader = Reader::from_bytes(data).unwrap();
        let events = count(&mut reader);
        assert!(events >= 5_000_000, "{events} events");
        eprintln!("{name}: {} bytes, {events} events", data.len());
        let mut g = c.benchmark_group(format!("top/{name}"));
        g.throughput(Throughput::Elements(events));
        g.sample_size(10);
        g.bench_function("read", |b| b.iter(|| black_box(count(&mut reader))));
        g.bench_function("top", |b| {
            b.iter(|| black_box(top(&mut reader, true, true)))
        });
        g.bench_function("top_one_thread", |b| {
            b.iter(|| black_box(top(&mut reader, false, true)))
        });
        g.bench_function("top_by_backtrace", |b| {
            b.iter(|| black_box(top(&mut reader, true, false)))
        });
        g.bench_function("flamegraph", |b| {
            b.iter(|| black_box(flamegraph(&mut reader, false)))
        });
        g.bench_function("flamegraph_svg", |b| {
            b.iter(|| black_box(flamegraph(&mut reader, true)))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
