//! The questions asked of a trace, as the command line and the viewer (`tracekit-view`) ask them:
//! each a plain struct of options whose `run` makes the passes it needs over a
//! [`Reader`] and returns an answer that renders itself as a table, CSV, JSON or SVG.
//!
//! With the `clap` feature each query is also a `clap::Args`, its fields' docs the
//! command line's help, so the command line and the library name an option once.
//!
//! What a query decides, beyond the one pass of [`crate::passes::analyze`]:
//! - a question about the live heap at its peak first finds the peak of the whole heap
//!   (unfiltered) and then weighs what is live at that time ([`passes::find_peak`]);
//! - a report that shows the peak of its own pass makes it exact when domains
//!   interleaved ([`passes::settle_peak`]);
//! - sites named by leaf, function or file need only each backtrace's innermost
//!   entries, which the pass keeps up to the one that names the site.

use tracekit_memtrace::{LocationLookup, ReadError, Timedelta};

use crate::analyzer::Options;
use crate::curve::TimelinePoint;
use crate::filter::{Filter, FilterError};
use crate::frames::{FrameTree, Hide};
use crate::passes::{self, Pass, Progress, Source, Stage};
use crate::paths;
use crate::render::{self, DiffContext, TopContext, TraceFile};
use crate::report::{self, DiffRow, FoldOptions, GroupBy, Rank, Top, Unit};
use crate::sites::{PerSite, Weight};
use crate::symbols::{FrameLabel, FrameSkip, Naming};
#[cfg(feature = "clap")]
use crate::time::time_arg;
use crate::units::human_bytes;

/// Why a query could not be answered.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The filter keeps nothing by construction.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The pass that looks for the peak of the live heap stopped at damage.
    #[error(transparent)]
    Peak(ReadError),
}

/// One pass with `options` and `filter`, its progress reported as
/// [`Stage::Analysing`]; with `settle`, its peak made exact.
fn filtered_pass(
    filter: &Filter,
    source: &mut dyn Source,
    options: Options,
    settle: bool,
    progress: Progress<'_>,
) -> Pass {
    let options = Options {
        filter: filter.clone(),
        ..options
    };
    match settle {
        true => passes::settled(source, options, progress),
        false => passes::analyze(source, options, progress),
    }
}

/// How allocation sites are named (shared by `top` and `diff`).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SiteSpec {
    /// Name sites by their innermost frame even when it is Rust standard-library code
    /// (by default frames from std, alloc, core and hashbrown are looked past, so that a
    /// Rust program's site is its own code rather than RawVec growth; OCaml traces have
    /// no such frames).
    #[cfg_attr(feature = "clap", arg(long))]
    pub std_frames: bool,
    /// Also look past frames whose function name starts with, or whose file path
    /// contains, this text (repeatable; e.g. a wrapper crate's name).
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATTERN"))]
    pub skip_frames: Vec<String>,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub naming: Naming,
}

impl SiteSpec {
    /// The frames looked past when naming a site.
    pub fn skip(&self) -> FrameSkip {
        let base = match self.std_frames {
            true => FrameSkip::none(),
            false => FrameSkip::rust_std(),
        };
        self.skip_frames
            .iter()
            .fold(base, |skip, p| skip.with_pattern(p))
            .with_naming(self.naming)
    }

    /// The pass's options for sites grouped `by`.
    fn options(&self, by: GroupBy) -> Options {
        Options {
            leaf_only: by != GroupBy::Backtrace,
            // A table of whole backtraces has a site for each: half the bytes.
            per_site: match by {
                GroupBy::Backtrace => PerSite::Narrow,
                _ => PerSite::All,
            },
            site_skip: self.skip(),
            // Site tables do not show the timeline.
            timeline_buckets: 0,
            ..Options::default()
        }
    }
}

/// `0` means no limit.
fn limit(n: usize) -> usize {
    if n == 0 { usize::MAX } else { n }
}

/// The peak of the whole live heap, when `peak` asks for it.
fn whole_peak(
    peak: bool,
    source: &mut dyn Source,
    progress: Progress<'_>,
) -> Result<Option<crate::Peak>, QueryError> {
    match peak {
        true => passes::find_peak(source, progress)
            .map(Some)
            .map_err(QueryError::Peak),
        false => Ok(None),
    }
}

/// Allocation sites ranked by allocated bytes, or by bytes live at a time or at the
/// peak of the live heap.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TopQuery {
    /// Group allocations by.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "leaf"))]
    pub by: GroupBy,
    /// Show this many sites (0: all).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 20))]
    pub limit: usize,
    /// Rank by bytes live at this time instead of allocated bytes.
    #[cfg_attr(feature = "clap", arg(long, value_parser = time_arg, conflicts_with = "peak"))]
    pub at: Option<Timedelta>,
    /// Rank by bytes live at the peak of the live heap (reports when that is).
    #[cfg_attr(feature = "clap", arg(long))]
    pub peak: bool,
    /// Rank by how steadily live bytes grow over the trace (a leak's shape): the
    /// slope of each site's live bytes at 32 times, robust to a spike that comes
    /// and goes, times how many of its steps grow.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with_all = ["at", "peak"]))]
    pub growing: bool,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub sites: SiteSpec,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

