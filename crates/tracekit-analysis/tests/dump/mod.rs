//! An independent reader of the corpus's expected dumps (`# memtrace-dump 1`, see
//! `shared/corpus/memtrace/README.md`), so that tests can compute expected totals from
//! the reference reader's own output instead of through tracekit's reader.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One event line.
#[derive(Clone, Debug)]
pub enum DumpEvent {
    /// `alloc`, `alloc_major`, `alloc_ext`.
    Alloc {
        dt: u64,
        id: u64,
        /// 0 minor, 1 major, 2 external.
        source: usize,
        nsamples: u64,
        len: u64,
        dom: u16,
        /// The backtrace text after `: ` (locations separated by spaces).
        backtrace: String,
    },
    Promote {
        dt: u64,
        id: u64,
    },
    Collect {
        dt: u64,
        id: u64,
    },
}

impl DumpEvent {
    pub fn dt(&self) -> u64 {
        match self {
            DumpEvent::Alloc { dt, .. }
            | DumpEvent::Promote { dt, .. }
            | DumpEvent::Collect { dt, .. } => *dt,
        }
    }
}

/// A parsed dump.
#[derive(Clone, Debug)]
pub struct Dump {
    pub sample_rate: f64,
    pub word_size: u32,
    pub executable_name: String,
    pub events: Vec<DumpEvent>,
    /// The reference reader raised (an `error:` line).
    pub errored: bool,
}

/// Every trace the corpus's manifest lists, with its expected dump parsed; `None`
/// (the test then skips) when `TRACEKIT_CORPUS` is unset.
pub fn corpus_rows() -> Option<Vec<(PathBuf, Dump)>> {
    let corpus = tracekit_testutil::corpus_path("memtrace")?;
    Some(
        manifest(&corpus)
            .into_iter()
            .map(|(trace, dump)| (trace, load(&dump)))
            .collect(),
    )
}

/// `(trace path, dump path)` for every row of the manifest. Panics if a listed file is
/// missing: with `TRACEKIT_CORPUS` set, a missing file is a failure.
pub fn manifest(corpus: &Path) -> Vec<(PathBuf, PathBuf)> {
    let text = std::fs::read_to_string(corpus.join("manifest.tsv")).expect("manifest.tsv");
    let mut rows = Vec::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 {
            continue;
        }
        let trace = corpus.join(cols[0]);
        let dump = corpus.join(cols[2]);
        assert!(trace.exists(), "missing {}", trace.display());
        assert!(dump.exists(), "missing {}", dump.display());
        rows.push((trace, dump));
    }
    assert!(!rows.is_empty(), "empty manifest");
    rows
}

pub fn read_text(path: &Path) -> String {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .expect("gunzip");
        out
    } else {
        raw
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn parse(text: &str) -> Dump {
    let mut sample_rate = f64::NAN;
    let mut word_size = 0;
    let mut executable_name = String::new();
    let mut events = Vec::new();
    let mut errored = false;
    let mut in_events = false;
    for line in text.split('\n') {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !in_events {
            if let Some(v) = line.strip_prefix("info.sample_rate_bits: 0x") {
                sample_rate = f64::from_bits(u64::from_str_radix(v, 16).unwrap());
            } else if let Some(v) = line.strip_prefix("info.word_size: ") {
                word_size = v.parse().unwrap();
            } else if let Some(v) = line.strip_prefix("info.executable_name: ") {
                executable_name = v.to_string();
            } else if line == "events:" {
                in_events = true;
            }
            continue;
        }
        if line.starts_with("error:") {
            errored = true;
            continue;
        }
        let mut tok = line.split_whitespace();
        let dt: u64 = tok.next().unwrap().parse().unwrap();
        let id: u64 = tok.next().unwrap().parse().unwrap();
        let kind = tok.next().unwrap();
        let ev = match kind {
            "promote" => DumpEvent::Promote { dt, id },
            "collect" => DumpEvent::Collect { dt, id },
            "alloc" | "alloc_major" | "alloc_ext" => {
                let nsamples = tok.next().unwrap().parse().unwrap();
                let len = tok
                    .next()
                    .unwrap()
                    .strip_prefix("len=")
                    .unwrap()
                    .parse()
                    .unwrap();
                let dom = tok
                    .next()
                    .unwrap()
                    .strip_prefix("dom=")
                    .unwrap()
                    .parse()
                    .unwrap();
                let at = line.find(": ").expect("backtrace separator");
                DumpEvent::Alloc {
                    dt,
                    id,
                    source: match kind {
                        "alloc" => 0,
                        "alloc_major" => 1,
                        _ => 2,
                    },
                    nsamples,
                    len,
                    dom,
                    backtrace: line[at + 2..].to_string(),
                }
            }
            other => panic!("unknown event kind {other:?} in {line:?}"),
        };
        events.push(ev);
    }
    assert!(sample_rate.is_finite() && word_size > 0, "dump header");
    Dump {
        sample_rate,
        word_size,
        executable_name,
        events,
        errored,
    }
}

pub fn load(path: &Path) -> Dump {
    parse(&read_text(path))
}

/// Totals in samples, computed straight from the dump's lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub allocs: u64,
    pub samples: u64,
    pub by_source: [u64; 3],
    pub collected_allocs: u64,
    pub collected_samples: u64,
    pub promotes: u64,
}

