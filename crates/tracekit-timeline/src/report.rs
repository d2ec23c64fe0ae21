//! What `tracekit fxt top` and `tracekit fxt slices` print: the slices of a
//! trace, or of a time range and some threads, by name (count, total, self
//! time, average, longest), or each one, as a table or as JSON ([`TopJson`],
//! [`SlicesJson`], which a viewer's answers will share).
//!
//! A top counts the slices of threads and the async slices apart, a row per
//! name and kind: a `tracing` span of a task is both (a slice per poll on the
//! thread that polled it, and one async slice for the task's life), and adding
//! the life to the polls would count the same time twice.

use std::fmt::Write as _;

use crate::{Timeline, Track, TrackKind};

/// Which slices a top counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopQuery {
    /// Only those that overlap this range, nanoseconds from the trace's first
    /// time (`None`: all).
    pub between: Option<(u64, u64)>,
    /// Only those on these threads, by koid (empty: every track, async ones
    /// included).
    pub threads: Vec<u64>,
    /// Names shown, the largest first (0: all).
    pub limit: usize,
    /// What ranks the names.
    pub by: TopOrder,
}

/// What ranks a top's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TopOrder {
    /// Total time.
    #[default]
    Total,
    /// Bytes allocated inside the slices ([`crate::allocated`]), when the
    /// trace has them.
    Allocated,
}

/// The slices of one name and kind.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NameJson {
    /// The name.
    pub name: String,
    /// `thread` (slices on a thread, nested) or `async` (async slices, which
    /// are not).
    pub kind: &'static str,
    /// Slices.
    pub count: u64,
    /// Their whole durations, nanoseconds.
    pub total_ns: u64,
    /// Their durations less their children's, nanoseconds.
    pub self_ns: u64,
    /// The average duration, nanoseconds (rounded down).
    pub avg_ns: u64,
    /// The longest one, nanoseconds.
    pub max_ns: u64,
    /// What was allocated inside them, for thread slices of a trace whose
    /// spans carry their allocations ([`crate::allocated`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated: Option<crate::allocated::Allocated>,
}

/// The answer of a [`TopQuery`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TopJson {
    /// The range counted, nanoseconds of the trace's clock (the whole trace
    /// when none was asked).
    pub from_ns: Option<u64>,
    /// Its end.
    pub to_ns: Option<u64>,
    /// The threads counted (empty: every track).
    pub threads: Vec<u64>,
    /// Slices counted, every name's.
    pub slices: u64,
    /// Rows counted: distinct names, and a name of both kinds twice.
    pub distinct_names: usize,
    /// The rows shown, the largest total first.
    pub names: Vec<NameJson>,
}

/// The slices of `tracks` that overlap `range` (on the trace's clock; `None`:
/// all), a row per name and kind, the largest total first (of equal totals,
/// thread rows first).
pub fn by_name(timeline: &Timeline, tracks: &[usize], range: Option<(u64, u64)>) -> Vec<NameJson> {
    let mut all: Vec<NameJson> = Vec::new();
    let allocated = crate::allocated::has_allocations(timeline)
        .then(|| crate::allocated::by_name(timeline, tracks, range));
    for (kind, label) in [(TrackKind::Thread, "thread"), (TrackKind::Async, "async")] {
        let of_kind: Vec<usize> = (tracks.iter().copied())
            .filter(|&i| timeline.tracks().get(i).is_some_and(|t| t.kind == kind))
            .collect();
        let rows = timeline.selection(&of_kind, range);
        all.extend(rows.into_iter().map(|n| NameJson {
            name: timeline.string(n.name).to_string(),
            kind: label,
            count: n.count,
            total_ns: n.total_ns,
            self_ns: n.self_ns,
            avg_ns: n.total_ns / n.count.max(1),
            max_ns: n.max_ns,
            allocated: match (kind, &allocated) {
                (TrackKind::Thread, Some(a)) => Some(a.get(&n.name).copied().unwrap_or_default()),
                _ => None,
            },
        }));
    }
    // Stable: of equal totals, thread rows first, each kind in its order.
    all.sort_by_key(|n| std::cmp::Reverse(n.total_ns));
    all
}

