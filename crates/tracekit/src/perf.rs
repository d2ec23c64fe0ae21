//! `tracekit perf ...`: call-stack timelines from `perf` (magic-trace style).
//!
//! `decode` reads `perf script` text (a file, or stdin) or a `perf.data` file (sampled
//! stacks read directly; Intel PT through `perf script`) and writes an FXT trace or
//! magic-trace's transcript; `record` runs `perf record` (Intel PT where the machine
//! has it, stack sampling otherwise) and then decodes; `flamegraph` folds sampled
//! stacks into a flame graph.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use tracekit_analysis::frames::FrameTree;
use tracekit_analysis::svg::FlameGraphOptions;
use tracekit_cache::user_cache_dir;
use tracekit_callstack::writer::{TraceScope, Warning};
use tracekit_columns::Spill;
use tracekit_perf::Mode;
use tracekit_perf::data::ReadStats;
use tracekit_perf::decode::{DecodeOptions, direct, transcribe};
use tracekit_perf::into_fxt::{decode_in_memory, decode_into};
use tracekit_perf::record::{self as plan, CallGraph, RecordOptions, Target};
use tracekit_perf::text::{Progress, TextSource};

use crate::common::input::{self, Family, Kind};
use crate::common::names::{Format, check_format, choose_format, default_output};
use crate::common::output::{
    ChildHandlesInterrupts, Output, OutputFile, TempDir, refuse_same_file,
};
use crate::common::{progress_bar, progress_spinner, say};

/// `tracekit perf` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Decode `perf script` output or a perf.data file into a call-stack timeline.
    Decode(DecodeArgs),
    /// Record a program (or a running process) with perf, then decode it.
    Record(RecordArgs),
    /// Folded stacks or an SVG flame graph of sampled stacks (perf.data or text).
    Flamegraph(FlamegraphArgs),
    /// A gzipped pprof CPU profile of sampled stacks (samples, and cpu
    /// nanoseconds when the recording says its period), for `go tool pprof`,
    /// Parca, Pyroscope or Perfetto.
    #[command(name = "to-pprof")]
    ToPprof(ToPprofArgs),
}

/// Options of `tracekit perf to-pprof`.
#[derive(Args)]
pub struct ToPprofArgs {
    /// A perf.data file of sampled stacks, or `perf script` text (`-`: stdin).
    input: PathBuf,
    /// The profile to write (default: the input's name with `.pb.gz`).
    #[arg(short, long, value_name = "OUT.pb.gz")]
    output: Option<PathBuf>,
    #[command(flatten)]
    read: SampledArgs,
    /// `-q`, which is global.
    #[arg(skip)]
    quiet: bool,
}

/// Options of `tracekit perf flamegraph`.
#[derive(Args)]
pub struct FlamegraphArgs {
    /// A perf.data file of sampled stacks, or `perf script` text (`-`: stdin).
    input: PathBuf,
    /// Write an SVG flame graph here instead of folded stacks.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Where to write (default: stdout): an SVG flame graph for a name ending in
    /// `.svg`, else folded stacks.
    #[arg(short, long, conflicts_with = "svg")]
    output: Option<PathBuf>,
    /// One tower per thread (`comm [tid]` at the root).
    #[arg(long)]
    per_thread: bool,
    /// Compare with this baseline recording (A; INPUT is B), read as INPUT
    /// is: a differential flame graph, each frame as wide as in INPUT, red
    /// where it grew and blue where it shrank; as text, stacks with both
    /// sample counts (`stack A B`, as difffolded.pl writes).
    #[arg(long, value_name = "BASE")]
    diff: Option<PathBuf>,
    /// With --diff: scale the baseline's samples to INPUT's total, for
    /// recordings of different lengths.
    #[arg(long, requires = "diff")]
    normalize: bool,
    #[command(flatten)]
    read: SampledArgs,
    /// `-q`, which is global.
    #[arg(skip)]
    quiet: bool,
}

/// How sampled stacks are read, for the commands that fold them.
#[derive(Args)]
pub struct SampledArgs {
    /// Which frames to keep: user space, kernel, or both.
    #[arg(long, value_enum, default_value = "user")]
    scope: TraceScope,
    /// Read perf.data through `perf script` instead of directly.
    #[arg(long)]
    via_perf_script: bool,
    /// Where separate debug files are looked for (repeatable; default
    /// /usr/lib/debug).
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// Use no separate debug files.
    #[arg(long, conflicts_with = "debug_dir")]
    no_debug_files: bool,
    /// Name every address from the objects, without the names kept by earlier
    /// runs (by build id, under $XDG_CACHE_HOME/tracekit/names), and keep none.
    #[arg(long)]
    no_cache: bool,
    /// The perf executable.
    #[arg(long, default_value = "perf")]
    perf: PathBuf,
}

