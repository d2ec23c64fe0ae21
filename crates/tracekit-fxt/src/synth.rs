//! A synthetic trace of the shape magic-trace writes, for tests and benches
//! that need a large trace in seconds (`tracekit fxt sample`), as
//! `tracekit_memtrace::synth` makes memtrace traces.
//!
//! Each thread runs a model program: a driver loop whose calls nest up to
//! [`MAX_DEPTH`] deep among [`FUNCTIONS`] functions, some of them recursing
//! through many frames of one function, most ending in short leaves. Each
//! slice is one complete event (`duration_complete`), written when it ends,
//! as a tracer that knows each call's end writes it. Threads take turns by
//! whole driver calls, so a thread's slices are in time order while the
//! threads' interleave. An instant marks every [`INSTANT_EVERY`]th slice of
//! a thread (`gc`), and a process counter (`heap`, one series) is sampled
//! every [`COUNTER_EVERY`] slices. The same configuration writes the same
//! bytes.
//!
//! | what | where |
//! | --- | --- |
//! | process | koid 1000, named `sample` |
//! | thread *i* | koid 1001 + *i*, named `worker i`, thread slot *i* |
//! | slices | category `app`, names `f000` ... `f399` and `main` (the driver) |
//! | instants | category `app`, name `gc`, on the thread |
//! | counter | category `app`, name `heap`, id 1, argument `bytes` (int64), on thread 0 |

use std::io::Write;

use crate::format::{Arg, ArgValue, Koid, StringId, ThreadId};
use crate::io::{FinishError, IoDestination};
use crate::write::{Initialization, Writer, WriterOptions};

/// Distinct functions of the model program.
pub const FUNCTIONS: u64 = 400;

/// The deepest a thread's stack goes.
pub const MAX_DEPTH: u32 = 48;

/// A thread's slices between two of its instants.
pub const INSTANT_EVERY: u64 = 1_000;

/// Slices between two samples of the counter.
pub const COUNTER_EVERY: u64 = 500;

