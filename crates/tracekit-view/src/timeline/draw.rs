//! The timeline's answers that are drawn: the tracks, a window's slices,
//! instants, counters and flows, a slice's details, a range's selection and
//! call tree, and a search. The large ones are written digit by digit rather
//! than through serde: a zoomed-out window is tens of thousands of items.

use std::fmt::Write as _;

use tracekit_columns::Spill;
use tracekit_timeline::lane::{Drawn, OPEN};
use tracekit_timeline::report;
use tracekit_timeline::{FlowPhase, Position, Timeline, TrackKind};

use super::{LAYOUT, MAX_FLOWS};
use crate::json::to_json;

/// A JSON string literal.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

pub(super) fn tracks_json(name: &str, t: &Timeline, heap: bool) -> String {
    let tracks: Vec<serde_json::Value> = t
        .tracks()
        .iter()
        .enumerate()
        .map(|(i, tr)| {
            serde_json::json!({
                "id": i,
                "kind": tr.kind.name(),
                "pid": tr.pid,
                "tid": tr.tid,
                "name": tr.name.map(|n| t.string(n)),
                "process": t.process_name(tr.pid),
                "lanes": tr.lanes.len(),
                "slices": tr.slices(),
                "instants": tr.instants.len(),
                "heap_domain": tr.heap_domain,
            })
        })
        .collect();
    let counters: Vec<serde_json::Value> = t
        .counters()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (lo, hi) = c
                .values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            serde_json::json!({
                "id": i,
                "pid": c.pid,
                "process": t.process_name(c.pid),
                "name": t.string(c.name),
                "counter": c.id,
                "series": t.string(c.series),
                "points": c.times.len(),
                "min": lo.is_finite().then_some(lo),
                "max": hi.is_finite().then_some(hi),
            })
        })
        .collect();
    let first = t.first_ns().unwrap_or(0);
    let warnings: Vec<String> = t.warnings().iter().map(ToString::to_string).collect();
    to_json(
        &serde_json::json!({
            "name": name,
            "first_ns": t.first_ns(),
            "span_ns": t.last_ns().map(|l| l.saturating_sub(first)),
            "records": t.records(),
            "slices": t.slices(),
            "flows": t.flows().len(),
            "damage": t.error().map(ToString::to_string),
            "warnings": warnings,
            "tracks": tracks,
            "counters": counters,
            "heap": heap,
        }),
        LAYOUT,
    )
}

/// Names used in an answer, each once, with their texts at the end.
#[derive(Default)]
struct Names(Vec<u32>, rustc_hash::FxHashSet<u32>);

impl Names {
    fn add(&mut self, id: u32) -> u32 {
        if self.1.insert(id) {
            self.0.push(id);
        }
        id
    }

    fn json(&self, t: &Timeline) -> String {
        let mut out = String::from("{");
        for (i, id) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "\"{id}\":{}", quoted(t.string(*id)));
        }
        out.push('}');
        out
    }
}

