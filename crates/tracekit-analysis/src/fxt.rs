//! A memtrace profile as an FXT trace for Perfetto: the analysis side of
//! `tracekit memtrace to-fxt`.
//!
//! What it writes (ticks are microseconds since the trace start):
//!
//! | record | on | content |
//! |--------|----|---------|
//! | kernel objects | | the process (the traced pid, named after the executable) and one thread per domain, `domain N` |
//! | counter `live heap (domain N)` | domain N | arg `bytes`: estimated live bytes of the objects domain N allocated, at every timeline point |
//! | counter `live heap` | first domain | arg `bytes`: the total, only when there are several domains |
//! | counter `allocation rate` | first domain | arg `bytes_per_s`: estimated bytes allocated per second over each interval, sampled at its start |
//! | instant `allocation` | allocating domain | one per `--big` allocation: `bytes` (object size), `words`, `nsamples`, `source`, `obj_id`, `site` and `backtrace` (innermost first) |
//! | instant `peak live heap` | first domain | `bytes` at the peak |
//!
//! Perfetto names a counter track `<event name>:<arg name>`, so each domain gets its
//! own live-heap track. Counter values are exact at their timestamps: a timeline point
//! holds the live heap including every event at that instant.

use std::io::Write;

use tracekit_fxt::format::{Arg, ArgValue, Koid, StringRef, ThreadRef};
use tracekit_fxt::io::{FinishError, IoDestination};
use tracekit_fxt::write::{Destination, Initialization, WriteError, Writer, WriterOptions};

use crate::analyzer::Profile;
use crate::report::EMPTY_BACKTRACE;
use crate::symbols::{FrameLabel, Naming, backtrace_labels};
use tracekit_memtrace::{DomainId, Info, LocationLookup, Timedelta};

/// FXT ticks per second used by [`write_profile`]: ticks are microseconds, like
/// memtrace's own timestamps. Pass it to the writer's initialization record.
pub const TICKS_PER_SECOND: u64 = 1_000_000;

/// What goes into the FXT trace.
#[derive(Clone, Debug)]
pub struct FxtOptions {
    /// At most this many counter samples per track.
    pub points: usize,
    /// Frames of a backtrace argument, innermost first (the rest is summarised).
    pub max_frames: usize,
    /// How the backtraces' frames are named.
    pub naming: Naming,
}