impl SampledArgs {
    /// Folds the sampled stacks of `input` (each thread apart if
    /// `per_thread`) with a progress bar unless `quiet`, reporting what the
    /// direct reader found; fails when there are none. The source, its name
    /// and the stacks.
    fn fold(
        &self,
        input: &Path,
        per_thread: bool,
        quiet: bool,
    ) -> anyhow::Result<(TextSource, String, tracekit_perf::fold::Folded)> {
        let mut source = open(input, &self.perf, Mode::Sampling)?;
        let name = source.name();
        let options = DecodeOptions {
            via_perf_script: self.via_perf_script,
            scope: self.scope,
            debug_dir: self.debug_dir.clone(),
            no_debug_files: self.no_debug_files,
            no_cache: self.no_cache,
            ..DecodeOptions::default()
        }
        .with_names_in(user_cache_dir().as_deref());
        let progress = progress(name.clone(), quiet);
        let folded = tracekit_perf::fold::fold(&mut source, &options, per_thread, progress)?;
        if let Some(read) = &folded.read {
            report_read(&name, read);
        }
        folded.require_samples(&name)?;
        Ok((source, name, folded))
    }
}

/// Options of `tracekit perf decode`.
#[derive(Args, Default)]
pub struct DecodeArgs {
    /// `perf script` text or a perf.data file; `-` or nothing reads text from stdin.
    input: Option<PathBuf>,
    /// Where to write (default: stdout for --transcript, else INPUT with `.fxt`, or `trace.fxt`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print magic-trace's transcript (`-> TIME BEGIN|END NAME` lines) instead of FXT.
    #[arg(long)]
    transcript: bool,
    /// With --transcript: do not echo input records.
    #[arg(long, requires = "transcript")]
    no_echo: bool,
    #[command(flatten)]
    options: DecodeOptions,
    /// The perf executable.
    #[arg(long, default_value = "perf")]
    perf: PathBuf,
    /// `-q`, which is global.
    #[arg(skip)]
    quiet: bool,
}

/// Options of `tracekit perf record`.
#[derive(Args)]
pub struct RecordArgs {
    /// Directory for perf.data and the decoded trace.
    #[arg(short, long, default_value = "perf-trace")]
    output_dir: PathBuf,
    /// Attach to a running process instead of starting COMMAND.
    #[arg(long, conflicts_with = "command")]
    pid: Option<u32>,
    /// With --pid: stop after this many seconds (default: at Ctrl-C).
    #[arg(long, requires = "pid")]
    duration: Option<f64>,
    /// Sample stacks even where Intel PT exists.
    #[arg(long)]
    sampling: bool,
    /// How sampled call stacks are unwound.
    #[arg(long, value_enum, default_value = "fp")]
    call_graph: CallGraph,
    /// Sampling frequency in Hz.
    #[arg(long, default_value_t = 10_000)]
    frequency: u32,
    /// What to trace: user space, kernel, or both (kernel needs privileges).
    #[arg(long, value_enum, default_value = "user")]
    scope: TraceScope,
    /// Intel PT: trace the whole run instead of keeping the last snapshot at exit.
    #[arg(long)]
    full_execution: bool,
    /// Print the transcript instead of writing FXT.
    #[arg(long)]
    transcript: bool,
    /// Then serve the trace's timeline to a web browser and open it (as
    /// `tracekit view DIR/trace.fxt --open`).
    #[arg(long, conflicts_with = "transcript")]
    view: bool,
    /// The perf executable.
    #[arg(long, default_value = "perf")]
    perf: PathBuf,
    /// `-q`, which is global.
    #[arg(skip)]
    quiet: bool,
    /// The program to record and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs one `tracekit perf` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let quiet = crate::common::quiet();
    match cmd {
        Command::Decode(args) => decode(&DecodeArgs { quiet, ..args }),
        Command::Record(args) => record(&RecordArgs { quiet, ..args }),
        Command::Flamegraph(args) => flamegraph(&FlamegraphArgs { quiet, ..args }),
        Command::ToPprof(args) => to_pprof(&ToPprofArgs { quiet, ..args }),
    }
}

