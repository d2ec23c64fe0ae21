//! The timeline's answers checked against the slices of a small trace.

use super::*;
use serde_json::Value;
use tracekit_fxt::format::{Koid, StringRef};
use tracekit_fxt::read::Reader;
use tracekit_fxt::stats::Counted;
use tracekit_fxt::write::{Initialization, VecDestination, Writer, WriterOptions};

/// Two threads of nested slices (a parent of 1000 ns holding ten children
/// of 50 ns, forty times), an instant, a counter and a flow, on a clock
/// that starts at 1 s.
fn trace() -> (Vec<u8>, TimelineTrace) {
    let init = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(VecDestination::new(), &init).unwrap();
    w.set_process_name(Koid(1), StringRef::inline("proc"))
        .unwrap();
    w.set_thread_name(Koid(1), Koid(2), StringRef::inline("main"))
        .unwrap();
    let threads = [
        w.set_thread_slot(1, Koid(1), Koid(2)).unwrap(),
        w.set_thread_slot(2, Koid(1), Koid(3)).unwrap(),
    ];
    let cat = w.intern("cat").unwrap();
    let (parent, child) = (w.intern("parent").unwrap(), w.intern("child").unwrap());
    let base = 1_000_000_000u64;
    for (k, &th) in threads.iter().enumerate() {
        for i in 0..40u64 {
            let t = base + i * 2_000 + k as u64 * 100;
            for c in 0..10u64 {
                let s = t + 10 + c * 90;
                w.duration_complete(th, cat, child, s, s + 50, &[]).unwrap();
            }
            w.duration_complete(th, cat, parent, t, t + 1_000, &[])
                .unwrap();
        }
    }
    let args = [tracekit_fxt::format::RawArg::new(
        w.intern("size").unwrap(),
        tracekit_fxt::format::ArgValue::UInt64(7),
    )];
    w.instant(threads[0], cat, child, base + 500, &args)
        .unwrap();
    // A flow from inside the first parent's sixth child to inside the
    // second thread's second parent's first child.
    w.flow_begin(threads[0], base + 500, 5).unwrap();
    w.flow_end(threads[1], base + 2_150, 5).unwrap();
    let bytes = w.finish().unwrap().into_vec();
    let mut reader = Reader::new(&bytes);
    let mut counted = Counted::new(&mut reader);
    let timeline = Timeline::build(&mut counted, &mut |_| {});
    let stats = counted.stats();
    (
        bytes,
        TimelineTrace::new("t.fxt".into(), timeline, stats_json(&stats)),
    )
}

fn ask(t: &TimelineTrace, e: TimelineEndpoint, params: &[(&str, &str)]) -> Value {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_str(&asked(t, e, params).unwrap()).unwrap()
}

/// The answer to `params`, checked as the server checks them.
fn asked(t: &TimelineTrace, e: TimelineEndpoint, params: Params) -> Result<String, Error> {
    t.query(e, params).and_then(|q| t.answer(e, &q))
}

#[test]
fn stats_are_those_of_fxt_stats() {
    let (bytes, t) = trace();
    let st = Stats::collect(&mut Reader::new(&bytes), |_| {}).unwrap();
    let expected: Value = serde_json::from_str(&to_json(&st, LAYOUT)).unwrap();
    assert_eq!(ask(&t, TimelineEndpoint::Stats, &[]), expected);
    let tracks = ask(&t, TimelineEndpoint::Tracks, &[]);
    assert_eq!(tracks["slices"], 880);
    assert_eq!(tracks["tracks"][0]["name"], "main");
    assert_eq!(tracks["tracks"][0]["process"], "proc");
    assert_eq!(tracks["tracks"][1]["tid"], 3);
}

