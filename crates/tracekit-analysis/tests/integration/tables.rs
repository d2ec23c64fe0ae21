//! Snapshot tests of the human-readable tables on a small hand-made trace.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use tracekit_analysis::render::{self, DiffContext, TopContext, TraceFile};
use tracekit_analysis::report::{self, GroupBy, Rank};
use tracekit_analysis::{Options, Profile, Sampling, analyze_events};
use tracekit_memtrace::{
    Alloc, AllocationSource, DomainId, Event, Info, Location, LocationCode, ObjId, Timedelta,
    Timestamp,
};

const SAMPLING: Sampling = Sampling {
    sample_rate: 1e-3,
    word_size_bits: 64,
};

fn table() -> HashMap<LocationCode, Vec<Location>> {
    let mut t = HashMap::new();
    let loc = |def: &str, file: &str, line| Location {
        filename: file.into(),
        line,
        start_char: 4,
        end_char: 20,
        defname: def.into(),
    };
    t.insert(LocationCode::new(1), vec![loc("Main", "main.ml", 10)]);
    t.insert(LocationCode::new(2), vec![loc("Main.build", "main.ml", 3)]);
    t.insert(
        LocationCode::new(3),
        vec![
            loc("Stdlib__List.map", "list.ml", 92),
            loc("Stdlib__List.rev", "list.ml", 60),
        ],
    );
    t.insert(
        LocationCode::new(4),
        vec![loc("Stdlib__Hashtbl.resize", "hashtbl.ml", 130)],
    );
    t.insert(LocationCode::new(5), vec![loc("Main.cache", "main.ml", 40)]);
    t
}

fn events(scale: u64) -> Vec<(Timedelta, Event<'static>)> {
    const BTS: [&[i64]; 4] = [&[1, 2, 3], &[1, 2, 4], &[1, 5, 4], &[1, 5]];
    let mut ev = Vec::new();
    let mut id = 0;
    for round in 0..40u64 {
        for (i, bt) in BTS.iter().enumerate() {
            let i = i as u64;
            let t = round * 100_000 + i * 10_000;
            let alloc = Alloc {
                obj_id: ObjId::new(id),
                domain: DomainId::new(0),
                length: 3 + i * 500 * scale,
                nsamples: 1 + i * scale,
                source: [
                    AllocationSource::Minor,
                    AllocationSource::Major,
                    AllocationSource::Major,
                    AllocationSource::External,
                ][i as usize],
                backtrace: bt.iter().map(|&c| LocationCode::new(c)).collect(),
                common_prefix: 0,
            };
            ev.push((Timedelta::from_micros(t as i64), Event::Alloc(alloc)));
            // Everything but the cache entries dies 50 ms later.
            if i != 3 {
                ev.push((
                    Timedelta::from_micros(t as i64 + 50_000),
                    Event::Collect(ObjId::new(id), DomainId::new(0)),
                ));
            }
            id += 1;
        }
    }
    ev.sort_by_key(|(t, _)| *t);
    ev
}

fn profile(scale: u64, live_at: Option<Timedelta>) -> Profile {
    let opts = Options {
        live_at,
        ..Options::default()
    };
    analyze_events(SAMPLING, opts, events(scale))
}

fn info(path: &str) -> TraceFile {
    let info = Info {
        sample_rate: SAMPLING.sample_rate,
        word_size: 64,
        executable_name: "/bin/example.exe".into(),
        host_name: "host".into(),
        ocaml_runtime_params: "".into(),
        pid: 42,
        initial_domain: DomainId::MAIN,
        start_time: Timestamp::from_micros(1_700_000_000_000_000),
        context: None,
    };
    TraceFile::new(path, &info)
}

/// The `top` table of the unscaled profile, with no time, peak or filter.
fn plain_top_table(by: GroupBy, rank: Rank, limit: usize) -> String {
    let p = profile(1, None);
    let t = report::top(&p, &table(), by, rank, limit);
    render::top_table(&info("a.ctf"), &p, &t, &TopContext::default())
}

#[test]
fn top_by_leaf() {
    insta::assert_snapshot!(plain_top_table(GroupBy::Leaf, Rank::Allocated, 3));
}

