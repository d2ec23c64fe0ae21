//! `copy` decodes with exactly the dump's reader rules, on thousands of
//! damaged corpus traces: for any input, `copy_trace` succeeds iff
//! `write_dump` reports no failure; when it succeeds it reports the same
//! warnings, and the copy dumps to the same text with no failure and no
//! warnings; when it fails, it fails with the dump's error. Copying from a
//! `StreamReader` writes the same bytes, or fails the same way.
//!
//! Rendering dumps dominates the cost (a 127 KB corpus trace dumps to 40 MB
//! of text), so each mutant is checked structurally: the original and the
//! copy are decoded in lockstep, their events must be equal and every
//! backtrace code must have equal locations in both location tables, which
//! implies equal dump lines. Every 25th mutant is also dumped for real and
//! compared byte for byte, which checks that shortcut.
//!
//! Skipped when `TRACEKIT_CORPUS` is unset; fails when it is set and a file
//! is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::common;

use std::collections::{BTreeMap, HashSet};

use tracekit_memtrace::dump::{DumpFailure, write_dump};
use tracekit_memtrace::synth::Rng;
use tracekit_memtrace::{
    CopyError, LocationCode, Reader, StreamReader, Warning, WriterOptions, copy_trace,
    copy_trace_stream,
};

/// What the dump of a trace reports, besides its text.
#[derive(Debug, PartialEq)]
struct Outcome {
    failure: Option<DumpFailure>,
    warnings: Vec<Warning>,
}

/// Checks the property for one input; `Err` names the violation.
fn check(input: &[u8], full_dump: bool) -> Result<(), String> {
    // A fresh reader for every pass: a reader keeps the location table of
    // its earlier passes, and a dump is the first pass of a fresh one.
    let fresh = || Reader::from_bytes(input).expect("opened before");
    let Ok(mut original) = Reader::from_bytes(input) else {
        // Neither a dump nor a copy starts: the trace-info packet is unreadable.
        return Ok(());
    };
    let copied = copy_trace(&mut fresh(), Vec::new(), WriterOptions::new());
    // Copying from a stream writes the same bytes, or fails the same way.
    let streamed = StreamReader::new(input, true)
        .map_err(|e| format!("the stream does not open: {e}"))
        .map(|mut s| copy_trace_stream(&mut s, Vec::new(), WriterOptions::new()))?;
    let same = match (&copied, &streamed) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.dump_failure().is_some() && a.dump_failure() == b.dump_failure(),
        _ => false,
    };
    if !same {
        return Err("copying from a stream differs".into());
    }
    let mut copy_reader = match &copied {
        Ok((bytes, _)) => Some(
            Reader::from_bytes(bytes)
                .map_err(|e| format!("copy ok, the copy does not open: {e}"))?,
        ),
        Err(_) => None,
    };
    // The original's dump outcome, and the copy against it in lockstep.
    let mut a = original.events(true);
    let mut b = copy_reader.as_mut().map(|r| r.events(true));
    let mut known: HashSet<LocationCode> = HashSet::new();
    let mut n = 0u64;
    let failure = loop {
        let item = a.next_event_with_locations();
        let (dt, event, table) = match item {
            None => break None,
            Some(Err(e)) => break Some(DumpFailure::Read(e)),
            Some(Ok(x)) => x,
        };
        let unknown = match &event {
            tracekit_memtrace::Event::Alloc(alloc) => alloc
                .backtrace
                .iter()
                .find(|c| !known.contains(*c) && table.get(**c).is_none())
                .copied(),
            _ => None,
        };
        if let Some(code) = unknown {
            break Some(DumpFailure::UnknownLocationCode(code));
        }
        if let Some(b) = &mut b {
            let (dt2, event2, table2) = match b.next_event_with_locations() {
                Some(Ok(x)) => x,
                None => return Err("copy ok, the copy has fewer events".into()),
                Some(Err(e)) => {
                    return Err(format!(
                        "copy ok, the copy's dump fails: {:?} [event {n}]",
                        e.kind
                    ));
                }
            };
            if (dt, &event) != (dt2, &event2) {
                return Err(format!(
                    "copy ok, an event of the copy differs in {} [event {n}: {} vs {}]",
                    difference(dt, &event, dt2, &event2),
                    short(&event),
                    short(&event2)
                ));
            }
            if let tracekit_memtrace::Event::Alloc(alloc) = &event {
                for &code in alloc.backtrace.iter() {
                    if known.contains(&code) {
                        continue;
                    }
                    if table.get(code) != table2.get(code) {
                        return Err(format!(
                            "copy ok, the locations of a code differ in the copy [code {code}, event {n}]"
                        ));
                    }
                    known.insert(code);
                }
            }
        } else if let tracekit_memtrace::Event::Alloc(alloc) = &event {
            known.extend(alloc.backtrace.iter().copied());
        }
        n += 1;
    };
    let outcome = Outcome {
        failure,
        warnings: a.take_warnings(),
    };
    drop(a);
    // Where the original ends, the copy must end too, without warnings.
    let copy_end = match b.take() {
        Some(mut b) if outcome.failure.is_none() => {
            let rest = match b.next_event() {
                None => Ok(()),
                Some(Ok(_)) => Err("copy ok, the copy has more events".to_string()),
                Some(Err(e)) => Err(format!("copy ok, the copy fails at its end: {:?}", e.kind)),
            };
            match rest {
                Ok(()) if !b.warnings().is_empty() => Err("copy ok, the copy's dump warns".into()),
                r => r,
            }
        }
        _ => Ok(()),
    };
    if full_dump {
        // The real dump agrees with the lockstep model.
        let mut text = Vec::new();
        let mut warnings = Vec::new();
        let o = write_dump(&mut fresh(), &mut text, |w| warnings.push(*w), |_| {}).unwrap();
        assert_eq!(
            Outcome {
                failure: o.failure,
                warnings
            },
            outcome,
            "the model of the dump is the dump"
        );
        if let Ok((copy, _)) = &copied
            && outcome.failure.is_none()
        {
            let mut text2 = Vec::new();
            let mut r = Reader::from_bytes(copy).unwrap();
            let o2 = write_dump(&mut r, &mut text2, |_| {}, |_| {}).unwrap();
            if o2.failure.is_some() || text2 != text {
                return Err("copy ok, the copy's dump text differs".into());
            }
        }
    }
    match (&copied, outcome.failure) {
        (Ok(_), Some(f)) => Err(format!("copy ok, dump fails: {}", kind_of(&f))),
        (Err(e), None) => Err(format!("dump ok, copy fails: {}", copy_kind(e))),
        (Err(e), Some(f)) if e.dump_failure() == Some(f) => Ok(()),
        (Err(e), Some(f)) => Err(format!(
            "both fail, differently: copy {} / dump {}",
            copy_kind(e),
            kind_of(&f)
        )),
        (Ok((_, warnings)), None) => {
            if *warnings != outcome.warnings {
                return Err("copy ok, other warnings".into());
            }
            copy_end
        }
    }
}

