//! `tracekit memtrace top|timeline|flamegraph|hot-paths|to-fxt|to-pprof|diff`: what memtrace_viewer shows,
//! on the command line. Argument parsing, files and progress; the analysis itself is
//! `tracekit-analysis`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use tracekit_analysis::Pass;
use tracekit_analysis::fxt;
use tracekit_analysis::passes::{Progress, Stage};
use tracekit_analysis::query::{
    DiffQuery, FlameDiff, FlameQuery, FxtQuery, HotPathsQuery, PprofQuery, QueryError,
    TimelineQuery, TopQuery,
};
use tracekit_analysis::render::TraceFile;
use tracekit_memtrace::{Reader, Timedelta};

use crate::common::names::{Format, check_format, choose_format, default_output, require_svg};
use crate::common::output::{Output, OutputFile, print, refuse_same_file, write_file, write_text};
use crate::common::{PROGRESS_THRESHOLD_BYTES, input, progress_bar, progress_spinner, say};
use crate::common::{fxt_write_error, print_answer, print_json};
use crate::memtrace::open_shared;
use tracekit_columns::TraceBytes;

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
    Top(TableArgs<TopQuery>),
    /// Live heap and allocation rate over time, as CSV (or an SVG plot with --plot).
    #[command(after_help = SIZES)]
    Timeline(TimelineArgs),
    /// Folded stacks (`frame;frame;frame weight`, as read by flamegraph.pl, inferno and
    /// speedscope) of allocated bytes or of bytes live at a time; --svg draws an
    /// interactive flame graph.
    #[command(after_help = SIZES)]
    Flamegraph(FlameArgs),
    /// Hot paths: the call sequences (consecutive frames, anywhere in the stacks) in
    /// at least a share of the allocated (or live) bytes, as memtrace_viewer's points
    /// of interest find them.
    #[command(name = "hot-paths", after_help = SIZES)]
    HotPaths(TableArgs<HotPathsQuery>),
    /// Converts a trace to FXT for Perfetto: live-heap counters per domain, an
    /// allocation-rate counter, and instant events with backtraces for the largest
    /// allocations.
    #[command(name = "to-fxt", after_help = SIZES)]
    ToFxt(ToFxtArgs),
    /// Writes the trace's allocations as a gzipped pprof heap profile (Go's heap
    /// profile sample types: alloc_objects, alloc_space, inuse_objects,
    /// inuse_space), for `go tool pprof`, Parca, Pyroscope or Perfetto.
    #[command(name = "to-pprof", after_help = SIZES)]
    ToPprof(ToPprofArgs),
    /// Sites whose allocated (or live) bytes changed most between two traces.
    #[command(after_help = SIZES)]
    Diff(DiffArgs),
}

/// The arguments of an analysis that prints a table: the trace, the query.
#[derive(Args, Debug)]
pub struct TableArgs<Q: Args> {
    /// The trace (.ctf).
    file: PathBuf,
    #[command(flatten)]
    query: Q,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `timeline` arguments.
#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// Draw the curves to this SVG file instead of printing CSV (only SVG is supported).
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    /// Write to this file (`-`: stdout): an SVG plot, JSON or CSV, by --json or its
    /// extension.
    #[arg(short, long, value_name = "FILE", conflicts_with = "plot")]
    output: Option<PathBuf>,
    #[command(flatten)]
    query: TimelineQuery,
    /// Print JSON instead of CSV.
    #[arg(long)]
    json: bool,
}

/// `flamegraph` arguments.
#[derive(Args, Debug)]
pub struct FlameArgs {
    /// The trace (.ctf).
    file: PathBuf,
    #[command(flatten)]
    query: FlameQuery,
    /// Write an interactive SVG flame graph to this file instead of folded stacks.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
    /// Write to this file (`-`: stdout): an SVG flame graph, JSON or folded stacks,
    /// by --json or its extension.
    #[arg(short, long, value_name = "FILE", conflicts_with = "svg")]
    output: Option<PathBuf>,
    /// Icicle graph (callers at the top) in the SVG.
    #[arg(long)]
    inverted: bool,
    /// Print the stacks as JSON.
    #[arg(long)]
    json: bool,
    /// Compare with this baseline trace (A; FILE is B): a differential flame
    /// graph, each frame as wide as in FILE, red where it grew and blue where it
    /// shrank; as text, stacks with both weights (`stack A B`, as difffolded.pl
    /// writes); as JSON, both weights and each function's change.
    #[arg(long, value_name = "BASE")]
    diff: Option<PathBuf>,
}