impl TopQuery {
    /// Asks `timeline`.
    pub fn run(&self, timeline: &Timeline) -> TopJson {
        let tracks: Vec<usize> = (0..timeline.tracks().len())
            .filter(|&i| on_threads(&timeline.tracks()[i], &self.threads))
            .collect();
        let range = on_clock(timeline, self.between);
        let mut all = by_name(timeline, &tracks, range);
        if self.by == TopOrder::Allocated {
            // Stable: of equal bytes, the order by total time.
            all.sort_by_key(|n| std::cmp::Reverse(n.allocated.map_or(0, |a| a.bytes)));
        }
        let slices = all.iter().map(|n| n.count).sum();
        let distinct_names = all.len();
        if self.limit > 0 {
            all.truncate(self.limit);
        }
        TopJson {
            from_ns: range.map(|r| r.0).or(timeline.first_ns()),
            to_ns: range.map(|r| r.1).or(timeline.last_ns()),
            threads: self.threads.clone(),
            slices,
            distinct_names,
            names: all,
        }
    }
}

impl TopJson {
    /// The answer as a table, durations in the unit that reads best.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let plural = |n: usize, one: &str, many: &str| match n {
            1 => format!("1 {one}"),
            n => format!("{n} {many}"),
        };
        let _ = writeln!(
            out,
            "{} of {}{}",
            plural(self.slices as usize, "slice", "slices"),
            plural(self.distinct_names, "name", "names"),
            match self.names.len() < self.distinct_names {
                true => format!(" (the {} largest totals shown)", self.names.len()),
                false => String::new(),
            }
        );
        let allocated = self.names.iter().any(|n| n.allocated.is_some());
        let _ = write!(
            out,
            "{:>9}  {:>10}  {:>10}  {:>10}  {:>10}",
            "count", "total", "self", "average", "longest"
        );
        if allocated {
            let _ = write!(
                out,
                "  {:>10}  {:>10}  {:>8}",
                "allocated", "self", "allocs"
            );
        }
        let _ = writeln!(out, "  name");
        for n in &self.names {
            let _ = write!(
                out,
                "{:>9}  {:>10}  {:>10}  {:>10}  {:>10}",
                n.count,
                duration(n.total_ns),
                duration(n.self_ns),
                duration(n.avg_ns),
                duration(n.max_ns),
            );
            if allocated {
                match n.allocated {
                    Some(a) => {
                        let _ = write!(
                            out,
                            "  {:>10}  {:>10}  {:>8}",
                            bytes(a.bytes),
                            bytes(a.self_bytes),
                            a.allocations
                        );
                    }
                    None => {
                        let _ = write!(out, "  {:>10}  {:>10}  {:>8}", "", "", "");
                    }
                }
            }
            let _ = writeln!(out, "  {}", row_name(&n.name, n.kind));
        }
        out
    }
}

/// One name and kind in two tops ([`TopDiffJson`]): A's figures, B's, and
/// the changes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NameChangeJson {
    /// The name.
    pub name: String,
    /// `thread` or `async`, as [`NameJson::kind`].
    pub kind: &'static str,
    /// Slices in A.
    pub count_a: u64,
    /// Slices in B.
    pub count_b: u64,
    /// Total time in A, nanoseconds.
    pub total_ns_a: u64,
    /// Total time in B.
    pub total_ns_b: u64,
    /// B's total less A's.
    pub total_change_ns: i64,
    /// Self time in A, nanoseconds.
    pub self_ns_a: u64,
    /// Self time in B.
    pub self_ns_b: u64,
    /// B's self time less A's.
    pub self_change_ns: i64,
}