/// The times `top --growing` weighs each site's live bytes at.
pub const GROWING_TIMES: usize = 32;

/// The answer to a [`TopQuery`].
#[derive(Debug)]
pub struct TopAnswer {
    /// The pass (its profile, warnings and error).
    pub pass: Pass,
    /// The ranked sites.
    pub top: Top,
    /// How the query was asked, for the headers.
    pub context: TopContext,
    /// Whether most of the profile's sites have no source line (the traced program
    /// was built without line tables).
    pub mostly_lineless: bool,
    /// With [`TopQuery::growing`], the groups whose live heap grows, steadiest
    /// first, at most the query's limit.
    pub growing: Option<Vec<report::GrowingSite>>,
}

impl TopQuery {
    /// Runs the passes the query needs over `reader`.
    pub fn run(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<TopAnswer, QueryError> {
        self.filter.check()?;
        let peak = whole_peak(self.peak, source, &mut *progress)?;
        let context = TopContext {
            at: peak.as_ref().map(|p| p.time).or(self.at),
            at_peak: peak.is_some(),
            filters: self.filter.describe(),
        };
        // Growth is weighed at times spread over the whole trace.
        let curve_times = match self.growing {
            true => {
                let end = source.end(&mut *progress).as_micros().max(0);
                let k = GROWING_TIMES as i64;
                Some(
                    (1..=k)
                        .map(|i| Timedelta::from_micros(end * i / k))
                        .collect(),
                )
            }
            false => None,
        };
        let options = Options {
            live_at: context.at,
            curve_times,
            ..self.sites.options(self.by)
        };
        // The header shows the peak: the whole heap's, or this pass's made exact.
        let mut pass = filtered_pass(&self.filter, source, options, peak.is_none(), progress);
        if let Some(peak) = peak {
            pass.profile.peak = peak;
        }
        let rank = match context.at {
            Some(_) => Rank::LiveAt,
            None => Rank::Allocated,
        };
        let (symbols, skip) = (source.locations(), self.sites.skip());
        let top = report::top_skipping(
            &pass.profile,
            symbols,
            self.by,
            rank,
            limit(self.limit),
            &skip,
        );
        let mostly_lineless = report::lineless_share(&pass.profile, symbols, &skip) > 0.5;
        let growing = self.growing.then(|| {
            let mut g = report::growing(&pass.profile, symbols, self.by, &skip);
            g.truncate(limit(self.limit));
            g
        });
        Ok(TopAnswer {
            pass,
            top,
            context,
            mostly_lineless,
            growing,
        })
    }
}

impl TopAnswer {
    /// The table `tracekit memtrace top` prints.
    pub fn table(&self, trace: &TraceFile) -> String {
        match &self.growing {
            Some(g) => {
                render::growing_table(trace, &self.pass.profile, &self.top, &self.context, g)
            }
            None => render::top_table(trace, &self.pass.profile, &self.top, &self.context),
        }
    }

    /// The same as JSON.
    pub fn json(&self, trace: &TraceFile) -> render::TopJson {
        let mut json = render::top_json(trace, &self.pass.profile, &self.top, &self.context);
        json.growing = self
            .growing
            .as_ref()
            .map(|g| render::growing_json(&self.pass.profile, g));
        json
    }
}

/// The live heap and the allocation rate over time.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TimelineQuery {
    /// At most this many points (intervals end on round times; 1 to 100000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 500, value_parser = points_arg))]
    pub points: usize,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

/// The answer to a [`TimelineQuery`].
#[derive(Debug)]
pub struct TimelineAnswer {
    /// The pass, its peak exact.
    pub pass: Pass,
    /// The curve's points.
    pub points: Vec<TimelinePoint>,
    /// The filter in words.
    pub filters: Vec<String>,
}

impl TimelineQuery {
    /// Runs the pass (without backtraces) over `reader`.
    pub fn run(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<TimelineAnswer, QueryError> {
        self.filter.check()?;
        let options = Options {
            backtraces: false,
            ..Options::default()
        };
        let pass = filtered_pass(&self.filter, source, options, true, progress);
        let points = (pass.profile.timeline).points(self.points.clamp(1, MAX_POINTS));
        Ok(TimelineAnswer {
            pass,
            points,
            filters: self.filter.describe(),
        })
    }
}

impl TimelineAnswer {
    /// CSV, a line per point.
    pub fn csv(&self) -> String {
        render::timeline_csv(&self.pass.profile, &self.points)
    }

    /// JSON.
    pub fn json(&self, trace: &TraceFile) -> render::TimelineJson {
        render::timeline_json(trace, &self.pass.profile, &self.points)
    }

    /// An SVG plot of both curves.
    pub fn svg(&self, trace: &TraceFile) -> String {
        render::timeline_svg(trace, &self.pass.profile, &self.points, &self.filters)
    }