/// `to-fxt` arguments.
#[derive(Args, Debug)]
pub struct ToFxtArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// The FXT file to write (default: the trace's name with `.fxt`).
    #[arg(short, long, value_name = "OUT.fxt")]
    output: Option<PathBuf>,
    #[command(flatten)]
    query: FxtQuery,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

/// `to-pprof` arguments.
#[derive(Args, Debug)]
pub struct ToPprofArgs {
    /// The trace (.ctf).
    file: PathBuf,
    /// The profile to write (default: the trace's name with `.pb.gz`).
    #[arg(short, long, value_name = "OUT.pb.gz")]
    output: Option<PathBuf>,
    #[command(flatten)]
    query: PprofQuery,
}

/// `diff` arguments.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The first (baseline) trace.
    a: PathBuf,
    /// The second trace.
    b: PathBuf,
    #[command(flatten)]
    query: DiffQuery,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// What the analyses that print text can also write.
const ANY: [Format; 3] = [Format::Text, Format::Json, Format::Svg];

/// Runs one analysis subcommand.
pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Top(a) => top(a),
        Command::Timeline(a) => timeline(a),
        Command::Flamegraph(a) => flamegraph(a),
        Command::HotPaths(a) => hot_paths(a),
        Command::ToFxt(a) => to_fxt(a),
        Command::ToPprof(a) => to_pprof(a),
        Command::Diff(a) => diff(a),
    }
}

