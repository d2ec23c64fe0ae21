//! Arbitrary bytes through the memtrace reader into the analysis (both drivers) and
//! every report: nothing may panic, and both drivers must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_analysis::report::{self, FoldOptions, GroupBy, Rank};
use tracekit_analysis::source::{self, ReaderSymbols};
use tracekit_analysis::{Micros, Options};
use tracekit_memtrace::Reader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = Reader::from_bytes(data) else {
        return;
    };
    let options = Options {
        live_at: Some(Micros(1000)),
        big: 3,
        timeline_buckets: 64,
        ..Options::default()
    };
    let a = source::analyze_reader(&mut reader, options.clone(), Some("a"), &mut |_| {});
    let b = source::analyze_reader_pipelined(&mut reader, options.clone(), &mut |_| {});
    let c = source::analyze_reader(&mut reader, options, None, &mut |_| {});
    assert_eq!((b.events, b.error), (c.events, c.error));
    assert_eq!(b.profile.totals, c.profile.totals);
    assert_eq!(b.profile.peak, c.profile.peak);
    assert!(a.profile.totals.samples <= c.profile.totals.samples);
    let symbols = ReaderSymbols(reader.locations());
    for by in [GroupBy::Leaf, GroupBy::Function, GroupBy::File, GroupBy::Backtrace] {
        let t = report::top(&b.profile, &symbols, by, Rank::LiveAt, 5);
        let _ = tracekit_analysis::render::top_table(
            &Default::default(),
            &b.profile,
            &t,
            &Default::default(),
        );
    }
    let lines = report::folded(&b.profile, &symbols, FoldOptions::default());
    let _ = tracekit_analysis::svg::flame_graph(&lines, &Default::default());
    let points = b.profile.timeline.points(50);
    let _ = tracekit_analysis::svg::timeline_plot(&points, b.profile.sampling, &Default::default());
});
