//! Text tables, CSV and JSON for the reports: what `tracekit memtrace top`,
//! `timeline` and `diff` print. The JSON of each is a typed answer (`TopJson`,
//! `TimelineJson`, `DiffJson`), the one the command's `--json` prints and the
//! viewer's API sends; text renders into strings.

use std::fmt::Write;

use serde::Serialize;

use crate::analyzer::{EventCounts, Profile};
use crate::curve::TimelinePoint;
use crate::frames::{FrameTree, Unit};
use crate::report::{DiffRow, EMPTY_BACKTRACE, GroupBy, GrowingSite, Rank, Top};
use crate::sampling::Sampling;
use crate::sites::SiteCounts;
use crate::units::human_bytes;
use tracekit_memtrace::{AllocationSource, Info, Timedelta};

/// A trace as the report headers name it: the file it was read from and its trace
/// info.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFile {
    /// File the trace was read from, as the reports show it.
    pub path: String,
    /// The trace-info record.
    pub info: Info,
}

impl TraceFile {
    /// The trace read from `path`, with trace info `info`.
    pub fn new(path: impl Into<String>, info: &Info) -> TraceFile {
        TraceFile {
            path: path.into(),
            info: info.clone(),
        }
    }
}

/// Describes what one sample stands for, for headers and help.
pub fn sampling_note(s: Sampling) -> String {
    format!(
        "sample rate {}: each sample stands for {} words ({} bytes each) = {} (sizes are estimates)",
        s.sample_rate,
        fmt_float(1.0 / s.sample_rate),
        s.word_bytes(),
        human_bytes(s.bytes_per_sample()),
    )
}

fn fmt_float(v: f64) -> String {
    let r = v.round();
    if v.is_finite() && (v - r).abs() <= 1e-6 * r.abs().max(1.0) && v.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{v:.6}")
    }
}

/// A trace's header in every JSON answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InfoJson {
    /// The file it was read from.
    pub path: String,
    /// The traced executable.
    pub executable_name: String,
    /// The host it ran on.
    pub host_name: String,
    /// Its process id.
    pub pid: i64,
    /// When the trace started, in microseconds since the Unix epoch.
    pub start_time_us: i64,
    /// The context string the program gave, if any.
    pub context: Option<String>,
    /// Samples per allocated word.
    pub sample_rate: f64,
    /// Bits per word.
    pub word_size: u8,
    /// Bytes one sample stands for.
    pub bytes_per_sample: f64,
    /// Time of the last event, in seconds from the start.
    pub duration_s: f64,
}

pub(crate) fn info_json(trace: &TraceFile, profile: &Profile) -> InfoJson {
    let info = &trace.info;
    InfoJson {
        path: trace.path.clone(),
        executable_name: info.executable_name.to_string(),
        host_name: info.host_name.to_string(),
        pid: info.pid,
        start_time_us: info.start_time.as_micros(),
        context: info.context.as_ref().map(|c| c.to_string()),
        sample_rate: info.sample_rate,
        word_size: info.word_size,
        bytes_per_sample: Sampling::from(info).bytes_per_sample(),
        duration_s: profile.end.to_secs_f64(),
    }
}

/// One set of counts (a site's, the sites left out, or the whole trace's), in
/// samples, bytes (samples times bytes per sample) and allocations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CountsJson {
    /// Sampled allocations.
    pub allocs: u64,
    /// Samples.
    pub samples: u64,
    /// Estimated bytes allocated.
    pub bytes: u64,
    /// Samples of minor-heap allocations.
    pub minor_samples: u64,
    /// Their bytes.
    pub minor_bytes: u64,
    /// Samples of major-heap allocations.
    pub major_samples: u64,
    /// Their bytes.
    pub major_bytes: u64,
    /// Samples of external allocations.
    pub external_samples: u64,
    /// Their bytes.
    pub external_bytes: u64,
    /// Words of the sampled objects.
    pub words: u64,
    /// Sampled objects promoted to the major heap.
    pub promoted: u64,
    /// Sampled objects collected.
    pub collected_allocs: u64,
    /// Their samples.
    pub collected_samples: u64,
    /// Sampled objects live at the end.
    pub live_end_allocs: u64,
    /// Their samples.
    pub live_end_samples: u64,
    /// Their bytes.
    pub live_end_bytes: u64,
    /// Sampled objects live at the time asked (`--at`, `--peak`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_allocs: Option<u64>,
    /// Their samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_samples: Option<u64>,
    /// Their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_bytes: Option<u64>,
}

