//! Synthetic traces: a deterministic model of an allocating program, for
//! demonstrations (`tracekit memtrace sample`), tests and benchmarks.
//!
//! The model program walks a call graph of `functions` functions; its stack
//! moves a few frames at a time around `depth` frames, so consecutive
//! backtraces share long prefixes as in real programs. It allocates objects
//! of varied sizes (minor, major and external), promotes some and collects
//! most of them later. Time advances a few microseconds per event.
//!
//! With [`SynthConfig::recursive`] the model is shaped like an OCaml
//! compiler instead: under a driver nest of about a quarter of `depth`
//! frames, walks of recursion (a function calling itself, or two or three
//! calling each other) go down and back up a few levels between samples,
//! to about `depth` frames on average, with a few allocation-site frames on
//! top. Its backtraces have long prediction runs around cycles and a mix of
//! every codeword kind, as real deep traces do; the default model's are
//! mostly single hits.

use std::io::Write;

use crate::error::WriteError;
use crate::types::{
    AllocationSource, DomainId, FormatVersion, Info, Location, LocationCode, ObjId, Timedelta,
    Timestamp,
};
use crate::write::{Writer, WriterOptions};

/// Parameters of a synthetic trace.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    /// Number of allocations.
    pub allocs: u64,
    /// Typical stack depth.
    pub depth: usize,
    /// Distinct functions of the model program.
    pub functions: u32,
    /// Seed of the pseudo-random generator.
    pub seed: u64,
    /// Format to write.
    pub format_version: FormatVersion,
    /// Whether the stacks are walks of deep recursion (see the module docs).
    pub recursive: bool,
}

impl Default for SynthConfig {
    fn default() -> SynthConfig {
        SynthConfig {
            allocs: 100_000,
            depth: 20,
            functions: 400,
            seed: 1,
            format_version: FormatVersion::V3,
            recursive: false,
        }
    }
}

/// A small, fast pseudo-random generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The trace info of a synthetic trace.
pub fn synth_info() -> Info {
    Info {
        sample_rate: 1e-4,
        word_size: 64,
        executable_name: "/tracekit/synthetic/sample.exe".into(),
        host_name: "tracekit".into(),
        ocaml_runtime_params: "s=256k,v=0".into(),
        pid: 4242,
        initial_domain: DomainId::MAIN,
        start_time: Timestamp::from_micros(1_700_000_000_000_000),
        context: Some("tracekit memtrace sample".into()),
    }
}

/// The location code of call site `site` in function `f`.
pub fn synth_code(f: u32, site: u32) -> LocationCode {
    LocationCode::new(0x5555_0000_0000 + i64::from(f) * 64 + i64::from(site) * 8)
}

/// The source locations the model program has for `code`.
pub fn synth_locations(code: LocationCode) -> Vec<Location> {
    let raw = code.get() - 0x5555_0000_0000;
    let (f, site) = (raw / 64, (raw % 64) / 8);
    let module = f / 10;
    vec![Location {
        filename: format!("src/module_{module:03}.ml").into(),
        line: (f * 10 + site) as u32 + 1,
        start_char: (site * 4) as u32,
        end_char: (site * 4 + 17) as u32,
        defname: format!("Module_{module:03}.fn_{f}").into(),
    }]
}

/// Writes a synthetic trace to `out` and returns `out`.
pub fn write_synthetic<W: Write>(out: W, config: &SynthConfig) -> Result<W, WriteError> {
    let info = synth_info();
    let options = WriterOptions::new().format_version(config.format_version);
    let mut w = Writer::with_options(out, &info, options)?;
    let mut rng = Rng::new(config.seed);
    let functions = u64::from(config.functions.max(2));
    // Innermost frame last here; reversed for the writer.
    let mut stack: Vec<LocationCode> = Vec::new();
    let mut callstack: Vec<LocationCode> = Vec::new();
    let mut live: Vec<ObjId> = Vec::new();
    let mut time = info.start_time;
    let depth = config.depth.max(2);
    let mut walk = Walk::default();
    for _ in 0..config.allocs {
        if config.recursive {
            walk.step(&mut rng, depth, functions, &mut stack);
        } else {
            // Move the stack: pop a few frames, push a few.
            let pops = rng.below(4) as usize;
            stack.truncate(stack.len().saturating_sub(pops));
            grow_stack(&mut rng, functions, &mut stack, depth);
        }
        callstack.clear();
        callstack.extend(stack.iter().rev());
        time = time.offset(Timedelta::from_micros(rng.below(8) as i64));
        let r = rng.below(100);
        let (source, length, nsamples) = match r {
            0..=89 => (AllocationSource::Minor, 1 + rng.below(16), 1),
            90..=96 => (
                AllocationSource::Major,
                256 + rng.below(100_000),
                1 + rng.below(4),
            ),
            _ => (AllocationSource::External, 1 + rng.below(4096), 1),
        };
        let id = w.put_alloc(time, length, nsamples, source, &callstack, synth_locations)?;
        if rng.below(10) < 8 {
            live.push(id);
        }
        if !live.is_empty() && rng.below(10) < 8 {
            let i = rng.below(live.len() as u64) as usize;
            let victim = live.swap_remove(i);
            if rng.below(8) == 0 {
                w.put_promote(time, victim)?;
            } else {
                w.put_collect(time, victim)?;
            }
        }
    }
    w.into_inner()
}