impl Dump {
    pub fn bytes_per_sample(&self) -> f64 {
        f64::from(self.word_size) / 8.0 / self.sample_rate
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        let mut live: HashMap<u64, u64> = HashMap::new();
        for ev in &self.events {
            match ev {
                DumpEvent::Alloc {
                    id,
                    source,
                    nsamples,
                    ..
                } => {
                    t.allocs += 1;
                    t.samples += nsamples;
                    t.by_source[*source] += nsamples;
                    live.insert(*id, *nsamples);
                }
                DumpEvent::Promote { .. } => t.promotes += 1,
                DumpEvent::Collect { id, .. } => {
                    if let Some(n) = live.remove(id) {
                        t.collected_allocs += 1;
                        t.collected_samples += n;
                    }
                }
            }
        }
        t
    }

    /// Samples live at `t` µs: allocated at or before `t`, not collected at or before `t`.
    pub fn live_at(&self, t: u64) -> u64 {
        let mut alloc: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut collected: HashMap<u64, u64> = HashMap::new();
        for ev in &self.events {
            match ev {
                DumpEvent::Alloc {
                    dt, id, nsamples, ..
                } => {
                    alloc.insert(*id, (*dt, *nsamples));
                }
                DumpEvent::Collect { dt, id } => {
                    // An object collected twice (synth_domains_v3 has some) is gone
                    // from the first collect on.
                    collected.entry(*id).or_insert(*dt);
                }
                DumpEvent::Promote { .. } => {}
            }
        }
        alloc
            .iter()
            .filter(|(id, (dt, _))| *dt <= t && collected.get(id).is_none_or(|c| *c > t))
            .map(|(_, (_, n))| n)
            .sum()
    }

    /// Samples live at `t` µs on domain `dom` (by allocating domain).
    pub fn live_at_domain(&self, t: u64, dom: u16) -> u64 {
        let mut alloc: HashMap<u64, (u64, u64, u16)> = HashMap::new();
        let mut collected: HashMap<u64, u64> = HashMap::new();
        for ev in &self.events {
            match ev {
                DumpEvent::Alloc {
                    dt,
                    id,
                    nsamples,
                    dom,
                    ..
                } => {
                    alloc.insert(*id, (*dt, *nsamples, *dom));
                }
                DumpEvent::Collect { dt, id } => {
                    // An object collected twice (synth_domains_v3 has some) is gone
                    // from the first collect on.
                    collected.entry(*id).or_insert(*dt);
                }
                DumpEvent::Promote { .. } => {}
            }
        }
        alloc
            .iter()
            .filter(|(id, (dt, _, d))| {
                *d == dom && *dt <= t && collected.get(id).is_none_or(|c| *c > t)
            })
            .map(|(_, (_, n, _))| n)
            .sum()
    }

    /// The largest live-sample total over all event times, and the earliest time it
    /// is reached, with events sorted by time (all events at one instant applied) and
    /// objects live from their alloc to their first collect.
    pub fn peak(&self) -> (u64, u64) {
        let mut sizes: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut deltas: Vec<(u64, i64)> = Vec::new();
        for ev in &self.events {
            match ev {
                DumpEvent::Alloc {
                    dt, id, nsamples, ..
                } => {
                    sizes.insert(*id, (*dt, *nsamples));
                    deltas.push((*dt, *nsamples as i64));
                }
                DumpEvent::Collect { dt, id } => {
                    // A collect stamped before the alloc (another domain's clock)
                    // ends the object at its allocation: it was never live.
                    if let Some((at, n)) = sizes.remove(id) {
                        deltas.push((at.max(*dt), -(n as i64)));
                    }
                }
                DumpEvent::Promote { .. } => {}
            }
        }
        deltas.sort_by_key(|d| d.0);
        let (mut live, mut best, mut best_t) = (0i64, 0i64, 0u64);
        let mut i = 0;
        while i < deltas.len() {
            let t = deltas[i].0;
            while i < deltas.len() && deltas[i].0 == t {
                live += deltas[i].1;
                i += 1;
            }
            if live > best {
                best = live;
                best_t = t;
            }
        }
        (best as u64, best_t)
    }
}