/// `fxt top --diff A B`: every name's slices in a baseline (A) and a second
/// trace (B), the largest change of total time first (then by name), as
/// the same query of each counts them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TopDiffJson {
    /// Slices counted in A.
    pub slices_a: u64,
    /// Slices counted in B.
    pub slices_b: u64,
    /// Rows in either: distinct names and kinds.
    pub distinct_names: usize,
    /// The rows shown.
    pub names: Vec<NameChangeJson>,
}

impl TopQuery {
    /// Compares `a` (the baseline) and `b` name by name, each asked as
    /// [`TopQuery::run`] asks one.
    pub fn diff(&self, a: &Timeline, b: &Timeline) -> TopDiffJson {
        let all = TopQuery {
            limit: 0,
            ..self.clone()
        };
        let (ta, tb) = (all.run(a), all.run(b));
        let mut rows = changes(&ta.names, &tb.names);
        let distinct_names = rows.len();
        if self.limit > 0 {
            rows.truncate(self.limit);
        }
        TopDiffJson {
            slices_a: ta.slices,
            slices_b: tb.slices,
            distinct_names,
            names: rows,
        }
    }
}

/// Rows of two tops ([`by_name`]) joined by name and kind, the largest change of
/// total time first (then by name and kind).
pub fn changes(a: &[NameJson], b: &[NameJson]) -> Vec<NameChangeJson> {
    let mut index: std::collections::HashMap<(&str, &'static str), usize> = Default::default();
    let mut rows: Vec<NameChangeJson> = Vec::new();
    for (side, names) in [(0, a), (1, b)] {
        for n in names {
            let i = *index.entry((&n.name, n.kind)).or_insert_with(|| {
                rows.push(NameChangeJson {
                    name: n.name.clone(),
                    kind: n.kind,
                    count_a: 0,
                    count_b: 0,
                    total_ns_a: 0,
                    total_ns_b: 0,
                    total_change_ns: 0,
                    self_ns_a: 0,
                    self_ns_b: 0,
                    self_change_ns: 0,
                });
                rows.len() - 1
            });
            let r = &mut rows[i];
            match side {
                0 => (r.count_a, r.total_ns_a, r.self_ns_a) = (n.count, n.total_ns, n.self_ns),
                _ => (r.count_b, r.total_ns_b, r.self_ns_b) = (n.count, n.total_ns, n.self_ns),
            }
        }
    }
    let change = |b: u64, a: u64| {
        (i128::from(b) - i128::from(a)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
    };
    for r in &mut rows {
        r.total_change_ns = change(r.total_ns_b, r.total_ns_a);
        r.self_change_ns = change(r.self_ns_b, r.self_ns_a);
    }
    rows.sort_by(|x, y| {
        (y.total_change_ns.unsigned_abs())
            .cmp(&x.total_change_ns.unsigned_abs())
            .then_with(|| x.name.cmp(&y.name))
            .then_with(|| x.kind.cmp(y.kind))
    });
    rows
}

impl TopDiffJson {
    /// The answer as a table, durations in the unit that reads best.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "A: {} slices, B: {} slices, {} names{}",
            self.slices_a,
            self.slices_b,
            self.distinct_names,
            match self.names.len() < self.distinct_names {
                true => format!(" (the {} largest changes shown)", self.names.len()),
                false => String::new(),
            }
        );
        let _ = writeln!(
            out,
            "{:>9}  {:>9}  {:>10}  {:>10}  {:>11}  {:>10}  {:>10}  {:>11}  name",
            "count A", "count B", "total A", "total B", "change", "self A", "self B", "change"
        );
        let signed = |d: i64| match d {
            0 => duration(0),
            d if d < 0 => format!("-{}", duration(d.unsigned_abs())),
            d => format!("+{}", duration(d.unsigned_abs())),
        };
        for n in &self.names {
            let _ = writeln!(
                out,
                "{:>9}  {:>9}  {:>10}  {:>10}  {:>11}  {:>10}  {:>10}  {:>11}  {}",
                n.count_a,
                n.count_b,
                duration(n.total_ns_a),
                duration(n.total_ns_b),
                signed(n.total_change_ns),
                duration(n.self_ns_a),
                duration(n.self_ns_b),
                signed(n.self_change_ns),
                row_name(&n.name, n.kind)
            );
        }
        out
    }
}

