//! The timeline viewer's answers to arbitrary traces and parameters: every
//! answer is JSON or a refusal of the parameters, never a panic, and the
//! range's call tree weighs no more than the range on each thread.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_fxt::read::Reader;
use tracekit_fxt::stats::Counted;
use tracekit_timeline::Timeline;
use tracekit_view::Api;
use tracekit_view::timeline::{TimelineEndpoint, TimelineTrace, stats_json};

fuzz_target!(|data: &[u8]| {
    // The last bytes choose the parameters; the rest is the trace.
    let (trace, head) = data.split_at(data.len().saturating_sub(16));
    let mut reader = Reader::new(trace);
    let mut counted = Counted::new(&mut reader);
    let timeline = Timeline::build(&mut counted, &mut |_| {});
    let stats = stats_json(&counted.stats());
    let tracks = timeline.tracks().len();
    let t = TimelineTrace::new("fuzz".into(), timeline, stats);
    let byte = |i: usize| u64::from(head.get(i).copied().unwrap_or(0));
    let from = byte(0) << byte(1) % 40;
    let to = from + (byte(2) << byte(3) % 40);
    let px = byte(4) * 64 + 1;
    let (track, lane, index) = (byte(5), byte(6), byte(7) * 256 + byte(8));
    let text = String::from_utf8_lossy(head.get(9..12).unwrap_or(b"a")).into_owned();
    let p = |pairs: &[(&str, String)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    };
    let all = (0..tracks)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let asks = [
        (TimelineEndpoint::Stats, p(&[])),
        (TimelineEndpoint::Tracks, p(&[])),
        (
            TimelineEndpoint::Window,
            p(&[
                ("from", from.to_string()),
                ("to", to.to_string()),
                ("px", px.to_string()),
            ]),
        ),
        (
            TimelineEndpoint::Details,
            p(&[
                ("track", track.to_string()),
                ("lane", lane.to_string()),
                ("index", index.to_string()),
            ]),
        ),
        (
            TimelineEndpoint::Selection,
            p(&[
                ("from", from.to_string()),
                ("to", to.to_string()),
                ("tracks", all.clone()),
            ]),
        ),
        (
            TimelineEndpoint::Flame,
            p(&[
                ("from", from.to_string()),
                ("to", to.to_string()),
                ("tracks", all.clone()),
            ]),
        ),
        (TimelineEndpoint::Search, p(&[("text", text.clone())])),
        (
            TimelineEndpoint::Search,
            p(&[
                ("text", text),
                ("after", format!("{track},{lane},{index}")),
                ("backward", "true".into()),
            ]),
        ),
        (TimelineEndpoint::Slices, p(&[("limit", "0".into())])),
        (TimelineEndpoint::Top, p(&[("limit", "0".into())])),
    ];
    for (endpoint, params) in asks {
        if let Ok(answer) = t
            .query(endpoint, params)
            .and_then(|q| t.answer(endpoint, &q))
        {
            let v: serde_json::Value = serde_json::from_str(&answer).expect("an answer is JSON");
            if endpoint == TimelineEndpoint::Flame {
                let total = v["total_ns"].as_u64().expect("a total");
                assert!(total <= (to - from).saturating_mul(tracks as u64));
            }
        }
    }
});
