//! `tracekit memtrace top|timeline|flamegraph|to-fxt|diff`: what memtrace_viewer shows,
//! on the command line. Argument parsing, files and progress; the analysis itself is
//! `tracekit-analysis`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use tracekit_analysis::fxt::{self, FxtOptions};
use tracekit_analysis::render::{self, DiffContext, TopContext};
use tracekit_analysis::report::{self, FoldOptions, GroupBy, Rank, Unit, Weight};
use tracekit_analysis::source::{self, Pass, ReaderSymbols};
use tracekit_analysis::svg::{self, FlameGraphOptions, PlotOptions, human_bytes};
use tracekit_analysis::symbols::{FrameLabel, FrameSkip};
use tracekit_analysis::{DomainId, Filter, Micros, Options, Peak, Source, parse_bytes, parse_time};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::{Initialization, Writer as FxtWriter, WriterOptions};
use tracekit_memtrace::Reader;

use crate::common::output::{OutputFile, print, print_json, write_file};
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
    source: Vec<SourceArg>,
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
    between: Option<Vec<Micros>>,
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
    fn leaf_only(by: ByArg) -> bool {
        by != ByArg::Backtrace
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SourceArg {
    Minor,
    Major,
    External,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum ByArg {
    /// The allocation site (last location of the backtrace).
    Leaf,
    /// The function (defname) of the allocation site.
    Function,
    /// The source file of the allocation site.
    File,
    /// The whole backtrace.
    Backtrace,
}

impl From<ByArg> for GroupBy {
    fn from(b: ByArg) -> GroupBy {
        match b {
            ByArg::Leaf => GroupBy::Leaf,
            ByArg::Function => GroupBy::Function,
            ByArg::File => GroupBy::File,
            ByArg::Backtrace => GroupBy::Backtrace,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum FramesArg {
    /// Function names (defname).
    Function,
    /// Full locations, defname@file:line:start-end.
    Location,
    /// Source files.
    File,
}

/// `top` arguments.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// Group allocations by.
    #[arg(long, value_enum, default_value = "leaf")]
    by: ByArg,
    /// Show this many sites (0: all).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Rank by bytes live at this time instead of allocated bytes.
    #[arg(long, value_parser = parse_time_arg, conflicts_with = "peak")]
    at: Option<Micros>,
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
    at: Option<Micros>,
    /// Weigh stacks by bytes live at the peak of the live heap.
    #[arg(long, conflicts_with = "live_end")]
    peak: bool,
    /// Weigh stacks by bytes still live at the end of the trace.
    #[arg(long)]
    live_end: bool,
    /// What a frame shows.
    #[arg(long, value_enum, default_value = "function")]
    frames: FramesArg,
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
    by: ByArg,
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

fn parse_time_arg(s: &str) -> Result<Micros, String> {
    parse_time(s).map_err(|e| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| e.to_string())
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter {
            sources: (!self.source.is_empty()).then(|| {
                self.source
                    .iter()
                    .map(|s| match s {
                        SourceArg::Minor => Source::Minor,
                        SourceArg::Major => Source::Major,
                        SourceArg::External => Source::External,
                    })
                    .collect()
            }),
            min_size_bytes: self.min_size.unwrap_or(0),
            domains: (!self.domain.is_empty())
                .then(|| self.domain.iter().map(|d| DomainId(*d)).collect()),
            allocated_between: self
                .between
                .as_ref()
                .and_then(|v| Some((*v.first()?, *v.get(1)?))),
            by_location: self.location.is_some(),
        }
    }

    fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.source {
            out.push(format!("source {}", format!("{s:?}").to_lowercase()));
        }
        if let Some(m) = self.min_size {
            out.push(format!("objects of at least {}", human_bytes(m as f64)));
        }
        if let Some(l) = &self.location {
            out.push(format!("backtrace location contains {l:?}"));
        }
        for d in &self.domain {
            out.push(format!("domain {d}"));
        }
        if let Some(v) = &self.between
            && let [a, b] = v.as_slice()
        {
            out.push(format!("allocated between {a} and {b}"));
        }
        out
    }

    fn check(&self) -> Result<()> {
        if let Some(v) = &self.between
            && let [a, b] = v.as_slice()
            && a > b
        {
            bail!("--between: {a} is after {b}");
        }
        Ok(())
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

/// One pass, with progress and warnings on stderr.
fn pass(
    reader: &mut Reader<'_>,
    path: &Path,
    options: Options,
    location: Option<&str>,
    what: &str,
) -> Pass {
    let bar = progress_bar(reader.size_bytes(), what, false);
    // Decoding and analysis on two threads when there are two cores (the `top`
    // bench measures both drivers); the location filter needs the one-thread driver,
    // which matches locations as it decodes.
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let mut progress = |pos| bar.set_position(pos);
    let p = if location.is_none() && two_cores {
        source::analyze_reader_pipelined(reader, options, &mut progress)
    } else {
        source::analyze_reader(reader, options, location, &mut progress)
    };
    bar.finish_and_clear();
    for w in &p.warnings {
        eprintln!("warning: {}: {w}", input::display(path));
    }
    p
}

/// Reports a read error that cut the analysis short; the exit code says so.
fn finish(path: &Path, p: &Pass) -> ExitCode {
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

/// The peak of the whole live heap: a quick pass without backtraces, repeated with
/// the domains known if the first pass saw domains interleave.
fn find_peak(reader: &mut Reader<'_>, path: &Path) -> Result<Peak> {
    let mut options = Options {
        backtraces: false,
        timeline_buckets: 0,
        ..Options::default()
    };
    let first = pass(reader, path, options.clone(), None, "finding the peak");
    if let Some(e) = first.error {
        bail!("{}: {e}", input::display(path));
    }
    let peak = first.profile.peak;
    if peak.late_events == 0 {
        return Ok(peak);
    }
    options.domains = peak.domains.clone();
    let second = pass(reader, path, options, None, "finding the peak");
    Ok(second.profile.peak)
}

/// One pass over the whole trace with `options`, its peak made exact.
fn settled_pass(
    reader: &mut Reader<'_>,
    path: &Path,
    options: Options,
    filter: &FilterArgs,
) -> Pass {
    let location = filter.location.as_deref();
    let mut p = pass(reader, path, options.clone(), location, "analysing");
    settle_peak(reader, path, &mut p, &options, location);
    p
}

/// Makes `p`'s peak exact when its domains interleaved: one more pass (without
/// backtraces unless the location filter needs them) with the domains known upfront.
fn settle_peak(
    reader: &mut Reader<'_>,
    path: &Path,
    p: &mut Pass,
    options: &Options,
    location: Option<&str>,
) {
    if p.profile.peak.late_events == 0 || p.error.is_some() {
        return;
    }
    let again = Options {
        backtraces: false,
        timeline_buckets: 0,
        live_at: None,
        big: 0,
        domains: p.profile.peak.domains.clone(),
        ..options.clone()
    };
    let second = pass(reader, path, again, location, "settling the peak");
    if second.error.is_none() {
        p.profile.peak = second.profile.peak;
    }
}

fn limit(n: usize) -> usize {
    if n == 0 { usize::MAX } else { n }
}

/// A spinner for the work after the passes (folding stacks, drawing, writing),
/// shown when the trace was large enough for that to take a while.
fn post_pass(reader: &Reader<'_>, what: &str) -> indicatif::ProgressBar {
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

/// The last component of a path, for titles.
fn file_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map_or_else(|| p.to_string(), |n| n.to_string_lossy().into_owned())
}

fn path_str(p: &Path) -> String {
    input::display(p)
}

fn top(args: TopArgs) -> Result<ExitCode> {
    args.filter.check()?;
    let mut reader = open(&args.file)?;
    let info = source::trace_info(&path_str(&args.file), reader.info());
    let mut ctx = TopContext {
        at: args.at,
        at_peak: false,
        filters: args.filter.describe(),
    };
    let mut whole_peak = None;
    if args.peak {
        let peak = find_peak(&mut reader, &args.file)?;
        ctx.at = Some(peak.time);
        ctx.at_peak = true;
        whole_peak = Some(peak);
    }
    let options = Options {
        filter: args.filter.filter(),
        live_at: ctx.at,
        leaf_only: SiteArgs::leaf_only(args.by),
        site_skip: args.sites.skip(),
        // The table does not show the timeline.
        timeline_buckets: 0,
        ..Options::default()
    };
    let location = args.filter.location.as_deref();
    let mut p = pass(
        &mut reader,
        &args.file,
        options.clone(),
        location,
        "analysing",
    );
    match whole_peak {
        Some(peak) => p.profile.peak = peak,
        None => settle_peak(&mut reader, &args.file, &mut p, &options, location),
    }
    let rank = if ctx.at.is_some() {
        Rank::LiveAt
    } else {
        Rank::Allocated
    };
    let symbols = ReaderSymbols(reader.locations());
    let t = report::top_skipping(
        &p.profile,
        &symbols,
        args.by.into(),
        rank,
        limit(args.limit),
        &args.sites.skip(),
    );
    if args.json {
        print_json(&render::top_json(&info, &p.profile, &t, &ctx))?;
    } else {
        print(&render::top_table(&info, &p.profile, &t, &ctx))?;
    }
    if report::lineless_share(&p.profile, &symbols, &args.sites.skip()) > 0.5 {
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
    args.filter.check()?;
    if let Some(plot) = &args.plot {
        require_svg(plot, "--plot")?;
    }
    let mut reader = open(&args.file)?;
    let info = source::trace_info(&path_str(&args.file), reader.info());
    let options = Options {
        filter: args.filter.filter(),
        backtraces: false,
        ..Options::default()
    };
    let p = settled_pass(&mut reader, &args.file, options, &args.filter);
    let points = p.profile.timeline.points(args.points.max(1));
    let s = p.profile.sampling;
    if let Some(plot) = &args.plot {
        let name = Path::new(&info.executable_name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut subtitle = format!(
            "{} — sample rate {}: 1 sample ≈ {} (estimated sizes)",
            file_name(&path_str(&args.file)),
            s.sample_rate,
            human_bytes(s.bytes_per_sample())
        );
        if !args.filter.describe().is_empty() {
            subtitle = format!("{subtitle}; {}", args.filter.describe().join(", "));
        }
        let svg = svg::timeline_plot(
            &points,
            s,
            &PlotOptions {
                title: format!("Live heap of {name} (pid {})", info.pid),
                subtitle,
                peak: Some((p.profile.peak.time, s.bytes(p.profile.peak.live))),
                ..PlotOptions::default()
            },
        );
        write_file(plot, &[&args.file], &svg)?;
        if args.json {
            print_json(&render::timeline_json(&info, &p.profile, &points))?;
        } else {
            print(&format!(
                "wrote {}: {} points over {}, peak {} at {}\n",
                plot.display(),
                points.len(),
                p.profile.end,
                human_bytes(s.bytes(p.profile.peak.live) as f64),
                p.profile.peak.time,
            ))?;
        }
    } else if args.json {
        print_json(&render::timeline_json(&info, &p.profile, &points))?;
    } else {
        print(&render::timeline_csv(&p.profile, &points))?;
    }
    Ok(finish(&args.file, &p))
}

fn flamegraph(args: FlameArgs) -> Result<ExitCode> {
    args.filter.check()?;
    if let Some(out) = &args.svg {
        require_svg(out, "--svg")?;
    }
    let mut reader = open(&args.file)?;
    let mut at = args.at;
    if args.peak {
        at = Some(find_peak(&mut reader, &args.file)?.time);
    }
    let options = Options {
        filter: args.filter.filter(),
        live_at: at,
        timeline_buckets: 0,
        ..Options::default()
    };
    let p = pass(
        &mut reader,
        &args.file,
        options,
        args.filter.location.as_deref(),
        "analysing",
    );
    let weight = if at.is_some() {
        Weight::LiveAt
    } else if args.live_end {
        Weight::LiveEnd
    } else {
        Weight::Allocated
    };
    let label = match args.frames {
        FramesArg::Function => FrameLabel::Function,
        FramesArg::Location => FrameLabel::Location,
        FramesArg::File => FrameLabel::File,
    };
    let unit = if args.samples {
        Unit::Samples
    } else {
        Unit::Bytes
    };
    let spinner = post_pass(&reader, "folding");
    let symbols = ReaderSymbols(reader.locations());
    let lines = report::folded(
        &p.profile,
        &symbols,
        FoldOptions {
            weight,
            label,
            unit,
            collapse_recursion: args.collapse_recursion,
        },
    );
    spinner.finish_and_clear();
    let total: u64 = lines.iter().map(|l| l.1).sum();
    let what = match (weight, at) {
        (Weight::LiveAt, Some(t)) if args.peak => format!("live at the peak ({t})"),
        (Weight::LiveAt, Some(t)) => format!("live at {t}"),
        (Weight::LiveEnd, _) => "live at the end".to_string(),
        _ => "allocated".to_string(),
    };
    if let Some(out) = &args.svg {
        let info = reader.info();
        let total_text = if args.samples {
            format!("{total} samples")
        } else {
            human_bytes(total as f64)
        };
        let spinner = post_pass(&reader, "drawing");
        let svg = svg::flame_graph(
            &lines,
            &FlameGraphOptions {
                title: format!(
                    "Memory {what}: {}",
                    file_name(&info.executable_name.to_string())
                ),
                subtitle: format!(
                    "{} — total {}; 1 sample ≈ {} (estimated sizes)",
                    file_name(&path_str(&args.file)),
                    total_text,
                    human_bytes(p.profile.sampling.bytes_per_sample()),
                ),
                bytes: !args.samples,
                inverted: args.inverted,
                ..FlameGraphOptions::default()
            },
        );
        write_file(out, &[&args.file], &svg)?;
        spinner.finish_and_clear();
        print(&format!(
            "wrote {}: {} stacks, {} {}\n",
            out.display(),
            lines.len(),
            total_text,
            what
        ))?;
    } else if args.json {
        let stacks: Vec<serde_json::Value> = lines
            .iter()
            .map(|(s, w)| serde_json::json!({"frames": s.split(';').collect::<Vec<_>>(), "weight": w}))
            .collect();
        print_json(&serde_json::json!({
            "unit": if args.samples { "samples" } else { "bytes" },
            "weight": what,
            "total": total,
            "stacks": stacks,
        }))?;
    } else {
        let mut text = String::with_capacity(lines.len() * 80);
        for (s, w) in &lines {
            text.push_str(s);
            text.push(' ');
            text.push_str(&w.to_string());
            text.push('\n');
        }
        print(&text)?;
    }
    Ok(finish(&args.file, &p))
}

fn to_fxt(args: ToFxtArgs) -> Result<ExitCode> {
    args.filter.check()?;
    let mut reader = open(&args.file)?;
    let info = source::trace_info(&path_str(&args.file), reader.info());
    let options = Options {
        filter: args.filter.filter(),
        big: args.big,
        ..Options::default()
    };
    let p = settled_pass(&mut reader, &args.file, options, &args.filter);
    let file = OutputFile::create(&args.output, &[&args.file])?;
    let spinner = post_pass(&reader, "writing");
    let dest = IoDestination::new(file);
    let mut w = FxtWriter::with_options(
        dest,
        &WriterOptions {
            initialization: Some(Initialization::new(fxt::TICKS_PER_SECOND)),
            ..WriterOptions::default()
        },
    )
    .map_err(|e| fxt_write_error(&args.output, e, None))?;
    let symbols = ReaderSymbols(reader.locations());
    let summary = fxt::write_profile(
        &mut w,
        &p.profile,
        &symbols,
        &info,
        &FxtOptions {
            points: args.points.max(1),
            ..FxtOptions::default()
        },
    );
    let closed = summary.and_then(|s| w.close().map(|()| s));
    let s = match closed {
        Ok(s) => s,
        Err(e) => {
            let io = w.destination_mut().take_error();
            return Err(fxt_write_error(&args.output, e, io));
        }
    };
    let file = w
        .finish()
        .map_err(|e| fxt_write_error(&args.output, e, None))?
        .into_inner();
    file.commit()?;
    spinner.finish_and_clear();
    if args.json {
        print_json(&serde_json::json!({
            "output": path_str(&args.output),
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
pub fn fxt_write_error(
    path: &Path,
    e: tracekit_fxt::write::WriteError,
    io: Option<std::io::Error>,
) -> anyhow::Error {
    match io {
        Some(io) => anyhow::Error::new(io),
        None => anyhow::anyhow!("writing {}: {e}", path.display()),
    }
}

fn diff(args: DiffArgs) -> Result<ExitCode> {
    args.filter.check()?;
    let options = Options {
        filter: args.filter.filter(),
        leaf_only: SiteArgs::leaf_only(args.by),
        site_skip: args.sites.skip(),
        timeline_buckets: 0,
        ..Options::default()
    };
    let mut ra = open(&args.a)?;
    let mut rb = open(&args.b)?;
    let pa = pass(
        &mut ra,
        &args.a,
        options.clone(),
        args.filter.location.as_deref(),
        "analysing A",
    );
    let pb = pass(
        &mut rb,
        &args.b,
        options,
        args.filter.location.as_deref(),
        "analysing B",
    );
    let (sa, sb) = (ReaderSymbols(ra.locations()), ReaderSymbols(rb.locations()));
    let rows = report::diff_skipping(
        (&pa.profile, &sa),
        (&pb.profile, &sb),
        args.by.into(),
        args.live,
        &args.sites.skip(),
    );
    let ctx = DiffContext {
        a: source::trace_info(&path_str(&args.a), ra.info()),
        b: source::trace_info(&path_str(&args.b), rb.info()),
        by: Some(args.by.into()),
        by_live: args.live,
    };
    if args.json {
        print_json(&render::diff_json(
            &ctx,
            &pa.profile,
            &pb.profile,
            &rows,
            limit(args.limit),
        ))?;
    } else {
        print(&render::diff_table(
            &ctx,
            &pa.profile,
            &pb.profile,
            &rows,
            limit(args.limit),
        ))?;
    }
    let ca = finish(&args.a, &pa);
    let cb = finish(&args.b, &pb);
    Ok(if pa.error.is_some() { ca } else { cb })
}