/// Appends `v` in decimal.
fn number(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// The window `from..to` on `px` pixels of `tracks`, each with its outer
/// lanes up to the count given.
pub(super) fn window(
    t: &Timeline,
    from: u64,
    to: u64,
    px: u64,
    tracks: &[(usize, usize)],
) -> String {
    let first = t.first_ns().unwrap_or(0);
    let (a, b) = (first.saturating_add(from), first.saturating_add(to));
    let ns_per_px = (to - from).div_ceil(px).max(1);
    let rel = |v: u64| v.saturating_sub(first);
    let mut names = Names::default();
    let mut out = String::with_capacity(1 << 16);
    let _ = write!(
        out,
        "{{\"from\":{from},\"to\":{to},\"px\":{px},\"ns_per_px\":{ns_per_px},\"tracks\":["
    );
    let mut drawn = Vec::new();
    for (n, &(ti, shown)) in tracks.iter().enumerate() {
        let Some(track) = t.tracks().get(ti) else {
            continue;
        };
        if n > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"track\":{ti},\"lanes\":[");
        for (l, lane) in track.lanes.iter().take(shown).enumerate() {
            if l > 0 {
                out.push(',');
            }
            out.push('[');
            drawn.clear();
            lane.window(a, b, ns_per_px, &mut drawn);
            for (k, d) in drawn.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                // Written digit by digit: a zoomed-out answer is tens of
                // thousands of these.
                let (start, e, name, index, count) = match *d {
                    Drawn::Slice(i) => match lane.get(i as usize) {
                        Some(s) => (s.start, s.end, s.name, i, None),
                        None => continue,
                    },
                    Drawn::Merged {
                        start,
                        end,
                        count,
                        longest,
                    } => {
                        let name = lane.get(longest as usize).map_or(0, |s| s.name);
                        (start, end, name, longest, Some(count))
                    }
                };
                out.push('[');
                number(&mut out, rel(start));
                out.push(',');
                match e {
                    OPEN => out.push_str("null"),
                    e => number(&mut out, rel(e)),
                }
                out.push(',');
                number(&mut out, u64::from(names.add(name)));
                out.push(',');
                number(&mut out, u64::from(index));
                if let Some(count) = count {
                    out.push(',');
                    number(&mut out, u64::from(count));
                }
                out.push(']');
            }
            out.push(']');
        }
        out.push_str("],\"instants\":[");
        // One instant per pixel: the first in it.
        let instants = &track.instants;
        let mut i = instants.partition_point(|x| x.time < a);
        let mut k = 0;
        while let Some(x) = instants.get(i).filter(|x| x.time < b) {
            if k > 0 {
                out.push(',');
            }
            k += 1;
            let _ = write!(out, "[{},{},{i}]", rel(x.time), names.add(x.name));
            // The next pixel's start, or the end of the clock: at least this
            // instant is passed.
            let next = (x.time - (x.time - a) % ns_per_px).saturating_add(ns_per_px);
            i += instants[i..].partition_point(|y| y.time < next).max(1);
        }
        out.push_str("]}");
    }
    out.push_str("],\"counters\":[");
    for (ci, c) in t.counters().iter().enumerate() {
        if ci > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"counter\":{ci},\"points\":[");
        // Per pixel, the lowest and highest value; and the value before the
        // range, so that the line starts at its left edge. A counter's samples
        // are in the order of their records, which threads interleave: each
        // goes to its pixel wherever it comes.
        let mut pixels: Vec<Option<(f64, f64)>> = vec![None; px as usize];
        let mut before: Option<(u64, f64)> = None;
        for (&time, &v) in c.times.iter().zip(&c.values) {
            if time < a {
                if before.is_none_or(|(bt, _)| time >= bt) {
                    before = Some((time, v));
                }
                continue;
            }
            if time >= b {
                continue;
            }
            let p = ((time - a) / ns_per_px) as usize;
            match pixels.get_mut(p) {
                Some(Some((lo, hi))) => {
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                }
                Some(slot) => *slot = Some((v, v)),
                None => {}
            }
        }
        let mut k = 0;
        let mut point = |out: &mut String, time: u64, lo: f64, hi: f64| {
            if !(lo.is_finite() && hi.is_finite()) {
                return;
            }
            if k > 0 {
                out.push(',');
            }
            k += 1;
            let _ = write!(out, "[{},{lo},{hi}]", rel(time));
        };
        if let Some((time, v)) = before {
            point(&mut out, time, v, v);
        }
        for (p, pixel) in pixels.into_iter().enumerate() {
            if let Some((lo, hi)) = pixel {
                point(&mut out, a + p as u64 * ns_per_px, lo, hi);
            }
        }
        out.push_str("]}");
    }
    out.push_str("],\"flows\":[");
    let mut shown = 0;
    let mut more = false;
    for f in t.flows() {
        let inside = f.points.windows(2).any(|w| w[0].time < b && w[1].time >= a)
            || (f.points.len() == 1 && f.points[0].time >= a && f.points[0].time < b);
        if !inside
            || !f
                .points
                .iter()
                .any(|p| tracks.iter().any(|&(t, _)| t == p.track))
        {
            continue;
        }
        if shown == MAX_FLOWS {
            more = true;
            break;
        }
        if shown > 0 {
            out.push(',');
        }
        shown += 1;
        out.push('[');
        for (k, p) in f.points.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let phase = match p.phase {
                FlowPhase::Begin => 'b',
                FlowPhase::Step => 's',
                FlowPhase::End => 'e',
            };
            // The depth of the slice it leaves from or arrives at: the
            // deepest one on its track open at its time.
            let depth = t.tracks().get(p.track).and_then(|tr| {
                tr.lanes
                    .iter()
                    .rposition(|lane| !lane.range(p.time, p.time.saturating_add(1)).is_empty())
            });
            let depth = depth.map_or("null".to_string(), |d| d.to_string());
            let _ = write!(out, "[{},{},\"{phase}\",{depth}]", p.track, rel(p.time));
        }
        out.push(']');
    }
    let _ = write!(out, "],\"flows_cut\":{more},\"names\":{}}}", names.json(t));
    out
}