/// The counts `c`, with the live-at counts when `live_at`.
fn counts_json(s: Sampling, c: &SiteCounts, live_at: bool) -> CountsJson {
    let by = |src: AllocationSource| c.samples_by_source[src as usize];
    let at = |v: u64| live_at.then_some(v);
    CountsJson {
        allocs: c.allocs,
        samples: c.samples,
        bytes: s.bytes(c.samples),
        minor_samples: by(AllocationSource::Minor),
        minor_bytes: s.bytes(by(AllocationSource::Minor)),
        major_samples: by(AllocationSource::Major),
        major_bytes: s.bytes(by(AllocationSource::Major)),
        external_samples: by(AllocationSource::External),
        external_bytes: s.bytes(by(AllocationSource::External)),
        words: c.words,
        promoted: c.promoted,
        collected_allocs: c.collected_allocs,
        collected_samples: c.collected,
        live_end_allocs: c.live_end_allocs(),
        live_end_samples: c.live_end(),
        live_end_bytes: s.bytes(c.live_end()),
        live_at_allocs: at(c.live_at_allocs),
        live_at_samples: at(c.live_at),
        live_at_bytes: at(s.bytes(c.live_at)),
    }
}

fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}

/// How `top` was asked for, for its headers.
#[derive(Clone, Debug, Default)]
pub struct TopContext {
    /// `--at` or the peak's time.
    pub at: Option<Timedelta>,
    /// Whether `at` is the peak.
    pub at_peak: bool,
    /// Filter description (empty when none).
    pub filters: Vec<String>,
}

/// `top --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopJson {
    /// The trace.
    pub trace: InfoJson,
    /// How sites are grouped.
    pub by: GroupBy,
    /// What ranks them.
    pub rank: Rank,
    /// The time live counts refer to, in seconds (`--at`, or the peak's).
    pub at_s: Option<f64>,
    /// Whether that time is the peak.
    pub at_peak: bool,
    /// The filter, in words.
    pub filters: Vec<String>,
    /// The peak of the live heap.
    pub peak: PeakJson,
    /// Every site's counts summed.
    pub totals: CountsJson,
    /// Events seen, kept and dropped.
    pub events: EventCounts,
    /// The top sites, first ranked first.
    pub sites: Vec<SiteJson>,
    /// The sites left out, together.
    pub others: OthersJson,
    /// With `--growing`, the groups whose live heap grows, steadiest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growing: Option<GrowingJson>,
}

/// The groups whose live heap grows (`top --growing`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrowingJson {
    /// The times the live bytes are weighed at, in seconds.
    pub times_s: Vec<f64>,
    /// The groups, steadiest growth first.
    pub sites: Vec<GrowingSiteJson>,
}

/// One group whose live heap grows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrowingSiteJson {
    /// 1 for the first.
    pub rank: usize,
    /// Its name.
    pub site: String,
    /// Its backtrace, caller first, when grouped by backtrace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<Vec<String>>,
    /// How fast its live bytes grow: the median slope between every two times.
    pub bytes_per_s: f64,
    /// How steadily, from -1 to 1 (Kendall's tau of the live bytes over time).
    pub steadiness: f64,
    /// Its live bytes at each time.
    pub live_bytes: Vec<u64>,
}

/// [`GrowingJson`] of `growing`, the groups of `profile`'s sites that grow.
pub fn growing_json(profile: &Profile, growing: &[GrowingSite]) -> GrowingJson {
    let s = profile.sampling;
    let times = profile.curves.as_ref().map_or(&[][..], |c| c.times());
    GrowingJson {
        times_s: times.iter().map(|t| t.to_secs_f64()).collect(),
        sites: growing
            .iter()
            .enumerate()
            .map(|(i, g)| GrowingSiteJson {
                rank: i + 1,
                site: g.site.name.clone(),
                backtrace: g.site.backtrace.clone(),
                bytes_per_s: g.slope * s.bytes_per_sample(),
                steadiness: g.steadiness,
                live_bytes: g.live.iter().map(|&v| s.bytes(v)).collect(),
            })
            .collect(),
    }
}

/// One of the top sites.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteJson {
    /// 1 for the first.
    pub rank: usize,
    /// Its name.
    pub site: String,
    /// Its fraction of the ranked quantity.
    pub share: f64,
    /// Its backtrace, innermost first (`--backtraces`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<Vec<String>>,
    /// Its counts.
    #[serde(flatten)]
    pub counts: CountsJson,
}

/// The sites left out of the top.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OthersJson {
    /// How many.
    pub sites: usize,
    /// Their fraction of the ranked quantity.
    pub share: f64,
    /// Their counts summed.
    #[serde(flatten)]
    pub counts: CountsJson,
}

/// The peak of the live heap.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PeakJson {
    /// When, in seconds from the start.
    pub time_s: f64,
    /// Live samples then.
    pub samples: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Whether the peak is exact (no domain's events came late).
    pub exact: bool,
}