/// Every slice that shows in a window is in its answer once: as itself
/// when at least a pixel wide, else in a merged run's count.
#[test]
fn a_window_accounts_for_every_slice_it_shows() {
    let (_, t) = trace();
    for (from, to, px) in [(0, 80_000, 100), (0, 80_000, 4_000), (3_000, 5_000, 500)] {
        let w = ask(
            &t,
            TimelineEndpoint::Window,
            &[
                ("from", &from.to_string()),
                ("to", &to.to_string()),
                ("px", &px.to_string()),
            ],
        );
        let ns_per_px = w["ns_per_px"].as_u64().unwrap();
        let tracks = t.with_timeline(|t| t.tracks().to_vec()).unwrap();
        let first = t.with_timeline(|t| t.first_ns().unwrap()).unwrap();
        for (ti, track) in tracks.iter().enumerate() {
            for (l, lane) in track.lanes.iter().enumerate() {
                let shown = lane.range(first + from, first + to).len() as u64;
                let items = w["tracks"][ti]["lanes"][l].as_array().unwrap();
                let mut counted = 0;
                for it in items {
                    let it = it.as_array().unwrap();
                    let d = it[1].as_u64().unwrap() - it[0].as_u64().unwrap();
                    match it.len() {
                        4 => {
                            assert!(d >= ns_per_px, "{it:?} drawn alone under a pixel");
                            counted += 1;
                        }
                        _ => counted += it[4].as_u64().unwrap(),
                    }
                    let name = it[2].as_u64().unwrap().to_string();
                    assert!(w["names"][&name].is_string(), "{name} named");
                }
                assert_eq!(counted, shown, "track {ti} lane {l} at {px} px");
            }
        }
    }
    // Zoomed in on one parent: each child drawn as itself, by name.
    let w = ask(
        &t,
        TimelineEndpoint::Window,
        &[("from", "0"), ("to", "1000"), ("px", "1000")],
    );
    let children = w["tracks"][0]["lanes"][1].as_array().unwrap();
    assert_eq!(children.len(), 10);
    assert_eq!(children[0], serde_json::json!([10, 60, children[0][2], 0]));
    let name = children[0][2].as_u64().unwrap().to_string();
    assert_eq!(w["names"][&name], "child");
    assert_eq!(w["tracks"][0]["instants"].as_array().unwrap().len(), 1);
    // A folded track asked with the lanes it shows: those, the outermost
    // first, as the whole track's; more lanes than it has are all of them; a
    // track asked twice is answered once, as first asked.
    let lanes = |tracks: &str| {
        let w = ask(
            &t,
            TimelineEndpoint::Window,
            &[
                ("from", "0"),
                ("to", "1000"),
                ("px", "1000"),
                ("tracks", tracks),
            ],
        );
        let got: Vec<Value> = w["tracks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["lanes"].clone())
            .collect();
        got
    };
    let whole = lanes("0");
    let all = whole[0].as_array().unwrap();
    assert!(all.len() >= 2);
    assert_eq!(lanes("0:1"), [Value::Array(all[..1].to_vec())]);
    assert_eq!(lanes("0:99"), whole);
    assert_eq!(lanes("0:1,0"), lanes("0:1"));
    // The flow leaves and arrives at the depth of the slices open there.
    let w = ask(
        &t,
        TimelineEndpoint::Window,
        &[("from", "0"), ("to", "4000"), ("px", "100")],
    );
    assert_eq!(
        w["flows"],
        serde_json::json!([[[0, 500, "b", 1], [1, 2_150, "e", 1]]])
    );
}

#[test]
fn details_selection_and_search_answer_what_the_slices_say() {
    let (_, t) = trace();
    let d = ask(
        &t,
        TimelineEndpoint::Details,
        &[("track", "0"), ("lane", "0"), ("index", "1")],
    );
    assert_eq!(d["name"], "parent");
    assert_eq!(d["start"], 2_000);
    assert_eq!(d["start_ns"], 1_000_002_000u64);
    assert_eq!(d["duration_ns"], 1_000);
    assert_eq!(d["self_ns"], 500, "ten children of 50 ns");
    assert_eq!(d["thread"], "main");
    let s = ask(
        &t,
        TimelineEndpoint::Selection,
        &[("from", "0"), ("to", "3999"), ("tracks", "0")],
    );
    // Two parents (at 0 and 2000 ns) and their twenty children.
    assert_eq!(s["slices"], 22);
    let names = s["names"].as_array().unwrap();
    assert_eq!(
        (names[0]["name"].as_str(), names[0]["count"].as_u64()),
        (Some("parent"), Some(2))
    );
    assert_eq!(names[0]["self_ns"], 1_000);
    assert_eq!(names[1]["total_ns"], 1_000);
    // The range's call tree: parent, and child under it; the range cuts
    // the second parent (2000..3000) at 2500.
    let f = ask(
        &t,
        TimelineEndpoint::Flame,
        &[("from", "0"), ("to", "2500"), ("tracks", "0")],
    );
    let nodes = f["nodes"].as_array().unwrap();
    let name = |n: &Value| f["names"][n[1].as_u64().unwrap().to_string()].clone();
    assert_eq!(nodes.len(), 2, "{f}");
    assert_eq!(
        (name(&nodes[0]), &nodes[0][0]),
        ("parent".into(), &Value::Null)
    );
    assert_eq!(
        (name(&nodes[1]), &nodes[1][0]),
        ("child".into(), &Value::from(0))
    );
    assert_eq!(nodes[0][2], 1_500);
    // Ten children of the first parent, and those of the second that
    // start before 2500 (at 2010, 2100, ... 2370, 2460: six, the last cut
    // to 40 ns).
    assert_eq!(nodes[1][2], 10 * 50 + 5 * 50 + 40);
    assert_eq!(nodes[0][3], 1_500 - (10 * 50 + 5 * 50 + 40));
    assert_eq!(f["total_ns"], 1_500);
    // Search: every parent, in time order, then nothing.
    let mut after: Option<String> = None;
    let mut starts = Vec::new();
    loop {
        let mut params = vec![("text", "PAR".to_string())];
        if let Some(a) = &after {
            params.push(("after", a.clone()));
        }
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = ask(&t, TimelineEndpoint::Search, &params);
        assert_eq!(r["matches"], 80);
        let Some(f) = r["found"].as_object() else {
            break;
        };
        starts.push(f["start"].as_u64().unwrap());
        after = Some(format!("{},{},{}", f["track"], f["lane"], f["index"]));
    }
    assert_eq!(starts.len(), 80);
    assert!(starts.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn bad_parameters_are_refused_with_what_is_wrong() {
    let (_, t) = trace();
    let refuse = |e, params: &[(&str, &str)]| {
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match asked(&t, e, params.clone()) {
            Err(Error::BadParameters(m)) => m,
            other => panic!("{params:?}: {other:?}"),
        }
    };
    assert!(refuse(TimelineEndpoint::Window, &[("px", "0")]).contains("px"));
    assert!(refuse(TimelineEndpoint::Window, &[("from", "9"), ("to", "3")]).contains("after"));
    assert!(refuse(TimelineEndpoint::Window, &[("tracks", "7")]).contains("not a track"));
    assert!(refuse(TimelineEndpoint::Window, &[("tracks", "0:x")]).contains("TRACK:LANES"));
    assert!(refuse(TimelineEndpoint::Window, &[("tracks", "7:1")]).contains("not a track"));
    assert!(refuse(TimelineEndpoint::Window, &[("nope", "1")]).contains("from, to, px, tracks"));
    assert!(refuse(TimelineEndpoint::Details, &[("track", "0")]).contains("lane"));
    assert!(
        refuse(
            TimelineEndpoint::Details,
            &[("track", "0"), ("lane", "0"), ("index", "99")]
        )
        .contains("no such")
    );
    assert!(refuse(TimelineEndpoint::Search, &[]).contains("text"));
    assert!(
        refuse(TimelineEndpoint::Search, &[("text", "a"), ("after", "1,2")])
            .contains("track,lane,index")
    );
    assert!(refuse(TimelineEndpoint::Slices, &[("between", "2s,1s")]).contains("after"));
    assert!(refuse(TimelineEndpoint::Stats, &[("x", "1")]).contains("none"));
    // A table's rows are bounded: "all" is not asked of a server.
    for n in ["0", "10001"] {
        assert!(refuse(TimelineEndpoint::Top, &[("limit", n)]).contains("between 1 and"));
        assert!(refuse(TimelineEndpoint::Slices, &[("limit", n)]).contains("between 1 and"));
    }
    // Times with units are times from the trace's first time.
    let top = ask(
        &t,
        TimelineEndpoint::Top,
        &[("between", "0,1us"), ("limit", "10000")],
    );
    assert_eq!(top["slices"], 11 + 11);
}

/// A track named twice is one track: its slices are counted once, and a
/// window lists it once.
#[test]
fn a_track_asked_twice_is_answered_once() {
    let (_, t) = trace();
    for e in [
        TimelineEndpoint::Selection,
        TimelineEndpoint::Flame,
        TimelineEndpoint::Window,
    ] {
        let once = ask(&t, e, &[("tracks", "0")]);
        let twice = ask(&t, e, &[("tracks", "0,0,0")]);
        assert_eq!(once, twice, "{e:?}");
    }
    let all = ask(&t, TimelineEndpoint::Selection, &[]);
    let repeated = ask(&t, TimelineEndpoint::Selection, &[("tracks", "1,0,1,0")]);
    assert_eq!(all["count"], repeated["count"]);
}

/// A counter sampled by two threads, whose records interleave out of time
/// order, is drawn with one point per pixel, in time order, holding the
/// lowest and highest value of the samples in it.
#[test]
fn a_counter_is_one_point_per_pixel_whatever_the_order_of_its_records() {
    use tracekit_fxt::format::{ArgValue, RawArg};
    let mut w = Writer::new(VecDestination::new()).unwrap();
    let threads = [
        w.set_thread_slot(1, Koid(1), Koid(2)).unwrap(),
        w.set_thread_slot(2, Koid(1), Koid(3)).unwrap(),
    ];
    let (cat, name, series) = (
        w.intern("c").unwrap(),
        w.intern("heap").unwrap(),
        w.intern("bytes").unwrap(),
    );
    // Thread k samples at 10 * i + k, but thread 1 writes 500 ns ahead of
    // thread 0: the records go back and forth in time.
    let mut samples = Vec::new();
    for i in 0..1_000u64 {
        for (k, &th) in threads.iter().enumerate() {
            let time = if k == 0 {
                10 * i
            } else {
                (10 * i + 500) % 10_000 + 1
            };
            let v = (time * 7 % 1_000) as i64;
            samples.push((time, v));
            let args = [RawArg::new(series, ArgValue::Int64(v))];
            w.counter(th, cat, name, time, 1, &args).unwrap();
        }
    }
    let bytes = w.finish().unwrap().into_vec();
    let timeline = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let t = TimelineTrace::new("c.fxt".into(), timeline, String::new());
    let first = samples.iter().map(|s| s.0).min().unwrap();
    let px = 100u64;
    let win = ask(
        &t,
        TimelineEndpoint::Window,
        &[("from", "0"), ("to", "10000"), ("px", &px.to_string())],
    );
    let points = win["counters"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), px as usize);
    let ns_per_px = 100;
    for (p, point) in points.iter().enumerate() {
        let at = point[0].as_u64().unwrap();
        assert_eq!(at, p as u64 * ns_per_px);
        let inside: Vec<i64> = (samples.iter())
            .filter(|s| (s.0 - first) / ns_per_px == p as u64)
            .map(|s| s.1)
            .collect();
        assert_eq!(
            point[1].as_f64().unwrap(),
            *inside.iter().min().unwrap() as f64
        );
        assert_eq!(
            point[2].as_f64().unwrap(),
            *inside.iter().max().unwrap() as f64
        );
    }
}

/// Two ranges of one trace compared: a range that holds twice the slices of
/// another changes by what the extra ones weigh, in the table and in the
/// merged call tree; the same range changes nothing.
#[test]
fn a_range_is_compared_with_another_by_name_and_by_call_path() {
    let (_, t) = trace();
    // Thread 0's parents start every 2000 ns: 0..4000 holds two, 0..2000 one.
    let ask_base = |e, from: &str, to: &str| {
        ask(
            &t,
            e,
            &[
                ("from", "0"),
                ("to", to),
                ("tracks", "0"),
                ("base", "range"),
                ("base_from", from),
                ("base_to", "1999"),
            ],
        )
    };
    let s = ask_base(TimelineEndpoint::Selection, "0", "3999");
    let changes = s["changes"].as_array().unwrap();
    let row = |name: &str| changes.iter().find(|r| r["name"] == name).unwrap().clone();
    let (parent, child) = (row("parent"), row("child"));
    assert_eq!(
        (&parent["count_a"], &parent["count_b"]),
        (&1.into(), &2.into())
    );
    assert_eq!(parent["total_change_ns"], 1_000);
    assert_eq!(
        (&child["count_a"], &child["count_b"]),
        (&10.into(), &20.into())
    );
    assert_eq!(child["total_change_ns"], 500);
    assert_eq!(s["base"]["slices"], 11);
    // Ranked by the size of the change.
    assert_eq!(changes[0]["name"], "parent");
    let f = ask_base(TimelineEndpoint::Flame, "0", "3999");
    let nodes = f["nodes"].as_array().unwrap();
    let name = |n: &Value| f["names"][n[1].as_u64().unwrap() as usize].clone();
    assert_eq!(nodes.len(), 2, "{f}");
    assert_eq!(name(&nodes[1]), "child");
    // [parent, name, total, self, base total, base self]
    let w = |n: &Value| (2..6).map(|i| n[i].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(w(&nodes[0]), [2_000, 1_000, 1_000, 500]);
    assert_eq!(w(&nodes[1]), [1_000, 1_000, 500, 500]);
    assert_eq!(
        (&f["total_ns"], &f["base_total_ns"]),
        (&2_000.into(), &1_000.into())
    );
    // The same range: no change.
    let same = ask_base(TimelineEndpoint::Selection, "0", "1999");
    let rows = same["changes"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["total_change_ns"] == 0 && r["self_change_ns"] == 0)
    );
    // No compared trace served: base=compare is refused.
    let e = asked(
        &t,
        TimelineEndpoint::Flame,
        vec![("base".into(), "compare".into())],
    );
    assert!(matches!(e, Err(Error::BadParameters(m)) if m.contains("--compare")));
    let e = asked(
        &t,
        TimelineEndpoint::Flame,
        vec![("base".into(), "range".into())],
    );
    assert!(matches!(e, Err(Error::BadParameters(m)) if m.contains("base_from")));
}

#[test]
fn an_async_slice_is_followed_to_the_one_it_runs_under() {
    use tracekit_fxt::format::{ArgValue, RawArg};
    let mut w = Writer::new(VecDestination::new()).unwrap();
    let th = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
    let cat = w.intern("cat").unwrap();
    let (task, job) = (w.intern("task").unwrap(), w.intern("job").unwrap());
    // Task 7 from 10 to 100; its job, id 8, from 20 to 30 names it as its
    // parent; job 9 names a parent span that is not async, and runs within 7.
    let parent = |p: u64| {
        [RawArg::new(
            StringRef::inline("parent"),
            ArgValue::UInt64(p),
        )]
    };
    let within = [
        RawArg::new(StringRef::inline("parent"), ArgValue::UInt64(99)),
        RawArg::new(StringRef::inline("within"), ArgValue::UInt64(7)),
    ];
    w.async_begin(th, cat, task, 10, 7, &[]).unwrap();
    w.async_begin(th, cat, job, 20, 8, &parent(7)).unwrap();
    w.async_end(th, cat, job, 30, 8, &[]).unwrap();
    w.async_begin(th, cat, job, 40, 9, &within).unwrap();
    w.async_end(th, cat, job, 50, 9, &[]).unwrap();
    w.async_end(th, cat, task, 100, 7, &[]).unwrap();
    let bytes = w.finish().unwrap().into_vec();
    let timeline = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let t = TimelineTrace::new("t.fxt".into(), timeline, String::new());
    let tracks = ask(&t, TimelineEndpoint::Tracks, &[]);
    let track_of = |name: &str| {
        let all = tracks["tracks"].as_array().unwrap();
        all.iter()
            .position(|t| t["name"] == name)
            .unwrap()
            .to_string()
    };
    // The task and its jobs share the task's track: the task's slice on the
    // first lane, its jobs on the next.
    let track = track_of("task #7");
    let details = |lane: &str, index: &str| {
        let at = [("track", track.as_str()), ("lane", lane), ("index", index)];
        ask(&t, TimelineEndpoint::Details, &at)
    };
    let first = details("1", "0");
    assert_eq!(first["async_id"], 8);
    let p = &first["parent"];
    assert_eq!(
        (
            p["name"].as_str(),
            p["track"].to_string(),
            p["lane"].as_u64()
        ),
        (Some("task"), track.clone(), Some(0))
    );
    let task_details = details("0", &p["index"].to_string());
    assert_eq!(task_details["async_id"], 7);
    assert!(task_details["parent"].is_null());
    // A parent that is not an async slice is not followed; the task it runs
    // within is.
    let second = details("1", "1");
    assert!(second["parent"].is_null());
    assert_eq!(second["within"]["name"], "task");
    assert!(first["within"].is_null());
}

/// Instants at the end of the clock (a trace's damaged or forged stamps): a
/// window over them answers, each pixel's first, rather than overflowing its
/// step to the next pixel (found by the `timeline_view` fuzz target).
#[test]
fn instants_at_the_end_of_the_clock_are_drawn() {
    let init = WriterOptions {
        initialization: Some(Initialization::new(1_000_000_000)),
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(VecDestination::new(), &init).unwrap();
    let th = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
    let (cat, name) = (w.intern("cat").unwrap(), w.intern("tick").unwrap());
    for ts in [1_000, u64::MAX - 3, u64::MAX - 1] {
        w.instant(th, cat, name, ts, &[]).unwrap();
    }
    let bytes = w.finish().unwrap().into_vec();
    let timeline = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let t = TimelineTrace::new("t.fxt".into(), timeline, String::new());
    let span = (u64::MAX - 1 - 1_000).to_string();
    let w = ask(&t, TimelineEndpoint::Window, &[("to", &span), ("px", "7")]);
    let instants = &w["tracks"][0]["instants"];
    // The first, and the first of the last pixel (the two last share it).
    assert_eq!(instants.as_array().map(Vec::len), Some(2), "{w}");
}
