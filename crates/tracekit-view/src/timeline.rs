//! The JSON answers behind the timeline page: a trace of slices (FXT, or perf
//! data decoded into it) held as a [`Timeline`], asked what a viewport of N
//! pixels shows, what a slice is, what a range holds and where a name is. No
//! I/O: the timeline is in memory, a request a list of named parameters
//! ([`Api`]).
//!
//! Times in the page's endpoints are nanoseconds from the trace's first time
//! (integers, so that a browser's doubles hold them exactly for 104 days of
//! trace). `slices` and `top` answer what `tracekit fxt slices --json` and
//! `tracekit fxt top --json` print, on the trace's own clock.
//!
//! | endpoint | answers | parameters |
//! | --- | --- | --- |
//! | `stats` | `fxt stats --json` of the trace | none |
//! | `tracks` | the trace's name, span, processes, tracks, counters, and damage | none |
//! | `window` | what `from..to` drawn on `px` pixels shows of some tracks: per lane, one item per slice of at least a pixel and one merged item per pixel for the rest; instants (one per pixel), counters (min and max per pixel) and flows in the range | `from`, `to`, `px`, `tracks` (`1,2,5`; default all) |
//! | `details` | one slice: name, category, track, times, self time, arguments | `track`, `lane`, `index` |
//! | `selection` | the slices of a range on some tracks, by name (count, total, self, average, max), as Perfetto's area selection sums them | `from`, `to`, `tracks` |
//! | `flame` | the range's call tree: its slices merged by their path of names, each with the time it spends in the range (nodes under 1/5000 of the whole left out) | `from`, `to`, `tracks` |
//! | `search` | the next (or previous) slice whose name contains a text, and how many there are | `text`, `after` (`track,lane,index`), `backward` |
//! | `slices` | `fxt slices --json` | `between` (`T1,T2`, as `1.5s,2s`), `thread` (repeatable), `name`, `limit` |
//! | `top` | `fxt top --json` | `between`, `thread`, `limit` |
//!
//! In a `window` answer a slice drawn as itself is `[start, end, name, index]`
//! and a merged run `[start, end, name, index, count]` (its longest slice's
//! name and index); `end` is `null` for a slice still open at the end of the
//! trace. Names are ids, with their texts in the answer's `names`. A flow is
//! its events, each `[track, time, phase, depth]`: the phase `b`, `s` or `e`,
//! the depth that of the deepest slice open on the track at its time (`null`
//! for none), where the arrow leaves or arrives.

use std::fmt::Write as _;

use tracekit_fxt::stats::Stats;
use tracekit_timeline::lane::{Drawn, OPEN};
use tracekit_timeline::report::{SlicesQuery, TopQuery};
use tracekit_timeline::{FlowPhase, Position, Timeline};

use crate::api::{Api, Params};
use crate::json::{Layout, to_json};

/// How the answers made from plain data are laid out: as the drawing answers
/// written by hand are.
const LAYOUT: Layout = Layout::Compact;

/// Most flows a window answer holds.
const MAX_FLOWS: usize = 2_000;

/// Most pixels a window may be asked for.
const MAX_PX: u64 = 16_384;

/// A timeline being served.
pub struct TimelineTrace {
    name: String,
    timeline: Timeline,
    stats: String,
    tracks: String,
}

/// What a request to a timeline asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimelineEndpoint {
    /// `fxt stats --json`.
    Stats,
    /// The tracks and what else the page draws first.
    Tracks,
    /// What a viewport shows.
    Window,
    /// One slice.
    Details,
    /// A range's slices by name.
    Selection,
    /// A range's call tree.
    Flame,
    /// The next or previous slice of a name.
    Search,
    /// `fxt slices --json`.
    Slices,
    /// `fxt top --json`.
    Top,
}

impl TimelineEndpoint {
    /// The parameters it takes.
    fn parameters(self) -> &'static [&'static str] {
        match self {
            TimelineEndpoint::Stats | TimelineEndpoint::Tracks => &[],
            TimelineEndpoint::Window => &["from", "to", "px", "tracks"],
            TimelineEndpoint::Details => &["track", "lane", "index"],
            TimelineEndpoint::Selection | TimelineEndpoint::Flame => &["from", "to", "tracks"],
            TimelineEndpoint::Search => &["text", "after", "backward"],
            TimelineEndpoint::Slices => &["between", "thread", "name", "limit"],
            TimelineEndpoint::Top => &["between", "thread", "limit"],
        }
    }
}

/// Why a request has no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The parameters are not the endpoint's, or their values are not valid.
    #[error("{0}")]
    BadParameters(String),
}

