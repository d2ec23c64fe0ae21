//! `tracekit memtrace top|timeline|flamegraph|to-fxt|diff`: what memtrace_viewer shows,
//! on the command line. Argument parsing, files and progress; the analysis itself is
//! `tracekit-analysis`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use tracekit_analysis::fxt::{self, FxtOptions};
use tracekit_analysis::passes::{self, Stage};
use tracekit_analysis::render::{self, DiffContext, TopContext, TraceFile};
use tracekit_analysis::report::{self, FoldOptions, GroupBy, Rank, Unit, Weight};
use tracekit_analysis::svg::human_bytes;
use tracekit_analysis::symbols::{FrameLabel, FrameSkip};
use tracekit_analysis::{Filter, Options, Pass, parse_bytes, parse_time};
use tracekit_fxt::io::{FinishError, IoDestination};
use tracekit_fxt::write::{Initialization, Writer as FxtWriter, WriterOptions};
use tracekit_memtrace::{AllocationSource, DomainId, Reader, Timedelta};

use crate::common::output::{OutputFile, print, write_file};
use crate::common::print_json;
use crate::common::{PROGRESS_THRESHOLD_BYTES, input, progress_bar, progress_spinner};
use crate::memtrace::open;

/// How sizes are estimated; shown in every analysis command's help.
const SIZES: &str = "Sizes are estimates in bytes: memtrace samples allocated words at the trace's \
sample rate, so each sample stands for 1/sample_rate words, times the trace's word size \
(8 bytes on 64-bit). Times are seconds from the trace start: 12.5s, 300ms, 1500us, 2m \
(a bare number is seconds).";

/// Memtrace analysis subcommands (flattened into `tracekit memtrace`).
#[derive(Subcommand)]
pub enum Command {
    /// Allocation sites ranked by allocated bytes (or by live bytes with --at/--peak).
    ///
    /// For each site: allocated bytes, share, sampled allocations, the minor/major/external
    /// split and the bytes still live at the end of the trace.
    #[command(after_help = SIZES)]
    Top(TopArgs),
    /// Live heap and allocation rate over time, as CSV (or an SVG plot with --plot).
    #[command(after_help = SIZES)]
    Timeline(TimelineArgs),
    /// Folded stacks (`frame;frame;frame weight`, as read by flamegraph.pl, inferno and
    /// speedscope) of allocated bytes or of bytes live at a time; --svg draws an
    /// interactive flame graph.
    #[command(after_help = SIZES)]
    Flamegraph(FlameArgs),
    /// Converts a trace to FXT for Perfetto: live-heap counters per domain, an
    /// allocation-rate counter, and instant events with backtraces for the largest
    /// allocations.
    #[command(name = "to-fxt", after_help = SIZES)]
    ToFxt(ToFxtArgs),
    /// Sites whose allocated (or live) bytes changed most between two traces.
    #[command(after_help = SIZES)]
    Diff(DiffArgs),
}

/// Which allocations count (shared by the analysis commands).
#[derive(Args, Clone, Debug, Default)]
pub struct FilterArgs {
    /// Keep only allocations from this source (repeatable).
    #[arg(long, value_enum)]
    source: Vec<AllocationSource>,
    /// Keep only objects at least this large (the object's own size, length x word size;
    /// e.g. 4096, 64k, 1MiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    min_size: Option<u64>,
    /// Keep only allocations whose backtrace has a location containing this text
    /// (locations print as defname@file:line:start-end).
    #[arg(long, value_name = "SUBSTRING")]
    location: Option<String>,
    /// Keep only allocations made by this domain (repeatable).
    #[arg(long, value_name = "ID")]
    domain: Vec<u16>,
    /// Keep only allocations made between two times (inclusive).
    #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = parse_time_arg)]
    between: Option<Vec<Timedelta>>,
}