/// A row's name as the tables print it: an async row's marked so.
fn row_name(name: &str, kind: &str) -> String {
    match kind {
        "async" => format!("{name} (async)"),
        _ => name.to_string(),
    }
}

/// `between`, nanoseconds from the trace's first time, on the trace's clock.
fn on_clock(timeline: &Timeline, between: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let first = timeline.first_ns().unwrap_or(0);
    between.map(|(a, b)| (first.saturating_add(a), first.saturating_add(b)))
}

/// Whether `track` is one of `threads` (by koid; every track when empty).
fn on_threads(track: &Track, threads: &[u64]) -> bool {
    threads.is_empty() || (track.kind == TrackKind::Thread && threads.contains(&track.tid))
}

/// Which slices `tracekit fxt slices` lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlicesQuery {
    /// Only those that overlap this range, nanoseconds from the trace's first
    /// time (`None`: all).
    pub between: Option<(u64, u64)>,
    /// Only those on these threads, by koid (empty: every track).
    pub threads: Vec<u64>,
    /// Only those whose name contains this text (ASCII case ignored).
    pub name: Option<String>,
    /// Slices listed, the earliest first (0: all).
    pub limit: usize,
}

/// One slice, as `fxt slices` lists it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SliceJson {
    /// Its track, an index in the timeline's tracks.
    pub track: usize,
    /// `thread` or `async`.
    pub kind: &'static str,
    /// The process's koid.
    pub pid: u64,
    /// The thread's koid (0 on an async track).
    pub tid: u64,
    /// Its lane: the depth on a thread.
    pub depth: usize,
    /// Start, nanoseconds of the trace's clock.
    pub start_ns: u64,
    /// Duration, nanoseconds; `None` for a slice still open at the end.
    pub duration_ns: Option<u64>,
    /// Name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Arguments.
    pub args: serde_json::Value,
}

/// The answer of a [`SlicesQuery`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SlicesJson {
    /// The trace's first time, nanoseconds (what `--between` counts from).
    pub first_ns: Option<u64>,
    /// Slices that match, listed or not.
    pub matching: u64,
    /// The earliest of them (by start, then track, lane and index).
    pub slices: Vec<SliceJson>,
}

impl SlicesQuery {
    /// Asks `timeline`.
    pub fn run(&self, timeline: &Timeline) -> SlicesJson {
        let range = on_clock(timeline, self.between);
        let names = self.name.as_deref().map(|n| timeline.names_containing(n));
        let mut hits: Vec<(u64, usize, usize, usize)> = Vec::new();
        for (ti, track) in timeline.tracks().iter().enumerate() {
            if !on_threads(track, &self.threads) {
                continue;
            }
            for (l, lane) in track.lanes.iter().enumerate() {
                for i in lane.shown(range) {
                    let Some(s) = lane.get(i) else { continue };
                    let named = names
                        .as_ref()
                        .is_none_or(|n| n.get(s.name as usize).copied().unwrap_or(false));
                    if named {
                        hits.push((s.start, ti, l, i));
                    }
                }
            }
        }
        hits.sort_unstable();
        let matching = hits.len() as u64;
        if self.limit > 0 {
            hits.truncate(self.limit);
        }
        let slices = hits
            .into_iter()
            .filter_map(|(_, ti, l, i)| {
                let track = timeline.tracks().get(ti)?;
                let s = track.lanes.get(l)?.get(i)?;
                Some(SliceJson {
                    track: ti,
                    kind: track.kind.name(),
                    pid: track.pid,
                    tid: track.tid,
                    depth: l,
                    start_ns: s.start,
                    duration_ns: (s.end != crate::lane::OPEN).then(|| s.end - s.start),
                    name: timeline.string(s.name).to_string(),
                    category: timeline.string(s.category).to_string(),
                    args: serde_json::from_str(timeline.args(s.args))
                        .unwrap_or(serde_json::Value::Null),
                })
            })
            .collect();
        SlicesJson {
            first_ns: timeline.first_ns(),
            matching,
            slices,
        }
    }
}