impl Api for TimelineTrace {
    type Endpoint = TimelineEndpoint;
    /// The parameters, checked, in the order asked.
    type Query = Params;
    type Error = Error;

    const KIND: &'static str = "timeline";

    const PAGE: &'static str = "/timeline.html";

    const ENDPOINTS: &'static [(&'static str, TimelineEndpoint)] = &[
        ("stats", TimelineEndpoint::Stats),
        ("tracks", TimelineEndpoint::Tracks),
        ("window", TimelineEndpoint::Window),
        ("details", TimelineEndpoint::Details),
        ("selection", TimelineEndpoint::Selection),
        ("flame", TimelineEndpoint::Flame),
        ("search", TimelineEndpoint::Search),
        ("slices", TimelineEndpoint::Slices),
        ("top", TimelineEndpoint::Top),
    ];

    fn is_ready(endpoint: TimelineEndpoint) -> bool {
        matches!(endpoint, TimelineEndpoint::Stats | TimelineEndpoint::Tracks)
    }

    fn status(_: &Error) -> u16 {
        400
    }

    fn query(&self, endpoint: TimelineEndpoint, params: Params) -> Result<Params, Error> {
        // The memtrace page's command-line form has no meaning here.
        if params.iter().any(|(name, _)| name == "arg") {
            return Err(bad(
                "a timeline's parameters are named: ?from=0&to=1000".to_string()
            ));
        }
        Checked::check(endpoint, &params)?;
        Ok(params)
    }

    fn answer(&self, endpoint: TimelineEndpoint, params: &Params) -> Result<String, Error> {
        self.answer_checked(endpoint, Checked(params))
    }
}

impl TimelineTrace {
    /// A timeline named `name`, with the counts of the records it was built
    /// from as `fxt stats --json` prints them ([`stats_json`]).
    pub fn new(name: String, timeline: Timeline, stats: String) -> TimelineTrace {
        let tracks = tracks_json(&name, &timeline);
        TimelineTrace {
            name,
            timeline,
            stats,
            tracks,
        }
    }

    /// Its name, as its answers give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The timeline.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The answer of `endpoint` to `p`.
    fn answer_checked(&self, endpoint: TimelineEndpoint, p: Checked<'_>) -> Result<String, Error> {
        let t = &self.timeline;
        Ok(match endpoint {
            TimelineEndpoint::Stats => self.stats.clone(),
            TimelineEndpoint::Tracks => self.tracks.clone(),
            TimelineEndpoint::Window => {
                let (from, to) = (p.time("from")?.unwrap_or(0), p.time("to")?);
                let to = to.unwrap_or_else(|| self.span());
                let px = p.number("px")?.unwrap_or(1000);
                if px == 0 || px > MAX_PX {
                    return Err(bad(format!("px: between 1 and {MAX_PX}")));
                }
                if to <= from {
                    return Err(bad("to: after from".to_string()));
                }
                let tracks = p.tracks(t)?;
                window(t, from, to, px, &tracks)
            }
            TimelineEndpoint::Details => {
                let at = Position {
                    track: p.required("track")?,
                    lane: p.required("lane")?,
                    index: p.required("index")?,
                };
                details(t, at).ok_or_else(|| bad("no such slice".to_string()))?
            }
            TimelineEndpoint::Selection | TimelineEndpoint::Flame => {
                let from = p.time("from")?.unwrap_or(0);
                let to = p.time("to")?.unwrap_or_else(|| self.span());
                if to < from {
                    return Err(bad("to: not before from".to_string()));
                }
                let tracks = p.tracks(t)?;
                match endpoint {
                    TimelineEndpoint::Flame => flame(t, from, to, &tracks),
                    _ => selection(t, from, to, &tracks),
                }
            }
            TimelineEndpoint::Search => {
                let text = p.get("text").unwrap_or_default();
                if text.is_empty() {
                    return Err(bad("text: what to search for".to_string()));
                }
                let after = p.get("after").map(position).transpose()?;
                let backward = p.flag("backward")?;
                search(t, text, after, backward)
            }
            TimelineEndpoint::Slices => to_json(
                &SlicesQuery {
                    between: p.between()?,
                    threads: p.numbers("thread")?,
                    name: p.get("name").map(str::to_string),
                    limit: p.number("limit")?.map_or(50, |n| n as usize),
                }
                .run(t),
                LAYOUT,
            ),
            TimelineEndpoint::Top => to_json(
                &TopQuery {
                    between: p.between()?,
                    threads: p.numbers("thread")?,
                    limit: p.number("limit")?.map_or(20, |n| n as usize),
                }
                .run(t),
                LAYOUT,
            ),
        })
    }

