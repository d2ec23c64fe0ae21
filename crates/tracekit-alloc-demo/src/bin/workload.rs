//! A realistic allocation workload, traced with tracekit-alloc.
//!
//! ```sh
//! MEMTRACE=workload.ctf cargo run --release -p tracekit-alloc-demo
//! cargo run --release -- memtrace top workload.ctf
//! ```
//!
//! It builds strings, vectors, hash maps and trees on the main thread and on
//! four worker threads, frees most of it, keeps some alive to the end, and
//! prints one JSON line with its own ground truth, counted exactly by an
//! allocator layer under the tracer:
//!
//! `{"allocated_bytes": N, "live_bytes_at_exit": M, "allocations": K}`
//!
//! "Bytes" are the sizes the program asked the allocator for
//! (`Layout::size()`), which is also what the trace estimates:
//! `sum(nsamples) * 8 / rate`. The trace's own `length` field is that size
//! rounded up to 8-byte words. A `realloc` counts as one allocation of its
//! new size (the trace sees it as a free and an allocation). The tracer's own
//! allocations are left out ([`tracekit_alloc::in_tracer`]). The live bytes
//! are measured just before the line is printed; the process then exits
//! without freeing anything, so the trace ends with the same live set.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Counts what the program allocates, exactly.
struct Counting<A>(A);

static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

fn count_alloc(size: usize) {
    if !tracekit_alloc::in_tracer() {
        ALLOCATED.fetch_add(size as u64, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(size as i64, Ordering::Relaxed);
    }
}

fn count_free(size: usize) {
    if !tracekit_alloc::in_tracer() {
        LIVE.fetch_sub(size as i64, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call unchanged to the inner allocator.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees are forwarded.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees are forwarded.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_free(layout.size());
        // SAFETY: the caller's guarantees are forwarded.
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees are forwarded.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count_free(layout.size());
            count_alloc(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: tracekit_alloc::Tracer<Counting<System>> =
    tracekit_alloc::Tracer::new(Counting(System));

/// A tiny deterministic generator, so that every run does the same work.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

/// Log lines: many short strings built with `format!`.
#[inline(never)]
fn build_log_lines(rng: &mut Lcg, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..n {
        let line = format!(
            "request {i} from 10.0.{}.{} took {} us",
            rng.next() % 256,
            rng.next() % 256,
            rng.next() % 10_000
        );
        lines.push(line);
    }
    lines
}

/// Word counts in a hash map keyed by owned strings.
#[inline(never)]
fn count_words(lines: &[String]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for line in lines {
        for word in line.split(' ') {
            *counts.entry(word.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// Numeric series grown one element at a time.
#[inline(never)]
fn grow_series(rng: &mut Lcg, n: usize, len: usize) -> Vec<Vec<u64>> {
    let mut all = Vec::new();
    for _ in 0..n {
        let mut v = Vec::new();
        for _ in 0..len {
            v.push(rng.next());
        }
        all.push(v);
    }
    all
}

/// An ordered index from ids to byte payloads.
#[inline(never)]
fn build_index(rng: &mut Lcg, n: usize) -> BTreeMap<u64, Vec<u8>> {
    let mut index = BTreeMap::new();
    for _ in 0..n {
        let len = 16 + (rng.next() % 240) as usize;
        index.insert(rng.next(), vec![7u8; len]);
    }
    index
}

/// A binary search tree of boxed nodes.
enum Tree {
    Leaf,
    Node(Box<Tree>, u64, Box<Tree>),
}

#[inline(never)]
fn insert_node(tree: Tree, key: u64) -> Tree {
    match tree {
        Tree::Leaf => Tree::Node(Box::new(Tree::Leaf), key, Box::new(Tree::Leaf)),
        Tree::Node(l, k, r) => {
            if key < k {
                Tree::Node(Box::new(insert_node(*l, key)), k, r)
            } else {
                Tree::Node(l, k, Box::new(insert_node(*r, key)))
            }
        }
    }
}

#[inline(never)]
fn build_tree(rng: &mut Lcg, n: usize) -> Tree {
    let mut t = Tree::Leaf;
    for _ in 0..n {
        t = insert_node(t, rng.next());
    }
    t
}

/// Large scratch buffers, allocated and dropped at once.
#[inline(never)]
fn scratch_buffers(rng: &mut Lcg, n: usize) -> u64 {
    let mut sum = 0;
    for _ in 0..n {
        let len = 100_000 + (rng.next() % 400_000) as usize;
        let buf = vec![1u8; len];
        sum += black_box(&buf).len() as u64;
    }
    sum
}

/// A worker thread's job: a bit of everything; returns what it keeps.
#[inline(never)]
fn worker(seed: u64) -> (Vec<String>, BTreeMap<u64, Vec<u8>>) {
    let mut rng = Lcg(seed);
    let mut kept_lines = Vec::new();
    let mut kept_index = BTreeMap::new();
    for round in 0..6 {
        let lines = build_log_lines(&mut rng, 20_000);
        let counts = count_words(&lines);
        black_box(counts.len());
        let series = grow_series(&mut rng, 200, 1_000);
        black_box(series.len());
        let index = build_index(&mut rng, 5_000);
        black_box(scratch_buffers(&mut rng, 40));
        if round % 3 == 0 {
            kept_lines.extend(lines.into_iter().take(5_000));
            kept_index.extend(index.into_iter().take(2_000));
        }
    }
    (kept_lines, kept_index)
}

fn main() {
    // Touch stdout first, so that its buffer is counted like everything else.
    drop(std::io::stdout().lock());
    tracekit_alloc::trace_if_requested();

    let mut rng = Lcg(42);
    let workers: Vec<_> = (0..4u64)
        .map(|i| std::thread::spawn(move || worker(1000 + i)))
        .collect();

    let mut tree = build_tree(&mut rng, 60_000);
    let mut kept_series = Vec::new();
    for _ in 0..6 {
        let lines = build_log_lines(&mut rng, 30_000);
        let counts = count_words(&lines);
        black_box(counts.len());
        let series = grow_series(&mut rng, 300, 2_000);
        // A cache that only grows: what is live at the end.
        kept_series.extend(series);
        black_box(scratch_buffers(&mut rng, 60));
        tree = build_tree(&mut rng, 10_000).merge_into(tree);
    }
    let kept: Vec<_> = workers.into_iter().filter_map(|w| w.join().ok()).collect();

    let allocated = ALLOCATED.load(Ordering::Relaxed);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    let live = LIVE.load(Ordering::Relaxed);
    let line = format!(
        "{{\"allocated_bytes\": {allocated}, \"live_bytes_at_exit\": {live}, \"allocations\": {allocations}}}"
    );
    println!("{line}");
    // Keep the live set to the end: exit without running destructors (the
    // exit hook then flushes the trace).
    black_box((&tree, &kept_series, &kept));
    std::mem::forget((tree, kept_series, kept));
    std::process::exit(0);
}

impl Tree {
    /// Moves every key of `self` into `other`.
    fn merge_into(self, mut other: Tree) -> Tree {
        let mut stack = vec![self];
        while let Some(t) = stack.pop() {
            if let Tree::Node(l, k, r) = t {
                other = insert_node(other, k);
                stack.push(*l);
                stack.push(*r);
            }
        }
        other
    }
}
