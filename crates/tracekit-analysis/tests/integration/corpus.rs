//! The analysis over the memtrace corpus, checked against sums computed straight from
//! the reference reader's dumps (parsed by `dump/mod.rs`, not by tracekit's reader).
//! Skipped when `TRACEKIT_CORPUS` is unset; a missing file fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::dump;

use std::collections::HashMap;

use tracekit_analysis::Weight;
use tracekit_analysis::fxt::{FxtOptions, write_trace};
use tracekit_analysis::render::{self, TopContext, TraceFile};
use tracekit_analysis::report::{self, FoldOptions, GroupBy, Rank, Unit};
use tracekit_analysis::symbols::FrameLabel;
use tracekit_analysis::{Options, Pass, Threads, analyze};
use tracekit_memtrace::Reader;
use tracekit_memtrace::Timedelta;

/// A time from the trace start, as the dump's microseconds give it.
fn us(t: u64) -> Timedelta {
    Timedelta::from_micros(i64::try_from(t).unwrap())
}

/// One pass over `reader` on `threads` threads.
fn pass(reader: &mut Reader<'_>, options: Options, threads: Threads) -> Pass {
    analyze(reader, Options { threads, ..options }, &mut |_, _| {})
}

/// One pass on one thread, which must read the whole trace.
fn run(reader: &mut Reader<'_>, options: Options) -> Pass {
    let p = pass(reader, options, Threads::One);
    assert!(p.error.is_none(), "{:?}", p.error);
    p
}

/// A few times spread over the trace, including event times and the very end.
fn probe_times(d: &dump::Dump) -> Vec<u64> {
    let end = d.events.iter().map(|e| e.dt()).max().unwrap_or(0);
    let mut t: Vec<u64> = (0..=8).map(|i| end * i / 8).collect();
    if let Some(e) = d.events.get(d.events.len() / 3) {
        t.push(e.dt());
    }
    t.push(end + 1);
    t
}

#[test]
fn totals_equal_the_dump_sums() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let name = trace.display();
        let mut reader = Reader::open(trace).unwrap();
        let p = run(&mut reader, Options::default());
        let t = &p.profile.totals;
        let e = d.totals();
        assert_eq!(t.allocs, e.allocs, "{name}: allocs");
        assert_eq!(t.samples, e.samples, "{name}: samples");
        assert_eq!(t.samples_by_source, e.by_source, "{name}: by source");
        assert_eq!(t.collected, e.collected_samples, "{name}: collected");
        assert_eq!(
            t.collected_allocs, e.collected_allocs,
            "{name}: collected allocs"
        );
        // Live at the end is what was allocated and never collected.
        assert_eq!(t.live_end(), e.samples - e.collected_samples, "{name}");
        assert_eq!(p.profile.events.promotes, e.promotes, "{name}: promotes");
        // The byte estimate is samples / rate * word bytes.
        let bytes = p.profile.sampling.bytes(t.samples) as f64;
        let expect = e.samples as f64 * d.bytes_per_sample();
        assert!((bytes - expect).abs() <= 0.5, "{name}: {bytes} vs {expect}");
        // The exact peak, with all events at one instant applied.
        let (peak, peak_t) = d.peak();
        assert_eq!(p.profile.peak.live, peak, "{name}: peak");
        if peak > 0 {
            assert_eq!(p.profile.peak.time, us(peak_t), "{name}: peak time");
        }
    }
}

#[test]
fn live_at_time_equals_the_dump() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        for t in probe_times(d) {
            let p = run(
                &mut reader,
                Options {
                    live_at: Some(us(t)),
                    backtraces: false,
                    ..Options::default()
                },
            );
            assert_eq!(
                p.profile.totals.live_at,
                d.live_at(t),
                "{}: live at {t}",
                trace.display()
            );
        }
    }
}

#[test]
fn peak_pass_finds_what_is_live_at_the_peak() {
    // `top --peak` runs a pass without backtraces for the peak, then a pass with
    // `live_at` = its time: the live total there must be the peak itself.
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, _) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let first = run(
            &mut reader,
            Options {
                backtraces: false,
                ..Options::default()
            },
        );
        let mut peak = first.profile.peak.clone();
        if peak.late_events > 0 {
            peak = run(
                &mut reader,
                Options {
                    backtraces: false,
                    domains: peak.domains.clone(),
                    ..Options::default()
                },
            )
            .profile
            .peak;
        }
        assert_eq!(peak.late_events, 0, "{}", trace.display());
        let second = run(
            &mut reader,
            Options {
                live_at: Some(peak.time),
                ..Options::default()
            },
        );
        assert_eq!(
            second.profile.totals.live_at,
            peak.live,
            "{}",
            trace.display()
        );
    }
}