    /// The trace's span, nanoseconds.
    fn span(&self) -> u64 {
        match (self.timeline.first_ns(), self.timeline.last_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a).max(1),
            _ => 1,
        }
    }
}

/// The counts of a trace's records as `fxt stats --json` prints them.
pub fn stats_json(stats: &Stats) -> String {
    to_json(stats, LAYOUT)
}

fn bad(message: String) -> Error {
    Error::BadParameters(message)
}

/// A request's parameters, checked against its endpoint's.
struct Checked<'a>(&'a [(String, String)]);

impl<'a> Checked<'a> {
    fn check(endpoint: TimelineEndpoint, params: &'a [(String, String)]) -> Result<Self, Error> {
        let known = endpoint.parameters();
        for (name, _) in params {
            if !known.contains(&name.as_str()) {
                let names = match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                };
                return Err(bad(format!(
                    "unknown parameter {name:?}: this endpoint's parameters are {names}"
                )));
            }
        }
        Ok(Checked(params))
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> Result<Option<u64>, Error> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("{name}={v}: not a whole number")))
            })
            .transpose()
    }

    fn required(&self, name: &str) -> Result<usize, Error> {
        self.number(name)?
            .map(|n| n as usize)
            .ok_or_else(|| bad(format!("{name}: required")))
    }

    /// A time in nanoseconds from the trace's first time: a whole number of
    /// nanoseconds, or a time with its unit (`1.5ms`).
    fn time(&self, name: &str) -> Result<Option<u64>, Error> {
        self.get(name).map(|v| nanoseconds(name, v)).transpose()
    }

    fn numbers(&self, name: &str) -> Result<Vec<u64>, Error> {
        let mut out = Vec::new();
        for (n, v) in self.0 {
            if n == name {
                for part in v.split(',').filter(|p| !p.is_empty()) {
                    out.push(
                        part.parse()
                            .map_err(|_| bad(format!("{name}={v}: not a whole number")))?,
                    );
                }
            }
        }
        Ok(out)
    }

    fn flag(&self, name: &str) -> Result<bool, Error> {
        match self.get(name) {
            None | Some("false" | "0") => Ok(false),
            Some("" | "true" | "1") => Ok(true),
            Some(v) => Err(bad(format!(
                "{name}={v}: a flag is on given alone or as =true, off as =false"
            ))),
        }
    }

    fn between(&self) -> Result<Option<(u64, u64)>, Error> {
        let Some(v) = self.get("between") else {
            return Ok(None);
        };
        let Some((a, b)) = v.split_once(',') else {
            return Err(bad(format!("between={v}: two times, as 1s,2s")));
        };
        let (a, b) = (nanoseconds("between", a)?, nanoseconds("between", b)?);
        if a > b {
            return Err(bad(format!("between={v}: the first is after the second")));
        }
        Ok(Some((a, b)))
    }

    /// The tracks asked for (all of them when none are), each checked.
    fn tracks(&self, t: &Timeline) -> Result<Vec<usize>, Error> {
        let Some(v) = self.get("tracks") else {
            return Ok((0..t.tracks().len()).collect());
        };
        let mut out = Vec::new();
        for part in v.split(',').filter(|p| !p.is_empty()) {
            match part.parse::<usize>() {
                Ok(i) if i < t.tracks().len() => out.push(i),
                _ => return Err(bad(format!("tracks={v}: {part} is not a track"))),
            }
        }
        Ok(out)
    }
}

fn nanoseconds(name: &str, v: &str) -> Result<u64, Error> {
    if let Ok(n) = v.parse::<u64>() {
        return Ok(n);
    }
    tracekit_analysis::parse_time_ns(v).map_err(|e| bad(format!("{name}={v}: {e}")))
}

fn position(v: &str) -> Result<Position, Error> {
    let mut parts = v.split(',').map(str::parse::<usize>);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Ok(track)), Some(Ok(lane)), Some(Ok(index)), None) => {
            Ok(Position { track, lane, index })
        }
        _ => Err(bad(format!("after={v}: track,lane,index"))),
    }
}

/// A JSON string literal.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn tracks_json(name: &str, t: &Timeline) -> String {
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

