//! Clicks of the viewer answered from a trace's tables, for CPU-time and profile
//! measurements: `tables_click TRACE [REPEATS [ONLY]]` builds the tables (or reads them back
//! from `TRACE.tables` when it is there, writing it otherwise), then answers a
//! timeline, a flame graph and `top` with a few filters REPEATS times each (or the
//! one click named by ONLY) and prints the median and least wall time per click.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Instant;

use tracekit_analysis::Filter;
use tracekit_analysis::query::{SiteSpec, TopQuery};
use tracekit_analysis::report::GroupBy;
use tracekit_analysis::tables::Tables;
use tracekit_memtrace::Reader;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let repeats: usize = args.get(2).map_or(3, |s| s.parse().unwrap());
    let only = args.get(3).cloned();
    let bytes = std::fs::read(path).unwrap();
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let cache = format!("{path}.tables");
    let t0 = Instant::now();
    let tables = match std::fs::read(&cache) {
        Ok(kept) => {
            let shared: tracekit_columns::Shared = Arc::new(kept);
            // SAFETY: the vector is never changed while the tables live.
            unsafe {
                Tables::read_in_place(
                    shared,
                    0,
                    reader.info().clone(),
                    bytes.len() as u64,
                    &mut |_| {},
                )
            }
            .unwrap()
        }
        Err(_) => {
            let t = Tables::build(&mut reader, &mut |_| {});
            let mut out = Vec::new();
            t.write_to(&mut out).unwrap();
            std::fs::write(&cache, out).unwrap();
            t
        }
    };
    eprintln!(
        "tables: {:.2} s, {} trie nodes",
        t0.elapsed().as_secs_f64(),
        tables.backtrace_nodes()
    );
    let end = tables.end();
    let clicks: Vec<(&str, Filter)> = vec![
        ("top", Filter::default()),
        (
            "min-size 64",
            Filter {
                min_size: Some(64),
                ..Filter::default()
            },
        ),
        (
            "never-collected",
            Filter {
                never_collected: true,
                ..Filter::default()
            },
        ),
        (
            "between a twentieth",
            Filter {
                between: Some(vec![
                    tracekit_memtrace::Timedelta::from_micros(end.as_micros() / 2),
                    tracekit_memtrace::Timedelta::from_micros(
                        end.as_micros() / 2 + end.as_micros() / 20,
                    ),
                ]),
                ..Filter::default()
            },
        ),
    ];
    if only.as_deref().is_none_or(|o| o == "timeline") {
        let query = tracekit_analysis::query::TimelineQuery {
            points: 400,
            filter: Filter::default(),
        };
        clock("timeline", repeats, || {
            query.run(&mut &tables, &mut |_, _| {}).unwrap()
        });
    }
    if only.as_deref().is_none_or(|o| o == "flame") {
        let query = tracekit_analysis::query::FlameQuery {
            at: None,
            peak: false,
            live_end: false,
            frames: tracekit_analysis::symbols::FrameLabel::Function,
            samples: false,
            collapse_recursion: false,
            no_collapse_recursion: false,
            naming: Default::default(),
            hide: Vec::new(),
            hide_function: Vec::new(),
            count_objects: true,
            filter: Filter {
                min_size: Some(16),
                ..Filter::default()
            },
        };
        clock("flame min-size 16", repeats, || {
            query.run(&mut &tables, &mut |_, _| {}).unwrap()
        });
    }
    for (name, filter) in clicks {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let query = TopQuery {
            growing: false,
            by: GroupBy::Leaf,
            limit: 20,
            at: None,
            peak: false,
            sites: SiteSpec::default(),
            filter,
        };
        clock(name, repeats, || {
            query.run(&mut &tables, &mut |_, _| {}).unwrap()
        });
    }
}

/// Runs `f` `repeats` times and prints the median and least wall time.
fn clock<T>(name: &str, repeats: usize, mut f: impl FnMut() -> T) {
    let mut times: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{name}: median {:.0} ms, least {:.0} ms",
        times[times.len() / 2],
        times[0]
    );
}
