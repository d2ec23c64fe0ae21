//! A trace's allocations as a pprof heap profile, with the sample types of
//! Go's heap profiles, so that every pprof reader (Go's `pprof`, Parca,
//! Pyroscope, Perfetto) shows it as it shows a Go program's heap:
//!
//! | sample type | unit | per backtrace |
//! | --- | --- | --- |
//! | `alloc_objects` | `count` | sampled objects allocated |
//! | `alloc_space` | `bytes` | estimated bytes allocated |
//! | `inuse_objects` | `count` | sampled objects live at the end of the trace |
//! | `inuse_space` | `bytes` | estimated bytes live at the end |
//!
//! Each backtrace is one sample, its frames named and started as
//! [`Naming`] says (the program's `main` first by default); a frame is a
//! location of one line of one function (file and line from the trace). Bytes
//! are rounded so that the samples add up to the rounded totals `memtrace
//! top` prints. The period is the bytes one memtrace sample stands for; the
//! filters the profile was made under are its comments.

use tracekit_memtrace::{Info, LocationLookup};
use tracekit_pprof::{Builder, Frame, LocationId, proto};

use crate::analyzer::Profile;
use crate::symbols::{Naming, shown_frames};

/// The heap profile of `profile`, a pass over the trace of `info` whose
/// locations `symbols` holds, its frames named as `naming` says and
/// `filters` (the filter's clauses, as `--between 1s 2s` says them) as
/// comments.
pub fn heap_profile(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    info: &Info,
    naming: Naming,
    filters: &[String],
) -> proto::Profile {
    let mut b = Builder::new(&[
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ]);
    let sampling = profile.sampling;
    b.period("space", "bytes", sampling.bytes(1) as i64);
    let start = info.start_time.as_micros().saturating_mul(1000);
    b.time(start, profile.end.as_micros().saturating_mul(1000));
    b.default_sample_type("alloc_space");
    b.comment(&format!(
        "memtrace trace of {} (pid {}), sample rate {}",
        info.executable_name, info.pid, info.sample_rate
    ));
    for f in filters {
        b.comment(&format!("filter: {f}"));
    }
    let (mut allocated, mut live) = (Rounded::default(), Rounded::default());
    let mut codes = Vec::new();
    let mut frames = Vec::new();
    let mut stack: Vec<LocationId> = Vec::new();
    for (bt, counts) in profile.sites.iter() {
        if counts.samples == 0 {
            continue;
        }
        profile.backtraces.codes_into(bt, &mut codes);
        shown_frames(symbols, &codes, naming, &mut frames);
        stack.clear();
        // pprof lists a stack innermost first.
        for (code, loc) in frames.iter().rev() {
            let id = match loc {
                Some(l) => {
                    let function = naming.function(&l.defname.to_string());
                    let file = l.filename.to_string();
                    b.location(Frame {
                        function: &function,
                        file: &file,
                        line: l.line,
                    })
                }
                None => b.location(Frame {
                    function: &format!("${code}"),
                    file: "",
                    line: 0,
                }),
            };
            stack.push(id);
        }
        let values = [
            counts.allocs as i64,
            allocated.add(sampling, counts.samples) as i64,
            counts.live_end_allocs() as i64,
            live.add(sampling, counts.live_end()) as i64,
        ];
        b.sample(&stack, &values, &[]);
    }
    b.finish()
}

/// Bytes of a running count of samples, each step the rounded running total
/// less the previous one: the steps add up to the rounded total.
#[derive(Default)]
struct Rounded {
    samples: u64,
    bytes: u64,
}

impl Rounded {
    fn add(&mut self, sampling: crate::Sampling, samples: u64) -> u64 {
        self.samples += samples;
        let total = sampling.bytes(self.samples);
        let step = total.saturating_sub(self.bytes);
        self.bytes = total;
        step
    }
}