#[test]
fn sites_by_leaf_equal_the_dump() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let p = run(&mut reader, Options::default());
        let symbols = reader.locations();
        let sites = report::sites(&p.profile, &symbols, GroupBy::Leaf);
        let got: HashMap<String, u64> = sites
            .iter()
            .map(|s| (s.name.clone(), s.counts.samples))
            .collect();
        // The leaf in the dump is the last location printed on the alloc line.
        let mut expect: HashMap<String, u64> = HashMap::new();
        for ev in &d.events {
            if let dump::DumpEvent::Alloc {
                nsamples,
                backtrace,
                ..
            } = ev
            {
                let leaf = if backtrace.is_empty() {
                    report::EMPTY_BACKTRACE.to_string()
                } else {
                    backtrace.rsplit(' ').next().unwrap().to_string()
                };
                *expect.entry(leaf).or_default() += nsamples;
            }
        }
        assert_eq!(got, expect, "{}", trace.display());
    }
}

#[test]
fn folded_stacks_sum_to_the_total() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let at = d.events.iter().map(|e| e.dt()).max().unwrap_or(0) / 2;
        let p = run(
            &mut reader,
            Options {
                live_at: Some(us(at)),
                ..Options::default()
            },
        );
        let symbols = reader.locations();
        let e = d.totals();
        for (weight, expect) in [
            (Weight::Allocated, e.samples),
            (Weight::LiveEnd, e.samples - e.collected_samples),
            (Weight::LiveAt, d.live_at(at)),
        ] {
            for label in [FrameLabel::Function, FrameLabel::Location] {
                let opts = FoldOptions {
                    weight,
                    label,
                    unit: Unit::Samples,
                    collapse_recursion: label == FrameLabel::Function,
                    ..FoldOptions::default()
                };
                let lines = report::folded(&p.profile, &symbols, opts);
                let sum: u64 = lines.iter().map(|l| l.1).sum();
                assert_eq!(sum, expect, "{} {weight:?}", trace.display());
                let bytes = report::folded(
                    &p.profile,
                    &symbols,
                    FoldOptions {
                        unit: Unit::Bytes,
                        ..opts
                    },
                );
                let sum: u64 = bytes.iter().map(|l| l.1).sum();
                assert_eq!(sum, p.profile.sampling.bytes(expect));
                assert!(lines.iter().all(|(s, _)| !s.contains('\n')));
            }
        }
    }
}

#[test]
fn timeline_points_equal_the_dump() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let p = run(
            &mut reader,
            Options {
                backtraces: false,
                ..Options::default()
            },
        );
        let points = p.profile.timeline.points(40);
        let allocated: u64 = points.iter().map(|p| p.allocated).sum();
        assert_eq!(allocated, d.totals().samples, "{}", trace.display());
        for pt in points.iter().step_by(7).chain(points.last()) {
            assert_eq!(
                pt.live,
                d.live_at(pt.time.as_micros() as u64),
                "{} at {}",
                trace.display(),
                pt.time
            );
        }
    }
}

/// Counter samples `(ticks, name, bytes)` read back with the FXT reader.
fn fxt_counters(bytes: &[u8]) -> Vec<(u64, String, u64)> {
    use tracekit_fxt::format::{ArgValue, EventKind};
    use tracekit_fxt::read::{Reader as FxtReader, Record};
    let mut r = FxtReader::new(bytes);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Event(e) = rec
            && matches!(e.kind, EventKind::Counter { .. })
            && let Some(ArgValue::Int64(v)) = e.args.get("bytes")
        {
            out.push((e.ticks, e.name.to_str().unwrap().to_string(), v as u64));
        }
    }
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    out
}

#[test]
fn to_fxt_counters_read_back() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, d) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let p = run(
            &mut reader,
            Options {
                big: 5,
                ..Options::default()
            },
        );
        let (bytes, summary) = write_trace(
            Vec::new(),
            &p.profile,
            &reader.locations(),
            reader.info(),
            &FxtOptions {
                points: 50,
                ..FxtOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            summary.instants,
            p.profile.big.len() as u64 + u64::from(p.profile.peak.live > 0)
        );
        let counters = fxt_counters(&bytes);
        let bps = p.profile.sampling;
        let mut checked = 0;
        for (i, (ticks, name, value)) in counters.iter().enumerate() {
            // Check every seventh sample, and all of the last ones.
            if i % 7 != 0 && i + 6 < counters.len() {
                continue;
            }
            let expect = if name == "live heap" {
                d.live_at(*ticks)
            } else {
                let dom: u16 = name
                    .strip_prefix("live heap (domain ")
                    .and_then(|s| s.strip_suffix(')'))
                    .unwrap()
                    .parse()
                    .unwrap();
                d.live_at_domain(*ticks, dom)
            };
            assert_eq!(
                *value,
                bps.bytes(expect),
                "{} {name} at {ticks}",
                trace.display()
            );
            checked += 1;
        }
        if !d.events.is_empty() {
            assert!(checked > 0);
        }
    }
}