/// How allocation sites are named (shared by `top` and `diff`).
#[derive(Args, Clone, Debug, Default)]
pub struct SiteArgs {
    /// Name sites by their innermost frame even when it is Rust standard-library code
    /// (by default frames from std, alloc, core and hashbrown are looked past, so that a
    /// Rust program's site is its own code rather than RawVec growth; OCaml traces have
    /// no such frames).
    #[arg(long)]
    std_frames: bool,
    /// Also look past frames whose function name starts with, or whose file path
    /// contains, this text (repeatable; e.g. a wrapper crate's name).
    #[arg(long, value_name = "PATTERN")]
    skip_frames: Vec<String>,
}

impl SiteArgs {
    fn skip(&self) -> FrameSkip {
        let base = if self.std_frames {
            FrameSkip::none()
        } else {
            FrameSkip::rust_std()
        };
        self.skip_frames
            .iter()
            .fold(base, |skip, p| skip.with_pattern(p))
    }

    /// Sites grouped by leaf, function or file need only each backtrace's innermost
    /// entries (the analysis keeps them up to the one that names the site).
    fn leaf_only(by: GroupBy) -> bool {
        by != GroupBy::Backtrace
    }
}

/// `top` arguments.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// Group allocations by.
    #[arg(long, value_enum, default_value = "leaf")]
    by: GroupBy,
    /// Show this many sites (0: all).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Rank by bytes live at this time instead of allocated bytes.
    #[arg(long, value_parser = parse_time_arg, conflicts_with = "peak")]
    at: Option<Timedelta>,
    /// Rank by bytes live at the peak of the live heap (reports when that is).
    #[arg(long)]
    peak: bool,
    #[command(flatten)]
    sites: SiteArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `timeline` arguments.
#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// At most this many points (intervals end on round times).
    #[arg(long, default_value_t = 500)]
    points: usize,
    /// Draw the curves to this SVG file instead of printing CSV (only SVG is supported).
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    filter: FilterArgs,
    /// Print JSON instead of CSV.
    #[arg(long)]
    json: bool,
}

/// `flamegraph` arguments.
#[derive(Args, Debug)]
pub struct FlameArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// Weigh stacks by bytes live at this time instead of allocated bytes.
    #[arg(long, value_parser = parse_time_arg, conflicts_with_all = ["peak", "live_end"])]
    at: Option<Timedelta>,
    /// Weigh stacks by bytes live at the peak of the live heap.
    #[arg(long, conflicts_with = "live_end")]
    peak: bool,
    /// Weigh stacks by bytes still live at the end of the trace.
    #[arg(long)]
    live_end: bool,
    /// What a frame shows.
    #[arg(long, value_enum, default_value = "function")]
    frames: FrameLabel,
    /// Weights in samples instead of estimated bytes.
    #[arg(long)]
    samples: bool,
    /// Merge runs of the same frame (direct recursion) into one frame.
    #[arg(long)]
    collapse_recursion: bool,
    /// Write an interactive SVG flame graph to this file instead of folded stacks.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
    /// Icicle graph (callers at the top) in the SVG.
    #[arg(long)]
    inverted: bool,
    #[command(flatten)]
    filter: FilterArgs,
    /// Print the stacks as JSON.
    #[arg(long)]
    json: bool,
}

/// `to-fxt` arguments.
#[derive(Args, Debug)]
pub struct ToFxtArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// The FXT file to write.
    #[arg(short, long, value_name = "OUT.fxt")]
    output: PathBuf,
    /// Instant events (with backtraces) for this many of the largest allocations.
    #[arg(long, value_name = "N", default_value_t = 20)]
    big: usize,
    /// At most this many counter samples per track.
    #[arg(long, default_value_t = 2000)]
    points: usize,
    #[command(flatten)]
    filter: FilterArgs,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

/// `diff` arguments.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The first (baseline) trace.
    a: PathBuf,
    /// The second trace.
    b: PathBuf,
    /// Group allocations by.
    #[arg(long, value_enum, default_value = "leaf")]
    by: GroupBy,
    /// Show this many sites (0: all).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Rank by the change of bytes live at the end instead of allocated bytes.
    #[arg(long)]
    live: bool,
    #[command(flatten)]
    sites: SiteArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn parse_time_arg(s: &str) -> Result<Timedelta, String> {
    parse_time(s).map_err(|e| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| e.to_string())
}

