//! Arbitrary bytes through the memtrace reader into the analysis (on one thread and on
//! two) and every report: nothing may panic, and both must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::report::{self, FoldOptions, GroupBy, Rank};
use tracekit_analysis::{Filter, Options, Threads, analyze};
use tracekit_memtrace::{Reader, Timedelta};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = Reader::from_bytes(data) else {
        return;
    };
    let options = Options {
        live_at: Some(Timedelta::from_micros(1000)),
        big: 3,
        timeline_buckets: 64,
        ..Options::default()
    };
    let one = Options {
        threads: Threads::One,
        ..options.clone()
    };
    let two = Options {
        threads: Threads::Two,
        ..options
    };
    let located = Options {
        filter: Filter {
            location: vec!["a".into()],
            forbid_function: vec!["b".into()],
            ..Filter::default()
        },
        ..one.clone()
    };
    let a = analyze(&mut reader, located, &mut |_, _| {});
    let b = analyze(&mut reader, two, &mut |_, _| {});
    let c = analyze(&mut reader, one, &mut |_, _| {});
    assert_eq!((b.events, b.error), (c.events, c.error));
    assert_eq!(b.profile.totals, c.profile.totals);
    assert_eq!(b.profile.peak, c.profile.peak);
    assert!(a.profile.totals.samples <= c.profile.totals.samples);
    let symbols = reader.locations();
    let trace = TraceFile::new("fuzz", reader.info());
    for by in [
        GroupBy::Leaf,
        GroupBy::Function,
        GroupBy::File,
        GroupBy::Backtrace,
    ] {
        let t = report::top(&b.profile, &symbols, by, Rank::LiveAt, 5);
        let _ = tracekit_analysis::render::top_table(&trace, &b.profile, &t, &Default::default());
    }
    let tree = report::fold_tree(&b.profile, &symbols, FoldOptions::default());
    let total: u64 = tree.lines().iter().map(|(_, w)| w).sum();
    assert_eq!(total, tree.total());
    let _ = tracekit_analysis::svg::flame_graph(&tree, &Default::default());
    let points = b.profile.timeline.points(50);
    let _ = tracekit_analysis::svg::timeline_plot(&points, b.profile.sampling, &Default::default());
});