#[test]
fn top_by_function_at_time() {
    let at = Timedelta::from_micros(2_020_000);
    let p = profile(1, Some(at));
    let t = report::top(&p, &table(), GroupBy::Function, Rank::LiveAt, 10);
    let ctx = TopContext {
        at: Some(at),
        at_peak: false,
        filters: vec!["source major".to_string()],
    };
    insta::assert_snapshot!(render::top_table(&info("a.ctf"), &p, &t, &ctx));
}

#[test]
fn top_by_backtrace() {
    insta::assert_snapshot!(plain_top_table(GroupBy::Backtrace, Rank::LiveEnd, 10));
}

#[test]
fn diff_table() {
    let (a, b) = (profile(1, None), profile(3, None));
    let t = table();
    let rows = report::diff((&a, &t), (&b, &t), GroupBy::Leaf, report::Rank::Allocated);
    let ctx = DiffContext {
        a: info("a.ctf"),
        b: info("b.ctf"),
        by: Some(GroupBy::Leaf),
        rank: report::Rank::Allocated,
    };
    insta::assert_snapshot!(render::diff_table(&ctx, &a, &b, &rows, 10));
}

#[test]
fn timeline_csv() {
    let p = profile(1, None);
    let points = p.timeline.points(8);
    insta::assert_snapshot!(render::timeline_csv(&p, &points));
}

#[test]
fn top_json_totals_match_counts() {
    let p = profile(1, None);
    let t = report::top(&p, &table(), GroupBy::File, Rank::Allocated, 2);
    let j = render::top_json(&info("a.ctf"), &p, &t, &TopContext::default());
    let j = serde_json::to_value(j).unwrap();
    assert_eq!(j["totals"]["allocs"], 160);
    assert_eq!(j["totals"]["samples"], 40 * (1 + 2 + 3 + 4));
    assert_eq!(j["totals"]["bytes"], 40 * 10 * 8000);
    assert_eq!(j["totals"]["live_end_samples"], 40 * 4);
    let site_sum: u64 = j["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["samples"].as_u64().unwrap())
        .sum::<u64>()
        + j["others"]["samples"].as_u64().unwrap();
    assert_eq!(site_sum, 400);
}

/// Counter samples `(ticks, value)` of the event named `name`, read back with the FXT
/// reader.
fn counters(bytes: &[u8], name: &str, arg: &str) -> Vec<(u64, f64)> {
    use tracekit_fxt::format::{ArgValue, EventKind};
    use tracekit_fxt::read::{Reader, Record};
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Event(e) = rec
            && matches!(e.kind, EventKind::Counter { .. })
            && e.name == name
        {
            let v = match e.args.get(arg) {
                Some(ArgValue::Int64(v)) => v as f64,
                Some(ArgValue::Double(v)) => v,
                other => panic!("unexpected {other:?}"),
            };
            out.push((e.ticks, v));
        }
    }
    out
}

#[test]
fn fxt_counters_read_back() {
    use tracekit_analysis::fxt::{FxtOptions, write_trace};
    let opts = Options {
        big: 3,
        ..Options::default()
    };
    let p = analyze_events(SAMPLING, opts, events(1));
    let (bytes, summary) = write_trace(
        Vec::new(),
        &p,
        &table(),
        &info("a.ctf").info,
        &FxtOptions {
            points: 8,
            ..FxtOptions::default()
        },
    )
    .unwrap();
    assert_eq!(summary.instants, 4);
    let live = counters(&bytes, "live heap (domain 0)", "bytes");
    assert_eq!(live.len() as u64, summary.points);
    // The live heap from the events themselves at each sample time.
    for (t, v) in &live {
        let mut alive = std::collections::HashMap::new();
        for (time, e) in events(1) {
            if time.as_micros() as u64 > *t {
                continue;
            }
            match e {
                Event::Alloc(a) => {
                    alive.insert(a.obj_id, a.nsamples);
                }
                Event::Collect(obj_id, _) => {
                    alive.remove(&obj_id);
                }
                Event::Promote(..) => {}
            }
        }
        let samples: u64 = alive.values().sum();
        assert_eq!(*v, SAMPLING.bytes(samples) as f64, "at {t}");
    }
    assert_eq!(live[0].0, 500_000);
    assert_eq!(live.last().map(|l| l.1), Some(SAMPLING.bytes(160) as f64));
    let rate = counters(&bytes, "allocation rate", "bytes_per_s");
    assert_eq!(rate.first(), Some(&(0, 816_000.0)));
    assert_eq!(rate.last().map(|r| r.1), Some(0.0));
}