    /// What the plot shows, in a line: `500 points over 2.5s, peak 1.2 MiB at 1.1s`.
    pub fn summary(&self) -> String {
        let p = &self.pass.profile;
        format!(
            "{} points over {}, peak {} at {}",
            self.points.len(),
            p.end,
            human_bytes(p.sampling.bytes(p.peak.live) as f64),
            p.peak.time,
        )
    }
}

/// Folded stacks of allocated bytes, or of bytes live at a time.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FlameQuery {
    /// Weigh stacks by bytes live at this time instead of allocated bytes.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_parser = time_arg, conflicts_with_all = ["peak", "live_end"])
    )]
    pub at: Option<Timedelta>,
    /// Weigh stacks by bytes live at the peak of the live heap.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "live_end"))]
    pub peak: bool,
    /// Weigh stacks by bytes still live at the end of the trace.
    #[cfg_attr(feature = "clap", arg(long))]
    pub live_end: bool,
    /// What a frame shows.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "function"))]
    pub frames: FrameLabel,
    /// Weights in samples instead of estimated bytes.
    #[cfg_attr(feature = "clap", arg(long))]
    pub samples: bool,
    /// Fold recursion, direct and indirect, always: a frame called again below
    /// itself joins its outer call (by default only when the stacks are deeper
    /// than a screen, 60 frames).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "no_collapse_recursion"))]
    pub collapse_recursion: bool,
    /// Never fold recursion: every call its own frame, however deep.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_collapse_recursion: bool,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub naming: Naming,
    /// Leave out of the stacks the frames whose name contains this text (their
    /// callees join their callers; repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "TEXT"))]
    pub hide: Vec<String>,
    /// Leave out of the stacks the frames of this function (their defname is the
    /// text; repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub hide_function: Vec<String>,
    /// Count each frame's sampled objects too ([`FrameTree::objects`]): a few
    /// bytes more per site and frame, for the outputs that show a count (not an
    /// option: the folded stacks have no place for it).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub count_objects: bool,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

/// The answer to a [`FlameQuery`].
#[derive(Debug)]
pub struct FlameAnswer {
    /// The pass.
    pub pass: Pass,
    /// The stacks, merged into a tree of frames.
    pub tree: FrameTree,
    /// The weights' unit.
    pub unit: Unit,
    /// What the weights are, in words (`allocated`, `live at the peak (1.5s)`).
    pub what: String,
    /// Whether recursion was folded (asked, or the stacks were deeper than a
    /// screen).
    pub recursion_folded: bool,
}

impl FlameQuery {
    /// Runs the passes the query needs over `reader`, then folds the stacks (reported
    /// to `progress` as [`Stage::Folding`]).
    pub fn run(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<FlameAnswer, QueryError> {
        self.filter.check()?;
        let peak = whole_peak(self.peak, source, &mut *progress)?;
        let at = peak.map(|p| p.time).or(self.at);
        let weight = match (at, self.live_end) {
            (Some(_), _) => Weight::LiveAt,
            (None, true) => Weight::LiveEnd,
            (None, false) => Weight::Allocated,
        };
        let options = Options {
            live_at: at,
            timeline_buckets: 0,
            per_site: match self.count_objects {
                true => PerSite::Counted(weight),
                false => PerSite::Weight(weight),
            },
            ..Options::default()
        };
        let pass = filtered_pass(&self.filter, source, options, false, &mut *progress);
        let unit = match self.samples {
            true => Unit::Samples,
            false => Unit::Bytes,
        };
        progress(Stage::Folding, source.size_bytes());
        let fold = FoldOptions {
            weight,
            label: self.frames,
            unit,
            collapse_recursion: false,
            fold_recursion: self.collapse_recursion,
            naming: self.naming,
        };
        let hide = Hide {
            containing: self.hide.clone(),
            functions: self.hide_function.clone(),
        };
        let mut tree = source.fold(&pass.profile, fold, &hide);
        let mut recursion_folded = self.collapse_recursion;
        // Recursion deeper than a screen is folded unless asked not to be.
        if !self.collapse_recursion
            && !self.no_collapse_recursion
            && tree.depth() > crate::frames::SCREEN_FRAMES
        {
            let folded = FoldOptions {
                fold_recursion: true,
                ..fold
            };
            tree = source.fold(&pass.profile, folded, &hide);
            recursion_folded = true;
        }
        Ok(FlameAnswer {
            pass,
            tree,
            recursion_folded,
            unit,
            what: weight.describe(at, self.peak),
        })
    }
}

impl FlameAnswer {
    /// Folded stacks, `stack weight` a line, as flamegraph.pl and inferno read them,
    /// written to `out` as they are walked.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.tree.write_folded(out)
    }

