//! Sites named past skipped frames: the analysis that keeps only each backtrace's
//! innermost entries up to the one naming the site (`Options::leaf_only` with
//! `Options::site_skip`, on one thread and pipelined) must name and count every site
//! exactly as the analysis of whole backtraces does.

#![allow(clippy::unwrap_used)]

use tracekit_analysis::report::{self, GroupBy, Rank};
use tracekit_analysis::symbols::FrameSkip;
use tracekit_analysis::{Options, Pass, Threads, analyze};
use tracekit_memtrace::Reader;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

/// One pass over `reader` on `threads` threads.
fn pass(reader: &mut Reader<'_>, options: Options, threads: Threads) -> Pass {
    analyze(reader, Options { threads, ..options }, &mut |_, _| {})
}

#[test]
fn trimmed_backtraces_name_the_same_sites() {
    let data = write_synthetic(
        Vec::new(),
        &SynthConfig {
            allocs: 20_000,
            depth: 12,
            functions: 60,
            ..SynthConfig::default()
        },
    )
    .unwrap();
    let mut reader = Reader::from_bytes(&data).unwrap();
    let full = pass(&mut reader, Options::default(), Threads::One);
    // The synthetic functions are `Module_NNN.fn_M` in `src/module_NNN.ml`: skip some
    // modules, nearly all of them (the innermost frames then name sites far up the
    // stack, or every frame is skipped and the leaf names the site), or none.
    let skips = [
        FrameSkip::none(),
        FrameSkip::rust_std(),
        FrameSkip::none().with_pattern("Module_000"),
        FrameSkip::none().with_pattern("src/module_00"),
        FrameSkip::none()
            .with_pattern("Module_00")
            .with_pattern("Module_01"),
        FrameSkip::none().with_pattern("Module_"),
    ];
    let mut moved = 0;
    for skip in &skips {
        let options = Options {
            leaf_only: true,
            site_skip: skip.clone(),
            ..Options::default()
        };
        let one = pass(&mut reader, options.clone(), Threads::One);
        let two = pass(&mut reader, options, Threads::Two);
        assert!(one.profile.backtraces.len() < full.profile.backtraces.len());
        let symbols = reader.locations();
        for by in [GroupBy::Leaf, GroupBy::Function, GroupBy::File] {
            let mut a = report::sites_skipping(&full.profile, &symbols, by, skip);
            let mut b = report::sites_skipping(&one.profile, &symbols, by, skip);
            let mut c = report::sites_skipping(&two.profile, &symbols, by, skip);
            for s in [&mut a, &mut b, &mut c] {
                report::rank_sites(s, Rank::Allocated);
            }
            assert_eq!(a, b, "{skip:?} {by:?}");
            assert_eq!(a, c, "{skip:?} {by:?}");
            let plain = report::sites(&full.profile, &symbols, by);
            if plain.len() != a.len() {
                moved += 1;
            }
        }
        assert_eq!(full.profile.totals, one.profile.totals);
        assert_eq!(full.profile.totals, two.profile.totals);
    }
    // The patterns did move sites, so the comparison above tested something.
    assert!(moved > 0);
}