impl FilterArgs {
    fn filter(&self) -> Result<Filter> {
        let f = Filter {
            sources: (!self.source.is_empty()).then(|| self.source.to_vec()),
            min_size_bytes: self.min_size.unwrap_or(0),
            domains: (!self.domain.is_empty())
                .then(|| self.domain.iter().map(|d| DomainId::new(*d)).collect()),
            allocated_between: self
                .between
                .as_ref()
                .and_then(|v| Some((*v.first()?, *v.get(1)?))),
            by_location: self.location.is_some(),
        };
        f.check()?;
        Ok(f)
    }

    fn describe(&self) -> Vec<String> {
        self.filter()
            .map(|f| f.describe(self.location.as_deref()))
            .unwrap_or_default()
    }
}

/// Runs one analysis subcommand.
pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Top(a) => top(a),
        Command::Timeline(a) => timeline(a),
        Command::Flamegraph(a) => flamegraph(a),
        Command::ToFxt(a) => to_fxt(a),
        Command::Diff(a) => diff(a),
    }
}

/// Progress of the passes over `reader`: one bar, its message the pass's stage.
fn progress(size_bytes: u64) -> impl FnMut(Stage, u64) {
    let bar = progress_bar(size_bytes, Stage::Analysing.describe(), false);
    let mut stage = Stage::Analysing;
    // Dropped with the closure, the bar clears itself.
    move |s, pos| {
        if s != stage {
            stage = s;
            bar.set_message(s.describe());
        }
        bar.set_position(pos);
    }
}

/// The pass's warnings (each skipped packet once, however many passes were made).
fn warn(path: &Path, p: &Pass) {
    for w in &p.warnings {
        eprintln!("warning: {}: {w}", input::display(path));
    }
}

/// Reports a read error that cut the analysis short; the exit code says so.
fn finish(path: &Path, p: &Pass) -> ExitCode {
    warn(path, p);
    match &p.error {
        None => ExitCode::SUCCESS,
        Some(e) => {
            eprintln!(
                "error: {}: {e}; the results cover the {} events before it",
                input::display(path),
                p.events
            );
            ExitCode::from(1)
        }
    }
}

fn find_peak(reader: &mut Reader<'_>, path: &Path) -> Result<tracekit_analysis::Peak> {
    let mut progress = progress(reader.size_bytes());
    passes::find_peak(reader, &mut progress)
        .map_err(|e| anyhow::anyhow!("{}: {e}", input::display(path)))
}

fn limit(n: usize) -> usize {
    if n == 0 { usize::MAX } else { n }
}

/// A spinner for the work after the passes (folding stacks, drawing, writing),
/// shown when the trace was large enough for that to take a while.
fn post_pass(reader: &Reader<'_>, what: &str) -> ProgressBar {
    progress_spinner(what, reader.size_bytes() >= PROGRESS_THRESHOLD_BYTES, false)
}

fn require_svg(path: &Path, flag: &str) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(()),
        Some(e) if e.eq_ignore_ascii_case("png") => {
            bail!("{flag}: only SVG output is supported; name the file .svg")
        }
        _ => bail!("{flag}: the output file must end in .svg"),
    }
}

