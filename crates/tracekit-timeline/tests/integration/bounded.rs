//! Building a timeline with its threads' slices and lanes spilled to files
//! takes memory of the process's own that hardly grows with the trace: the
//! heap the building thread holds at its highest, counted by this binary's
//! allocator, grows by no more than the lanes' summaries (half a byte a
//! slice) for a trace four times larger, and the spilled timeline is the
//! timeline built in memory, byte for byte as a cache file keeps it. A
//! range's flame graph of millions of distinct paths grows its call tree in
//! files too, and answers as the tree grown in memory.

use tracekit_columns::Spill;
use tracekit_fxt::format::{Arg, ArgValue, Koid};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::read::Reader;
use tracekit_fxt::write::{Initialization, Writer, WriterOptions};
use tracekit_testutil::heap::{PerThread, highest_of};
use tracekit_timeline::Timeline;

#[global_allocator]
static GLOBAL: PerThread = PerThread;

/// A trace of `calls` calls on each of two threads, each three slices deep,
/// written as a tracer of complete events writes them (the inner first):
/// nothing in it but slices, so that only its lanes and (each inner slice
/// with an address of its own, as magic-trace gives every frame) its
/// arguments grow with it.
fn nested_trace(calls: u64) -> Vec<u8> {
    trace(calls, |_, level| level)
}

/// A trace of `calls` calls on each of two threads, each three slices deep,
/// the slice of `level` in call `call` named `f{name(call, level)}` (of 128).
fn trace(calls: u64, name: impl Fn(u64, usize) -> usize) -> Vec<u8> {
    let options = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let out = IoDestination::with_buffer_size(Vec::new(), 1 << 20);
    let mut w = Writer::with_options(out, &options).unwrap();
    let threads: Vec<_> = (0..2u8)
        .map(|slot| {
            let tid = Koid(2 + u64::from(slot));
            w.set_thread_slot(slot, Koid(1), tid).unwrap()
        })
        .collect();
    let category = w.intern("app").unwrap();
    let names: Vec<_> = (0..128)
        .map(|i| w.intern(&format!("f{i}")).unwrap())
        .collect();
    let address = w.intern("address").unwrap();
    for call in 0..calls {
        let at = 1_000 + call * 10;
        let [outer, middle, inner] = [0, 1, 2].map(|level| names[name(call, level) % 128]);
        let args = [Arg::new(address, ArgValue::Pointer(0x5555_0000 + call))];
        for &t in &threads {
            w.duration_complete(t, category, inner, at + 2, at + 4, &args)
                .unwrap();
            w.duration_complete(t, category, middle, at + 1, at + 5, &[])
                .unwrap();
            w.duration_complete(t, category, outer, at, at + 6, &[])
                .unwrap();
        }
    }
    w.finish_io().unwrap()
}

/// The timeline of `bytes` built spilling as `spill` says, and the most heap
/// this thread held beyond what it held before, while building it.
fn build(bytes: &[u8], spill: &Spill) -> (Timeline, i64) {
    highest_of(|| Timeline::build_spilling(&mut Reader::new(bytes), spill, &mut |_| {}))
}

fn written(t: &Timeline) -> Vec<u8> {
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    out
}

#[test]
fn a_spilled_build_holds_about_the_same_memory_for_a_trace_four_times_larger() {
    let dir = tempfile::tempdir().unwrap();
    let spill = Spill::to(dir.path());
    let (small, large) = (nested_trace(400_000), nested_trace(1_600_000));
    let (_, small_heap) = build(&small, &spill);
    let (spilled, large_heap) = build(&large, &spill);
    let (in_memory, memory_heap) = build(&large, &Spill::memory());
    let mib = |b: i64| b as f64 / 1048576.0;
    eprintln!(
        "heap at its highest: {:.1} MiB for 2.4 M slices, {:.1} MiB for 9.6 M spilled, \
         {:.1} MiB in memory",
        mib(small_heap),
        mib(large_heap),
        mib(memory_heap)
    );
    // Slices in memory grow with the trace: 9.6 M of them hold more than
    // 300 MiB, while spilled ones hold a few MiB a thread and the lanes'
    // summaries, 32 bytes for 64 slices.
    assert!(memory_heap > 300 << 20, "{}", mib(memory_heap));
    let summaries = (9_600_000 - 2_400_000) / 2;
    assert!(
        large_heap <= small_heap + summaries + (1 << 20),
        "{} MiB against {} MiB",
        mib(large_heap),
        mib(small_heap)
    );
    assert_eq!(written(&spilled), written(&in_memory));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Calls whose three names are the digits of their number in base 128: a
/// range of 1.2 M calls has about as many distinct paths. Its flame graph
/// grown in files holds a fraction of the heap the tree grown in memory
/// does, and is the same tree.
#[test]
fn a_range_s_flame_graph_of_many_paths_grows_on_disk() {
    let calls = 1_200_000;
    let bytes = trace(calls, |call, level| (call >> (7 * (2 - level))) as usize);
    let (timeline, _) = build(&bytes, &Spill::memory());
    let range = (0, u64::MAX);
    let dir = tempfile::tempdir().unwrap();
    let tracks: Vec<usize> = (0..timeline.tracks().len()).collect();
    let (spilled, spilled_heap) =
        highest_of(|| timeline.flame(&tracks, range, &Spill::to(dir.path())));
    let (in_memory, memory_heap) = highest_of(|| timeline.flame(&tracks, range, &Spill::memory()));
    let mib = |b: i64| b as f64 / 1048576.0;
    eprintln!(
        "a flame graph of {} paths: {:.1} MiB of heap at its highest grown in files, {:.1} MiB \
         in memory",
        in_memory.len(),
        mib(spilled_heap),
        mib(memory_heap)
    );
    assert!(in_memory.len() > 1_000_000);
    assert!(in_memory.iter().eq(spilled.iter()));
    // 24 bytes a node and a child table of 4 bytes a slot in memory; the
    // lanes' nodes of the range (4 bytes a slice) either way.
    assert!(memory_heap > 40 << 20, "{}", mib(memory_heap));
    assert!(spilled_heap < memory_heap / 2, "{}", mib(spilled_heap));
    drop(spilled);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