/// What to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthConfig {
    /// At least this many slices (the last driver call is finished).
    pub slices: u64,
    /// Threads, 1 to 255 (each takes a thread slot).
    pub threads: u8,
    /// Seed of the pseudo-random model.
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> SynthConfig {
        SynthConfig {
            slices: 1_000_000,
            threads: 8,
            seed: 1,
        }
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Synthesized {
    /// Slices (complete events).
    pub slices: u64,
    /// Instants.
    pub instants: u64,
    /// Counter samples.
    pub counters: u64,
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The writer and the model's state.
struct Model<W: Write> {
    w: Writer<IoDestination<W>>,
    rng: Rng,
    category: StringId,
    functions: Vec<StringId>,
    gc: StringId,
    heap: StringId,
    bytes: StringId,
    heap_bytes: i64,
    counter_thread: ThreadId,
    done: Synthesized,
}

impl<W: Write> Model<W> {
    /// Writes the call of `function` on `thread` from `start` (its children
    /// first, each when it ends), at `depth`; its end.
    fn call(
        &mut self,
        thread: ThreadId,
        function: usize,
        start: u64,
        depth: u32,
    ) -> Result<u64, crate::write::WriteError> {
        let mut t = start + 1 + self.rng.below(20);
        let roll = self.rng.below(100);
        if depth < MAX_DEPTH && roll < 8 {
            // Recursion: the function calls itself, a few to many frames down.
            let levels = 2 + self.rng.below(12) as u32;
            t = self.recurse(thread, function, t, depth + 1, levels)?;
        } else if depth < MAX_DEPTH && roll < 55 {
            let children = 1 + self.rng.below(if depth < 4 { 6 } else { 3 });
            for _ in 0..children {
                let callee = self.callee();
                t = self.call(thread, callee, t, depth + 1)? + self.rng.below(30);
            }
        } else {
            // A short leaf.
            t += 10 + self.rng.below(190);
        }
        let end = t + 5 + self.rng.below(40);
        self.slice(thread, function, start, end)?;
        Ok(end)
    }

    /// `levels` nested calls of `function` from `start`, the innermost
    /// calling on; the outermost's end.
    fn recurse(
        &mut self,
        thread: ThreadId,
        function: usize,
        start: u64,
        depth: u32,
        levels: u32,
    ) -> Result<u64, crate::write::WriteError> {
        if levels == 0 || depth >= MAX_DEPTH {
            let callee = self.callee();
            return self.call(thread, callee, start, depth);
        }
        let inner = self.recurse(thread, function, start + 3, depth + 1, levels - 1)?;
        let end = inner + 2 + self.rng.below(10);
        self.slice(thread, function, start, end)?;
        Ok(end)
    }

    /// A callee: a few functions are called far more often than the rest.
    fn callee(&mut self) -> usize {
        let n = FUNCTIONS as usize;
        match self.rng.below(4) {
            0 => self.rng.below(16) as usize,
            _ => self.rng.below(n as u64) as usize,
        }
    }

    fn slice(
        &mut self,
        thread: ThreadId,
        function: usize,
        start: u64,
        end: u64,
    ) -> Result<(), crate::write::WriteError> {
        let name = self.functions[function];
        (self.w).duration_complete(thread, self.category, name, start, end, &[])?;
        self.done.slices += 1;
        if self.done.slices.is_multiple_of(INSTANT_EVERY) {
            (self.w).instant(thread, self.category, self.gc, end, &[])?;
            self.done.instants += 1;
        }
        if self.done.slices.is_multiple_of(COUNTER_EVERY) {
            self.heap_bytes = (self.heap_bytes + self.rng.below(1 << 20) as i64 - (1 << 19)).max(0);
            let args = [Arg::new(self.bytes, ArgValue::Int64(self.heap_bytes))];
            let thread = self.counter_thread;
            (self.w).counter(thread, self.category, self.heap, end, 1, &args)?;
            self.done.counters += 1;
        }
        Ok(())
    }
}

/// Writes the trace `config` describes to `out`; `out` once the trace is
/// complete and flushed, and what was written.
pub fn write_synthetic<W: Write>(
    out: W,
    config: &SynthConfig,
) -> Result<(W, Synthesized), FinishError> {
    let options = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let dest = IoDestination::with_buffer_size(out, 1 << 20);
    let mut w = Writer::with_options(dest, &options).map_err(FinishError::Write)?;
    let model = (|| {
        let pid = Koid(1000);
        // Names by reference, not inline: Jane Street's reader refuses
        // inline names of kernel objects.
        let name = w.intern("sample")?;
        w.set_process_name(pid, name)?;
        let mut threads = Vec::new();
        for slot in 0..config.threads.max(1) {
            let tid = Koid(1001 + u64::from(slot));
            let name = w.intern(&format!("worker {slot}"))?;
            w.set_thread_name(pid, tid, name)?;
            threads.push(w.set_thread_slot(slot, pid, tid)?);
        }
        let mut functions = Vec::new();
        for i in 0..FUNCTIONS {
            functions.push(w.intern(&format!("f{i:03}"))?);
        }
        functions.push(w.intern("main")?);
        let strings = (w.intern("app")?, w.intern("gc")?, w.intern("heap")?);
        let bytes = w.intern("bytes")?;
        Ok::<_, crate::write::WriteError>((threads, functions, strings, bytes))
    })();
    let (threads, functions, (category, gc, heap), bytes) = model.map_err(FinishError::Write)?;
    let mut m = Model {
        w,
        rng: Rng(config.seed),
        category,
        functions,
        gc,
        heap,
        bytes,
        heap_bytes: 1 << 24,
        counter_thread: threads[0],
        done: Synthesized::default(),
    };
    let driver = FUNCTIONS as usize;
    let mut clocks = vec![1_000u64; threads.len()];
    while m.done.slices < config.slices {
        for (clock, &thread) in clocks.iter_mut().zip(&threads) {
            let end = m
                .call(thread, driver, *clock, 0)
                .map_err(FinishError::Write)?;
            *clock = end + 50 + m.rng.below(500);
        }
    }
    let done = m.done;
    let out = m.w.finish_io()?;
    Ok((out, done))
}

#[cfg(all(test, feature = "read"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read::{Reader, Record};

    #[test]
    fn a_sample_holds_what_it_says_nested_and_the_same_for_a_seed() {
        let config = SynthConfig {
            slices: 20_000,
            threads: 3,
            seed: 7,
        };
        let (bytes, done) = write_synthetic(Vec::new(), &config).unwrap();
        assert!(done.slices >= 20_000 && done.slices < 40_000, "{done:?}");
        assert_eq!(done.instants, done.slices / INSTANT_EVERY);
        assert_eq!(done.counters, done.slices / COUNTER_EVERY);
        let (mut slices, mut instants, mut counters) = (0, 0, 0);
        let mut threads = std::collections::BTreeSet::new();
        let mut r = Reader::new(&bytes);
        while let Some(record) = r.next_record().unwrap() {
            if let Record::Event(e) = record {
                threads.insert(e.thread.thread);
                match e.kind {
                    crate::format::EventKind::DurationComplete { end_ticks } => {
                        assert!(end_ticks > e.ticks);
                        slices += 1;
                    }
                    crate::format::EventKind::Instant => instants += 1,
                    crate::format::EventKind::Counter { .. } => counters += 1,
                    _ => {}
                }
            }
        }
        assert_eq!(
            (slices, instants, counters),
            (done.slices, done.instants, done.counters)
        );
        assert_eq!(threads.len(), 3);
        assert!(r.warnings().is_empty());
        assert_eq!(write_synthetic(Vec::new(), &config).unwrap().0, bytes);
        let other = SynthConfig { seed: 8, ..config };
        assert_ne!(write_synthetic(Vec::new(), &other).unwrap().0, bytes);
    }
}