pub(super) fn details(t: &Timeline, at: Position) -> Option<String> {
    let (s, self_ns) = t.slice_at(at)?;
    let track = t.tracks().get(at.track)?;
    let first = t.first_ns().unwrap_or(0);
    let end = (s.end != OPEN).then(|| s.end.saturating_sub(first));
    let args: serde_json::Value =
        serde_json::from_str(t.args(s.args)).unwrap_or(serde_json::Value::Null);
    // An async slice's id, and the async slices of the span it was made
    // under and of the one it runs within (the task polling it: its `parent`
    // and `within` arguments, which the tracing layer writes), to follow it.
    let id = (track.lanes.get(at.lane)).and_then(|l| l.id(at.index));
    let link = |arg: &str| {
        let p = async_slice(t, track.pid, args.get(arg)?.as_u64()?)?;
        let name = t.slice_at(p).map(|(s, _)| t.string(s.name));
        Some(serde_json::json!({"track": p.track, "lane": p.lane, "index": p.index, "name": name}))
    };
    let (parent, within) = (link("parent"), link("within"));
    Some(to_json(
        &serde_json::json!({
            "track": at.track,
            "lane": at.lane,
            "index": at.index,
            "name": t.string(s.name),
            "category": t.string(s.category),
            "kind": track.kind.name(),
            "pid": track.pid,
            "tid": track.tid,
            "thread": track.name.map(|n| t.string(n)),
            "start": s.start.saturating_sub(first),
            "start_ns": s.start,
            "end": end,
            "duration_ns": end.map(|e| e.saturating_sub(s.start.saturating_sub(first))),
            "self_ns": self_ns,
            "open": s.end == OPEN,
            "args": args,
            "async_id": id,
            "parent": parent,
            "within": within,
        }),
        LAYOUT,
    ))
}

/// Where the async slice of id `id` of process `pid` is, if there is one.
fn async_slice(t: &Timeline, pid: u64, id: u64) -> Option<Position> {
    let tracks = t.tracks().iter().enumerate();
    tracks
        .filter(|(_, tr)| tr.kind == TrackKind::Async && tr.pid == pid)
        .find_map(|(ti, tr)| {
            tr.lanes.iter().enumerate().find_map(|(li, lane)| {
                let index = (0..lane.len()).find(|&i| lane.id(i) == Some(id))?;
                Some(Position {
                    track: ti,
                    lane: li,
                    index,
                })
            })
        })
}

/// What a `selection` or a `flame` is compared with: a range of some tracks
/// of a timeline (nanoseconds from its first time).
pub(super) struct Base<'a> {
    pub(super) timeline: &'a Timeline,
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) tracks: Vec<usize>,
}

/// `from..to` (nanoseconds from `t`'s first time) on `t`'s clock.
fn on_clock(t: &Timeline, from: u64, to: u64) -> (u64, u64) {
    let first = t.first_ns().unwrap_or(0);
    (first.saturating_add(from), first.saturating_add(to))
}