impl SlicesJson {
    /// The answer as a table: start from the trace's first time, duration,
    /// thread (or async track's process), depth, name, arguments.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} matching slices{}",
            self.matching,
            match (self.slices.len() as u64) < self.matching {
                true => format!(" (the {} earliest shown)", self.slices.len()),
                false => String::new(),
            }
        );
        let _ = writeln!(
            out,
            "{:>10}  {:>10}  {:>14}  {:>5}  name  args",
            "start", "duration", "thread", "depth"
        );
        let first = self.first_ns.unwrap_or(0);
        for s in &self.slices {
            let thread = match s.kind {
                "async" => format!("async {}", s.pid),
                _ => format!("{}/{}", s.pid, s.tid),
            };
            let args = match &s.args {
                serde_json::Value::Object(m) if m.is_empty() => String::new(),
                a => a.to_string(),
            };
            let line = format!(
                "{:>10}  {:>10}  {:>14}  {:>5}  {}  {}",
                duration(s.start_ns.saturating_sub(first)),
                s.duration_ns.map_or_else(|| "open".to_string(), duration),
                thread,
                s.depth,
                s.name,
                args
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }
}

/// Bytes in the binary unit that reads best (`512 B`, `1.50 KiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ => format!("{v:.2} {}", UNITS[unit]),
    }
}

/// A duration in nanoseconds as people read it: `812 ns`, `12.3 us`, `4.56 ms`,
/// `1.23 s`, three significant digits.
pub fn duration(ns: u64) -> String {
    let (value, unit) = match ns {
        0..1_000 => return format!("{ns} ns"),
        1_000..1_000_000 => (ns as f64 / 1e3, "us"),
        1_000_000..1_000_000_000 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let digits = match value {
        v if v < 10.0 => 2,
        v if v < 100.0 => 1,
        _ => 0,
    };
    format!("{value:.digits$} {unit}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// As the tracing layer writes a task: its polls on a thread, its life as
    /// an async slice of the same name.
    #[test]
    fn top_counts_a_name_on_threads_and_async_apart() {
        use tracekit_fxt::format::Koid;
        use tracekit_fxt::io::IoDestination;
        use tracekit_fxt::read::Reader;
        use tracekit_fxt::write::Writer;
        let mut w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
        let (c, job, poll) = (
            w.intern("cat").unwrap(),
            w.intern("job").unwrap(),
            w.intern("poll").unwrap(),
        );
        w.async_begin(t, c, job, 100, 7, &[]).unwrap();
        w.duration_complete(t, c, job, 110, 120, &[]).unwrap();
        w.duration_complete(t, c, poll, 112, 114, &[]).unwrap();
        w.duration_complete(t, c, job, 150, 170, &[]).unwrap();
        w.async_end(t, c, job, 400, 7, &[]).unwrap();
        let bytes = w.finish_io().unwrap();
        let timeline = Timeline::build(&mut Reader::new(&bytes), &mut |_| {});
        let top = TopQuery::default().run(&timeline);
        let rows: Vec<_> = top
            .names
            .iter()
            .map(|n| (n.name.as_str(), n.kind, n.count, n.total_ns, n.self_ns))
            .collect();
        assert_eq!(
            rows,
            [
                ("job", "async", 1, 300, 300),
                ("job", "thread", 2, 30, 28),
                ("poll", "thread", 1, 2, 2),
            ]
        );
        assert_eq!((top.slices, top.distinct_names), (4, 3));
        assert!(top.table().contains("job (async)"), "{}", top.table());
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration(0), "0 ns");
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_000), "1.00 us");
        assert_eq!(duration(12_345), "12.3 us");
        assert_eq!(duration(456_700_000), "457 ms");
        assert_eq!(duration(1_230_000_000), "1.23 s");
        assert_eq!(duration(3_600_000_000_000), "3600 s");
    }
}
