//! Building a trace's tables with their columns spilled to files takes memory
//! of the process's own that does not grow with the trace: the heap the
//! building thread holds at its highest, counted by this binary's allocator,
//! is the same for a trace four times larger (with the same backtraces), and
//! the spilled tables answer as tables built in memory. So for a pass over
//! the trace that spills: four times as many objects live at once cost it
//! no more; and for a query over the tables that spills: four times as many
//! whole backtraces cost it only a few bytes each.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;

use tracekit_analysis::Filter;
use tracekit_analysis::analyzer::Options;
use tracekit_analysis::passes::{self, Spilling, Threads};
use tracekit_analysis::query::{SiteSpec, TopQuery};
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::report::GroupBy;
use tracekit_analysis::sites::SiteCounts;
use tracekit_analysis::tables::Tables;
use tracekit_columns::Spill;
use tracekit_columns::spill::SPILL_BYTES;
use tracekit_memtrace::synth::{synth_code, synth_info, synth_locations};
use tracekit_memtrace::{AllocationSource, LocationCode, Reader, Timedelta, Writer, WriterOptions};
use tracekit_testutil::heap::{PerThread, highest_of};

#[global_allocator]
static GLOBAL: PerThread = PerThread;

/// The tables of `bytes` built spilling as `spill` says, and the most heap
/// this thread held beyond what it held before, while building them.
fn build(bytes: &[u8], spill: &Spill) -> (Tables, i64) {
    highest_of(|| {
        let mut reader = Reader::from_bytes(bytes).unwrap();
        Tables::build_spilling(&mut reader, spill, &mut |_| {})
    })
}

/// `top --by BY --limit 20`, with the peak when `peak`.
fn top_query(by: GroupBy, peak: bool) -> TopQuery {
    TopQuery {
        growing: false,
        by,
        limit: 20,
        at: None,
        peak,
        sites: SiteSpec::default(),
        filter: Filter::default(),
    }
}

fn top_json(tables: &Tables, bytes: &[u8]) -> serde_json::Value {
    let reader = Reader::from_bytes(bytes).unwrap();
    let query = top_query(GroupBy::Function, true);
    let answer = query.run(&mut &*tables, &mut |_, _| {}).unwrap();
    serde_json::to_value(answer.json(&TraceFile::new("t.ctf", reader.info()))).unwrap()
}

/// A trace of `allocs` allocations from 64 backtraces, each object collected
/// 32 allocations after its own: the same trie and as many objects live at
/// once whatever its length, so that only its columns grow with it.
fn young_trace(allocs: u64) -> Vec<u8> {
    trace(allocs, Some(32))
}

/// A trace of `allocs` allocations from 64 backtraces, each object collected
/// `lifetime` allocations after its own, or never.
fn trace(allocs: u64, lifetime: Option<usize>) -> Vec<u8> {
    let info = synth_info();
    let mut w = Writer::with_options(Vec::new(), &info, WriterOptions::new()).unwrap();
    let stacks: Vec<Vec<LocationCode>> = (0..64u32)
        .map(|i| {
            (0..6)
                .map(|d| synth_code((i * 7 + d) % 40, d % 4))
                .collect()
        })
        .collect();
    let mut live = VecDeque::new();
    let mut time = info.start_time;
    for i in 0..allocs {
        time = time.offset(Timedelta::from_micros(1 + (i % 5) as i64));
        let stack = &stacks[(i.wrapping_mul(2_654_435_761) % 64) as usize];
        let source = AllocationSource::Minor;
        let id = w
            .put_alloc(time, 1 + i % 16, 1, source, stack, synth_locations)
            .unwrap();
        live.push_back(id);
        if lifetime.is_some_and(|l| live.len() > l)
            && let Some(old) = live.pop_front()
        {
            w.put_collect(time, old).unwrap();
        }
    }
    w.into_inner().unwrap()
}

#[test]
fn a_spilled_build_holds_the_same_memory_for_a_trace_four_times_larger() {
    let dir = tempfile::tempdir().unwrap();
    let spill = Spill::to(dir.path());
    let (small, large) = (young_trace(1_500_000), young_trace(6_000_000));
    let (small_tables, small_heap) = build(&small, &spill);
    let (large_tables, large_heap) = build(&large, &spill);
    let (in_memory, memory_heap) = build(&large, &Spill::memory());
    assert_eq!(large_tables.allocations(), 6_000_000);
    // A column of less than the spill size stays in memory: at 6 M
    // allocations, only the source's byte each (5.7 MiB) is in a file.
    assert!(small_tables.column_bytes() < 13 * SPILL_BYTES);
    assert!(large_tables.column_bytes() <= small_tables.column_bytes());
    let mib = |b: i64| b as f64 / 1048576.0;
    eprintln!(
        "heap at its highest: {:.1} MiB for 1.5 M allocations, {:.1} MiB for 6 M spilled, \
         {:.1} MiB in memory",
        mib(small_heap),
        mib(large_heap),
        mib(memory_heap)
    );
    // Columns in memory grow with the trace: 6 M allocations hold more than
    // 100 MiB of them, while spilled ones hold a fixed few MiB a column.
    assert!(memory_heap > 100 << 20, "{}", mib(memory_heap));
    assert!(
        large_heap <= small_heap + (4 << 20),
        "{} MiB against {} MiB",
        mib(large_heap),
        mib(small_heap)
    );
    assert_eq!(
        top_json(&large_tables, &large),
        top_json(&in_memory, &large)
    );
}

