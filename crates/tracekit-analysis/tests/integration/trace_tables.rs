//! Every query answered from a trace's tables (written to bytes and read back, as
//! a viewer's cache holds them) gives the answer its pass over the reader gives:
//! the `--json` document and the table, for every kind of filter, on the corpus's
//! traces and on generated ones (one domain and several, deep and recursive
//! stacks).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use tracekit_analysis::Filter;
use tracekit_analysis::query::{
    DiffQuery, FlameQuery, HotPathsQuery, SiteSpec, TimelineQuery, TopQuery,
};
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::report::GroupBy;
use tracekit_analysis::symbols::FrameLabel;
use tracekit_analysis::tables::Tables;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
use tracekit_memtrace::{AllocationSource, FormatVersion, Reader, Timedelta};

fn quiet() -> impl FnMut(tracekit_analysis::passes::Stage, u64) {
    |_, _| {}
}

fn file(r: &Reader<'_>) -> TraceFile {
    TraceFile::new("t.ctf", r.info())
}

/// The filters compared: none, and one of each kind, some combined.
fn filters(bytes: &[u8]) -> Vec<Filter> {
    let mut reader = Reader::from_bytes(bytes).unwrap();
    let tables = Tables::build(&mut reader, &mut |_| {});
    let end = tables.end().as_micros();
    let at = |share: i64| Timedelta::from_micros(end * share / 6);
    // A function and a location text that occur in the trace, so that the location
    // clauses keep some allocations and drop others.
    let mut names: Vec<(String, String)> = Vec::new();
    let top = top_query(GroupBy::Function, false, None, Filter::default());
    let answer = top.run(&mut &tables, &mut quiet()).unwrap();
    for row in serde_json::to_value(answer.json(&file(&reader))).unwrap()["sites"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(name) = row["site"].as_str() {
            let text = name.chars().take(4).collect::<String>();
            names.push((name.to_string(), text));
        }
    }
    let mut out = vec![
        Filter::default(),
        Filter {
            between: Some(vec![at(2), at(4)]),
            ..Filter::default()
        },
        Filter {
            min_size: Some(64),
            max_size: Some(1 << 20),
            source: vec![AllocationSource::Minor, AllocationSource::Major],
            ..Filter::default()
        },
        Filter {
            domain: vec![0],
            ..Filter::default()
        },
        Filter {
            collected_between: Some(vec![at(1), at(5)]),
            ..Filter::default()
        },
        Filter {
            never_collected: true,
            ..Filter::default()
        },
        Filter {
            lifetime: Some(vec![Timedelta::from_micros(0), at(1)]),
            live_between: Some(vec![at(3), at(3)]),
            ..Filter::default()
        },
    ];
    if let Some((function, text)) = names.first() {
        out.push(Filter {
            function: vec![function.clone()],
            ..Filter::default()
        });
        out.push(Filter {
            location: vec![text.clone()],
            forbid_function: names.get(1).map(|n| n.0.clone()).into_iter().collect(),
            between: Some(vec![at(1), at(6)]),
            ..Filter::default()
        });
        out.push(Filter {
            forbid: vec![text.clone()],
            never_collected: true,
            ..Filter::default()
        });
    }
    out
}

fn top_query(by: GroupBy, peak: bool, at: Option<Timedelta>, filter: Filter) -> TopQuery {
    TopQuery {
        growing: false,
        by,
        // The rest are summed in `others`, which is compared too.
        limit: 100,
        at,
        peak,
        sites: SiteSpec::default(),
        filter,
    }
}

fn flame_query(filter: Filter, at: Option<Timedelta>, peak: bool) -> FlameQuery {
    FlameQuery {
        at,
        peak,
        live_end: false,
        frames: FrameLabel::Function,
        samples: false,
        collapse_recursion: false,
        no_collapse_recursion: false,
        naming: Default::default(),
        hide: Vec::new(),
        hide_function: Vec::new(),
        count_objects: true,
        filter,
    }
}