/// The answer of `top`.
pub fn top_json(trace: &TraceFile, profile: &Profile, top: &Top, ctx: &TopContext) -> TopJson {
    let s = profile.sampling;
    let live_at = profile.live_at.is_some();
    let total_ranked = top.rank.of(&top.totals);
    let sites = top
        .sites
        .iter()
        .enumerate()
        .map(|(i, site)| SiteJson {
            rank: i + 1,
            site: site.name.clone(),
            share: share(top.rank.of(&site.counts), total_ranked),
            backtrace: site.backtrace.clone(),
            counts: counts_json(s, &site.counts, live_at),
        })
        .collect();
    TopJson {
        trace: info_json(trace, profile),
        by: top.by,
        rank: top.rank,
        at_s: ctx.at.map(|t| t.to_secs_f64()),
        at_peak: ctx.at_peak,
        filters: ctx.filters.clone(),
        peak: peak_json(profile),
        totals: counts_json(s, &top.totals, live_at),
        events: profile.events,
        sites,
        others: OthersJson {
            sites: top.other_sites,
            share: share(top.rank.of(&top.others), total_ranked),
            counts: counts_json(s, &top.others, live_at),
        },
        growing: None,
    }
}

fn peak_json(profile: &Profile) -> PeakJson {
    PeakJson {
        time_s: profile.peak.time.to_secs_f64(),
        samples: profile.peak.live,
        bytes: profile.sampling.bytes(profile.peak.live),
        exact: profile.peak.late_events == 0,
    }
}

/// A plain text table with right-aligned numeric columns and a free last column.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Lines printed under a row (e.g. a backtrace), by row index.
    notes: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>, notes: Vec<String>) {
        self.rows.push(cells);
        self.notes.push(notes);
    }

    fn render(&self, out: &mut String) {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n - 1) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == n {
                    s.push_str(c);
                } else {
                    let pad = widths[i].saturating_sub(c.chars().count());
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
                    s.push_str("  ");
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.header, out);
        for (r, notes) in self.rows.iter().zip(&self.notes) {
            line(r, out);
            let indent: usize = widths.iter().take(n - 1).map(|w| w + 2).sum();
            for note in notes {
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(note);
                out.push('\n');
            }
        }
    }
}

fn hb(s: Sampling, samples: u64) -> String {
    human_bytes(s.bytes(samples) as f64)
}

fn pct(part: u64, total: u64) -> String {
    format!("{:.2}%", 100.0 * share(part, total))
}

/// Frames of a backtrace shown under a `--by backtrace` row.
const BACKTRACE_LINES: usize = 12;

/// A backtrace (caller first, ending at the site) as a row's name and the
/// lines under it: one frame a line, a recursive run once with its count
/// (as flame graphs fold it), and the middle left out of a longer one so
/// that the site stays in view.
fn backtrace_lines(bt: &[String]) -> (String, Vec<String>) {
    let parts = crate::paths::folded_parts(bt);
    let Some((first, rest)) = parts.split_first() else {
        return (EMPTY_BACKTRACE.to_owned(), Vec::new());
    };
    let mut notes = Vec::new();
    let shown = if rest.len() > BACKTRACE_LINES {
        let kept = BACKTRACE_LINES - 1;
        notes.push(format!("> ... {} more", rest.len() - kept));
        &rest[rest.len() - kept..]
    } else {
        rest
    };
    notes.extend(shown.iter().map(|f| format!("> {f}")));
    (first.clone(), notes)
}

/// `top` as a table.
pub fn top_table(trace: &TraceFile, profile: &Profile, top: &Top, ctx: &TopContext) -> String {
    let s = profile.sampling;
    let t = &top.totals;
    let mut out = top_header(trace, profile, t, ctx);
    let by = match top.by {
        GroupBy::Leaf => "allocation site",
        GroupBy::Function => "function",
        GroupBy::File => "file",
        GroupBy::Backtrace => "backtrace (from main to the allocation site)",
    };
    out.push('\n');
    let total_ranked = top.rank.of(t);
    let mut table = match top.rank {
        Rank::Allocated => Table::new(&[
            "#",
            "allocated",
            "share",
            "allocs",
            "minor",
            "major",
            "external",
            "live end",
            by,
        ]),
        Rank::LiveAt => Table::new(&[
            "#",
            "live",
            "share",
            "objects",
            "allocated",
            "allocs",
            "live end",
            by,
        ]),
        Rank::LiveEnd => Table::new(&[
            "#",
            "live end",
            "share",
            "objects",
            "allocated",
            "allocs",
            by,
        ]),
    };
    let cells = |rank: String, c: &SiteCounts, name: String| -> Vec<String> {
        let share = pct(top.rank.of(c), total_ranked);
        match top.rank {
            Rank::Allocated => vec![
                rank,
                hb(s, c.samples),
                share,
                c.allocs.to_string(),
                hb(s, c.samples_by_source[0]),
                hb(s, c.samples_by_source[1]),
                hb(s, c.samples_by_source[2]),
                hb(s, c.live_end()),
                name,
            ],
            Rank::LiveAt => vec![
                rank,
                hb(s, c.live_at),
                share,
                c.live_at_allocs.to_string(),
                hb(s, c.samples),
                c.allocs.to_string(),
                hb(s, c.live_end()),
                name,
            ],
            Rank::LiveEnd => vec![
                rank,
                hb(s, c.live_end()),
                share,
                c.live_end_allocs().to_string(),
                hb(s, c.samples),
                c.allocs.to_string(),
                name,
            ],
        }
    };
    for (i, site) in top.sites.iter().enumerate() {
        let (first, notes) = match &site.backtrace {
            Some(bt) => backtrace_lines(bt),
            None => (site.name.clone(), Vec::new()),
        };
        table.row(cells((i + 1).to_string(), &site.counts, first), notes);
    }
    if top.other_sites > 0 {
        table.row(
            cells(
                String::new(),
                &top.others,
                format!("({} other sites)", top.other_sites),
            ),
            Vec::new(),
        );
    }
    table.render(&mut out);
    if top.sites.is_empty() {
        out.push_str("(no allocations)\n");
    }
    out
}