    /// JSON, serialized as the stacks are walked.
    pub fn json(&self) -> render::FoldedJson<'_> {
        render::folded_json(&self.tree, self.unit, &self.what)
    }

    /// An interactive SVG flame graph (an icicle graph when `inverted`).
    pub fn svg(&self, trace: &TraceFile, inverted: bool) -> String {
        let p = &self.pass.profile;
        render::flame_graph_svg(trace, p, &self.tree, self.unit, &self.what, inverted)
    }

    /// What the graph shows, in a line: `120 stacks, 1.2 MiB allocated`.
    pub fn summary(&self) -> String {
        let total = render::folded_total(&self.tree, self.unit);
        format!("{} stacks, {total} {}", self.tree.stacks(), self.what)
    }
}

/// Two flame graphs of one [`FlameQuery`] compared: a baseline's (A) and a
/// second trace's (B), merged frame by frame ([`crate::diff`]).
#[derive(Debug)]
pub struct FlameDiff {
    /// A's flame graph.
    pub base: FlameAnswer,
    /// B's flame graph.
    pub answer: FlameAnswer,
    /// Both merged.
    pub tree: crate::diff::DiffTree,
}

impl FlameDiff {
    /// Compares `answer` (B) with `base` (A).
    pub fn new(base: FlameAnswer, answer: FlameAnswer) -> FlameDiff {
        let tree = crate::diff::diff(&base.tree, &answer.tree);
        FlameDiff { base, answer, tree }
    }

    /// Differential folded stacks, `stack A B` a line, as flamegraph.pl and
    /// inferno read them.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.tree.write_folded(out)
    }

    /// JSON: the stacks with both weights, and each function's change.
    pub fn json(&self) -> render::DiffFoldedJson<'_> {
        render::diff_folded_json(
            &self.tree,
            &self.base.tree,
            self.answer.unit,
            &self.answer.what,
        )
    }

    /// The differential flame graph (an icicle graph when `inverted`).
    pub fn svg(&self, a: &TraceFile, b: &TraceFile, inverted: bool) -> String {
        let (unit, what) = (self.answer.unit, &self.answer.what);
        render::diff_flame_graph_svg(a, b, &self.tree, unit, what, inverted)
    }

    /// What the graph shows, in a line: `120 stacks, 1.2 MiB allocated (A: 1.0 MiB)`.
    pub fn summary(&self) -> String {
        let unit = self.answer.unit;
        let (b, a) = (&self.answer.tree, &self.base.tree);
        format!(
            "{} stacks, {} {} (A: {})",
            b.stacks(),
            render::folded_total(b, unit),
            self.answer.what,
            render::folded_total(a, unit)
        )
    }
}

/// The heavy call sequences of the flame graph's stacks ([`paths::hot_paths`]):
/// memtrace_viewer's hot paths.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct HotPathsQuery {
    /// Report call sequences in at least this share of the weight (0.005: 0.5%, the
    /// viewer's significance frequency).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.005, value_parser = share_arg))]
    pub frequency: f64,
    /// A sequence is left out when a one-frame longer one keeps all but this share
    /// of the total weight (0.0001: 0.01%, the viewer's tolerance).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0001, value_parser = share_arg))]
    pub tolerance: f64,
    /// Show this many paths, heaviest first (0: all).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 50))]
    pub limit: usize,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub flame: FlameQuery,
}

/// Most points a curve is drawn with: an answer's size is bounded by it,
/// however long the trace.
pub const MAX_POINTS: usize = 100_000;

/// A number of points, 1 to [`MAX_POINTS`].
#[cfg(feature = "clap")]
fn points_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_POINTS).contains(&n) => Ok(n),
        _ => Err(format!("{s}: a number of points from 1 to {MAX_POINTS}")),
    }
}

/// A share, 0 to 1.
#[cfg(feature = "clap")]
fn share_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{s}: a share is a number from 0 to 1 (0.005 is 0.5%)"
        )),
    }
}

/// The answer to a [`HotPathsQuery`].
#[derive(Debug)]
pub struct HotPathsAnswer {
    /// The flame graph the paths were found in.
    pub flame: FlameAnswer,
    /// The paths, heaviest first (all of them; [`HotPathsAnswer::shown`] limits).
    pub paths: Vec<paths::HotPath>,
    /// How many to show.
    pub limit: usize,
    /// The query's frequency and tolerance.
    pub frequency: f64,
    /// See [`HotPathsQuery::tolerance`].
    pub tolerance: f64,
}

impl HotPathsQuery {
    /// The flame graph's passes, then the paths in its tree.
    pub fn run(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<HotPathsAnswer, QueryError> {
        // The paths' counts are part of the answer.
        let query = FlameQuery {
            count_objects: true,
            ..self.flame.clone()
        };
        let flame = query.run(source, progress)?;
        Ok(self.answer(flame))
    }

    /// The paths in an answer to this query's [`FlameQuery`].
    pub fn answer(&self, flame: FlameAnswer) -> HotPathsAnswer {
        let paths = paths::hot_paths(&flame.tree, self.frequency, self.tolerance);
        HotPathsAnswer {
            flame,
            paths,
            limit: self.limit,
            frequency: self.frequency,
            tolerance: self.tolerance,
        }
    }
}

/// `hot-paths --json`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HotPathsJson {
    /// The trace.
    pub trace: render::InfoJson,
    /// `bytes` or `samples`.
    pub unit: &'static str,
    /// What the weights measure.
    pub what: String,
    /// The weight of every path.
    pub total: u64,
    /// The significance frequency asked.
    pub frequency: f64,
    /// The tolerance asked.
    pub tolerance: f64,
    /// Paths found before the limit.
    pub paths_found: usize,
    /// The paths shown, heaviest first.
    pub paths: Vec<HotPathJson>,
}