/// Which field of two events differs.
fn difference(
    dt: tracekit_memtrace::Timedelta,
    a: &tracekit_memtrace::Event<'_>,
    dt2: tracekit_memtrace::Timedelta,
    b: &tracekit_memtrace::Event<'_>,
) -> &'static str {
    use tracekit_memtrace::Event::Alloc;
    match (a, b) {
        _ if dt != dt2 => "time",
        _ if a.obj_id() != b.obj_id() => "object id",
        (Alloc(x), Alloc(y)) if x.backtrace != y.backtrace => "backtrace",
        (Alloc(x), Alloc(y)) if x.common_prefix != y.common_prefix => "common prefix",
        _ => "another field",
    }
}

fn short(e: &tracekit_memtrace::Event<'_>) -> String {
    match e {
        tracekit_memtrace::Event::Alloc(a) => format!(
            "alloc id {} len {} prefix {} frames {}",
            a.obj_id.get(),
            a.length,
            a.common_prefix,
            a.backtrace.len()
        ),
        other => format!("{other:?}"),
    }
}

/// The name of an error kind, without its data.
fn kind_name(k: &tracekit_memtrace::ReadErrorKind) -> String {
    let s = format!("{k:?}");
    s.split('(').next().unwrap_or_default().to_string()
}

fn kind_of(f: &DumpFailure) -> String {
    match f {
        DumpFailure::Read(e) => kind_name(&e.kind),
        DumpFailure::UnknownLocationCode(_) => "unknown location code".into(),
    }
}

fn copy_kind(e: &CopyError) -> String {
    match e {
        CopyError::Read(e) => format!("read {}", kind_name(&e.kind)),
        CopyError::UnknownLocationCode(_) => "unknown location code".into(),
        CopyError::Input(e) => format!("input {e}"),
        CopyError::Write(e) => format!("write {e:?}")
            .split([' ', '{', '('])
            .take(2)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

#[test]
fn copy_succeeds_exactly_when_the_dump_does_and_dumps_the_same() {
    let traces = common::corpus_traces();
    if traces.is_empty() {
        return;
    }
    let bases: Vec<(String, Vec<u8>)> = traces
        .iter()
        .map(|(name, data)| (name.clone(), common::prefix(data, 64 << 10)))
        .collect();
    const PER_TRACE: usize = 320;
    let mut violations: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut total = 0usize;
    let start = std::time::Instant::now();
    for (i, (name, base)) in bases.iter().enumerate() {
        let other = &bases[(i + 1) % bases.len()].1;
        let mut rng = Rng::new(0x5eed_0000 + i as u64);
        // The undamaged base first.
        if let Err(v) = check(base, true) {
            violations
                .entry(v)
                .or_default()
                .push(format!("{name} undamaged"));
        }
        for m in 0..PER_TRACE {
            let kind = m % common::MUTATIONS.len();
            let mut mutant = common::mutate(base, other, kind, &mut rng);
            // Every fifth mutant is damaged twice.
            if m % 5 == 4 {
                let again = rng.below(common::MUTATIONS.len() as u64) as usize;
                mutant = common::mutate(&mutant, other, again, &mut rng);
            }
            total += 1;
            if let Err(v) = check(&mutant, m % 25 == 0) {
                let (v, detail) = v.split_once(" [").unwrap_or((&v, ""));
                let v = v.to_string();
                let detail = detail.trim_end_matches(']');
                violations.entry(v).or_default().push(format!(
                    "{name} #{m} ({}) {detail}",
                    common::MUTATIONS[kind]
                ));
            }
        }
    }
    let failed: usize = violations.values().map(Vec::len).sum();
    eprintln!(
        "{total} mutants in {:.2} s, {failed} violate the property",
        start.elapsed().as_secs_f64()
    );
    for (v, cases) in &violations {
        eprintln!("  {:4} {v}", cases.len());
        for c in &cases[..cases.len().min(3)] {
            eprintln!("         e.g. {c}");
        }
    }
    assert!(total >= 3000);
    assert_eq!(failed, 0, "mutants that violate the property");
}