/// The table `memtrace top --growing` prints: the lines above every `top` table,
/// then the groups whose live heap grows, steadiest first.
pub fn growing_table(
    trace: &TraceFile,
    profile: &Profile,
    top: &Top,
    ctx: &TopContext,
    growing: &[GrowingSite],
) -> String {
    let s = profile.sampling;
    let mut out = top_header(trace, profile, &top.totals, ctx);
    let times = profile.curves.as_ref().map_or(&[][..], |c| c.times());
    let _ = writeln!(
        out,
        "\ngrowing: live bytes at {} times from {} to {}; slope the median of every two \
         (Theil-Sen), steadiness the share of pairs that grow less those that shrink",
        times.len(),
        times.first().copied().unwrap_or_default(),
        times.last().copied().unwrap_or_default(),
    );
    out.push('\n');
    let by = match top.by {
        GroupBy::Leaf | GroupBy::Backtrace => "allocation site",
        GroupBy::Function => "function",
        GroupBy::File => "file",
    };
    let mut table = Table::new(&["#", "grows", "steadiness", "live first", "live last", by]);
    for (i, g) in growing.iter().enumerate() {
        let first = g.live.first().copied().unwrap_or(0);
        let last = g.live.last().copied().unwrap_or(0);
        table.row(
            vec![
                (i + 1).to_string(),
                format!("{}/s", human_bytes(g.slope * s.bytes_per_sample())),
                format!("{:.2}", g.steadiness),
                hb(s, first),
                hb(s, last),
                g.site.name.clone(),
            ],
            Vec::new(),
        );
    }
    table.render(&mut out);
    if growing.is_empty() {
        out.push_str("(no site grows)\n");
    }
    out
}

/// The lines above a `top` table: the trace, the sampling, the filter, the totals
/// and the peak.
fn top_header(trace: &TraceFile, profile: &Profile, t: &SiteCounts, ctx: &TopContext) -> String {
    let s = profile.sampling;
    let info = &trace.info;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} (pid {}, host {})",
        info.executable_name, info.pid, info.host_name
    );
    let _ = writeln!(out, "{}", sampling_note(s));
    if !ctx.filters.is_empty() {
        let _ = writeln!(out, "filter: {}", ctx.filters.join(", "));
    }
    let _ = writeln!(
        out,
        "allocated {} in {} sampled objects (minor {}, major {}, external {}); live at end {} in {} objects",
        hb(s, t.samples),
        t.allocs,
        hb(s, t.samples_by_source[0]),
        hb(s, t.samples_by_source[1]),
        hb(s, t.samples_by_source[2]),
        hb(s, t.live_end()),
        t.live_end_allocs(),
    );
    let peak_note = if profile.peak.late_events == 0 {
        ""
    } else {
        " (approximate: domains interleave)"
    };
    let _ = writeln!(
        out,
        "peak live heap {} at {}{}; trace length {}",
        hb(s, profile.peak.live),
        profile.peak.time,
        peak_note,
        profile.end,
    );
    if let Some(at) = ctx.at {
        let _ = writeln!(
            out,
            "live at {}{}: {} in {} objects",
            at,
            if ctx.at_peak { " (the peak)" } else { "" },
            hb(s, t.live_at),
            t.live_at_allocs,
        );
    }
    out
}

/// Timeline as CSV: one row per point, bytes estimated.
pub fn timeline_csv(profile: &Profile, points: &[TimelinePoint]) -> String {
    let s = profile.sampling;
    let mut out = String::from(
        "time_s,live_bytes,allocated_bytes,freed_bytes,alloc_rate_bytes_per_s,live_samples,allocated_samples,freed_samples",
    );
    let domains = profile.timeline.domains();
    if domains.len() > 1 {
        for d in domains {
            let _ = write!(out, ",live_bytes_domain_{d}");
        }
    }
    out.push('\n');
    for p in points {
        let secs = p.interval.to_secs_f64();
        let rate = if secs > 0.0 {
            s.bytes(p.allocated) as f64 / secs
        } else {
            0.0
        };
        let _ = write!(
            out,
            "{:.6},{},{},{},{:.0},{},{},{}",
            p.time.to_secs_f64(),
            s.bytes(p.live),
            s.bytes(p.allocated),
            s.bytes(p.freed),
            rate,
            p.live,
            p.allocated,
            p.freed
        );
        if domains.len() > 1 {
            for v in &p.live_by_domain {
                let _ = write!(out, ",{}", s.bytes(*v));
            }
        }
        out.push('\n');
    }
    out
}