pub(super) fn selection(
    t: &Timeline,
    from: u64,
    to: u64,
    tracks: &[usize],
    base: Option<&Base<'_>>,
) -> String {
    let range = on_clock(t, from, to);
    let names = t.selection(tracks, Some(range));
    // What the slices allocated, when the trace's spans carry it.
    let allocated = tracekit_timeline::allocated::has_allocations(t)
        .then(|| tracekit_timeline::allocated::by_name(t, tracks, Some(range)));
    let rows: Vec<serde_json::Value> = names
        .iter()
        .map(|n| {
            let mut row = serde_json::json!({
                "name": t.string(n.name),
                "count": n.count,
                "total_ns": n.total_ns,
                "self_ns": n.self_ns,
                "avg_ns": n.total_ns.checked_div(n.count).unwrap_or(0),
                "max_ns": n.max_ns,
            });
            if let Some(a) = &allocated {
                row["allocated"] = serde_json::json!(a.get(&n.name).copied().unwrap_or_default());
            }
            row
        })
        .collect();
    let mut answer = serde_json::json!({
        "from": from,
        "to": to,
        "tracks": tracks,
        "slices": names.iter().map(|n| n.count).sum::<u64>(),
        "names": rows,
    });
    if let Some(b) = base {
        let a = b.timeline;
        let rows_a = report::by_name(a, &b.tracks, Some(on_clock(a, b.from, b.to)));
        let rows_b = report::by_name(t, tracks, Some(range));
        answer["base"] = serde_json::json!({
            "from": b.from,
            "to": b.to,
            "tracks": b.tracks,
            "slices": rows_a.iter().map(|n| n.count).sum::<u64>(),
        });
        answer["changes"] = serde_json::json!(report::changes(&rows_a, &rows_b));
    }
    to_json(&answer, LAYOUT)
}

/// Nodes of a call tree under this share of the whole are left out.
const FLAME_SHARE: u64 = 5_000;

pub(super) fn flame(
    t: &Timeline,
    from: u64,
    to: u64,
    tracks: &[usize],
    base: Option<&Base<'_>>,
    spill: &Spill,
) -> String {
    if let Some(base) = base {
        return flame_diff(t, from, to, tracks, base, spill);
    }
    let range = on_clock(t, from, to);
    let tree = t.flame(tracks, range, spill);
    let whole: u64 = tree
        .iter()
        .filter(|n| n.parent.is_none())
        .map(|n| n.total_ns)
        .sum();
    let least = (whole / FLAME_SHARE).max(1);
    let mut names = Names::default();
    let out = pruned(
        tree.iter(),
        |node| node.parent,
        |node| node.total_ns >= least || whole == 0,
        |out, node, parent| {
            let name = names.add(node.name);
            let _ = write!(out, "[{parent},{name},{},{}]", node.total_ns, node.self_ns);
        },
    );
    format!(
        "{{\"from\":{from},\"to\":{to},\"total_ns\":{whole},\"nodes\":[{out}],\"names\":{}}}",
        names.json(t)
    )
}