/// Progress of the passes over `reader`: one bar, its message the pass's stage.
/// With the trace's `bytes`, the pages a pass has read are released as it goes, so
/// that a mapped trace does not end up resident whole on top of the analysis's own
/// memory.
fn progress(size_bytes: u64, bytes: Option<TraceBytes>) -> impl FnMut(Stage, u64) {
    let bar = progress_bar(size_bytes, Stage::Analysing.describe(), false);
    let mut stage = Stage::Analysing;
    let mut release = bytes.map(|b| b.pass());
    // Dropped with the closure, the bar clears itself.
    move |s, pos| {
        if s != stage {
            stage = s;
            bar.set_message(s.describe());
            // Redrawn while nothing moves: folding reports no position.
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
        }
        bar.set_position(pos);
        if let Some(release) = &mut release {
            release.at(pos);
        }
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

/// Opens the trace at `path` and runs a query over it with a progress bar,
/// cleared before anything is printed; an error names the trace. The reader
/// (for the trace's names and info) and the answer.
fn analyse<T>(
    path: &Path,
    query: impl FnOnce(&mut Reader<'_>, Progress<'_>) -> Result<T, QueryError>,
) -> Result<(Reader<'static>, T)> {
    let (mut reader, bytes) = open_shared(path)?;
    let mut progress = progress(reader.size_bytes(), bytes);
    let answer = query(&mut reader, &mut progress);
    drop(progress);
    let answer = answer.map_err(|e| match e {
        QueryError::Filter(e) => anyhow::Error::new(e),
        QueryError::Peak(e) => anyhow::anyhow!("{}: {e}", input::display(path)),
    })?;
    Ok((reader, answer))
}

/// The trace at `path`, as answers name it.
fn trace_file(path: &Path, reader: &Reader<'_>) -> TraceFile {
    TraceFile::new(input::display(path), reader.info())
}

/// Warns when `--at` asks about a time after the trace's last event: what is live
/// then is what is live at the end.
fn warn_past_end(path: &Path, at: Option<Timedelta>, pass: &Pass) {
    let end = pass.profile.end;
    if let Some(at) = at.filter(|at| *at > end && pass.error.is_none()) {
        eprintln!(
            "warning: {}: --at {at} is after the trace's end ({end}): showing what is live at the end",
            input::display(path)
        );
    }
}

/// A spinner for the work after the passes (drawing, writing), shown when the trace
/// was large enough for that to take a while.
fn post_pass(reader: &Reader<'_>, what: &str) -> ProgressBar {
    progress_spinner(what, reader.size_bytes() >= PROGRESS_THRESHOLD_BYTES, false)
}

fn top(args: TableArgs<TopQuery>) -> Result<ExitCode> {
    args.query.filter.check()?;
    let (reader, answer) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    let info = trace_file(&args.file, &reader);
    print_answer(args.json, || answer.json(&info), || answer.table(&info))?;
    if answer.mostly_lineless {
        say(format_args!(
            "note: {}: most allocation sites have no source line (line 0): the traced program \
             was built without line tables. For a Rust program, add `[profile.release] debug = \
             \"line-tables-only\"` to its Cargo.toml and rebuild.",
            input::display(&args.file)
        ));
    }
    warn_past_end(&args.file, args.query.at, &answer.pass);
    Ok(finish(&args.file, &answer.pass))
}

fn timeline(mut args: TimelineArgs) -> Result<ExitCode> {
    args.query.filter.check()?;
    if let Some(plot) = &args.plot {
        require_svg(plot, "--plot")?;
    }
    let (flag, output) = (args.json.then_some(Format::Json), args.output.as_deref());
    if choose_format(output, flag, &ANY, Format::Text)? == Format::Svg {
        args.plot = args.output.take();
    }
    let (reader, answer) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    let info = trace_file(&args.file, &reader);
    if let Some(plot) = &args.plot {
        write_file(plot, &[&args.file], &answer.svg(&info))?;
        if !args.json {
            print(&format!("wrote {}: {}\n", plot.display(), answer.summary()))?;
        }
    }
    let out = args.output.unwrap_or_else(|| PathBuf::from("-"));
    if args.json {
        let json = serde_json::to_string_pretty(&answer.json(&info))?;
        write_text(&out, &[&args.file], &json)?;
    } else if args.plot.is_none() {
        write_text(&out, &[&args.file], &answer.csv())?;
    }
    Ok(finish(&args.file, &answer.pass))
}

fn flamegraph(args: FlameArgs) -> Result<ExitCode> {
    args.query.filter.check()?;
    if let Some(out) = &args.svg {
        require_svg(out, "--svg")?;
    }
    let flag = (args.svg.as_ref().map(|_| Format::Svg)).or(args.json.then_some(Format::Json));
    let path = args.svg.as_deref().or(args.output.as_deref());
    let format = choose_format(path, flag, &ANY, Format::Text)?;
    if let Some(base) = &args.diff {
        return flamegraph_diff(&args, base, format, path);
    }
    let (reader, answer) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    warn_past_end(&args.file, args.query.at, &answer.pass);
    let out = path.unwrap_or(Path::new("-"));
    match format {
        Format::Svg => {
            let info = trace_file(&args.file, &reader);
            let spinner = post_pass(&reader, "drawing");
            write_text(out, &[&args.file], &answer.svg(&info, args.inverted))?;
            spinner.finish_and_clear();
            if !input::is_stdin(out) {
                print(&format!("wrote {}: {}\n", out.display(), answer.summary()))?;
            }
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&answer.json())?;
            write_text(out, &[&args.file], &json)?;
        }
        _ => {
            let mut w = Output::create(out, &[&args.file])?;
            answer.write_text(&mut w)?;
            w.finish()?;
        }
    }
    Ok(finish(&args.file, &answer.pass))
}

/// `flamegraph --diff BASE FILE`: both traces folded by one query, merged.
fn flamegraph_diff(
    args: &FlameArgs,
    base: &Path,
    format: Format,
    path: Option<&Path>,
) -> Result<ExitCode> {
    let (ra, a) = analyse(base, |r, p| args.query.run(r, p))?;
    let (rb, b) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    warn_past_end(base, args.query.at, &a.pass);
    warn_past_end(&args.file, args.query.at, &b.pass);
    let (ta, tb) = (trace_file(base, &ra), trace_file(&args.file, &rb));
    let diff = FlameDiff::new(a, b);
    let out = path.unwrap_or(Path::new("-"));
    let inputs: [&Path; 2] = [base, &args.file];
    match format {
        Format::Svg => {
            write_text(out, &inputs, &diff.svg(&ta, &tb, args.inverted))?;
            if !input::is_stdin(out) {
                print(&format!("wrote {}: {}\n", out.display(), diff.summary()))?;
            }
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&diff.json())?;
            write_text(out, &inputs, &json)?;
        }
        _ => {
            let mut w = Output::create(out, &inputs)?;
            diff.write_text(&mut w)?;
            w.finish()?;
        }
    }
    let ca = finish(base, &diff.base.pass);
    let cb = finish(&args.file, &diff.answer.pass);
    Ok(if diff.base.pass.error.is_some() {
        ca
    } else {
        cb
    })
}