/// `timeline --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineJson {
    /// The trace.
    pub trace: InfoJson,
    /// The peak of the live heap.
    pub peak: PeakJson,
    /// The domains, in the order of each point's `live_bytes_by_domain`.
    pub domains: Vec<u16>,
    /// The counts of every allocation the filter keeps.
    pub totals: CountsJson,
    /// The curve.
    pub points: Vec<PointJson>,
}

/// One point of the timeline: the interval that ends at its time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointJson {
    /// Its time, in seconds from the start.
    pub time_s: f64,
    /// The interval's length, in seconds.
    pub interval_s: f64,
    /// Bytes live at its time.
    pub live_bytes: u64,
    /// Bytes allocated in the interval.
    pub allocated_bytes: u64,
    /// Bytes freed in it.
    pub freed_bytes: u64,
    /// Bytes allocated per second over it.
    pub alloc_rate_bytes_per_s: f64,
    /// Samples live at its time.
    pub live_samples: u64,
    /// Bytes live at its time, per domain.
    pub live_bytes_by_domain: Vec<u64>,
}

/// The answer of `timeline`.
pub fn timeline_json(
    trace: &TraceFile,
    profile: &Profile,
    points: &[TimelinePoint],
) -> TimelineJson {
    let s = profile.sampling;
    let points = points
        .iter()
        .map(|p| {
            let secs = p.interval.to_secs_f64();
            let allocated_bytes = s.bytes(p.allocated);
            PointJson {
                time_s: p.time.to_secs_f64(),
                interval_s: secs,
                live_bytes: s.bytes(p.live),
                allocated_bytes,
                freed_bytes: s.bytes(p.freed),
                alloc_rate_bytes_per_s: if secs > 0.0 {
                    allocated_bytes as f64 / secs
                } else {
                    0.0
                },
                live_samples: p.live,
                live_bytes_by_domain: p.live_by_domain.iter().map(|v| s.bytes(*v)).collect(),
            }
        })
        .collect();
    TimelineJson {
        trace: info_json(trace, profile),
        peak: peak_json(profile),
        domains: profile.timeline.domains().iter().map(|d| d.get()).collect(),
        totals: counts_json(s, &profile.totals, false),
        points,
    }
}

/// Names of the two traces of a diff.
#[derive(Clone, Debug)]
pub struct DiffContext {
    /// First trace.
    pub a: TraceFile,
    /// Second trace.
    pub b: TraceFile,
    /// Grouping.
    pub by: Option<GroupBy>,
    /// What the sites are ranked by.
    pub rank: Rank,
}

fn signed_bytes(v: i128) -> String {
    let sign = if v > 0 {
        "+"
    } else if v < 0 {
        "-"
    } else {
        ""
    };
    format!("{sign}{}", human_bytes(v.unsigned_abs() as f64))
}