/// The heap this thread holds at its highest during a pass over `bytes` on
/// this thread, its trie and live objects grown as `spill` says, and the
/// pass's profile's totals and live objects at the end.
fn pass(bytes: &[u8], spill: &Spill) -> (i64, (SiteCounts, u64)) {
    let (pass, heap) = highest_of(|| {
        let mut source = Spilling {
            source: Reader::from_bytes(bytes).unwrap(),
            spill: spill.clone(),
        };
        let options = Options {
            threads: Threads::One,
            ..Options::default()
        };
        passes::analyze(&mut source, options, &mut |_, _| {})
    });
    let p = pass.profile;
    (heap, (p.totals, p.live_objects_at_end))
}

/// Checks the heaps `what` held at its highest for 1 M and 4 M live objects
/// spilled and 4 M in memory: the spilled ones the same within 4 MiB, the one
/// in memory `more` bytes above.
fn holds_the_same(what: &str, [small, large, memory]: [i64; 3], more: i64) {
    let mib = |b: i64| b as f64 / 1048576.0;
    eprintln!(
        "{what}'s heap at its highest: {:.1} MiB for 1 M live objects, {:.1} MiB for 4 M \
         spilled, {:.1} MiB in memory",
        mib(small),
        mib(large),
        mib(memory)
    );
    assert!(memory > large + more, "{what}: {} MiB", mib(memory));
    assert!(large <= small + (4 << 20), "{what}: {} MiB", mib(large));
}

/// Objects that are never collected: a trace of four times as many holds four
/// times as many objects live at its end. Spilled, neither the build nor a
/// pass holds more for them; in memory, both do.
#[test]
fn live_objects_spilled_cost_the_same_for_four_times_as_many() {
    let dir = tempfile::tempdir().unwrap();
    let spill = Spill::to(dir.path());
    let (small, large) = (trace(1_000_000, None), trace(4_000_000, None));
    let (_, small_build) = build(&small, &spill);
    let (large_tables, large_build) = build(&large, &spill);
    let (in_memory, memory_build) = build(&large, &Spill::memory());
    holds_the_same("build", [small_build, large_build, memory_build], 40 << 20);
    assert_eq!(
        top_json(&large_tables, &large),
        top_json(&in_memory, &large)
    );

    let (small_pass, _) = pass(&small, &spill);
    let (large_pass, spilled) = pass(&large, &spill);
    let (memory_pass, kept) = pass(&large, &Spill::memory());
    // 16 bytes an object and 4 a slot of the window, in memory.
    holds_the_same("pass", [small_pass, large_pass, memory_pass], 60 << 20);
    assert_eq!(spilled.1, 4_000_000);
    assert_eq!(spilled, kept);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A trace of `allocs` allocations, each from a backtrace of its own (and
/// each printing differently): as many sites as allocations, each of its
/// own weight.
fn distinct_trace(allocs: u32) -> Vec<u8> {
    let info = synth_info();
    let mut w = Writer::with_options(Vec::new(), &info, WriterOptions::new()).unwrap();
    let mut time = info.start_time;
    for i in 0..allocs {
        time = time.offset(Timedelta::from_micros(1));
        let stack = [
            synth_code(i % 1024, 0),
            synth_code(1024 + (i / 1024) % 1024, 1),
            synth_code(2048 + i / (1024 * 1024), 2),
        ];
        // Samples of their own, so that no two sites tie in a ranking (the
        // ties at a table's last row are named to break them).
        let source = AllocationSource::Minor;
        w.put_alloc(time, 1, 1 + u64::from(i), source, &stack, synth_locations)
            .unwrap();
    }
    w.into_inner().unwrap()
}

/// `top --by backtrace` over the tables of `bytes`, its passes spilling as
/// `spill` says: the heap this thread held at its highest, and the answer.
fn top_by_backtrace(tables: &Tables, bytes: &[u8], spill: &Spill) -> (i64, serde_json::Value) {
    let reader = Reader::from_bytes(bytes).unwrap();
    let query = top_query(GroupBy::Backtrace, false);
    let (answer, heap) = highest_of(|| {
        let mut source = Spilling {
            source: tables,
            spill: spill.clone(),
        };
        query.run(&mut source, &mut |_, _| {}).unwrap()
    });
    let json = answer.json(&TraceFile::new("t.ctf", reader.info()));
    (heap, serde_json::to_value(json).unwrap())
}

/// A query that counts every whole backtrace holds a site for each, and
/// groups them by what they print in a tree of a node or more each. Spilled,
/// its sites' counts and that tree grow in files: four times as many
/// backtraces cost the querying thread only the indexes it keeps in memory
/// (at most 8 bytes a site more), where in memory they cost more than 60.
#[test]
fn a_query_over_millions_of_backtraces_holds_their_counts_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let spill = Spill::to(dir.path());
    let (small, large) = (distinct_trace(400_000), distinct_trace(1_600_000));
    let (small_tables, _) = build(&small, &Spill::memory());
    let (large_tables, _) = build(&large, &Spill::memory());
    let (small_heap, _) = top_by_backtrace(&small_tables, &small, &spill);
    let (large_heap, spilled) = top_by_backtrace(&large_tables, &large, &spill);
    let (memory_heap, kept) = top_by_backtrace(&large_tables, &large, &Spill::memory());
    assert_eq!(spilled, kept);
    assert_eq!(spilled["events"]["allocs"], 1_600_000);
    let per_site = |heap: i64| (heap - small_heap) as f64 / 1_200_000.0;
    eprintln!(
        "top --by backtrace's heap at its highest: {} B for 400 k sites, {} B for 1.6 M \
         spilled ({:.1} B a site more), {} B in memory ({:.1} B a site more)",
        small_heap,
        large_heap,
        per_site(large_heap),
        memory_heap,
        per_site(memory_heap)
    );
    assert!(per_site(large_heap) <= 8.0, "{:.1}", per_site(large_heap));
    assert!(per_site(memory_heap) > 60.0, "{:.1}", per_site(memory_heap));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