impl Default for FxtOptions {
    fn default() -> Self {
        FxtOptions {
            points: 2000,
            max_frames: 200,
            naming: Naming::default(),
        }
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FxtSummary {
    /// Counter events.
    pub counters: u64,
    /// Instant events.
    pub instants: u64,
    /// Counter samples per live-heap track (timeline points).
    pub points: u64,
    /// Domain threads.
    pub domains: u64,
}

impl std::fmt::Display for FxtSummary {
    /// `120 counter samples (40 per live-heap track, 2 domains), 20 instant events`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.domains == 1 { "" } else { "s" };
        write!(
            f,
            "{} counter samples ({} per live-heap track, {} domain{s}), {} instant events",
            self.counters, self.points, self.domains, self.instants
        )
    }
}

/// Process koid: the traced pid when it is a plausible one. Perfetto keeps only the
/// low 32 bits of koids, so they must stay small.
fn process_koid(info: &Info) -> Koid {
    match u64::try_from(info.pid) {
        Ok(p) if (1..1 << 31).contains(&p) => Koid(p),
        _ => Koid(1),
    }
}

/// Thread koid of a domain: the process koid for the main domain (as for a
/// process's main thread), the process koid plus the domain id for the others.
pub fn domain_koid(process: Koid, domain: DomainId) -> Koid {
    Koid(process.0 + u64::from(domain.get()))
}

/// The allocation site and the backtrace text, innermost frame first, at most `max`
/// frames, named as `naming` says.
fn backtrace_text(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    bt: crate::BacktraceId,
    max: usize,
    naming: Naming,
) -> (String, String) {
    let codes = profile.backtraces.codes(bt);
    let mut frames = Vec::new();
    backtrace_labels(symbols, &codes, FrameLabel::Location, naming, &mut frames);
    let site = frames
        .last()
        .cloned()
        .unwrap_or_else(|| EMPTY_BACKTRACE.to_string());
    let mut text = String::new();
    for (i, f) in frames.iter().rev().enumerate() {
        if i == max {
            text.push_str(&format!("\n... {} more frames", frames.len() - max));
            break;
        }
        if i > 0 {
            text.push('\n');
        }
        text.push_str(f);
    }
    // Both strings go into one record of at most 4095 words.
    (truncate(site, 2000), truncate(text, 24_000))
}

/// FXT int64 (the widely supported integer argument) of a count.
fn i64s(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// One record to write, sorted by time before writing.
enum Item {
    Live { domain: DomainId, bytes: u64 },
    Total { bytes: u64 },
    Rate { bytes_per_s: f64 },
    Big(usize),
    Peak { bytes: u64 },
}

/// Writes `profile` as a whole FXT trace into `out` (the magic number, the
/// initialization record, then [`write_profile`]'s records) and returns `out`, the
/// trace closed, with what was written. An error is `out`'s own when it caused it.
pub fn write_trace<W: Write>(
    out: W,
    profile: &Profile,
    symbols: &dyn LocationLookup,
    info: &Info,
    options: &FxtOptions,
) -> Result<(W, FxtSummary), FinishError> {
    let init = WriterOptions {
        initialization: Some(Initialization::new(TICKS_PER_SECOND)),
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(IoDestination::new(out), &init).map_err(FinishError::Write)?;
    let summary = write_profile(&mut w, profile, symbols, info, options);
    let summary = summary.map_err(|e| w.explain(e))?;
    Ok((w.finish_io()?, summary))
}

/// Writes `profile` into `w` (whose initialization record must say
/// [`TICKS_PER_SECOND`]).
pub fn write_profile<D: Destination>(
    w: &mut Writer<D>,
    profile: &Profile,
    symbols: &dyn LocationLookup,
    info: &Info,
    options: &FxtOptions,
) -> Result<FxtSummary, WriteError> {
    let s = profile.sampling;
    let pid = process_koid(info);
    let exe_path = info.executable_name.to_str_lossy();
    let exe = std::path::Path::new(&*exe_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| exe_path.to_string());
    let pname = truncate(format!("{exe} (memtrace)"), 1000);
    let pname = w.intern(&pname)?;
    w.set_process_name(pid, pname)?;
    let mut domains: Vec<DomainId> = profile.timeline.domains().to_vec();
    for b in &profile.big {
        if !domains.contains(&b.domain) {
            domains.push(b.domain);
        }
    }
    if domains.is_empty() {
        domains.push(DomainId::MAIN);
    }
    // Thread-table slots for the first 255 domains, inline refs beyond.
    let mut slots: Vec<(DomainId, ThreadRef)> = Vec::new();
    for (i, d) in domains.iter().enumerate() {
        let name = w.intern(&format!("domain {d}"))?;
        let tid = domain_koid(pid, *d);
        w.set_thread_name(pid, tid, name)?;
        let r = match u8::try_from(i) {
            Ok(slot) if slot < u8::MAX => ThreadRef::Index(w.set_thread_slot(slot, pid, tid)?),
            _ => ThreadRef::Inline {
                process: pid,
                thread: tid,
            },
        };
        slots.push((*d, r));
    }
    let thread = |d: DomainId| {
        slots
            .iter()
            .find(|(x, _)| *x == d)
            .map(|(_, r)| *r)
            .unwrap_or(ThreadRef::Inline {
                process: pid,
                thread: domain_koid(pid, d),
            })
    };
    let main = domains[0];
    let cat = w.intern("memtrace")?;
    let bytes_name = w.intern("bytes")?;
    let rate_name = w.intern("bytes_per_s")?;
    let live_names: Vec<_> = profile
        .timeline
        .domains()
        .iter()
        .map(|d| w.intern(&format!("live heap (domain {d})")))
        .collect::<Result<_, _>>()?;
    let total_name = w.intern("live heap")?;
    let alloc_rate = w.intern("allocation rate")?;
    let names = [
        "words",
        "nsamples",
        "source",
        "obj_id",
        "site",
        "backtrace",
        "allocation",
        "peak live heap",
    ]
    .map(|n| w.intern(n));
    let [
        words,
        nsamples,
        source,
        obj_id,
        site_name,
        backtrace_name,
        allocation,
        peak_name,
    ] = names;
    let (words, nsamples, source, obj_id) = (words?, nsamples?, source?, obj_id?);
    let (site_name, backtrace_name, allocation, peak_name) =
        (site_name?, backtrace_name?, allocation?, peak_name?);

    let points = profile.timeline.points(options.points.max(1));
    let tl_domains = profile.timeline.domains();
    let multi = tl_domains.len() > 1;
    let mut items: Vec<(Timedelta, Item)> = Vec::new();
    let mut start = Timedelta::default();
    for p in &points {
        for (d, live) in tl_domains.iter().zip(&p.live_by_domain) {
            items.push((
                p.time,
                Item::Live {
                    domain: *d,
                    bytes: s.bytes(*live),
                },
            ));
        }
        if multi {
            items.push((
                p.time,
                Item::Total {
                    bytes: s.bytes(p.live),
                },
            ));
        }
        let secs = p.interval.to_secs_f64();
        let rate = if secs > 0.0 {
            s.bytes(p.allocated) as f64 / secs
        } else {
            0.0
        };
        items.push((start, Item::Rate { bytes_per_s: rate }));
        start = p.time;
    }
    if !points.is_empty() {
        items.push((start, Item::Rate { bytes_per_s: 0.0 }));
    }
    for (i, b) in profile.big.iter().enumerate() {
        items.push((b.time, Item::Big(i)));
    }
    if profile.peak.live > 0 {
        items.push((
            profile.peak.time,
            Item::Peak {
                bytes: s.bytes(profile.peak.live),
            },
        ));
    }
    items.sort_by_key(|(t, _)| *t);

    let mut summary = FxtSummary {
        points: points.len() as u64,
        domains: domains.len() as u64,
        ..FxtSummary::default()
    };
    for (t, item) in &items {
        // Times from the trace start are never negative.
        let ticks = u64::try_from(t.as_micros()).unwrap_or(0);
        match item {
            Item::Live { domain, bytes } => {
                let ix = tl_domains.iter().position(|d| d == domain).unwrap_or(0);
                w.counter(
                    thread(*domain),
                    cat,
                    live_names[ix],
                    ticks,
                    u64::from(domain.get()),
                    &[Arg::new(bytes_name, ArgValue::Int64(i64s(*bytes)))],
                )?;
                summary.counters += 1;
            }
            Item::Total { bytes } => {
                w.counter(
                    thread(main),
                    cat,
                    total_name,
                    ticks,
                    1 << 16,
                    &[Arg::new(bytes_name, ArgValue::Int64(i64s(*bytes)))],
                )?;
                summary.counters += 1;
            }
            Item::Rate { bytes_per_s } => {
                w.counter(
                    thread(main),
                    cat,
                    alloc_rate,
                    ticks,
                    (1 << 16) + 1,
                    &[Arg::new(rate_name, ArgValue::Double(*bytes_per_s))],
                )?;
                summary.counters += 1;
            }
            Item::Big(i) => {
                let b = &profile.big[*i];
                let (site, backtrace) = backtrace_text(
                    profile,
                    symbols,
                    b.backtrace,
                    options.max_frames,
                    options.naming,
                );
                let size = b.length.saturating_mul(s.word_bytes());
                let args = [
                    Arg::new(bytes_name, ArgValue::Int64(i64s(size))),
                    Arg::new(words, ArgValue::Int64(i64s(b.length))),
                    Arg::new(nsamples, ArgValue::Int64(i64s(b.nsamples))),
                    Arg::new(source, ArgValue::String(StringRef::from(b.source.name()))),
                    Arg::new(obj_id, ArgValue::Int64(i64s(b.obj_id.get()))),
                    Arg::new(site_name, ArgValue::String(StringRef::from(site.as_str()))),
                    Arg::new(
                        backtrace_name,
                        ArgValue::String(StringRef::from(backtrace.as_str())),
                    ),
                ];
                w.instant(thread(b.domain), cat, allocation, ticks, &args)?;
                summary.instants += 1;
            }
            Item::Peak { bytes } => {
                w.instant(
                    thread(main),
                    cat,
                    peak_name,
                    ticks,
                    &[Arg::new(bytes_name, ArgValue::Int64(i64s(*bytes)))],
                )?;
                summary.instants += 1;
            }
        }
    }
    w.flush()?;
    Ok(summary)
}