/// `diff` as a table of the first `limit` rows.
pub fn diff_table(
    ctx: &DiffContext,
    a: &Profile,
    b: &Profile,
    rows: &[DiffRow],
    limit: usize,
) -> String {
    let mut out = String::new();
    let (sa, sb) = (a.sampling, b.sampling);
    let _ = writeln!(out, "A: {} ({})", ctx.a.path, ctx.a.info.executable_name);
    let _ = writeln!(out, "B: {} ({})", ctx.b.path, ctx.b.info.executable_name);
    let ta = sa.bytes(a.totals.samples);
    let tb = sb.bytes(b.totals.samples);
    let la = sa.bytes(a.totals.live_end());
    let lb = sb.bytes(b.totals.live_end());
    let _ = writeln!(
        out,
        "allocated: A {}, B {} ({}); live at end: A {}, B {} ({})",
        human_bytes(ta as f64),
        human_bytes(tb as f64),
        signed_bytes(i128::from(tb) - i128::from(ta)),
        human_bytes(la as f64),
        human_bytes(lb as f64),
        signed_bytes(i128::from(lb) - i128::from(la)),
    );
    let live_at = (ctx.rank == Rank::LiveAt).then_some((a.live_at, b.live_at));
    if let Some((ta, tb)) = live_at {
        let at = |t: Option<Timedelta>| t.map_or_else(|| "-".to_string(), |t| t.to_string());
        let (la, lb) = (sa.bytes(a.totals.live_at), sb.bytes(b.totals.live_at));
        let _ = writeln!(
            out,
            "live at {}: A {}, B {} ({})",
            match ta == tb {
                true => at(ta),
                false => format!("A's {}, B's {}", at(ta), at(tb)),
            },
            human_bytes(la as f64),
            human_bytes(lb as f64),
            signed_bytes(i128::from(lb) - i128::from(la)),
        );
    }
    let _ = writeln!(out, "sizes are estimates from sampling (see --help)\n");
    if no_difference(a, b, rows) {
        let _ = writeln!(
            out,
            "no difference: every site allocated the same bytes in A and B, with the same bytes live at the end"
        );
        return out;
    }
    let mut head = vec!["#", "alloc A", "alloc B", "change"];
    if live_at.is_some() {
        head.extend(["live at A", "live at B", "change"]);
    }
    head.extend(["live end A", "live end B", "change", "site"]);
    let mut table = Table::new(&head);
    for (i, r) in rows.iter().take(limit).enumerate() {
        let mut cells = vec![
            (i + 1).to_string(),
            human_bytes(r.allocated_bytes.0 as f64),
            human_bytes(r.allocated_bytes.1 as f64),
            signed_bytes(r.allocated_delta()),
        ];
        if live_at.is_some() {
            cells.extend([
                human_bytes(r.live_at_bytes.0 as f64),
                human_bytes(r.live_at_bytes.1 as f64),
                signed_bytes(r.live_at_delta()),
            ]);
        }
        cells.extend([
            human_bytes(r.live_end_bytes.0 as f64),
            human_bytes(r.live_end_bytes.1 as f64),
            signed_bytes(r.live_end_delta()),
            r.name.clone(),
        ]);
        table.row(cells, Vec::new());
    }
    table.render(&mut out);
    if rows.len() > limit {
        let _ = writeln!(out, "({} more sites)", rows.len() - limit);
    }
    out
}

/// Whether the two traces' sites allocated, and kept live, exactly the same.
pub fn no_difference(a: &Profile, b: &Profile, rows: &[DiffRow]) -> bool {
    a.sampling.bytes(a.totals.samples) == b.sampling.bytes(b.totals.samples)
        && a.sampling.bytes(a.totals.live_end()) == b.sampling.bytes(b.totals.live_end())
        && rows
            .iter()
            .all(|r| r.allocated_delta() == 0 && r.live_end_delta() == 0 && r.live_at_delta() == 0)
}

/// `diff --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffJson {
    /// The first trace.
    pub a: InfoJson,
    /// The second.
    pub b: InfoJson,
    /// How sites are grouped (`None`: by leaf).
    pub by: Option<GroupBy>,
    /// `allocated`, `live_at` or `live_end`.
    pub ranked_by: Rank,
    /// With `live_at`: the time in A and in B, seconds from each start (at
    /// each one's peak, or the one time asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_s: Option<(f64, f64)>,
    /// The first trace's counts.
    pub totals_a: CountsJson,
    /// The second's.
    pub totals_b: CountsJson,
    /// Whether no site's bytes changed.
    pub no_difference: bool,
    /// The sites whose bytes changed most, first.
    pub sites: Vec<DiffSiteJson>,
}

/// A site in both traces.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffSiteJson {
    /// Its name.
    pub site: String,
    /// Bytes it allocated in the first trace.
    pub allocated_bytes_a: u64,
    /// In the second.
    pub allocated_bytes_b: u64,
    /// The second less the first.
    pub allocated_bytes_change: f64,
    /// Its bytes live at the end of the first trace.
    pub live_end_bytes_a: u64,
    /// Of the second.
    pub live_end_bytes_b: u64,
    /// The second less the first.
    pub live_end_bytes_change: f64,
    /// With `live_at`: its bytes live at that time in the first trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_bytes_a: Option<u64>,
    /// In the second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_bytes_b: Option<u64>,
    /// Its sampled allocations in the first trace.
    pub allocs_a: u64,
    /// In the second.
    pub allocs_b: u64,
}

/// The answer of `diff`.
pub fn diff_json(
    ctx: &DiffContext,
    a: &Profile,
    b: &Profile,
    rows: &[DiffRow],
    limit: usize,
) -> DiffJson {
    let live_at = ctx.rank == Rank::LiveAt;
    let sites = rows
        .iter()
        .take(limit)
        .map(|r| DiffSiteJson {
            live_at_bytes_a: live_at.then_some(r.live_at_bytes.0),
            live_at_bytes_b: live_at.then_some(r.live_at_bytes.1),
            site: r.name.clone(),
            allocated_bytes_a: r.allocated_bytes.0,
            allocated_bytes_b: r.allocated_bytes.1,
            allocated_bytes_change: r.allocated_delta() as f64,
            live_end_bytes_a: r.live_end_bytes.0,
            live_end_bytes_b: r.live_end_bytes.1,
            live_end_bytes_change: r.live_end_delta() as f64,
            allocs_a: r.a.allocs,
            allocs_b: r.b.allocs,
        })
        .collect();
    DiffJson {
        a: info_json(&ctx.a, a),
        b: info_json(&ctx.b, b),
        by: ctx.by,
        ranked_by: ctx.rank,
        live_at_s: match (live_at, a.live_at, b.live_at) {
            (true, Some(ta), Some(tb)) => Some((ta.to_secs_f64(), tb.to_secs_f64())),
            _ => None,
        },
        totals_a: counts_json(a.sampling, &a.totals, false),
        totals_b: counts_json(b.sampling, &b.totals, false),
        no_difference: no_difference(a, b, rows),
        sites,
    }
}