/// Asks every query with `filter` of the reader and of the tables, and compares.
fn compare(name: &str, bytes: &[u8], tables: &Tables, filter: &Filter) {
    let what = format!("{name} with {filter:?}");
    let mut reader = Reader::from_bytes(bytes).unwrap();
    let f = file(&reader);
    let mid = Some(Timedelta::from_micros(tables.end().as_micros() / 2));
    let asked = [
        (GroupBy::Leaf, false, None),
        (GroupBy::Function, false, None),
        (GroupBy::File, false, mid),
        (GroupBy::Backtrace, false, None),
        (GroupBy::Leaf, true, None),
        (GroupBy::Backtrace, false, mid),
    ];
    for (by, peak, at) in asked {
        {
            let q = top_query(by, peak, at, filter.clone());
            let a = q.run(&mut reader, &mut quiet()).unwrap();
            let b = q.run(&mut &*tables, &mut quiet()).unwrap();
            assert_eq!(a.json(&f), b.json(&f), "top {by:?} {peak} {at:?}: {what}");
            assert_eq!(a.table(&f), b.table(&f), "top table: {what}");
        }
    }
    // Sites named past other frames than the default's: the tables keep only
    // the default's sites, so these are found per query.
    for sites in [
        SiteSpec {
            std_frames: true,
            skip_frames: Vec::new(),
            naming: Default::default(),
        },
        SiteSpec {
            std_frames: false,
            skip_frames: vec!["a".into(), "List".into()],
            naming: Default::default(),
        },
    ] {
        let q = TopQuery {
            sites: sites.clone(),
            ..top_query(GroupBy::Leaf, false, mid, filter.clone())
        };
        let a = q.run(&mut reader, &mut quiet()).unwrap();
        let b = q.run(&mut &*tables, &mut quiet()).unwrap();
        assert_eq!(a.json(&f), b.json(&f), "top with {sites:?}: {what}");
    }
    let q = TimelineQuery {
        points: 50,
        filter: filter.clone(),
    };
    let a = q.run(&mut reader, &mut quiet()).unwrap();
    let b = q.run(&mut &*tables, &mut quiet()).unwrap();
    assert_eq!(a.json(&f), b.json(&f), "timeline: {what}");
    for (at, peak) in [(None, false), (mid, false), (None, true)] {
        let q = flame_query(filter.clone(), at, peak);
        let a = q.run(&mut reader, &mut quiet()).unwrap();
        let b = q.run(&mut &*tables, &mut quiet()).unwrap();
        let (ja, jb) = (
            serde_json::to_value(a.json()).unwrap(),
            serde_json::to_value(b.json()).unwrap(),
        );
        assert_eq!(ja, jb, "flamegraph {at:?} {peak}: {what}");
        let q = HotPathsQuery {
            frequency: 0.005,
            tolerance: 0.0001,
            limit: 100,
            flame: q,
        };
        let (a, b) = (q.answer(a), q.answer(b));
        assert_eq!(a.json(&f), b.json(&f), "hot-paths: {what}");
    }
    let q = DiffQuery {
        by: GroupBy::Function,
        limit: 100,
        live: false,
        at: None,
        peak: false,
        sites: SiteSpec::default(),
        filter: filter.clone(),
    };
    let mut other = Reader::from_bytes(bytes).unwrap();
    let pa = q.pass(&mut reader, &mut quiet()).unwrap();
    let pb = q.pass(&mut other, &mut quiet()).unwrap();
    let ta = q.pass(&mut &*tables, &mut quiet()).unwrap();
    let tb = q.pass(&mut &*tables, &mut quiet()).unwrap();
    let ctx = q.context(f.clone(), f.clone());
    let a = q.compare((pa, reader.locations()), (pb, other.locations()));
    let b = q.compare((ta, tables.locations()), (tb, tables.locations()));
    assert_eq!(a.json(&ctx), b.json(&ctx), "diff: {what}");
}

fn compare_all(name: &str, bytes: &[u8]) -> usize {
    let mut reader = Reader::from_bytes(bytes).unwrap();
    let built = Tables::build(&mut reader, &mut |_| {});
    // The tables as a viewer reads them back from its cache file, where they
    // can be written (not those of a damaged trace).
    let mut file = Vec::new();
    let tables = match built.write_to(&mut file) {
        Ok(()) => Tables::read_from(&file, reader.info().clone(), bytes.len() as u64).unwrap(),
        Err(e) => {
            let damaged = built.error().is_some() || !built.warnings().is_empty();
            assert!(damaged, "{name}: only damaged tables are refused: {e}");
            built
        }
    };
    let filters = filters(bytes);
    for filter in &filters {
        compare(name, bytes, &tables, filter);
    }
    filters.len()
}

#[test]
fn the_tables_answer_as_the_reader_on_the_corpus() {
    let Some(corpus) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    let rows = super::dump::manifest(&corpus);
    assert!(!rows.is_empty());
    for (trace, _) in rows {
        let bytes = std::fs::read(&trace).unwrap();
        compare_all(&trace.display().to_string(), &bytes);
    }
}