fn hot_paths(args: TableArgs<HotPathsQuery>) -> Result<ExitCode> {
    args.query.flame.filter.check()?;
    let (reader, answer) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    let info = trace_file(&args.file, &reader);
    print_answer(args.json, || answer.json(&info), || answer.table(&info))?;
    warn_past_end(&args.file, args.query.flame.at, &answer.flame.pass);
    Ok(finish(&args.file, &answer.flame.pass))
}

fn to_fxt(args: ToFxtArgs) -> Result<ExitCode> {
    args.query.filter.check()?;
    let output =
        (args.output.clone()).unwrap_or_else(|| default_output(Some(&args.file), Format::Fxt));
    refuse_same_file(&output, &[&args.file])?;
    check_format(&output, Format::Fxt)?;
    let (reader, pass) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    let mut file = OutputFile::create(&output, &[&args.file])?;
    // The spinner counts the bytes: `--big 200000` writes backtraces for seconds.
    let spinner = post_pass(&reader, "writing");
    let (symbols, options) = (reader.locations(), args.query.fxt_options());
    let out = spinner.wrap_write(&mut file);
    let written = fxt::write_trace(out, &pass.profile, symbols, reader.info(), &options);
    let (_, s) = written.map_err(|e| fxt_write_error(&output, e))?;
    file.commit()?;
    spinner.finish_and_clear();
    if args.json {
        let mut summary = serde_json::to_value(s)?;
        summary["output"] = output.display().to_string().into();
        print_json(&summary)?;
    } else {
        print(&format!("wrote {}: {s}\n", output.display()))?;
    }
    Ok(finish(&args.file, &pass))
}

fn to_pprof(args: ToPprofArgs) -> Result<ExitCode> {
    args.query.filter.check()?;
    let output =
        (args.output.clone()).unwrap_or_else(|| default_output(Some(&args.file), Format::Pprof));
    refuse_same_file(&output, &[&args.file])?;
    check_format(&output, Format::Pprof)?;
    let (_, answer) = analyse(&args.file, |r, p| args.query.run(r, p))?;
    let mut file = OutputFile::create(&output, &[&args.file])?;
    tracekit_pprof::write_gzip(&answer.profile, &mut file)?;
    file.commit()?;
    let (samples, totals) = (answer.profile.sample.len(), &answer.pass.profile.totals);
    let bytes = answer.pass.profile.sampling.bytes(totals.samples);
    say(format_args!(
        "wrote {}: {samples} stacks, {} allocations, {} allocated",
        output.display(),
        totals.allocs,
        tracekit_analysis::svg::human_bytes(bytes as f64)
    ));
    Ok(finish(&args.file, &answer.pass))
}

fn diff(args: DiffArgs) -> Result<ExitCode> {
    args.query.filter.check()?;
    let (ra, pa) = analyse(&args.a, |r, p| args.query.pass(r, p))?;
    let (rb, pb) = analyse(&args.b, |r, p| args.query.pass(r, p))?;
    let answer = args
        .query
        .compare((pa, ra.locations()), (pb, rb.locations()));
    let ctx = (args.query).context(trace_file(&args.a, &ra), trace_file(&args.b, &rb));
    print_answer(args.json, || answer.json(&ctx), || answer.table(&ctx))?;
    let ca = finish(&args.a, &answer.a);
    let cb = finish(&args.b, &answer.b);
    Ok(if answer.a.error.is_some() { ca } else { cb })
}
