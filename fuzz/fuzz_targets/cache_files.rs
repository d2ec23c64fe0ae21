//! The viewer's cache files read back with bytes flipped, for wrong answers
//! rather than crashes: a memtrace trace's tables file and a timeline file,
//! each kept by `TablesCache` for a small trace, get the input's flips (a
//! pair of a 2-byte offset into the file and a byte to XOR there, as many as
//! the input holds), and are asked for again. Whatever the flips, the cache
//! must give what the trace itself gives: the file read back when it is
//! whole, or the tables or timeline made again when it is not. Compared as
//! their own files' bytes, which hold every column.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tracekit_analysis::tables::Tables;
use tracekit_cache::TablesCache;
use tracekit_columns::TraceBytes;
use tracekit_memtrace::Reader;

/// The traces, their cache, and what each cache file holds when whole.
struct Seed {
    _dir: tempfile::TempDir,
    cache: TablesCache,
    ctf: PathBuf,
    ctf_bytes: TraceBytes,
    tables_file: PathBuf,
    tables_whole: Vec<u8>,
    tables_expected: Vec<u8>,
    fxt: PathBuf,
    fxt_bytes: Vec<u8>,
    timeline_file: PathBuf,
    timeline_whole: Vec<u8>,
    timeline_expected: Vec<u8>,
}

/// The file's bytes of tables, or of a timeline and its statistics.
fn tables_bytes(t: &Tables) -> Vec<u8> {
    let mut out = Vec::new();
    t.write_to(&mut out).expect("written to memory");
    out
}

fn timeline_bytes(t: &tracekit_timeline::Timeline, stats: &str) -> Vec<u8> {
    let mut out = stats.as_bytes().to_vec();
    t.write_to(&mut out).expect("written to memory");
    out
}

fn build_timeline(bytes: &[u8]) -> Result<(tracekit_timeline::Timeline, String), ()> {
    let mut reader = tracekit_fxt::read::Reader::new(bytes);
    let spill = tracekit_columns::Spill::memory();
    let built = tracekit_timeline::open::build_timeline(&mut reader, true, &spill, &mut |_| {});
    let stats = tracekit_view::timeline::stats_json(&built.stats.unwrap_or_default());
    Ok((built.timeline, stats))
}

/// The one cache file of `kind` in the cache.
fn kept_file(cache: &TablesCache, kind: &str) -> PathBuf {
    std::fs::read_dir(cache.dir())
        .expect("the cache folder")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.extension().is_some_and(|e| e == kind))
        .expect("a cache file")
}

fn seed() -> &'static Seed {
    static SEED: OnceLock<Seed> = OnceLock::new();
    SEED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let config = tracekit_memtrace::synth::SynthConfig {
            allocs: 300,
            depth: 6,
            ..Default::default()
        };
        let trace = tracekit_memtrace::synth::write_synthetic(Vec::new(), &config)
            .expect("a synthetic trace");
        let ctf = dir.path().join("t.ctf");
        std::fs::write(&ctf, &trace).expect("written");
        let ctf_bytes = TraceBytes::new(trace.clone());
        let mut reader = Reader::from_bytes(&trace).expect("it reads");
        let tables_expected = tables_bytes(&Tables::build(&mut reader, &mut |_| {}));
        let (tables, _) = cache.tables(&ctf, &ctf_bytes, &mut |_| {}).expect("kept");
        assert_eq!(tables_bytes(&tables), tables_expected);
        let tables_file = kept_file(&cache, "tables");
        let tables_whole = std::fs::read(&tables_file).expect("read");

        let config = tracekit_fxt::synth::SynthConfig {
            slices: 2_000,
            threads: 2,
            seed: 1,
        };
        let (fxt_bytes, _) =
            tracekit_fxt::synth::write_synthetic(Vec::new(), &config).expect("a synthetic trace");
        let fxt = dir.path().join("t.fxt");
        std::fs::write(&fxt, &fxt_bytes).expect("written");
        let (timeline, stats) = build_timeline(&fxt_bytes).expect("built");
        let timeline_expected = timeline_bytes(&timeline, &stats);
        let (t, s, _) = cache
            .timeline_of(&fxt, &fxt_bytes, || build_timeline(&fxt_bytes))
            .expect("kept");
        assert_eq!(timeline_bytes(&t, &s), timeline_expected);
        let timeline_file = kept_file(&cache, "timeline");
        let timeline_whole = std::fs::read(&timeline_file).expect("read");
        Seed {
            _dir: dir,
            cache,
            ctf,
            ctf_bytes,
            tables_file,
            tables_whole,
            tables_expected,
            fxt,
            fxt_bytes,
            timeline_file,
            timeline_whole,
            timeline_expected,
        }
    })
}

/// Writes `whole` with the flips of `data` in place of `file`, by rename as
/// the cache writes its files.
fn damage(file: &Path, whole: &[u8], data: &[u8]) {
    let mut bytes = whole.to_vec();
    for flip in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([flip[0], flip[1]]));
        if let Some(b) = bytes.get_mut(at % whole.len().max(1)) {
            *b ^= flip[2];
        }
    }
    let tmp = file.with_extension("fuzz");
    std::fs::write(&tmp, &bytes).expect("written");
    std::fs::rename(&tmp, file).expect("renamed");
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, flips)) = data.split_first() else {
        return;
    };
    let s = seed();
    if which & 1 == 0 {
        damage(&s.tables_file, &s.tables_whole, flips);
        let (tables, _) = s
            .cache
            .tables(&s.ctf, &s.ctf_bytes, &mut |_| {})
            .expect("read back or made again");
        assert_eq!(tables_bytes(&tables), s.tables_expected, "a wrong answer");
    } else {
        damage(&s.timeline_file, &s.timeline_whole, flips);
        let (t, stats, _) = s
            .cache
            .timeline_of(&s.fxt, &s.fxt_bytes, || build_timeline(&s.fxt_bytes))
            .expect("read back or made again");
        assert_eq!(timeline_bytes(&t, &stats), s.timeline_expected, "a wrong answer");
    }
});