/// Folded stacks as JSON, serialized as they are walked (no document in memory):
/// `{"stacks": [{"frames", "weight"}], "total", "unit", "weight"}`; `what` says what
/// the weights measure ([`Weight::describe`](crate::sites::Weight::describe)).
pub fn folded_json<'a>(tree: &'a FrameTree, unit: Unit, what: &'a str) -> FoldedJson<'a> {
    FoldedJson {
        stacks: Stacks(tree),
        total: tree.total(),
        unit: unit.name(),
        weight: what,
    }
}

/// [`folded_json`]'s document.
#[derive(serde::Serialize)]
pub struct FoldedJson<'a> {
    stacks: Stacks<'a>,
    total: u64,
    unit: &'static str,
    weight: &'a str,
}

/// The stacks of a tree as a JSON array, each serialized as it is reached.
struct Stacks<'a>(&'a FrameTree);

impl serde::Serialize for Stacks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(serde::Serialize)]
        struct Stack<'a> {
            frames: &'a [&'a str],
            weight: u64,
        }
        let mut seq = serializer.serialize_seq(Some(self.0.stacks()))?;
        self.0.try_for_each_stack(|frames, weight| {
            seq.serialize_element(&Stack { frames, weight })
        })?;
        seq.end()
    }
}

/// The JSON of a differential flame graph ([`crate::diff::DiffTree`]): each
/// stack with its weight in A (`base`) and in B (`weight`), the totals, and each
/// function's weights in both, the largest change first.
pub fn diff_folded_json<'a>(
    diff: &'a crate::diff::DiffTree,
    base: &FrameTree,
    unit: Unit,
    what: &'a str,
) -> DiffFoldedJson<'a> {
    DiffFoldedJson {
        stacks: DiffStacks(diff),
        base_total: diff.base_total(),
        total: diff.tree().total(),
        unit: unit.name(),
        weight: what,
        functions: diff.functions(base),
    }
}

/// [`diff_folded_json`]'s document.
#[derive(serde::Serialize)]
pub struct DiffFoldedJson<'a> {
    stacks: DiffStacks<'a>,
    base_total: u64,
    total: u64,
    unit: &'static str,
    weight: &'a str,
    functions: Vec<crate::diff::FunctionChange>,
}

/// The stacks of a differential tree as a JSON array, each serialized as it is
/// reached.
struct DiffStacks<'a>(&'a crate::diff::DiffTree);

impl serde::Serialize for DiffStacks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(serde::Serialize)]
        struct Stack<'a> {
            frames: &'a [&'a str],
            base: u64,
            weight: u64,
        }
        let mut seq = serializer.serialize_seq(None)?;
        self.0.try_for_each_stack(|frames, base, weight| {
            seq.serialize_element(&Stack {
                frames,
                base,
                weight,
            })
        })?;
        seq.end()
    }
}

/// The differential flame graph of `diff` (B's widths, A's colours), titled with
/// both traces; `what` says what the weights measure.
pub fn diff_flame_graph_svg(
    a: &TraceFile,
    b: &TraceFile,
    diff: &crate::diff::DiffTree,
    unit: Unit,
    what: &str,
    inverted: bool,
) -> String {
    let total = |t: u64| match unit {
        Unit::Samples => format!("{t} samples"),
        Unit::Bytes => human_bytes(t as f64),
    };
    crate::svg::diff_flame_graph(
        diff,
        &crate::svg::FlameGraphOptions {
            title: format!(
                "Memory {what}, {} against {}: red grew, blue shrank",
                file_name(&b.path),
                file_name(&a.path)
            ),
            subtitle: format!(
                "widths: B {} (total {}); A {} (total {}) (estimated sizes)",
                file_name(&b.path),
                total(diff.tree().total()),
                file_name(&a.path),
                total(diff.base_total()),
            ),
            bytes: unit == Unit::Bytes,
            inverted,
            ..crate::svg::FlameGraphOptions::default()
        },
    )
}