fn window(t: &Timeline, from: u64, to: u64, px: u64, tracks: &[usize]) -> String {
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
    for (n, &ti) in tracks.iter().enumerate() {
        let Some(track) = t.tracks().get(ti) else {
            continue;
        };
        if n > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"track\":{ti},\"lanes\":[");
        for (l, lane) in track.lanes.iter().enumerate() {
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
            let next = x.time - (x.time - a) % ns_per_px + ns_per_px;
            i += instants[i..].partition_point(|y| y.time < next);
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
        // range, so that the line starts at its left edge.
        let mut pixels: Vec<(u64, f64, f64)> = Vec::new();
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
            let p = (time - a) / ns_per_px;
            match pixels.last_mut() {
                Some((q, lo, hi)) if *q == p => {
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                }
                _ => pixels.push((p, v, v)),
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
        for (p, lo, hi) in pixels {
            point(&mut out, a + p * ns_per_px, lo, hi);
        }
        out.push_str("]}");
    }
    out.push_str("],\"flows\":[");
    let mut shown = 0;
    let mut more = false;
    for f in t.flows() {
        let inside = f.points.windows(2).any(|w| w[0].time < b && w[1].time >= a)
            || (f.points.len() == 1 && f.points[0].time >= a && f.points[0].time < b);
        if !inside || !f.points.iter().any(|p| tracks.contains(&p.track)) {
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

fn details(t: &Timeline, at: Position) -> Option<String> {
    let (s, self_ns) = t.slice_at(at)?;
    let track = t.tracks().get(at.track)?;
    let first = t.first_ns().unwrap_or(0);
    let end = (s.end != OPEN).then(|| s.end.saturating_sub(first));
    let args: serde_json::Value =
        serde_json::from_str(t.args(s.args)).unwrap_or(serde_json::Value::Null);
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
        }),
        LAYOUT,
    ))
}

fn selection(t: &Timeline, from: u64, to: u64, tracks: &[usize]) -> String {
    let first = t.first_ns().unwrap_or(0);
    let range = (first.saturating_add(from), first.saturating_add(to));
    let names = t.selection(tracks, Some(range));
    let rows: Vec<serde_json::Value> = names
        .iter()
        .map(|n| {
            serde_json::json!({
                "name": t.string(n.name),
                "count": n.count,
                "total_ns": n.total_ns,
                "self_ns": n.self_ns,
                "avg_ns": n.total_ns.checked_div(n.count).unwrap_or(0),
                "max_ns": n.max_ns,
            })
        })
        .collect();
    to_json(
        &serde_json::json!({
            "from": from,
            "to": to,
            "tracks": tracks,
            "slices": names.iter().map(|n| n.count).sum::<u64>(),
            "names": rows,
        }),
        LAYOUT,
    )
}

/// Nodes of a call tree under this share of the whole are left out.
const FLAME_SHARE: u64 = 5_000;

fn flame(t: &Timeline, from: u64, to: u64, tracks: &[usize]) -> String {
    let first = t.first_ns().unwrap_or(0);
    let range = (first.saturating_add(from), first.saturating_add(to));
    let tree = t.flame(tracks, range);
    let whole: u64 = tree
        .iter()
        .filter(|n| n.parent.is_none())
        .map(|n| n.total_ns)
        .sum();
    let least = whole / FLAME_SHARE;
    // A child weighs no more than its parent: keeping the heavy ones keeps
    // every kept node's parent.
    let mut kept = vec![u32::MAX; tree.len()];
    let mut names = Names::default();
    let mut out = String::new();
    let mut n = 0u32;
    for (i, node) in tree.iter().enumerate() {
        let parent = match node.parent {
            None => None,
            Some(p) => match kept.get(p as usize) {
                Some(&k) if k != u32::MAX => Some(k),
                _ => continue,
            },
        };
        if node.total_ns < least.max(1) && whole > 0 {
            continue;
        }
        kept[i] = n;
        if n > 0 {
            out.push(',');
        }
        n += 1;
        let parent = parent.map_or("null".to_string(), |p| p.to_string());
        let _ = write!(
            out,
            "[{parent},{},{},{}]",
            names.add(node.name),
            node.total_ns,
            node.self_ns
        );
    }
    format!(
        "{{\"from\":{from},\"to\":{to},\"total_ns\":{whole},\"nodes\":[{out}],\"names\":{}}}",
        names.json(t)
    )
}

fn search(t: &Timeline, text: &str, after: Option<Position>, backward: bool) -> String {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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
            for (ti, track) in t.timeline().tracks().iter().enumerate() {
                let first = t.timeline().first_ns().unwrap();
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
        assert!(
            refuse(TimelineEndpoint::Window, &[("nope", "1")]).contains("from, to, px, tracks")
        );
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
        // Times with units are times from the trace's first time.
        let top = ask(
            &t,
            TimelineEndpoint::Top,
            &[("between", "0,1us"), ("limit", "0")],
        );
        assert_eq!(top["slices"], 11 + 11);
    }
}