fn top(args: TopArgs) -> Result<ExitCode> {
    let filter = args.filter.filter()?;
    let mut reader = open(&args.file)?;
    let info = TraceFile::new(input::display(&args.file), reader.info());
    let mut ctx = TopContext {
        at: args.at,
        at_peak: false,
        filters: args.filter.describe(),
    };
    let whole_peak = if args.peak {
        let peak = find_peak(&mut reader, &args.file)?;
        ctx.at = Some(peak.time);
        ctx.at_peak = true;
        Some(peak)
    } else {
        None
    };
    let skip = args.sites.skip();
    let options = Options {
        filter,
        live_at: ctx.at,
        leaf_only: SiteArgs::leaf_only(args.by),
        site_skip: skip.clone(),
        // The table does not show the timeline.
        timeline_buckets: 0,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let mut progress = progress(reader.size_bytes());
    let mut p = passes::analyze(&mut reader, options.clone(), location, &mut progress);
    match whole_peak {
        Some(peak) => p.profile.peak = peak,
        None => passes::settle_peak(&mut reader, &mut p, &options, location, &mut progress),
    }
    drop(progress);
    let rank = if ctx.at.is_some() {
        Rank::LiveAt
    } else {
        Rank::Allocated
    };
    let symbols = reader.locations();
    let by = args.by;
    let t = report::top_skipping(&p.profile, &symbols, by, rank, limit(args.limit), &skip);
    if args.json {
        print_json(&render::top_json(&info, &p.profile, &t, &ctx))?;
    } else {
        print(&render::top_table(&info, &p.profile, &t, &ctx))?;
    }
    if report::lineless_share(&p.profile, &symbols, &skip) > 0.5 {
        eprintln!(
            "note: {}: most allocation sites have no source line (line 0): the traced program \
             was built without line tables. For a Rust program, add `[profile.release] debug = \
             \"line-tables-only\"` to its Cargo.toml and rebuild.",
            input::display(&args.file)
        );
    }
    Ok(finish(&args.file, &p))
}

fn timeline(args: TimelineArgs) -> Result<ExitCode> {
    let filter = args.filter.filter()?;
    if let Some(plot) = &args.plot {
        require_svg(plot, "--plot")?;
    }
    let mut reader = open(&args.file)?;
    let info = TraceFile::new(input::display(&args.file), reader.info());
    let options = Options {
        filter,
        backtraces: false,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let mut progress = progress(reader.size_bytes());
    let p = passes::settled(&mut reader, options, location, &mut progress);
    drop(progress);
    let points = p.profile.timeline.points(args.points.max(1));
    if let Some(plot) = &args.plot {
        let svg = render::timeline_svg(&info, &p.profile, &points, &args.filter.describe());
        write_file(plot, &[&args.file], &svg)?;
        if !args.json {
            let s = p.profile.sampling;
            print(&format!(
                "wrote {}: {} points over {}, peak {} at {}\n",
                plot.display(),
                points.len(),
                p.profile.end,
                human_bytes(s.bytes(p.profile.peak.live) as f64),
                p.profile.peak.time,
            ))?;
        }
    }
    if args.json {
        print_json(&render::timeline_json(&info, &p.profile, &points))?;
    } else if args.plot.is_none() {
        print(&render::timeline_csv(&p.profile, &points))?;
    }
    Ok(finish(&args.file, &p))
}

fn flamegraph(args: FlameArgs) -> Result<ExitCode> {
    let filter = args.filter.filter()?;
    if let Some(out) = &args.svg {
        require_svg(out, "--svg")?;
    }
    let mut reader = open(&args.file)?;
    let at = match args.peak {
        true => Some(find_peak(&mut reader, &args.file)?.time),
        false => args.at,
    };
    let options = Options {
        filter,
        live_at: at,
        timeline_buckets: 0,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let mut progress = progress(reader.size_bytes());
    let p = passes::analyze(&mut reader, options, location, &mut progress);
    drop(progress);
    let weight = match (at, args.live_end) {
        (Some(_), _) => Weight::LiveAt,
        (None, true) => Weight::LiveEnd,
        (None, false) => Weight::Allocated,
    };
    let label = args.frames;
    let unit = match args.samples {
        true => Unit::Samples,
        false => Unit::Bytes,
    };
    let spinner = post_pass(&reader, "folding");
    let symbols = reader.locations();
    let fold = FoldOptions {
        weight,
        label,
        unit,
        collapse_recursion: args.collapse_recursion,
    };
    let lines = report::folded(&p.profile, &symbols, fold);
    spinner.finish_and_clear();
    let what = weight.describe(at, args.peak);
    if let Some(out) = &args.svg {
        let info = TraceFile::new(input::display(&args.file), reader.info());
        let spinner = post_pass(&reader, "drawing");
        let svg = render::flame_graph_svg(&info, &p.profile, &lines, unit, &what, args.inverted);
        write_file(out, &[&args.file], &svg)?;
        spinner.finish_and_clear();
        let total = render::folded_total(&lines, unit);
        let shown = out.display();
        print(&format!(
            "wrote {shown}: {} stacks, {total} {what}\n",
            lines.len()
        ))?;
    } else if args.json {
        print_json(&render::folded_json(&lines, unit, &what))?;
    } else {
        print(&render::folded_text(&lines))?;
    }
    Ok(finish(&args.file, &p))
}

fn to_fxt(args: ToFxtArgs) -> Result<ExitCode> {
    let filter = args.filter.filter()?;
    let mut reader = open(&args.file)?;
    let info = TraceFile::new(input::display(&args.file), reader.info());
    let options = Options {
        filter,
        big: args.big,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let mut progress = progress(reader.size_bytes());
    let p = passes::settled(&mut reader, options, location, &mut progress);
    drop(progress);
    let file = OutputFile::create(&args.output, &[&args.file])?;
    let spinner = post_pass(&reader, "writing");
    let init = WriterOptions {
        initialization: Some(Initialization::new(fxt::TICKS_PER_SECOND)),
        ..WriterOptions::default()
    };
    let mut w = FxtWriter::with_options(IoDestination::new(file), &init)
        .map_err(|e| fxt_write_error(&args.output, FinishError::Write(e)))?;
    let symbols = reader.locations();
    let fxt_options = FxtOptions {
        points: args.points.max(1),
        ..FxtOptions::default()
    };
    let summary = fxt::write_profile(&mut w, &p.profile, &symbols, &info.info, &fxt_options);
    let s = summary.map_err(|e| fxt_write_error(&args.output, w.explain(e)))?;
    let file = w
        .finish_io()
        .map_err(|e| fxt_write_error(&args.output, e))?;
    file.commit()?;
    spinner.finish_and_clear();
    if args.json {
        print_json(&serde_json::json!({
            "output": args.output.display().to_string(),
            "counters": s.counters,
            "instants": s.instants,
            "points": s.points,
            "domains": s.domains,
        }))?;
    } else {
        print(&format!(
            "wrote {}: {} counter samples ({} per live-heap track, {} domain{}), {} instant events\n",
            args.output.display(),
            s.counters,
            s.points,
            s.domains,
            if s.domains == 1 { "" } else { "s" },
            s.instants,
        ))?;
    }
    Ok(finish(&args.file, &p))
}

/// The error of an FXT writer over an [`OutputFile`]: the I/O error (which names
/// the file) when there is one, else the writer's own.
pub fn fxt_write_error(path: &Path, e: FinishError) -> anyhow::Error {
    match e {
        FinishError::Io(io) => anyhow::Error::new(io),
        FinishError::Write(e) => anyhow::anyhow!("writing {}: {e}", path.display()),
    }
}

fn diff(args: DiffArgs) -> Result<ExitCode> {
    let options = Options {
        filter: args.filter.filter()?,
        leaf_only: SiteArgs::leaf_only(args.by),
        site_skip: args.sites.skip(),
        timeline_buckets: 0,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let analyse = |path: &Path| -> Result<(Reader<'static>, Pass)> {
        let mut reader = open(path)?;
        let mut progress = progress(reader.size_bytes());
        let p = passes::analyze(&mut reader, options.clone(), location, &mut progress);
        Ok((reader, p))
    };
    let (ra, pa) = analyse(&args.a)?;
    let (rb, pb) = analyse(&args.b)?;
    let (sa, sb) = (ra.locations(), rb.locations());
    let rows = report::diff_skipping(
        (&pa.profile, &sa),
        (&pb.profile, &sb),
        args.by,
        args.live,
        &args.sites.skip(),
    );
    let ctx = DiffContext {
        a: TraceFile::new(input::display(&args.a), ra.info()),
        b: TraceFile::new(input::display(&args.b), rb.info()),
        by: Some(args.by),
        by_live: args.live,
    };
    let (a, b, n) = (&pa.profile, &pb.profile, limit(args.limit));
    if args.json {
        print_json(&render::diff_json(&ctx, a, b, &rows, n))?;
    } else {
        print(&render::diff_table(&ctx, a, b, &rows, n))?;
    }
    let ca = finish(&args.a, &pa);
    let cb = finish(&args.b, &pb);
    Ok(if pa.error.is_some() { ca } else { cb })
}