/// One hot path.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HotPathJson {
    /// Its frames, outermost first.
    pub frames: Vec<String>,
    /// Its weight.
    pub weight: u64,
    /// Its fraction of the total.
    pub share: f64,
    /// The objects it holds.
    pub objects: u64,
}

impl HotPathsAnswer {
    /// The paths to show.
    pub fn shown(&self) -> &[paths::HotPath] {
        let n = match self.limit {
            0 => self.paths.len(),
            n => n.min(self.paths.len()),
        };
        self.paths.get(..n).unwrap_or(&[])
    }

    fn share(&self, w: u64) -> f64 {
        match self.flame.tree.total() {
            0 => 0.0,
            t => w as f64 / t as f64,
        }
    }

    /// A table: weight, share, objects and the path, a row per path.
    pub fn table(&self, trace: &TraceFile) -> String {
        use std::fmt::Write;
        let unit = |w: u64| match self.flame.unit {
            Unit::Bytes => human_bytes(w as f64),
            Unit::Samples => format!("{w} samples"),
        };
        let mut out = format!(
            "{}: hot paths of {} {} (in at least {}% of it, tolerance {}%)\n",
            trace.path,
            unit(self.flame.tree.total()),
            self.flame.what,
            self.frequency * 100.0,
            self.tolerance * 100.0,
        );
        let _ = writeln!(
            out,
            "{:>12} {:>7} {:>9}  path (caller first)",
            "weight", "share", "objects"
        );
        for p in self.shown() {
            let _ = writeln!(
                out,
                "{:>12} {:>6.2}% {:>9}  {}",
                unit(p.weight),
                self.share(p.weight) * 100.0,
                p.objects,
                paths::folded(&p.frames)
            );
        }
        if self.shown().len() < self.paths.len() {
            let _ = writeln!(
                out,
                "({} more; --limit 0 shows all)",
                self.paths.len() - self.shown().len()
            );
        }
        out
    }

    /// JSON: the weights' unit and meaning, the total, and the paths shown.
    pub fn json(&self, trace: &TraceFile) -> HotPathsJson {
        let paths = self
            .shown()
            .iter()
            .map(|p| HotPathJson {
                frames: p.frames.clone(),
                weight: p.weight,
                share: self.share(p.weight),
                objects: p.objects,
            })
            .collect();
        HotPathsJson {
            trace: render::info_json(trace, &self.flame.pass.profile),
            unit: self.flame.unit.name(),
            what: self.flame.what.clone(),
            total: self.flame.tree.total(),
            frequency: self.frequency,
            tolerance: self.tolerance,
            paths_found: self.paths.len(),
            paths,
        }
    }
}

/// The live-heap and allocation-rate counters and the largest allocations, for an FXT
/// trace ([`crate::fxt::write_profile`]).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FxtQuery {
    /// Instant events (with backtraces) for this many of the largest allocations.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", default_value_t = 20))]
    pub big: usize,
    /// At most this many counter samples per track.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2000))]
    pub points: usize,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub naming: Naming,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

impl FxtQuery {
    /// Runs the pass over `reader`, its peak exact: the timeline, the peak and the
    /// `big` largest allocations with their backtraces, no other backtrace
    /// ([`Options::big_backtraces_only`]).
    pub fn run(&self, source: &mut dyn Source, progress: Progress<'_>) -> Result<Pass, QueryError> {
        self.filter.check()?;
        let options = Options {
            big: self.big,
            big_backtraces_only: true,
            ..Options::default()
        };
        Ok(filtered_pass(&self.filter, source, options, true, progress))
    }

    /// The writer's options for this query.
    pub fn fxt_options(&self) -> crate::fxt::FxtOptions {
        crate::fxt::FxtOptions {
            points: self.points.max(1),
            naming: self.naming,
            ..crate::fxt::FxtOptions::default()
        }
    }
}

/// The trace's allocations as a pprof heap profile ([`crate::pprof`]).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PprofQuery {
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub naming: Naming,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

/// The answer to a [`PprofQuery`].
#[derive(Debug)]
pub struct PprofAnswer {
    /// The pass.
    pub pass: Pass,
    /// The profile.
    pub profile: tracekit_pprof::proto::Profile,
}