/// Pushes calls through the model's call graph until `stack` is about
/// `depth` frames deep.
fn grow_stack(rng: &mut Rng, functions: u64, stack: &mut Vec<LocationCode>, depth: usize) {
    while stack.len() < depth.saturating_sub(2) || (stack.len() < depth + 4 && rng.below(3) == 0) {
        let caller = stack.last().map_or(0, |c| c.get() as u64);
        let f = (caller.wrapping_mul(31).wrapping_add(rng.below(5)) % functions) as u32;
        stack.push(synth_code(f, rng.below(4) as u32));
    }
}

/// The recursive model's state: a driver nest, and a walk of recursion
/// under it that goes down to `target` levels and back up.
#[derive(Default)]
struct Walk {
    /// Frames of the driver nest (the bottom of `stack`).
    driver: usize,
    /// The call sites one level of the recursion goes through.
    cycle: Vec<LocationCode>,
    level: usize,
    target: usize,
    descending: bool,
}

impl Walk {
    /// Moves to the next sample's stack.
    fn step(&mut self, rng: &mut Rng, depth: usize, functions: u64, stack: &mut Vec<LocationCode>) {
        if self.cycle.is_empty() {
            self.start(rng, depth, functions, stack);
        }
        // Samples are far apart in a walk: a few levels between two.
        let moved = rng.below(12) as usize;
        if self.descending {
            self.level = (self.level + moved).min(self.target);
            self.descending = self.level < self.target;
        } else {
            self.level = self.level.saturating_sub(moved);
        }
        stack.truncate(self.driver);
        for l in 0..self.level {
            stack.push(self.cycle[l % self.cycle.len()]);
        }
        // Allocation sites on top: the recursive function's own, or through
        // a library's own paths: a buffer, a balanced map's insertion
        // (itself recursive), a list map.
        let f = (self.cycle[0].get() as u64 % functions) as u32;
        stack.push(synth_code(f, 4 + rng.below(4) as u32));
        let lib = |site| synth_code(0, site);
        match rng.below(4) {
            0 => {}
            1 => stack.extend([lib(0), lib(1)]),
            2 => {
                stack.extend((0..2 + rng.below(6)).map(|_| lib(2)));
                stack.push(lib(3));
                if rng.below(2) == 0 {
                    stack.push(lib(4));
                }
            }
            _ => stack.extend((0..rng.below(20)).map(|_| lib(5))),
        }
        if self.level == 0 && !self.descending {
            self.cycle.clear();
        }
    }

    /// A new walk: another driver nest and another recursion.
    fn start(
        &mut self,
        rng: &mut Rng,
        depth: usize,
        functions: u64,
        stack: &mut Vec<LocationCode>,
    ) {
        let quarter = (depth / 4).max(1);
        stack.truncate(self.driver.min(rng.below(quarter as u64) as usize));
        let nest = quarter + rng.below(quarter as u64) as usize;
        grow_stack(rng, functions, stack, nest);
        self.driver = stack.len();
        let period = match rng.below(10) {
            0..=3 => 1,
            4..=7 => 2,
            _ => 3,
        };
        let f = rng.below(functions) as u32;
        self.cycle = (0..period)
            .map(|i| synth_code((f + i) % functions as u32, i))
            .collect();
        // Levels of `period` frames, to reach about `depth` frames at the
        // bottom of the walk, between a tenth and twice as deep.
        let levels = depth.saturating_sub(self.driver) / period as usize;
        self.target = 1 + levels / 5 + rng.below(2 * levels as u64 + 1) as usize;
        self.level = 0;
        self.descending = true;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{Event, Reader};

    /// Mean and deepest backtrace of a synthetic trace.
    fn depths(config: &SynthConfig) -> (f64, usize) {
        let data = write_synthetic(Vec::new(), config).unwrap();
        let mut reader = Reader::from_bytes(&data).unwrap();
        let mut events = reader.events(true);
        let (mut n, mut sum, mut max) = (0usize, 0usize, 0usize);
        while let Some(item) = events.next_event() {
            if let (_, Event::Alloc(a)) = item.unwrap() {
                n += 1;
                sum += a.backtrace.len();
                max = max.max(a.backtrace.len());
            }
        }
        (sum as f64 / n as f64, max)
    }

    #[test]
    fn the_recursive_model_is_about_as_deep_as_asked() {
        for depth in [100, 700] {
            let config = SynthConfig {
                allocs: 20_000,
                depth,
                recursive: true,
                ..SynthConfig::default()
            };
            let (mean, max) = depths(&config);
            let d = depth as f64;
            assert!(
                mean > 0.5 * d && mean < 1.5 * d,
                "depth {depth}: mean {mean}"
            );
            assert!(max > depth * 3 / 2, "depth {depth}: deepest {max}");
        }
    }
}
