//! Test support shared by the integration tests: the corpus traces and
//! deterministic mutations of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use tracekit_memtrace::synth::Rng;

/// Every corpus trace, by name, sorted; empty when `TRACEKIT_CORPUS` is unset.
/// The trace list comes from the manifest, so a missing trace file fails.
pub fn corpus_traces() -> Vec<(String, Vec<u8>)> {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace") else {
        return Vec::new();
    };
    let manifest = std::fs::read_to_string(dir.join("manifest.tsv")).expect("manifest.tsv");
    let mut out: Vec<(String, Vec<u8>)> = manifest
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let path = l.split('\t').next().unwrap();
            let data = std::fs::read(dir.join(path))
                .unwrap_or_else(|e| panic!("corpus trace {path}: {e}"));
            (path.trim_start_matches("traces/").to_string(), data)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "the manifest lists no traces");
    out
}

/// Start offsets and lengths of the packets of `data`, from their size
/// fields, up to the first packet whose size is unusable.
pub fn packets(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 30 <= data.len() {
        let bits = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().unwrap());
        let len = (bits / 8) as usize;
        if len < 66 || pos + len > data.len() {
            break;
        }
        out.push((pos, len));
        pos += len;
    }
    out
}

/// The trace-info packet and as many whole packets after it as fit in
/// `limit` bytes (at least one): a shorter trace to mutate, as decoding
/// cost grows with its length.
pub fn prefix(data: &[u8], limit: usize) -> Vec<u8> {
    if data.len() <= limit {
        return data.to_vec();
    }
    let mut end = 0;
    for (i, (start, len)) in packets(data).into_iter().enumerate() {
        if i >= 2 && start + len > limit {
            break;
        }
        end = start + len;
    }
    data[..end].to_vec()
}

/// The kinds of damage [`mutate`] does.
pub const MUTATIONS: [&str; 8] = [
    "set bytes",
    "flip a bit",
    "truncate",
    "duplicate a packet",
    "drop a packet",
    "swap packets",
    "splice in a packet of another trace",
    "change a packet's pid",
];

/// `base` damaged in one of the [`MUTATIONS`] ways (`kind`), at places drawn from
/// `rng`; `other` is another trace for splicing.
pub fn mutate(base: &[u8], other: &[u8], kind: usize, rng: &mut Rng) -> Vec<u8> {
    let mut d = base.to_vec();
    let ps = packets(base);
    let pick = |rng: &mut Rng, ps: &[(usize, usize)]| ps[rng.below(ps.len() as u64) as usize];
    // Packets after the trace-info one, where damage does not just stop
    // the reader at once.
    let later: Vec<_> = ps.iter().copied().skip(1).collect();
    match kind {
        0 => {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(d.len() as u64) as usize;
                d[at] = rng.next_u64() as u8;
            }
        }
        1 => {
            let at = rng.below(d.len() as u64) as usize;
            d[at] ^= 1 << rng.below(8);
        }
        2 => {
            let at = rng.below(d.len() as u64 + 1) as usize;
            d.truncate(at);
        }
        3 if !later.is_empty() => {
            let (s, l) = pick(rng, &later);
            let packet = base[s..s + l].to_vec();
            // Right after itself, or before another packet.
            let at = if rng.below(2) == 0 {
                s + l
            } else {
                pick(rng, &later).0
            };
            d.splice(at..at, packet);
        }
        4 if !later.is_empty() => {
            let (s, l) = pick(rng, &later);
            d.drain(s..s + l);
        }
        5 if later.len() >= 2 => {
            let i = rng.below(later.len() as u64 - 1) as usize;
            let (a, b) = (later[i], later[i + 1]);
            let mut swapped = base[b.0..b.0 + b.1].to_vec();
            swapped.extend_from_slice(&base[a.0..a.0 + a.1]);
            d.splice(a.0..b.0 + b.1, swapped);
        }
        6 => {
            let theirs: Vec<_> = packets(other).into_iter().skip(1).collect();
            if !theirs.is_empty() {
                let (s, l) = pick(rng, &theirs);
                let at = if later.is_empty() {
                    d.len()
                } else {
                    pick(rng, &later).0
                };
                d.splice(at..at, other[s..s + l].iter().copied());
            }
        }
        7 if !later.is_empty() => {
            let (s, _) = pick(rng, &later);
            let pid = i64::from_le_bytes(d[s + 30..s + 38].try_into().unwrap());
            let new = match rng.below(3) {
                0 => pid.wrapping_add(1),
                1 => 0,
                _ => rng.next_u64() as i64,
            };
            d[s + 30..s + 38].copy_from_slice(&new.to_le_bytes());
        }
        // Too few packets for this kind: damage a byte instead.
        _ => {
            let at = rng.below(d.len() as u64) as usize;
            d[at] = rng.next_u64() as u8;
        }
    }
    d
}
