//! Every slice of the corpus's FXT traces, as a plain matching of the records
//! finds them, is on the timeline once, on its thread's track (or its
//! process's async track), and a slice deeper than the outermost starts within
//! one a lane above it.

use std::collections::HashMap;

use tracekit_fxt::format::EventKind;
use tracekit_fxt::read::{Reader, Record, Records};
use tracekit_timeline::lane::OPEN;
use tracekit_timeline::{Timeline, TrackKind};

/// (pid, tid or 0 for async, start, end, name, arguments) of every slice.
type Row = (u64, u64, u64, u64, String, String);

/// A thread's duration begins (name and arguments) and ends, with their times.
type Marks = Vec<(u64, Result<(String, String), String>)>;

/// A begin waiting for its end: start, name, arguments.
type Begun = (u64, String, String);

fn traces() -> Option<Vec<std::path::PathBuf>> {
    let dir = tracekit_testutil::corpus_path("fxt")?;
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fxt"))
        .collect();
    out.sort();
    assert!(out.len() >= 5, "the corpus's FXT traces: {out:?}");
    Some(out)
}

/// The slices of `bytes` by a plain matching: begins and ends by thread, in
/// the order of their times (records of one time in the order read), an end's
/// arguments after its begin's, async
/// begins and ends by process, name and id, completes as they are.
fn matched(bytes: &[u8]) -> Vec<Row> {
    let mut r = Reader::new(bytes);
    // Per thread, its begins (`Some`) and ends (`None`) with their times.
    let mut marks: HashMap<(u64, u64), Marks> = HashMap::new();
    let mut open: HashMap<(u64, u64), Vec<Begun>> = HashMap::new();
    let mut asyncs: HashMap<(u64, String, u64), (u64, String)> = HashMap::new();
    let mut rows = Vec::new();
    while let Ok(Some(e)) = r.next_entry() {
        let Record::Event(ev) = e.record else {
            continue;
        };
        let (pid, tid) = (ev.thread.process.0, ev.thread.thread.0);
        let t = e.tick_rate.ns(ev.ticks);
        let name = String::from_utf8_lossy(ev.name.as_bytes()).into_owned();
        let args = tracekit_timeline::args_json(ev.args);
        match ev.kind {
            EventKind::DurationBegin => marks
                .entry((pid, tid))
                .or_default()
                .push((t, Ok((name, args)))),
            EventKind::DurationEnd => marks.entry((pid, tid)).or_default().push((t, Err(args))),
            EventKind::DurationComplete { end_ticks } => {
                rows.push((pid, tid, t, e.tick_rate.ns(end_ticks).max(t), name, args))
            }
            EventKind::AsyncBegin { id } => {
                if let Some((s, a)) = asyncs.insert((pid, name.clone(), id), (t, args)) {
                    rows.push((pid, 0, s, OPEN, name, a));
                }
            }
            EventKind::AsyncEnd { id } => {
                if let Some((s, a)) = asyncs.remove(&(pid, name.clone(), id)) {
                    rows.push((pid, 0, s, t.max(s), name, a));
                }
            }
            _ => {}
        }
    }
    for ((pid, tid), mut thread) in marks {
        // Stable: marks of one time stay in the order read.
        thread.sort_by_key(|m| m.0);
        let stack = open.entry((pid, tid)).or_default();
        for (t, mark) in thread {
            match mark {
                Ok((n, a)) => stack.push((t, n, a)),
                // An end's arguments join its begin's.
                Err(end) => {
                    if let Some((s, n, a)) = stack.pop() {
                        let args = match (a.as_str(), end.as_str()) {
                            (_, "{}") => a,
                            ("{}", _) => end,
                            _ => format!("{},{}", &a[..a.len() - 1], &end[1..]),
                        };
                        rows.push((pid, tid, s, t, n, args));
                    }
                }
            }
        }
    }
    for ((pid, tid), stack) in open {
        rows.extend(stack.into_iter().map(|(s, n, a)| (pid, tid, s, OPEN, n, a)));
    }
    for ((pid, name, _), (s, a)) in asyncs {
        rows.push((pid, 0, s, OPEN, name, a));
    }
    rows.sort();
    rows
}

