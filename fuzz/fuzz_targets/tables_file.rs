//! Trace tables read back from bytes (`Tables::read_from`, and
//! `Tables::read_in_place` as the viewer reads its cache files): arbitrary
//! bytes, and a real file with bytes flipped where the input says, which
//! reaches past the checks at the start. Tables that read are then queried, so
//! a file that passes every check cannot make a query panic; read in place,
//! they must answer as read into memory.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tracekit_analysis::Filter;
use tracekit_analysis::query::{SiteSpec, TimelineQuery, TopQuery};
use tracekit_analysis::report::GroupBy;
use tracekit_analysis::tables::Tables;
use tracekit_memtrace::Reader;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

/// A small trace's tables as bytes, and the trace's header.
fn seed() -> &'static (Vec<u8>, tracekit_memtrace::Info) {
    static SEED: OnceLock<(Vec<u8>, tracekit_memtrace::Info)> = OnceLock::new();
    SEED.get_or_init(|| {
        let config = SynthConfig {
            allocs: 200,
            depth: 6,
            ..SynthConfig::default()
        };
        let trace = write_synthetic(Vec::new(), &config).unwrap_or_default();
        let mut reader = Reader::from_bytes(&trace).expect("a synthetic trace reads");
        let tables = Tables::build(&mut reader, &mut |_| {});
        let mut bytes = Vec::new();
        tables.write_to(&mut bytes).expect("written to memory");
        (bytes, reader.info().clone())
    })
}

fn ask(t: &Tables) {
    let top = TopQuery {
        growing: false,
        by: GroupBy::Backtrace,
        limit: 5,
        at: None,
        peak: true,
        sites: SiteSpec::default(),
        filter: Filter {
            lifetime: Some(vec![
                tracekit_memtrace::Timedelta::from_micros(0),
                tracekit_memtrace::Timedelta::from_micros(1000),
            ]),
            ..Filter::default()
        },
    };
    let _ = top.run(&mut &*t, &mut |_, _| {});
    let timeline = TimelineQuery {
        points: 10,
        filter: Filter::default(),
    };
    let _ = timeline.run(&mut &*t, &mut |_, _| {});
}

fuzz_target!(|data: &[u8]| {
    let (file, info) = seed();
    if let Ok(t) = Tables::read_from(data, info.clone(), 0) {
        ask(&t);
    }
    let mut flipped = file.clone();
    for c in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([c[0], c[1]])) % flipped.len().max(1);
        if let Some(b) = flipped.get_mut(at) {
            *b ^= c[2];
        }
    }
    let copied = Tables::read_from(&flipped, info.clone(), 0);
    if let Ok(t) = &copied {
        ask(t);
    }
    // After 8 bytes of key, as in a cache file.
    let mut keyed = vec![0u8; 8];
    keyed.extend_from_slice(&flipped);
    let shared: std::sync::Arc<dyn AsRef<[u8]> + Send + Sync> = std::sync::Arc::new(keyed);
    // SAFETY: a vector's bytes, never changed.
    let placed = unsafe { Tables::read_in_place(shared, 8, info.clone(), 0, &mut |_| {}) };
    assert_eq!(placed.as_ref().err(), copied.as_ref().err());
    if let (Ok(a), Ok(b)) = (&placed, &copied) {
        assert_eq!(a.events(), b.events());
        ask(a);
    }
});
