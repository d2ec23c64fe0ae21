//! FXT timelines of arbitrary bytes: building one never panics, and what a
//! viewer asks of it holds together: every slice that shows in a window is
//! drawn once, a selection counts every slice it overlaps, and a search walks
//! every slice of the names searched, in order, once. A timeline written as
//! bytes reads back as the same bytes, and the input read as a timeline file
//! is an error or a timeline, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_fxt::read::Reader;
use tracekit_timeline::Timeline;
use tracekit_timeline::lane::Drawn;

fuzz_target!(|data: &[u8]| {
    let _ = Timeline::read_from(data);
    let t = Timeline::build(&mut Reader::new(data), &mut |_| {});
    let mut file = Vec::new();
    if t.write_to(&mut file).is_ok() {
        let back = Timeline::read_from(&file).expect("a timeline written reads back");
        let mut again = Vec::new();
        back.write_to(&mut again).expect("written again");
        assert_eq!(again, file);
    }
    let (first, last) = (t.first_ns().unwrap_or(0), t.last_ns().unwrap_or(0));
    let span = last.saturating_sub(first).max(1);
    let mut out = Vec::new();
    let mut overlapping = 0u64;
    for track in t.tracks() {
        for lane in &track.lanes {
            for px in [1, 7, 1000] {
                out.clear();
                lane.window(
                    first,
                    first.saturating_add(span),
                    span.div_ceil(px),
                    &mut out,
                );
                let drawn: u64 = out
                    .iter()
                    .map(|d| match d {
                        Drawn::Slice(_) => 1,
                        Drawn::Merged { count, .. } => u64::from(*count),
                    })
                    .sum();
                assert_eq!(
                    drawn,
                    lane.range(first, first.saturating_add(span)).len() as u64
                );
            }
            overlapping += lane.range(first, first.saturating_add(span)).len() as u64;
            for i in 0..lane.len() {
                let s = lane.get(i).expect("a slice of the lane");
                let _ = t.args(s.args);
                let _ = t.string(s.name);
            }
        }
    }
    for f in t.flows() {
        assert!(f.points.iter().all(|p| p.track < t.tracks().len()));
    }
    let all: Vec<usize> = (0..t.tracks().len()).collect();
    let counted: u64 = t
        .selection(&all, Some((first, first.saturating_add(span))))
        .iter()
        .map(|n| n.count)
        .sum();
    assert_eq!(counted, overlapping);
    let every: u64 = t.selection(&all, None).iter().map(|n| n.count).sum();
    assert_eq!(every, t.slices() as u64);
    let names = t.names_containing("");
    let mut at = None;
    let mut steps = 0;
    while let Some(p) = t.find(&names, at, false) {
        assert!(at.is_none_or(|a| a != p));
        at = Some(p);
        steps += 1;
        assert!(steps <= t.slices());
    }
    assert_eq!(steps, t.slices());
});