impl PprofQuery {
    /// Runs the pass over `source` (whole backtraces, every count) and makes
    /// the profile.
    pub fn run(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<PprofAnswer, QueryError> {
        self.filter.check()?;
        let options = Options {
            leaf_only: false,
            timeline_buckets: 0,
            per_site: PerSite::Narrow,
            ..Options::default()
        };
        let pass = filtered_pass(&self.filter, source, options, false, progress);
        let profile = crate::pprof::heap_profile(
            &pass.profile,
            source.locations(),
            source.info(),
            self.naming,
            &self.filter.describe(),
        );
        Ok(PprofAnswer { pass, profile })
    }
}

/// Sites whose allocated (or live) bytes changed most between two traces.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DiffQuery {
    /// Group allocations by.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "leaf"))]
    pub by: GroupBy,
    /// Show this many sites (0: all).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 20))]
    pub limit: usize,
    /// Rank by the change of bytes live at the end instead of allocated bytes.
    #[cfg_attr(feature = "clap", arg(long))]
    pub live: bool,
    /// Rank by the change of bytes live at this time (from each trace's
    /// start) instead of allocated bytes.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_parser = time_arg, conflicts_with_all = ["peak", "live"])
    )]
    pub at: Option<Timedelta>,
    /// Rank by the change of bytes live at the peak of each trace's live heap.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "live"))]
    pub peak: bool,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub sites: SiteSpec,
    #[allow(missing_docs)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: Filter,
}

/// The answer to a [`DiffQuery`].
#[derive(Debug)]
pub struct DiffAnswer {
    /// The baseline's pass.
    pub a: Pass,
    /// The second trace's pass.
    pub b: Pass,
    /// Sites by the size of their change.
    pub rows: Vec<DiffRow>,
    /// How many rows to show.
    pub limit: usize,
}

impl DiffQuery {
    /// One of the two passes, over `reader` (each trace its own, so that each can
    /// report its own progress).
    pub fn pass(
        &self,
        source: &mut dyn Source,
        progress: Progress<'_>,
    ) -> Result<Pass, QueryError> {
        self.filter.check()?;
        let peak = whole_peak(self.peak, source, &mut *progress)?;
        let options = Options {
            live_at: peak.as_ref().map(|p| p.time).or(self.at),
            ..self.sites.options(self.by)
        };
        let mut pass = filtered_pass(&self.filter, source, options, false, progress);
        if let Some(peak) = peak {
            pass.profile.peak = peak;
        }
        Ok(pass)
    }

    /// What the sites are ranked by.
    pub fn rank(&self) -> Rank {
        match (self.live, self.peak || self.at.is_some()) {
            (true, _) => Rank::LiveEnd,
            (false, true) => Rank::LiveAt,
            (false, false) => Rank::Allocated,
        }
    }

    /// Compares the two passes, each with its trace's locations.
    pub fn compare(
        &self,
        (a, la): (Pass, &dyn LocationLookup),
        (b, lb): (Pass, &dyn LocationLookup),
    ) -> DiffAnswer {
        let skip = self.sites.skip();
        let rows = report::diff_skipping(
            (&a.profile, la),
            (&b.profile, lb),
            self.by,
            self.rank(),
            &skip,
        );
        DiffAnswer {
            a,
            b,
            rows,
            limit: limit(self.limit),
        }
    }

    /// The names of the two traces, for the headers.
    pub fn context(&self, a: TraceFile, b: TraceFile) -> DiffContext {
        DiffContext {
            a,
            b,
            by: Some(self.by),
            rank: self.rank(),
        }
    }
}

impl DiffAnswer {
    /// The table `tracekit memtrace diff` prints.
    pub fn table(&self, ctx: &DiffContext) -> String {
        render::diff_table(
            ctx,
            &self.a.profile,
            &self.b.profile,
            &self.rows,
            self.limit,
        )
    }