#[test]
fn the_tables_answer_as_the_reader_on_generated_traces() {
    for (allocs, depth, recursive, version) in [
        (20_000, 12, false, FormatVersion::V2),
        (15_000, 40, true, FormatVersion::V3),
    ] {
        let config = SynthConfig {
            allocs,
            depth,
            recursive,
            format_version: version,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let n = compare_all(&format!("{config:?}"), &bytes);
        assert!(n >= 10, "the location filters were made: {n}");
    }
}

/// Two domains that number their objects from the same id (written apart, the
/// second's packets then put after the first's), so that allocations reuse the
/// ids of objects still live, which the analysis takes as the older object's end:
/// the tables, which otherwise follow objects by where they are in the trace, must
/// follow them by id as the analysis does.
#[test]
fn ids_reused_while_live_answer_as_the_reader() {
    use tracekit_memtrace::synth::{synth_code, synth_info, synth_locations};
    use tracekit_memtrace::{DomainId, ObjId, Timestamp, Writer};
    let info = synth_info();
    let t0 = info.start_time.as_micros();
    let header = Writer::new(Vec::new(), &info)
        .unwrap()
        .into_inner()
        .unwrap()
        .len();
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let domain = |d: u16, next: &mut dyn FnMut() -> u64| -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), &info)
            .unwrap()
            .for_domain(DomainId::new(d))
            .unwrap();
        let mut live: Vec<ObjId> = Vec::new();
        for step in 0..2_000i64 {
            let time = Timestamp::from_micros(t0 + step * 10 + i64::from(d) * 5);
            match next() % 5 {
                0 if !live.is_empty() => {
                    let k = (next() as usize) % live.len();
                    w.put_collect(time, live.swap_remove(k)).unwrap();
                }
                1 if !live.is_empty() => {
                    let k = (next() as usize) % live.len();
                    w.put_promote(time, live[k]).unwrap();
                }
                _ => {
                    let f = (next() % 12) as u32;
                    let stack = [synth_code(f, (f % 4) + 1), synth_code(f / 3, 1)];
                    let source = [
                        AllocationSource::Minor,
                        AllocationSource::Major,
                        AllocationSource::External,
                    ][(next() % 3) as usize];
                    let length = 1 + next() % 300;
                    let id = w
                        .put_alloc(
                            time,
                            length,
                            1 + next() % 3,
                            source,
                            &stack,
                            synth_locations,
                        )
                        .unwrap();
                    live.push(id);
                }
            }
        }
        w.into_inner().unwrap()
    };
    let first = domain(0, &mut next);
    let second = domain(1, &mut next);
    let bytes = [&first[..], &second[header..]].concat();
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let q = top_query(GroupBy::Leaf, false, None, Filter::default());
    let pass = q.run(&mut reader, &mut quiet()).unwrap().pass;
    assert!(pass.warnings.is_empty() && pass.error.is_none());
    assert!(
        pass.profile.events.duplicate_ids > 100,
        "{:?}",
        pass.profile.events
    );
    compare_all("ids reused while live", &bytes);
}

/// A trace cut short: the tables hold the events before the damage, and every pass
/// over them reports it as the reader's does.
#[test]
fn damaged_tables_report_the_damage_as_the_reader() {
    let bytes = write_synthetic(
        Vec::new(),
        &SynthConfig {
            allocs: 5_000,
            ..SynthConfig::default()
        },
    )
    .unwrap();
    // Bytes after the last packet that do not read as one (as a crash mid-write
    // leaves them).
    let cut = [&bytes[..], &[0xc1, 0x1f, 0xfc, 0xc1, 0, 0]].concat();
    let mut reader = Reader::from_bytes(&cut).unwrap();
    let tables = Tables::build(&mut reader, &mut |_| {});
    assert!(tables.error().is_some(), "the cut trace reads as damaged");
    let q = top_query(GroupBy::Leaf, false, None, Filter::default());
    let a = q.run(&mut reader, &mut quiet()).unwrap();
    let b = q.run(&mut &tables, &mut quiet()).unwrap();
    assert_eq!(a.pass.error, b.pass.error);
    assert_eq!(a.pass.events, b.pass.events);
    assert_eq!(a.pass.warnings, b.pass.warnings);
    let f = file(&reader);
    assert_eq!(a.json(&f), b.json(&f));
}

/// The answers carry the filters they were asked with: a filter that changes
/// nothing would make the comparison above vacuous.
#[test]
fn the_filters_compared_change_the_answers() {
    let bytes = write_synthetic(Vec::new(), &SynthConfig::default()).unwrap();
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let tables = Tables::build(&mut reader, &mut |_| {});
    let f = file(&reader);
    let total = |filter: Filter| -> Value {
        let q = top_query(GroupBy::Leaf, false, None, filter);
        let answer = q.run(&mut &tables, &mut quiet()).unwrap();
        serde_json::to_value(answer.json(&f)).unwrap()["totals"].clone()
    };
    let all = total(Filter::default());
    let filters = filters(&bytes);
    // The trace has one domain, which the domain filter keeps.
    let narrowing: Vec<_> = filters[1..]
        .iter()
        .filter(|f| f.domain.is_empty())
        .collect();
    let changed = narrowing
        .iter()
        .filter(|filter| total((**filter).clone()) != all)
        .count();
    assert_eq!(changed, narrowing.len(), "every filter keeps less than all");
}