/// A range's call tree merged with a baseline's by paths of names: each node
/// `[parent, name, total, self, base total, base self]`, parents first; nodes
/// under 1/5000 of the larger whole in both are left out.
fn flame_diff(
    t: &Timeline,
    from: u64,
    to: u64,
    tracks: &[usize],
    base: &Base<'_>,
    spill: &Spill,
) -> String {
    let a = base.timeline;
    // (parent, name, [total, self] in A, in B)
    type Merged<'n> = (Option<u32>, &'n str, [[u64; 2]; 2]);
    let mut merged: Vec<Merged<'_>> = Vec::new();
    let mut index: rustc_hash::FxHashMap<(Option<u32>, &str), u32> = Default::default();
    let trees = [
        (
            a,
            a.flame(&base.tracks, on_clock(a, base.from, base.to), spill),
        ),
        (t, t.flame(tracks, on_clock(t, from, to), spill)),
    ];
    for (side, (timeline, tree)) in trees.iter().enumerate() {
        // The merged node of each of this tree's nodes, parents first.
        let mut map: Vec<u32> = Vec::with_capacity(tree.len());
        for node in tree.iter() {
            let parent = node.parent.and_then(|p| map.get(p as usize).copied());
            let name = timeline.string(node.name);
            let i = *index.entry((parent, name)).or_insert_with(|| {
                merged.push((parent, name, [[0; 2]; 2]));
                (merged.len() - 1) as u32
            });
            let w = &mut merged[i as usize].2[side];
            w[0] = w[0].saturating_add(node.total_ns);
            w[1] = w[1].saturating_add(node.self_ns);
            map.push(i);
        }
    }
    let whole = |side: usize| -> u64 {
        (merged.iter())
            .filter(|m| m.0.is_none())
            .map(|m| m.2[side][0])
            .sum()
    };
    let (whole_a, whole_b) = (whole(0), whole(1));
    let least = (whole_a.max(whole_b) / FLAME_SHARE).max(1);
    let mut names = Vec::<&str>::new();
    let mut name_ids: rustc_hash::FxHashMap<&str, usize> = Default::default();
    let out = pruned(
        merged.iter(),
        |m| m.0,
        |(_, _, [wa, wb])| wa[0].max(wb[0]) >= least,
        |out, &&(_, name, [wa, wb]), parent| {
            let id = *name_ids.entry(name).or_insert_with(|| {
                names.push(name);
                names.len() - 1
            });
            let _ = write!(
                out,
                "[{parent},{id},{},{},{},{}]",
                wb[0], wb[1], wa[0], wa[1]
            );
        },
    );
    let names: Vec<String> = names.iter().map(|s| quoted(s)).collect();
    format!(
        "{{\"from\":{from},\"to\":{to},\"total_ns\":{whole_b},\"base_total_ns\":{whole_a},\"nodes\":[{out}],\"names\":[{}]}}",
        names.join(",")
    )
}

/// The nodes of a call tree (parents first) that are `heavy` and whose
/// parent was kept, each written by `write` with its parent's index among the
/// kept ones (`null` for a root), separated by commas. A child weighs no more
/// than its parent: keeping the heavy ones keeps every kept node's parent.
fn pruned<N>(
    nodes: impl IntoIterator<Item = N>,
    parent: impl Fn(&N) -> Option<u32>,
    heavy: impl Fn(&N) -> bool,
    mut write: impl FnMut(&mut String, &N, &str),
) -> String {
    // The kept nodes' places among the kept, by index: as many as the answer
    // shows, however many the tree holds.
    let mut kept: rustc_hash::FxHashMap<u32, u32> = Default::default();
    let mut out = String::new();
    let mut n = 0u32;
    for (i, node) in nodes.into_iter().enumerate() {
        let parent = match parent(&node) {
            None => "null".to_string(),
            Some(p) => match kept.get(&p) {
                Some(&k) => k.to_string(),
                None => continue,
            },
        };
        if !heavy(&node) {
            continue;
        }
        kept.insert(i as u32, n);
        if n > 0 {
            out.push(',');
        }
        n += 1;
        write(&mut out, &node, &parent);
    }
    out
}

pub(super) fn search(t: &Timeline, text: &str, after: Option<Position>, backward: bool) -> String {
    let names = t.names_containing(text);
    let found = t.find(&names, after, backward);
    let first = t.first_ns().unwrap_or(0);
    let hit = found.and_then(|p| {
        let s = t.tracks().get(p.track)?.lanes.get(p.lane)?.get(p.index)?;
        Some(serde_json::json!({
            "track": p.track,
            "lane": p.lane,
            "index": p.index,
            "name": t.string(s.name),
            "start": s.start.saturating_sub(first),
            "end": (s.end != OPEN).then(|| s.end.saturating_sub(first)),
        }))
    });
    to_json(
        &serde_json::json!({
            "text": text,
            "matches": t.count_named(&names),
            "found": hit,
        }),
        LAYOUT,
    )
}