#[test]
fn every_slice_of_the_corpus_is_on_its_track_once() {
    let Some(traces) = traces() else {
        return;
    };
    for path in traces {
        let bytes = std::fs::read(&path).unwrap();
        let t = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
        let mut rows: Vec<Row> = Vec::new();
        for track in t.tracks() {
            for (depth, lane) in track.lanes.iter().enumerate() {
                for i in 0..lane.len() {
                    let s = lane.get(i).unwrap();
                    let tid = match track.kind {
                        TrackKind::Thread => track.tid,
                        TrackKind::Async => 0,
                    };
                    rows.push((
                        track.pid,
                        tid,
                        s.start,
                        s.end,
                        t.string(s.name).to_string(),
                        t.args(s.args).to_string(),
                    ));
                    if track.kind == TrackKind::Thread && depth > 0 {
                        let above = &track.lanes[depth - 1];
                        let parent = above.range(s.start, s.start + 1);
                        // It starts within it; it may outlive it (open until
                        // the end of the trace, or stamped so).
                        let within = parent.clone().any(|j| {
                            let p = above.get(j).unwrap();
                            p.start <= s.start && s.start < p.end
                        });
                        assert!(within, "{}: {s:?} under {parent:?}", path.display());
                    }
                }
            }
        }
        rows.sort();
        // Every flow event is in a flow, on its thread's track.
        let mut flow_events = Vec::new();
        let mut r = Reader::new(&bytes);
        while let Ok(Some(e)) = r.next_entry() {
            if let Record::Event(ev) = e.record
                && let EventKind::FlowBegin { id }
                | EventKind::FlowStep { id }
                | EventKind::FlowEnd { id } = ev.kind
            {
                flow_events.push((id, ev.thread.thread.0, e.tick_rate.ns(ev.ticks)));
            }
        }
        let mut in_flows: Vec<(u64, u64, u64)> = t
            .flows()
            .iter()
            .flat_map(|f| {
                f.points
                    .iter()
                    .map(|p| (f.id, t.tracks()[p.track].tid, p.time))
            })
            .collect();
        flow_events.sort();
        in_flows.sort();
        assert_eq!(in_flows, flow_events, "{}", path.display());
        let expected = matched(&bytes);
        assert_eq!(rows.len(), t.slices());
        assert_eq!(rows, expected, "{}", path.display());
        if path.ends_with("synthetic_all_records.fxt") {
            assert_eq!(t.flows().len(), 1, "a begin, a step and an end");
        }
        if path.ends_with("magic_trace_sample.fxt") {
            // 17,296 begin and end pairs on one thread, named `main`.
            assert_eq!(t.slices(), 17_296);
            let main = &t.tracks()[0];
            assert_eq!(main.name.map(|n| t.string(n)), Some("main"));
            assert!(main.lanes.len() > 5, "nested: {} lanes", main.lanes.len());
            // Begins carry their address and symbol.
            let first = main.lanes[0].get(0).unwrap();
            let args: serde_json::Value = serde_json::from_str(t.args(first.args)).unwrap();
            assert!(
                args.get("address").is_some() && args.get("symbol").is_some(),
                "{args}"
            );
        }
    }
}

#[test]
fn a_truncated_trace_keeps_what_was_read() {
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let whole = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
    let cut = &bytes[..bytes.len() / 2 + 3];
    let mut positions = Vec::new();
    let half = Timeline::build(&mut Reader::new(cut), &mut |p| positions.push(p));
    assert!(half.error().is_some() || !half.warnings().is_empty());
    assert!(0 < half.slices() && half.slices() < whole.slices());
    assert!(half.records() < whole.records());
    assert!(!positions.is_empty());
}

#[test]
fn every_corpus_timeline_reads_back_as_written() {
    let Some(traces) = traces() else {
        return;
    };
    for path in traces {
        let bytes = std::fs::read(&path).unwrap();
        let t = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
        if t.error().is_some() || !t.warnings().is_empty() {
            continue;
        }
        let mut file = Vec::new();
        t.write_to(&mut file).unwrap();
        let back = Timeline::read_from(&file).unwrap();
        let mut again = Vec::new();
        back.write_to(&mut again).unwrap();
        assert_eq!(again, file, "{}", path.display());
        assert_eq!(back.slices(), t.slices());
        let slices = |t: &Timeline| -> Vec<(u64, u64, String, String)> {
            let mut out = Vec::new();
            for track in t.tracks() {
                for lane in &track.lanes {
                    for i in 0..lane.len() {
                        let s = lane.get(i).unwrap();
                        out.push((
                            s.start,
                            s.end,
                            t.string(s.name).to_string(),
                            t.args(s.args).to_string(),
                        ));
                    }
                }
            }
            out
        };
        assert_eq!(slices(&back), slices(&t), "{}", path.display());
    }
}