    /// The same as JSON.
    pub fn json(&self, ctx: &DiffContext) -> render::DiffJson {
        render::diff_json(
            ctx,
            &self.a.profile,
            &self.b.profile,
            &self.rows,
            self.limit,
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_memtrace::AllocationSource;
    use tracekit_memtrace::Reader;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    fn trace(seed: u64) -> Vec<u8> {
        let config = SynthConfig {
            allocs: 20_000,
            seed,
            ..SynthConfig::default()
        };
        write_synthetic(Vec::new(), &config).unwrap()
    }

    fn top(peak: bool, filter: Filter) -> TopQuery {
        TopQuery {
            growing: false,
            by: GroupBy::Leaf,
            limit: 0,
            at: None,
            peak,
            sites: SiteSpec::default(),
            filter,
        }
    }

    fn major_only() -> Filter {
        Filter {
            source: vec![AllocationSource::Major],
            ..Filter::default()
        }
    }

    #[test]
    fn top_at_the_peak_weighs_the_filtered_sites_at_the_whole_heaps_peak() {
        let bytes = trace(3);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let whole = passes::find_peak(&mut reader, &mut |_, _| {}).unwrap();
        let mut stages = Vec::new();
        let answer = top(true, major_only())
            .run(&mut reader, &mut |s, _| stages.push(s))
            .unwrap();
        stages.dedup();
        assert_eq!(stages, [Stage::FindingPeak, Stage::Analysing]);
        assert_eq!(answer.context.at, Some(whole.time));
        assert!(answer.context.at_peak);
        assert_eq!(answer.context.filters, ["source major"]);
        // The header's peak is the whole heap's, not the filtered pass's.
        assert_eq!(answer.pass.profile.peak, whole);
        assert_eq!(answer.top.rank, Rank::LiveAt);
        let live: Vec<u64> = answer.top.sites.iter().map(|s| s.counts.live_at).collect();
        assert!(live.windows(2).all(|w| w[0] >= w[1]), "{live:?}");
        assert!(live.iter().sum::<u64>() > 0);
        let table = answer.table(&TraceFile::new("t.ctf", reader.info()));
        assert!(table.contains("peak"), "{table}");
    }

    /// A filter that keeps nothing leaves the curve's buckets a microsecond
    /// wide; however many points are asked, the answer has at most
    /// [`MAX_POINTS`].
    #[test]
    fn a_curve_has_at_most_max_points_however_many_are_asked() {
        let config = SynthConfig {
            allocs: 200_000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let nothing = Filter {
            location: vec!["no such place".into()],
            ..Filter::default()
        };
        let q = TimelineQuery {
            points: usize::MAX,
            filter: nothing,
        };
        let answer = q.run(&mut reader, &mut |_, _| {}).unwrap();
        assert!(!answer.points.is_empty());
        assert!(answer.points.len() <= MAX_POINTS, "{}", answer.points.len());
    }

    #[test]
    fn top_ranks_by_allocation_and_keeps_only_the_limit() {
        let bytes = trace(4);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let all = top(false, Filter::default())
            .run(&mut reader, &mut |_, _| {})
            .unwrap();
        assert_eq!(all.top.rank, Rank::Allocated);
        assert!(all.top.sites.len() > 5 && all.top.other_sites == 0);
        let five = TopQuery {
            limit: 5,
            ..top(false, Filter::default())
        };
        let five = five.run(&mut reader, &mut |_, _| {}).unwrap();
        let names = |a: &TopAnswer| {
            a.top
                .sites
                .iter()
                .map(|s| s.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&five), names(&all)[..5]);
        assert_eq!(five.top.other_sites, all.top.sites.len() - 5);
        assert!(!five.mostly_lineless);
    }

    #[test]
    fn sites_by_backtrace_keep_whole_backtraces() {
        let bytes = trace(9);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let query = TopQuery {
            growing: false,
            by: GroupBy::Backtrace,
            ..top(false, Filter::default())
        };
        let answer = query.run(&mut reader, &mut |_, _| {}).unwrap();
        // The same pass with every backtrace entry kept, ranked the same way.
        let whole = passes::analyze(&mut reader, Options::default(), &mut |_, _| {});
        let symbols = reader.locations();
        let expected = report::top(
            &whole.profile,
            symbols,
            GroupBy::Backtrace,
            Rank::Allocated,
            usize::MAX,
        );
        let depth = |t: &Top| {
            t.sites
                .iter()
                .map(|s| s.backtrace.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
        };
        assert!(
            depth(&expected) > 2 * expected.sites.len(),
            "synthetic stacks are deep"
        );
        assert_eq!(depth(&answer.top), depth(&expected));
        let names = |t: &Top| t.sites.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&answer.top), names(&expected));
    }

    #[test]
    fn an_empty_time_range_is_refused_before_any_pass() {
        let bytes = trace(5);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let filter = Filter {
            between: Some(vec![Timedelta::from_micros(5), Timedelta::from_micros(1)]),
            ..Filter::default()
        };
        let mut passes_made = 0;
        let r = top(false, filter).run(&mut reader, &mut |_, pos| {
            passes_made += usize::from(pos == 0)
        });
        assert!(matches!(
            r,
            Err(QueryError::Filter(FilterError::EmptyRange(..)))
        ));
        assert_eq!(passes_made, 0);
    }

    #[test]
    fn clauses_on_lives_keep_the_objects_whose_lives_pass() {
        let bytes = trace(8);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        // Each object's samples, allocation and collection (or none), read here.
        let mut objects: Vec<(u64, Timedelta, Option<Timedelta>)> = Vec::new();
        let mut end = Timedelta::default();
        {
            let mut live = std::collections::HashMap::new();
            let mut events = reader.events(false);
            while let Some(item) = events.next_event() {
                let (t, ev) = item.unwrap();
                end = end.max(t);
                match ev {
                    tracekit_memtrace::Event::Alloc(a) => {
                        assert!(live.insert(a.obj_id.get(), objects.len()).is_none());
                        objects.push((a.nsamples, t, None));
                    }
                    tracekit_memtrace::Event::Collect(id, _) => {
                        if let Some(i) = live.remove(&id.get()) {
                            objects[i].2 = Some(t.max(objects[i].1));
                        }
                    }
                    _ => {}
                }
            }
        }
        let ms = |m: i64| Timedelta::from_micros(m * 1000);
        let third = end.as_micros() / 3;
        let t1 = Timedelta::from_micros(third);
        let t2 = Timedelta::from_micros(2 * third);
        let specs = [
            Filter {
                collected_between: Some(vec![t1, t2]),
                ..Filter::default()
            },
            Filter {
                never_collected: true,
                ..Filter::default()
            },
            Filter {
                lifetime: Some(vec![ms(0), ms(5)]),
                ..Filter::default()
            },
            Filter {
                live_between: Some(vec![t1, t2]),
                ..Filter::default()
            },
            Filter {
                live_between: Some(vec![t1, t1]),
                lifetime: Some(vec![ms(1), ms(1_000_000)]),
                source: vec![AllocationSource::Minor],
                ..Filter::default()
            },
        ];
        let total: u64 = objects.iter().map(|o| o.0).sum();
        for spec in specs {
            let expected: u64 = objects
                .iter()
                .filter(|(_, a, c)| spec.keeps_life(*a, *c, end))
                .map(|o| o.0)
                .sum();
            let q = TimelineQuery {
                points: 10,
                filter: spec.clone(),
            };
            let answer = q.run(&mut reader, &mut |_, _| {}).unwrap();
            let got = answer.pass.profile.totals.samples;
            if spec.source.is_empty() {
                assert_eq!(got, expected, "{spec:?}");
            } else {
                assert!(got <= expected, "{spec:?}");
            }
            assert!(0 < got && got < total, "{spec:?}: {got} of {total}");
        }
        let backwards = Filter {
            lifetime: Some(vec![ms(2), ms(1)]),
            ..Filter::default()
        };
        assert_eq!(
            backwards.check(),
            Err(FilterError::EmptyRangeOf("--lifetime", ms(2), ms(1)))
        );
    }

    #[test]
    fn a_flame_graph_at_the_peak_folds_what_is_live_then() {
        let bytes = trace(6);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let whole = passes::find_peak(&mut reader, &mut |_, _| {}).unwrap();
        let query = FlameQuery {
            at: None,
            peak: true,
            live_end: false,
            frames: FrameLabel::Function,
            samples: true,
            collapse_recursion: false,
            no_collapse_recursion: false,
            naming: Default::default(),
            hide: Vec::new(),
            hide_function: Vec::new(),
            count_objects: false,
            filter: Filter::default(),
        };
        let mut stages = Vec::new();
        let answer = query.run(&mut reader, &mut |s, _| stages.push(s)).unwrap();
        assert_eq!(stages.last(), Some(&Stage::Folding));
        assert_eq!(answer.what, format!("live at the peak ({})", whole.time));
        let lines = answer.tree.lines();
        let folded: u64 = lines.iter().map(|(_, w)| w).sum();
        // Every sample live at the peak is in exactly one stack.
        assert_eq!(folded, whole.live);
        assert_eq!(answer.tree.total(), whole.live);
        let stacks = format!("{} stacks, ", lines.len());
        assert!(answer.summary().starts_with(&stacks));
    }

    #[test]
    fn a_trace_diffed_with_itself_changes_nothing() {
        let bytes = trace(7);
        let query = DiffQuery {
            by: GroupBy::Function,
            limit: 20,
            live: false,
            at: None,
            peak: false,
            sites: SiteSpec::default(),
            filter: Filter::default(),
        };
        let (mut ra, mut rb) = (
            Reader::from_bytes(&bytes).unwrap(),
            Reader::from_bytes(&bytes).unwrap(),
        );
        let pa = query.pass(&mut ra, &mut |_, _| {}).unwrap();
        let pb = query.pass(&mut rb, &mut |_, _| {}).unwrap();
        let answer = query.compare((pa, ra.locations()), (pb, rb.locations()));
        assert!(!answer.rows.is_empty());
        assert!(
            answer
                .rows
                .iter()
                .all(|r| r.allocated_delta() == 0 && r.a == r.b)
        );
    }

    #[test]
    fn a_timeline_has_at_most_the_points_asked_for_and_an_exact_peak() {
        let bytes = trace(8);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let whole = passes::find_peak(&mut reader, &mut |_, _| {}).unwrap();
        let query = TimelineQuery {
            points: 40,
            filter: Filter::default(),
        };
        let answer = query.run(&mut reader, &mut |_, _| {}).unwrap();
        assert!(!answer.points.is_empty() && answer.points.len() <= 40);
        assert_eq!(answer.pass.profile.peak.live, whole.live);
        assert_eq!(answer.csv().lines().count(), answer.points.len() + 1);
        assert!(
            answer
                .summary()
                .starts_with(&format!("{} points over", answer.points.len()))
        );
    }

    #[test]
    fn site_specs_look_past_std_frames_unless_told_not_to() {
        let mut spec = SiteSpec::default();
        assert_eq!(spec.skip(), FrameSkip::rust_std());
        spec.std_frames = true;
        assert_eq!(spec.skip(), FrameSkip::none());
        spec.skip_frames.push("wrapper".into());
        assert_eq!(spec.skip(), FrameSkip::none().with_pattern("wrapper"));
    }
}