/// Progress of a decode: a bar over a file, a spinner over a stream, and a
/// line when `perf script` starts.
fn progress(name: String, quiet: bool) -> impl FnMut(Progress) {
    let mut bar = None;
    move |p| match p {
        Progress::Total(n) => bar = Some(progress_bar(n, "decoding", quiet)),
        Progress::Recording(n) => bar = Some(progress_bar(n, "reading", quiet)),
        Progress::PerfScriptStarted(mode) => {
            if !quiet {
                let what = match mode {
                    Mode::IntelPt => "Intel PT branches",
                    _ => "sampled stacks",
                };
                eprintln!("running perf script on {name} ({what})");
            }
        }
        Progress::Position(n) => bar
            .get_or_insert_with(|| progress_spinner("decoding", true, quiet))
            .set_position(n),
    }
}

/// A warning sink that prints the first warnings in full and, once dropped,
/// how many more there were.
fn warnings() -> impl FnMut(&Warning) {
    const SHOWN: u64 = 20;
    struct More(u64);
    impl Drop for More {
        fn drop(&mut self) {
            if self.0 > 0 {
                eprintln!("... and {} more warnings", self.0);
            }
        }
    }
    let (mut shown, mut more) = (0, More(0));
    move |w| {
        // The whole `More` is taken, not its count: it says so when dropped.
        let more = &mut more;
        match shown < SHOWN {
            true => {
                shown += 1;
                eprintln!("{w}");
            }
            false => more.0 += 1,
        }
    }
}

/// Opens `path` (`-`: standard input) for `tracekit perf`: `perf script` text, or a
/// perf.data file to be read as recorded in `mode` (through `perf`, the executable,
/// where it is not read directly). Any other kind of input is an error that says
/// what it is (an empty one too: there is nothing to decode).
fn open(path: &Path, perf: &Path, mode: Mode) -> anyhow::Result<TextSource> {
    if input::is_stdin(path) {
        let stream = input::open_stream(path, Family::Perf)?;
        return Ok(TextSource::Stream(Some(Box::new(stream))));
    }
    let (bytes, kind) = input::read_all_sniffed(path, Family::Perf)?;
    Ok(source(path, bytes, kind, perf, mode))
}

/// The source of the perf input `path`, its `bytes` read and sniffed as `kind`.
fn source(path: &Path, bytes: input::Bytes, kind: Kind, perf: &Path, mode: Mode) -> TextSource {
    match kind {
        Kind::PerfData => TextSource::PerfData {
            path: path.to_path_buf(),
            perf: perf.to_path_buf(),
            mode,
            bytes: Some(std::sync::Arc::new(bytes)),
        },
        _ => TextSource::File {
            path: path.to_path_buf(),
            text: Box::new(bytes),
        },
    }
}