fn snapshot_top(file: &str, by: GroupBy, peak: bool) -> Option<String> {
    let corpus = tracekit_testutil::corpus_path("memtrace")?;
    let path = corpus.join("traces").join(file);
    let mut reader = Reader::open(&path).unwrap();
    let mut ctx = TopContext::default();
    let mut options = Options::default();
    if peak {
        let first = run(
            &mut reader,
            Options {
                backtraces: false,
                ..Options::default()
            },
        );
        ctx.at = Some(first.profile.peak.time);
        ctx.at_peak = true;
        options.live_at = ctx.at;
    }
    let p = run(&mut reader, options);
    let rank = if peak { Rank::LiveAt } else { Rank::Allocated };
    let symbols = reader.locations();
    let top = report::top(&p.profile, &symbols, by, rank, 12);
    let info = TraceFile::new(format!("traces/{file}"), reader.info());
    Some(render::top_table(&info, &p.profile, &top, &ctx))
}

#[test]
fn top_tables() {
    let Some(t) = snapshot_top("mixed_v3.ctf", GroupBy::Leaf, false) else {
        return;
    };
    insta::assert_snapshot!("mixed_v3_top_leaf", t);
    let t = snapshot_top("lists_hashtbl_v2.ctf", GroupBy::Function, false).unwrap();
    insta::assert_snapshot!("lists_hashtbl_v2_top_function", t);
    let t = snapshot_top("bigarrays_v2.ctf", GroupBy::Leaf, true).unwrap();
    insta::assert_snapshot!("bigarrays_v2_top_peak", t);
    let t = snapshot_top("synth_v2.ctf", GroupBy::File, false).unwrap();
    insta::assert_snapshot!("synth_v2_top_file", t);
}

#[test]
fn pipelined_pass_equals_the_single_thread_pass() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, _) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let options = Options {
            live_at: Some(us(20_000)),
            big: 7,
            ..Options::default()
        };
        let a = run(&mut reader, options.clone());
        let b = pass(&mut reader, options, Threads::Two);
        assert!(b.error.is_none());
        assert_eq!(a.events, b.events);
        let (a, b) = (a.profile, b.profile);
        let name = trace.display();
        assert_eq!(a.totals, b.totals, "{name}");
        assert_eq!(a.peak, b.peak, "{name}");
        assert_eq!(a.events, b.events, "{name}");
        assert_eq!(a.big, b.big, "{name}");
        assert_eq!(a.timeline.points(100), b.timeline.points(100), "{name}");
        let symbols = reader.locations();
        let sa = report::sites(&a, &symbols, GroupBy::Backtrace);
        let sb = report::sites(&b, &symbols, GroupBy::Backtrace);
        assert_eq!(sa, sb, "{name}");
    }
}

#[test]
fn leaf_only_gives_the_same_sites() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (trace, _) in &rows {
        let mut reader = Reader::open(trace).unwrap();
        let full = run(&mut reader, Options::default());
        let leaf_options = Options {
            leaf_only: true,
            ..Options::default()
        };
        let one = run(&mut reader, leaf_options.clone());
        let two = pass(&mut reader, leaf_options, Threads::Two);
        let symbols = reader.locations();
        for by in [GroupBy::Leaf, GroupBy::Function, GroupBy::File] {
            let mut a = report::sites(&full.profile, &symbols, by);
            let mut b = report::sites(&one.profile, &symbols, by);
            let mut c = report::sites(&two.profile, &symbols, by);
            for s in [&mut a, &mut b, &mut c] {
                report::rank_sites(s, Rank::Allocated);
            }
            assert_eq!(a, b, "{} {by:?}", trace.display());
            assert_eq!(a, c, "{} {by:?}", trace.display());
        }
        assert_eq!(full.profile.totals, two.profile.totals);
    }
}

/// On damaged traces one- and two-thread passes stop at the same error, after the same events, with
/// the same totals (the pipelined one counts the events of its unfinished batch).
#[test]
fn pipelined_pass_stops_where_the_single_thread_pass_does() {
    use tracekit_memtrace::synth::{Rng, SynthConfig, write_synthetic};
    let base = write_synthetic(
        Vec::new(),
        &SynthConfig {
            allocs: 30_000,
            ..SynthConfig::default()
        },
    )
    .unwrap();
    let mut rng = Rng::new(5);
    let mut errors = 0;
    for round in 0..40 {
        let mut data = base.clone();
        let at = 64 + rng.below(data.len() as u64 - 64) as usize;
        data[at] ^= 1 << rng.below(8);
        let Ok(mut reader) = Reader::from_bytes(&data) else {
            continue;
        };
        let options = Options {
            leaf_only: round % 2 == 0,
            ..Options::default()
        };
        let a = pass(&mut reader, options.clone(), Threads::One);
        let b = pass(&mut reader, options, Threads::Two);
        errors += usize::from(a.error.is_some());
        assert_eq!(a.error, b.error, "flip at {at}");
        assert_eq!(a.events, b.events, "flip at {at}");
        assert_eq!(a.warnings, b.warnings, "flip at {at}");
        assert_eq!(a.profile.totals, b.profile.totals, "flip at {at}");
    }
    assert!(errors > 0, "some flips stop the pass");
}
