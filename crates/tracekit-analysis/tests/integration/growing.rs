//! `top --growing` on a trace made for it: a site that leaks steadily, a larger
//! spike that comes and goes, and churn that never stays, answered from the reader
//! and from the tables alike.
#![allow(clippy::unwrap_used)]

use tracekit_analysis::Filter;
use tracekit_analysis::query::{SiteSpec, TopQuery};
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::report::GroupBy;
use tracekit_analysis::tables::Tables;
use tracekit_memtrace::synth::{synth_code, synth_info, synth_locations};
use tracekit_memtrace::{AllocationSource, Reader, Timedelta, Writer};

const LEAK: u32 = 11;
const SPIKE: u32 = 22;
const CHURN: u32 = 33;
const JUMP: u32 = 44;

/// Ten seconds: every 100 ms the leak keeps an object and the churn allocates one
/// it frees at once; at 5 s the spike allocates 800 objects, eight times what the
/// leak ever holds, and frees them at 5.5 s; at 9.2 s the jump allocates 500 it
/// keeps. Every object is one sample.
fn trace() -> Vec<u8> {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let at = |ms: i64| info.start_time.offset(Timedelta::from_micros(ms * 1000));
    // Innermost first, as the writer takes a callstack.
    let stack = |f: u32| vec![synth_code(f, 1), synth_code(1, 0)];
    let mut spike = Vec::new();
    for step in 1..=100i64 {
        let ms = step * 100;
        let put = |w: &mut Writer<Vec<u8>>, f: u32| {
            w.put_alloc(
                at(ms),
                100,
                1,
                AllocationSource::Major,
                &stack(f),
                synth_locations,
            )
            .unwrap()
        };
        put(&mut w, LEAK);
        let churn = put(&mut w, CHURN);
        w.put_collect(at(ms), churn).unwrap();
        if ms == 5000 {
            for _ in 0..800 {
                spike.push(put(&mut w, SPIKE));
            }
        }
        if ms == 9200 {
            for _ in 0..500 {
                put(&mut w, JUMP);
            }
        }
        if ms == 5500 {
            for id in spike.drain(..) {
                w.put_collect(at(ms), id).unwrap();
            }
        }
    }
    w.into_inner().unwrap()
}

fn query(growing: bool, peak: bool) -> TopQuery {
    TopQuery {
        growing,
        by: GroupBy::Function,
        limit: 10,
        at: None,
        peak,
        sites: SiteSpec::default(),
        filter: Filter::default(),
    }
}

fn name(f: u32) -> String {
    format!("Module_{:03}.fn_{f}", f / 10)
}

#[test]
fn a_steady_leak_grows_first_and_a_larger_spike_does_not_grow() {
    let bytes = trace();
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let file = TraceFile::new("growing.ctf", reader.info());
    let answer = query(true, false).run(&mut reader, &mut |_, _| {}).unwrap();
    let json = serde_json::to_value(answer.json(&file)).unwrap();
    let growing = &json["growing"];
    let sites = growing["sites"].as_array().unwrap();
    assert_eq!(sites[0]["site"], name(LEAK), "{growing:#}");
    // A jump late in the trace is no steady growth: most pairs of times are both
    // before it or both after, so the median slope stays 0.
    assert!(
        sites.iter().skip(1).all(|s| s["site"] != name(JUMP)),
        "only the leak grows: {growing:#}"
    );
    assert!(
        sites
            .iter()
            .all(|s| s["site"] != name(SPIKE) && s["site"] != name(CHURN)),
        "only the leak grows: {growing:#}"
    );
    // The leak's live bytes at the 32 times climb to its 100 objects, each a
    // sample (the bytes a sample stands for, whatever the object's size).
    let live: Vec<u64> = sites[0]["live_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(live.len(), 32);
    assert!(live.windows(2).all(|w| w[0] <= w[1]), "{live:?}");
    let word = u64::from(synth_info().word_size / 8);
    let per_sample = 1.0 / synth_info().sample_rate;
    assert_eq!(live[31] as f64, 100.0 * word as f64 * per_sample);
    assert!(
        sites[0]["steadiness"].as_f64().unwrap() > 0.9,
        "{growing:#}"
    );
    // A leak of a sample every 100 ms: 10 a second.
    let rate = sites[0]["bytes_per_s"].as_f64().unwrap();
    let expected = 10.0 * word as f64 * per_sample;
    assert!(
        (rate - expected).abs() < expected * 0.05,
        "{rate} against {expected}"
    );
    // The spike is the larger at the peak: ranked by live bytes there, it leads.
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let peak = query(false, true).run(&mut reader, &mut |_, _| {}).unwrap();
    let peak = serde_json::to_value(peak.json(&file)).unwrap();
    assert_eq!(peak["sites"][0]["site"], name(SPIKE));
    // The tables answer the same.
    let mut reader = Reader::from_bytes(&bytes).unwrap();
    let tables = Tables::build(&mut reader, &mut |_| {});
    let again = query(true, false)
        .run(&mut &tables, &mut |_, _| {})
        .unwrap();
    assert_eq!(serde_json::to_value(again.json(&file)).unwrap(), json);
    insta::assert_snapshot!(answer.table(&file));
}