/// The last part of a path, for titles.
fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// The timeline plot of a trace, titled with its program and file: the live heap
/// (and allocation rate) over `points`, its peak marked; `filters` describes the
/// filter ([`crate::Filter::describe`]).
pub fn timeline_svg(
    trace: &TraceFile,
    profile: &Profile,
    points: &[TimelinePoint],
    filters: &[String],
) -> String {
    let s = profile.sampling;
    let mut subtitle = format!(
        "{} — sample rate {}: 1 sample ≈ {} (estimated sizes)",
        file_name(&trace.path),
        s.sample_rate,
        human_bytes(s.bytes_per_sample())
    );
    if !filters.is_empty() {
        subtitle = format!("{subtitle}; {}", filters.join(", "));
    }
    crate::svg::timeline_plot(
        points,
        s,
        &crate::svg::PlotOptions {
            title: format!(
                "Live heap of {} (pid {})",
                file_name(&trace.info.executable_name.to_str_lossy()),
                trace.info.pid
            ),
            subtitle,
            peak: Some((profile.peak.time, s.bytes(profile.peak.live))),
            ..crate::svg::PlotOptions::default()
        },
    )
}

/// The total of a frame tree's stacks in words: `12.3 MiB`, or `42 samples`.
pub fn folded_total(tree: &FrameTree, unit: Unit) -> String {
    let total = tree.total();
    match unit {
        Unit::Samples => format!("{total} samples"),
        Unit::Bytes => human_bytes(total as f64),
    }
}

/// The flame graph (or icicle graph, `inverted`) of a frame tree, titled with the
/// trace's program and file; `what` says what the weights measure.
pub fn flame_graph_svg(
    trace: &TraceFile,
    profile: &Profile,
    tree: &FrameTree,
    unit: Unit,
    what: &str,
    inverted: bool,
) -> String {
    crate::svg::flame_graph(
        tree,
        &crate::svg::FlameGraphOptions {
            title: format!(
                "Memory {what}: {}",
                file_name(&trace.info.executable_name.to_str_lossy())
            ),
            subtitle: format!(
                "{} — total {}; 1 sample ≈ {} (estimated sizes)",
                file_name(&trace.path),
                folded_total(tree, unit),
                human_bytes(profile.sampling.bytes_per_sample()),
            ),
            bytes: unit == Unit::Bytes,
            inverted,
            ..crate::svg::FlameGraphOptions::default()
        },
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::Unit;
    use crate::sites::Weight;
    use serde_json::json;

    /// The counts' JSON names each source's fields by the source's own name, and
    /// carries the live-at fields only for a time asked.
    #[test]
    fn counts_name_sources_as_the_trace_does_and_live_at_when_asked() {
        let s = Sampling {
            sample_rate: 0.5,
            word_size_bits: 64,
        };
        let c = SiteCounts {
            samples_by_source: [1, 20, 300],
            live_at: 7,
            ..SiteCounts::default()
        };
        let without = serde_json::to_value(counts_json(s, &c, false)).unwrap();
        for src in AllocationSource::ALL {
            let samples = c.samples_by_source[src as usize];
            assert_eq!(without[format!("{}_samples", src.name())], samples);
            assert_eq!(without[format!("{}_bytes", src.name())], samples * 16);
        }
        assert!(without.get("live_at_samples").is_none());
        let with = serde_json::to_value(counts_json(s, &c, true)).unwrap();
        assert_eq!(with["live_at_samples"], 7);
        assert_eq!(with["live_at_bytes"], 7 * 16);
        assert_eq!(
            with.as_object().unwrap().len(),
            without.as_object().unwrap().len() + 3
        );
    }

    #[test]
    fn folded_stacks_as_text_and_json() {
        let tree = FrameTree::from_folded(&[("main;g;h", 12), ("main;f", 30), ("main", 1)]);
        let mut text = Vec::new();
        tree.write_folded(&mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "main 1\nmain;f 30\nmain;g;h 12\n"
        );
        let v = serde_json::to_value(folded_json(&tree, Unit::Samples, "allocated")).unwrap();
        assert_eq!(v["unit"], "samples");
        assert_eq!(v["weight"], "allocated");
        assert_eq!(v["total"], 43);
        assert_eq!(v["stacks"][2]["frames"], json!(["main", "g", "h"]));
        assert_eq!(v["stacks"][2]["weight"], 12);
        assert_eq!(v["stacks"].as_array().unwrap().len(), 3);
        assert_eq!(folded_total(&tree, Unit::Samples), "43 samples");
        assert_eq!(folded_total(&tree, Unit::Bytes), "43 B");
    }

    #[test]
    fn weights_in_words() {
        let t = Some(Timedelta::from_micros(1_500_000));
        assert_eq!(Weight::Allocated.describe(None, false), "allocated");
        assert_eq!(Weight::LiveAt.describe(t, false), "live at 1.5s");
        assert_eq!(Weight::LiveAt.describe(t, true), "live at the peak (1.5s)");
        assert_eq!(Weight::LiveEnd.describe(None, false), "live at the end");
    }
}
