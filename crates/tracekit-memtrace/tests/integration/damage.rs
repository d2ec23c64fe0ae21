//! Damaged traces: every corpus trace truncated and bit-flipped at many
//! offsets. The reader must not panic, and every event whose bytes lie before
//! the damage must decode exactly as in the intact trace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tracekit_memtrace::synth::{Rng, SynthConfig, write_synthetic};
use tracekit_memtrace::{Event, FormatVersion, ReadError, Reader, Timedelta, Warning};

/// Each event with the byte offset where its encoding ends, and the offset
/// where its packet ends.
struct Decoded {
    events: Vec<(u64, u64, i64, Event<'static>)>,
    warnings: Vec<Warning>,
    error: bool,
}

fn decode(data: &[u8]) -> Option<Decoded> {
    let mut reader = Reader::from_bytes(data).ok()?;
    let mut events = reader.events(true);
    let mut out = Vec::new();
    let mut error = None;
    loop {
        match events.next_event() {
            None => break,
            Some(Err(e)) => {
                error = Some(e);
                break;
            }
            Some(Ok((dt, ev))) => {
                let ev = ev.into_owned();
                out.push((events.position(), 0, dt.as_micros(), ev));
            }
        }
    }
    let warnings = events.take_warnings();
    drop(events);
    same_through_read_into(&mut reader, &out, &warnings, error);
    Some(Decoded {
        events: out,
        warnings,
        error: error.is_some(),
    })
}

/// The same pass through `read_into`, in runs of a few events, gives the same
/// events, warnings and error as `next_event`, also on damaged traces.
fn same_through_read_into(
    reader: &mut Reader<'_>,
    expected: &[(u64, u64, i64, Event<'static>)],
    warnings: &[Warning],
    error: Option<ReadError>,
) {
    let mut events = reader.events(true);
    let mut sink: Vec<(Timedelta, Event<'static>)> = Vec::new();
    let got_error = loop {
        let before = sink.len();
        match events.read_into(&mut sink, 7) {
            Ok(n) => {
                assert_eq!(
                    sink.len() - before,
                    n,
                    "read_into counts what it hands over"
                );
                if n < 7 {
                    assert_eq!(events.read_into(&mut sink, 7), Ok(0), "the pass is over");
                    break None;
                }
            }
            Err(e) => break Some(e),
        }
    };
    assert_eq!(got_error, error, "read_into stops with the same error");
    assert_eq!(events.warnings(), warnings, "read_into warns the same");
    assert_eq!(
        sink.len(),
        expected.len(),
        "read_into yields as many events"
    );
    for (a, b) in sink.iter().zip(expected) {
        assert_eq!(
            (a.0.as_micros(), &a.1),
            (b.2, &b.3),
            "read_into yields the same events"
        );
    }
}

/// Offsets where packets end, from the packet headers' sizes.
fn packet_ends(data: &[u8]) -> Vec<u64> {
    let mut ends = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= data.len() {
        let bits = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().unwrap());
        let size = (bits / 8) as usize;
        if size == 0 {
            break;
        }
        pos += size;
        ends.push(pos as u64);
    }
    ends
}

fn traces() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") {
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            out.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    // Traces the crate makes itself, so the test means something without the corpus.
    for (i, v) in [FormatVersion::V3, FormatVersion::V2]
        .into_iter()
        .enumerate()
    {
        let config = SynthConfig {
            allocs: 5000,
            seed: 7 + i as u64,
            format_version: v,
            ..SynthConfig::default()
        };
        out.push((
            format!("synth-{v}"),
            write_synthetic(Vec::new(), &config).unwrap(),
        ));
    }
    out
}

fn offsets(len: usize, rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n / 2).map(|i| i * len / (n / 2)).collect();
    v.extend((0..n / 2).map(|_| rng.below(len as u64) as usize));
    // The first headers, byte by byte.
    v.extend(0..len.min(100));
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn truncation_keeps_every_complete_packet() {
    let mut rng = Rng::new(11);
    for (name, data) in traces() {
        let clean = decode(&data).expect("intact trace opens");
        assert!(!clean.error, "{name}");
        let ends = packet_ends(&data);
        for cut in offsets(data.len(), &mut rng, 100) {
            let Some(damaged) = decode(&data[..cut]) else {
                continue;
            };
            // Everything in packets that end before the cut is there, in order,
            // and nothing else: a truncated packet is skipped.
            let complete = ends
                .iter()
                .filter(|&&e| e <= cut as u64)
                .max()
                .copied()
                .unwrap_or(0);
            let expected: Vec<_> = clean.events.iter().filter(|e| e.0 <= complete).collect();
            assert_eq!(damaged.events.len(), expected.len(), "{name} cut at {cut}");
            for (a, b) in damaged.events.iter().zip(&expected) {
                assert_eq!((a.2, &a.3), (b.2, &b.3), "{name} cut at {cut}");
            }
            let cut_in_packet = !ends.contains(&(cut as u64)) && cut as u64 > complete;
            if cut_in_packet && !damaged.error {
                assert!(
                    damaged
                        .warnings
                        .iter()
                        .any(|w| matches!(w, Warning::TruncatedPacket { .. })),
                    "{name} cut at {cut}: a truncated packet is reported"
                );
            }
        }
    }
}

#[test]
fn bit_flips_keep_every_event_before_the_damage() {
    let mut rng = Rng::new(12);
    for (name, data) in traces() {
        let clean = decode(&data).expect("intact trace opens");
        for at in offsets(data.len(), &mut rng, 100) {
            let mut damaged = data.clone();
            damaged[at] ^= 1 << rng.below(8);
            let Some(d) = decode(&damaged) else {
                continue;
            };
            let before: Vec<_> = clean.events.iter().filter(|e| e.0 <= at as u64).collect();
            assert!(
                d.events.len() >= before.len(),
                "{name} flip at {at}: {} events, {} expected before the damage",
                d.events.len(),
                before.len()
            );
            for (a, b) in d.events.iter().zip(&before) {
                assert_eq!((a.2, &a.3), (b.2, &b.3), "{name} flip at {at}");
            }
        }
    }
}

#[test]
fn random_garbage_and_repeated_damage_never_panic() {
    let mut rng = Rng::new(13);
    let base = write_synthetic(
        Vec::new(),
        &SynthConfig {
            allocs: 500,
            ..SynthConfig::default()
        },
    )
    .unwrap();
    for round in 0..300 {
        let mut d = base.clone();
        for _ in 0..1 + round % 20 {
            let at = rng.below(d.len() as u64) as usize;
            d[at] = rng.next_u64() as u8;
        }
        let _ = decode(&d);
        let mut r = Reader::from_bytes(&d);
        if let Ok(r) = &mut r {
            let mut ev = r.events(false);
            while let Some(Ok(_)) = ev.next_event() {}
        }
    }
}