fn decode(args: &DecodeArgs) -> anyhow::Result<ExitCode> {
    // Options that do not go together are reported before the input is read.
    args.options.config(args.transcript)?;
    let path = args.input.clone().unwrap_or_else(|| PathBuf::from("-"));
    let mut source = open(&path, &args.perf, args.options.mode)?;
    let input = source.path().map(PathBuf::from);
    let inputs: Vec<&Path> = input.as_deref().into_iter().collect();
    if args.transcript {
        let output = args.output.clone().unwrap_or_else(|| PathBuf::from("-"));
        let mut out = Output::create(&output, &inputs)?;
        let opts = args.options.transcript(!args.no_echo)?;
        // Out before the next piece is waited for.
        let write = |s: &str| out.write_all(s.as_bytes()).and_then(|()| out.flush());
        transcribe(&mut source, &opts, write, |line| eprintln!("{line}"))?;
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    let options = (args.options.clone()).with_names_in(user_cache_dir().as_deref());
    let output = (args.output.clone()).unwrap_or_else(|| source.default_fxt_output());
    check_format(&output, Format::Fxt)?;
    let shown = output.display().to_string();
    // The recording is opened first: a wrong input is reported before an output exists.
    let data = direct(&source, &options)?;
    let out = Output::create(&output, &inputs)?;
    let started = Instant::now();
    let progress = progress(source.name(), args.quiet);
    let note = |line: &str| eprintln!("warning: {line}");
    let (out, decoded) = decode_into(
        &mut source,
        data,
        &options,
        (out, &shown),
        progress,
        warnings(),
        note,
    )?;
    out.finish()?;
    if !args.quiet {
        let (took, records) = (started.elapsed(), decoded.fxt.records);
        eprintln!("{decoded} in {took:.2?}: wrote {records} FXT records to {shown}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Decodes the perf input `path` (its `bytes` read and sniffed as `kind`) with
/// the default options into an FXT trace, with progress, for `tracekit
/// view`. The trace goes to a temporary file that has no name (removed
/// however the process ends) and is mapped back, so that the decoded trace
/// is not held in memory; where no temporary file can be made, it is decoded
/// into memory, with a warning. The samples read wait for their names where
/// `spill` says.
pub fn decode_for_view(
    path: &Path,
    bytes: input::Bytes,
    kind: Kind,
    quiet: bool,
    spill: &Spill,
) -> anyhow::Result<input::Bytes> {
    let mut options = DecodeOptions::default().with_names_in(user_cache_dir().as_deref());
    options.spill = spill.clone();
    let mut source = source(path, bytes, kind, Path::new("perf"), options.mode);
    let progress = progress(source.name(), quiet);
    let note = |line: &str| eprintln!("warning: {line}");
    let file = match tempfile::tempfile() {
        Ok(file) => file,
        Err(e) => {
            eprintln!(
                "warning: cannot make a temporary file for the decoded trace ({e}); it is held in memory"
            );
            let fxt = decode_in_memory(&mut source, &options, progress, warnings(), note)?;
            return Ok(input::Bytes::Owned(fxt));
        }
    };
    let data = direct(&source, &options)?;
    let name = "the decoded trace (a temporary file)";
    let out = (std::io::BufWriter::with_capacity(1 << 20, file), name);
    let (out, _) = decode_into(&mut source, data, &options, out, progress, warnings(), note)?;
    let mut file = out
        .into_inner()
        .map_err(|e| anyhow::anyhow!("cannot write {name}: {}", e.error()))?;
    // A small trace is read back rather than mapped: from its start.
    std::io::Seek::rewind(&mut file).with_context(|| format!("cannot read {name}"))?;
    Ok(input::file_bytes(&file, name)?)
}

/// Prints what the direct reader found that a user should know.
fn report_read(name: &str, read: &ReadStats) {
    for w in read.warnings() {
        eprintln!("warning: {name}: {w}");
    }
}

fn flamegraph(args: &FlamegraphArgs) -> anyhow::Result<ExitCode> {
    let path = args.svg.as_deref().or(args.output.as_deref());
    let flag = args.svg.as_ref().map(|_| Format::Svg);
    let format = choose_format(path, flag, &[Format::Text, Format::Svg], Format::Text)?;
    let (source, name, folded) = args.read.fold(&args.input, args.per_thread, args.quiet)?;
    let inputs = source.path().into_iter().collect::<Vec<_>>();
    if let Some(base) = &args.diff {
        let (base_source, base_name, base_folded) =
            args.read.fold(base, args.per_thread, args.quiet)?;
        let inputs: Vec<&Path> = inputs.into_iter().chain(base_source.path()).collect();
        let mut diff = tracekit_analysis::diff::diff(
            &FrameTree::from_folded(&base_folded.lines),
            &FrameTree::from_folded(&folded.lines),
        );
        if args.normalize {
            diff.normalize();
        }
        let mut out = Output::create(path.unwrap_or(Path::new("-")), &inputs)?;
        if format == Format::Svg {
            let image = tracekit_analysis::svg::diff_flame_graph(
                &diff,
                &FlameGraphOptions {
                    title: format!(
                        "CPU samples: {name} against {base_name}: red grew, blue shrank"
                    ),
                    subtitle: format!(
                        "widths: {name} ({} samples); {base_name} ({} samples{})",
                        folded.samples,
                        base_folded.samples,
                        if args.normalize {
                            ", scaled to the same total"
                        } else {
                            ""
                        }
                    ),
                    bytes: false,
                    ..FlameGraphOptions::default()
                },
            );
            out.write_all(image.as_bytes())?;
        } else {
            diff.write_folded(&mut out)?;
        }
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    match path.filter(|_| format == Format::Svg) {
        Some(svg) => {
            let (samples, stacks) = (folded.samples, folded.lines.len());
            let tree = FrameTree::from_folded(&folded.lines);
            let image = tracekit_analysis::svg::flame_graph(
                &tree,
                &FlameGraphOptions {
                    title: format!("CPU samples: {name}"),
                    subtitle: format!("{samples} samples, {stacks} distinct stacks"),
                    bytes: false,
                    ..FlameGraphOptions::default()
                },
            );
            let mut out = Output::create(svg, &inputs)?;
            out.write_all(image.as_bytes())?;
            out.finish()?;
        }
        None => {
            let path = args.output.clone().unwrap_or_else(|| PathBuf::from("-"));
            let mut out = Output::create(&path, &inputs)?;
            folded.write(&mut out)?;
            out.finish()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn to_pprof(args: &ToPprofArgs) -> anyhow::Result<ExitCode> {
    let input = Some(args.input.as_path()).filter(|p| !input::is_stdin(p));
    let output = (args.output.clone()).unwrap_or_else(|| default_output(input, Format::Pprof));
    check_format(&output, Format::Pprof)?;
    refuse_same_file(&output, &[&args.input])?;
    let (source, _, folded) = args.read.fold(&args.input, true, args.quiet)?;
    let period = source
        .path()
        .and_then(tracekit_perf::data::recording_period)
        .and_then(|t| u64::try_from(t.0).ok());
    let profile = tracekit_perf::pprof::cpu_profile(&folded, period);
    let inputs = source.path().into_iter().collect::<Vec<_>>();
    let mut file = OutputFile::create(&output, &inputs)?;
    tracekit_pprof::write_gzip(&profile, &mut file)?;
    file.commit()?;
    say(format_args!(
        "wrote {}: {} samples, {} stacks{}",
        output.display(),
        folded.samples,
        folded.lines.len(),
        match period {
            Some(ns) => format!(", {ns} ns each"),
            None => " (no sampling period in the input: samples only)".to_owned(),
        }
    ));
    Ok(ExitCode::SUCCESS)
}

fn record(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let target = Target::new(args.pid, args.duration, &args.command)?;
    std::fs::create_dir_all(&args.output_dir)
        .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    // perf writes into a fresh folder; its file replaces DIR/perf.data only once
    // perf is done, so an old recording survives a failed one.
    let staging = TempDir::new_in(&args.output_dir)?;
    let final_data = args.output_dir.join("perf.data");
    let data = staging.path().join("perf.data");
    let mut plan = plan::plan(&RecordOptions {
        perf: args.perf.clone(),
        data: data.clone(),
        target,
        scope: args.scope,
        sampling: args.sampling,
        has_intel_pt: plan::has_intel_pt(),
        call_graph: args.call_graph,
        frequency: args.frequency,
        full_execution: args.full_execution,
    });
    eprintln!("tracekit: {}", plan.why);
    if args.pid.is_some() && args.duration.is_none() {
        eprintln!("tracekit: recording until Ctrl-C");
    }
    let mut child = plan
        .command
        .stdin(Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "cannot run {} (install perf: `apt-get install linux-perf`)",
                args.perf.display()
            )
        })?;
    let status = {
        let _guard = ChildHandlesInterrupts::new();
        child.wait()?
    };
    if !data.exists() {
        bail!(
            "perf record failed ({status}) and wrote no {}",
            final_data.display()
        );
    }
    staging.commit("perf.data", &final_data)?;
    drop(staging);
    if !status.success() {
        eprintln!("tracekit: perf record exited with {status}; decoding what it wrote");
    }
    let decode_args = DecodeArgs {
        input: Some(final_data),
        output: (!args.transcript).then(|| args.output_dir.join("trace.fxt")),
        transcript: args.transcript,
        options: DecodeOptions {
            scope: args.scope,
            mode: if plan.intel_pt {
                Mode::IntelPt
            } else {
                Mode::Sampling
            },
            ..DecodeOptions::default()
        },
        perf: args.perf.clone(),
        quiet: args.quiet,
        ..DecodeArgs::default()
    };
    let decoded = decode(&decode_args);
    let decoded = match (decoded, args.view) {
        (Ok(code), true) if code == ExitCode::SUCCESS => {
            let trace = args.output_dir.join("trace.fxt");
            crate::view::run(crate::view::ViewArgs::opening(trace))
        }
        (decoded, _) => decoded,
    };
    // The recorded program's failure is the command's, as if it had run alone
    // (perf record exits with the workload's status); a decoding error is still
    // reported, but the program's status says more about what went wrong.
    match status.code().filter(|&c| c != 0) {
        None => decoded,
        Some(code) => {
            if let Err(e) = decoded {
                eprintln!("error: {e:#}");
            }
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
    }
}
