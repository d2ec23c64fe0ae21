//! `tracekit perf ...`: call-stack timelines from `perf` (magic-trace style).
//!
//! `decode` reads `perf script` text (a file, or stdin) or a `perf.data` file (for which
//! it runs `perf script` itself) and writes an FXT trace or magic-trace's transcript;
//! `record` runs `perf record` (Intel PT where the machine has it, stack sampling
//! otherwise) and then decodes.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use flate2::Compression;
use flate2::write::GzEncoder;
use indicatif::{ProgressBar, ProgressStyle};
use tracekit_callstack::decode::{DecodeStats, Decoder, HitCollector};
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::script::complete_prefix;
use tracekit_callstack::sink::Sink;
use tracekit_callstack::transcript::{self, TranscriptOptions};
use tracekit_callstack::writer::{Config, TraceScope, Warning};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::Writer;

/// `tracekit perf` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Decode `perf script` output or a perf.data file into a call-stack timeline.
    Decode(DecodeArgs),
    /// Record a program (or a running process) with perf, then decode it.
    Record(RecordArgs),
}

/// Which address spaces were traced.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Scope {
    /// User space only.
    User,
    /// Kernel only.
    Kernel,
    /// User space and kernel.
    #[value(name = "user+kernel")]
    UserKernel,
}

impl From<Scope> for TraceScope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::User => TraceScope::User,
            Scope::Kernel => TraceScope::Kernel,
            Scope::UserKernel => TraceScope::UserAndKernel,
        }
    }
}

/// How a perf.data file was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Look at the recorded events (`perf evlist`).
    Auto,
    /// Intel Processor Trace branches (`perf script --itrace=bep`).
    IntelPt,
    /// Sampled call stacks (`cycles`, `cpu-clock`, ...).
    Sampling,
}

/// Options of `tracekit perf decode`.
#[derive(Args)]
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
    /// What was traced: user space, kernel, or both.
    #[arg(long, value_enum, default_value = "user")]
    scope: Scope,
    /// For perf.data input: branch trace (Intel PT) or sampled stacks.
    #[arg(long, value_enum, default_value = "auto")]
    mode: Mode,
    /// Append " [inferred start time]" to frames whose start was inferred (default with --transcript).
    #[arg(long)]
    annotate_inferred_start_times: bool,
    /// Keep only what happens between calls to START and STOP (`START..STOP`).
    #[arg(long, value_name = "START..STOP")]
    filter: Option<String>,
    /// OCaml pushtrap addresses (hex, comma-separated); with the two below enables
    /// precise OCaml exception tracking.
    #[arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)]
    ocaml_pushtraps: Option<Vec<String>>,
    /// OCaml poptrap addresses (hex, comma-separated).
    #[arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)]
    ocaml_poptraps: Option<Vec<String>>,
    /// OCaml entertrap addresses (hex, comma-separated).
    #[arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)]
    ocaml_entertraps: Option<Vec<String>>,
    /// Do not queue events inside TSX transactions.
    #[arg(long)]
    no_transactions: bool,
    /// The perf executable.
    #[arg(long, default_value = "perf")]
    perf: PathBuf,
    /// No progress or summary on stderr (warnings are still printed).
    #[arg(short, long)]
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
    scope: Scope,
    /// Intel PT: trace the whole run instead of keeping the last snapshot at exit.
    #[arg(long)]
    full_execution: bool,
    /// Print the transcript instead of writing FXT.
    #[arg(long)]
    transcript: bool,
    /// The perf executable.
    #[arg(long, default_value = "perf")]
    perf: PathBuf,
    /// No progress or summary on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// The program to record and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// How perf unwinds sampled stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CallGraph {
    /// Frame pointers (cheap; needs code built with frame pointers).
    Fp,
    /// DWARF unwinding of copied stacks (works without frame pointers; large files).
    Dwarf,
}

/// Runs one `tracekit perf` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Decode(args) => decode(&args),
        Command::Record(args) => record(&args),
    }
}

// ---- decode -------------------------------------------------------------------------------

const PERF_DATA_MAGIC: &[u8] = b"PERFILE2";
/// Text is decoded in pieces of about this size (progress granularity, pipe buffering).
const CHUNK: usize = 8 << 20;

fn parse_hex_list(v: &Option<Vec<String>>) -> anyhow::Result<Vec<u64>> {
    v.iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| {
            u64::from_str_radix(s.trim_start_matches("0x"), 16)
                .with_context(|| format!("not a hex address: {s}"))
        })
        .collect()
}

fn config_of(args: &DecodeArgs) -> anyhow::Result<Config> {
    let any_traps = args.ocaml_pushtraps.is_some()
        || args.ocaml_poptraps.is_some()
        || args.ocaml_entertraps.is_some();
    let ocaml_exception_info = if any_traps {
        Some(OcamlExceptionInfo::new(
            &parse_hex_list(&args.ocaml_pushtraps)?,
            &parse_hex_list(&args.ocaml_poptraps)?,
            &parse_hex_list(&args.ocaml_entertraps)?,
        ))
    } else {
        None
    };
    Ok(Config {
        scope: args.scope.into(),
        annotate_inferred_start_times: args.annotate_inferred_start_times || args.transcript,
        ocaml_exception_info,
        transactions: !args.no_transactions,
    })
}

/// Where the `perf script` text comes from.
enum Source {
    Stdin,
    Text(PathBuf),
    PerfData(PathBuf),
}

fn source_of(input: &Option<PathBuf>) -> anyhow::Result<Source> {
    let Some(path) = input.as_ref().filter(|p| p.as_os_str() != "-") else {
        return Ok(Source::Stdin);
    };
    let mut magic = [0u8; 8];
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let n = read_up_to(&mut f, &mut magic)?;
    Ok(if magic[..n] == *PERF_DATA_MAGIC {
        Source::PerfData(path.clone())
    } else {
        Source::Text(path.clone())
    })
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Calls `f` on successive pieces of `r` that hold only complete records.
fn for_each_chunk(mut r: impl Read, mut f: impl FnMut(&str, u64)) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + (1 << 16));
    let mut offset = 0u64;
    loop {
        let start = buf.len();
        let want = CHUNK.max(start);
        buf.resize(start + want, 0);
        let n = read_up_to(&mut r, &mut buf[start..])?;
        buf.truncate(start + n);
        let eof = n < want;
        let cut = complete_prefix(&buf, eof);
        if cut > 0 {
            match std::str::from_utf8(&buf[..cut]) {
                Ok(text) => f(text, offset),
                Err(_) => f(&String::from_utf8_lossy(&buf[..cut]), offset),
            }
            offset += cut as u64;
            buf.drain(..cut);
        }
        if eof {
            return Ok(());
        }
    }
}

/// Recorded events of a perf.data file.
fn perf_evlist(perf: &Path, data: &Path) -> anyhow::Result<String> {
    let out = Process::new(perf)
        .arg("evlist")
        .arg("-i")
        .arg(data)
        .stderr(Stdio::piped())
        .output()
        .with_context(|| {
            format!(
                "cannot run {} (install perf: `apt-get install linux-perf`)",
                perf.display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "`perf evlist -i {}` failed: {}",
            data.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `perf script` command for a perf.data file: magic-trace's field lists, plus
/// `comm` so that processes get their command names.
fn perf_script_command(perf: &Path, data: &Path, mode: Mode) -> anyhow::Result<(Process, Mode)> {
    let mode = match mode {
        Mode::Auto => {
            if perf_evlist(perf, data)?
                .lines()
                .any(|l| l.starts_with("intel_pt"))
            {
                Mode::IntelPt
            } else {
                Mode::Sampling
            }
        }
        m => m,
    };
    let mut cmd = Process::new(perf);
    cmd.arg("script").arg("-i").arg(data).arg("--ns");
    match mode {
        Mode::IntelPt => {
            cmd.args([
                "--itrace=bep",
                "-F",
                "comm,pid,tid,time,flags,ip,addr,sym,symoff,synth,dso,event,period",
            ]);
        }
        _ => {
            cmd.args(["-F", "comm,pid,tid,time,ip,sym,symoff,dso,event,period"]);
        }
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    Ok((cmd, mode))
}

fn spawn_perf_script(perf: &Path, data: &Path, mode: Mode) -> anyhow::Result<(Child, Mode)> {
    let (mut cmd, mode) = perf_script_command(perf, data, mode)?;
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot run {} script", perf.display()))?;
    Ok((child, mode))
}

fn finish_perf_script(mut child: Child) -> anyhow::Result<()> {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("perf script failed ({status}): {}", err.trim());
    }
    Ok(())
}

/// Runs `f` over the text of the source in chunks; returns the input size if known.
fn with_text(
    source: &Source,
    args_perf: &Path,
    mode: Mode,
    quiet: bool,
    mut f: impl FnMut(&str, u64),
) -> anyhow::Result<()> {
    match source {
        Source::Stdin => Ok(for_each_chunk(io::stdin().lock(), f)?),
        Source::Text(path) => {
            let file =
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            let len = file.metadata()?.len();
            if len == 0 {
                return Ok(());
            }
            // SAFETY: the map is only read; tracekit does not write input files, and a
            // concurrent truncation by another process is outside what a reader can prevent.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .with_context(|| format!("cannot map {}", path.display()))?;
            let bar = progress(Some(len), quiet);
            let mut pos = 0usize;
            while pos < map.len() {
                let end = (pos + CHUNK).min(map.len());
                let cut = if end == map.len() {
                    end - pos
                } else {
                    match complete_prefix(&map[pos..end], false) {
                        0 => end - pos,
                        c => c,
                    }
                };
                let piece = &map[pos..pos + cut];
                match std::str::from_utf8(piece) {
                    Ok(text) => f(text, pos as u64),
                    Err(_) => f(&String::from_utf8_lossy(piece), pos as u64),
                }
                pos += cut;
                bar.set_position(pos as u64);
            }
            bar.finish_and_clear();
            Ok(())
        }
        Source::PerfData(path) => {
            let (mut child, mode) = spawn_perf_script(args_perf, path, mode)?;
            if !quiet {
                eprintln!(
                    "running perf script on {} ({})",
                    path.display(),
                    match mode {
                        Mode::IntelPt => "Intel PT branches",
                        _ => "sampled stacks",
                    }
                );
            }
            let stdout = child.stdout.take().context("perf script has no stdout")?;
            let bar = progress(None, quiet);
            let mut bytes = 0u64;
            for_each_chunk(stdout, |text, off| {
                f(text, off);
                bytes += text.len() as u64;
                bar.set_position(bytes);
            })?;
            bar.finish_and_clear();
            finish_perf_script(child)
        }
    }
}

fn progress(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "decoding {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} decoding {bytes} ({bytes_per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    }
}

/// Prints warnings, the first ones in full and then a count.
struct WarningPrinter {
    shown: u64,
    hidden: u64,
}

const SHOWN_WARNINGS: u64 = 20;

impl WarningPrinter {
    fn print(&mut self, w: &Warning) {
        if self.shown < SHOWN_WARNINGS {
            self.shown += 1;
            eprintln!("{w}");
        } else {
            self.hidden += 1;
        }
    }
    fn finish(&self) {
        if self.hidden > 0 {
            eprintln!("... and {} more warnings", self.hidden);
        }
    }
}

fn report_unparsed(stats: &DecodeStats) {
    if stats.unparsed == 0 {
        return;
    }
    eprintln!(
        "warning: skipped {} of {} records that were not perf script output tracekit knows",
        stats.unparsed, stats.records
    );
    for e in &stats.first_unparsed {
        eprintln!("  {e}");
    }
}

fn decode(args: &DecodeArgs) -> anyhow::Result<ExitCode> {
    let config = config_of(args)?;
    let filter = match &args.filter {
        Some(f) => Some(RangeFilter::parse(f).context("--filter wants START..STOP")?),
        None => None,
    };
    let source = source_of(&args.input)?;
    if args.transcript {
        return decode_transcript(args, config, filter, &source);
    }
    decode_fxt(args, config, filter, &source)
}

fn decode_transcript(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &Source,
) -> anyhow::Result<ExitCode> {
    // The transcript is a debugging and conformance format: it wants the whole input
    // (its time origin and the filter's first pass look ahead).
    let mut text = String::new();
    with_text(source, &args.perf, args.mode, true, |t, _| text.push_str(t))?;
    let opts = TranscriptOptions {
        scope: config.scope,
        annotate_inferred_start_times: config.annotate_inferred_start_times,
        echo: !args.no_echo,
        time_origin_first_event: true,
        ocaml_exception_info: config.ocaml_exception_info,
        filter,
        events_output: false,
    };
    let t = transcript::run(&text, &opts);
    for line in &t.stderr {
        eprintln!("{line}");
    }
    match &args.output {
        Some(path) => std::fs::write(path, &t.stdout)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = io::stdout().lock();
            if let Err(e) = out.write_all(t.stdout.as_bytes()).and_then(|_| out.flush()) {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    return Err(e.into());
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn default_output(source: &Source) -> PathBuf {
    match source {
        Source::Stdin => PathBuf::from("trace.fxt"),
        Source::Text(p) | Source::PerfData(p) => p.with_extension("fxt"),
    }
}

fn decode_fxt(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &Source,
) -> anyhow::Result<ExitCode> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(source));
    let file =
        File::create(&output).with_context(|| format!("cannot create {}", output.display()))?;
    let out = if output.extension().is_some_and(|e| e == "gz") {
        FxtFile::Gz(GzEncoder::new(file, Compression::default()))
    } else {
        FxtFile::Plain(file)
    };
    let writer = Writer::new(IoDestination::with_buffer_size(out, 1 << 20))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", output.display()))?;
    let started = Instant::now();
    let (sink, stats) = run_decoder(args, config, filter, source, FxtSink::new(writer))?;
    let records = sink.records();
    let mut dest = sink
        .finish()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", output.display()))?;
    if let Some(e) = dest.take_error() {
        return Err(anyhow::Error::new(e).context(format!("cannot write {}", output.display())));
    }
    dest.into_inner()
        .finish()
        .with_context(|| format!("cannot write {}", output.display()))?;
    if !args.quiet {
        eprintln!(
            "decoded {} records ({} events, {} decode errors) in {:.2?}: wrote {} FXT records to {}",
            stats.records,
            stats.events,
            stats.decode_errors,
            started.elapsed(),
            records,
            output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The FXT output file, plain or gzip-compressed (`.gz`).
enum FxtFile {
    Plain(File),
    Gz(GzEncoder<File>),
}

impl Write for FxtFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            FxtFile::Plain(f) => f.write(buf),
            FxtFile::Gz(g) => g.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            FxtFile::Plain(f) => f.flush(),
            FxtFile::Gz(g) => g.flush(),
        }
    }
}

impl FxtFile {
    fn finish(self) -> io::Result<()> {
        match self {
            FxtFile::Plain(mut f) => f.flush(),
            FxtFile::Gz(g) => g.finish()?.flush(),
        }
    }
}

fn run_decoder<S: Sink>(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &Source,
    sink: S,
) -> anyhow::Result<(S, DecodeStats)> {
    let hits = match filter {
        Some(f) => {
            if matches!(source, Source::Stdin) {
                bail!("--filter needs two passes over the input: give a file, not stdin");
            }
            let mut collector = HitCollector::new(f);
            with_text(source, &args.perf, args.mode, true, |t, _| {
                collector.feed(t)
            })?;
            Some(collector.finish())
        }
        None => None,
    };
    let mut decoder = Decoder::new(sink, config, hits);
    let mut printer = WarningPrinter {
        shown: 0,
        hidden: 0,
    };
    with_text(source, &args.perf, args.mode, args.quiet, |t, off| {
        // Same output as `feed`; parses on a second core when there is one.
        decoder.feed_pipelined(t, off);
        for w in decoder.drain_warnings() {
            printer.print(&w);
        }
    })?;
    let (sink, stats, warnings) = decoder.finish();
    for w in &warnings {
        printer.print(w);
    }
    printer.finish();
    report_unparsed(&stats);
    Ok((sink, stats))
}

// ---- record -------------------------------------------------------------------------------

const INTEL_PT_PMU: &str = "/sys/bus/event_source/devices/intel_pt";

fn scope_suffix(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "u",
        Scope::Kernel => "k",
        Scope::UserKernel => "uk",
    }
}

/// Lets perf, not tracekit, react to Ctrl-C while it records, so that it can finish
/// writing perf.data and tracekit can decode it afterwards.
struct IgnoreInterrupts {
    previous: libc::sighandler_t,
}

impl IgnoreInterrupts {
    fn new() -> Self {
        // SAFETY: installing SIG_IGN is async-signal-safe and touches no Rust state.
        let previous = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        IgnoreInterrupts { previous }
    }
}

impl Drop for IgnoreInterrupts {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved in `new`.
        unsafe {
            libc::signal(libc::SIGINT, self.previous);
        }
    }
}

fn record(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    if args.pid.is_none() && args.command.is_empty() {
        bail!("nothing to record: give `-- COMMAND [ARGS...]` or `--pid PID`");
    }
    std::fs::create_dir_all(&args.output_dir)
        .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    let data = args.output_dir.join("perf.data");
    let has_pt = Path::new(INTEL_PT_PMU).exists();
    let use_pt = has_pt && !args.sampling;
    let scope = scope_suffix(args.scope);
    let mut cmd = Process::new(&args.perf);
    cmd.arg("record").arg("-o").arg(&data).arg("--timestamp");
    let why = if use_pt {
        cmd.arg(format!(
            "--event=intel_pt/cyc=1,cyc_thresh=1,mtc_period=0/{scope}"
        ));
        if !args.full_execution {
            cmd.arg("--snapshot=e");
        }
        "the intel_pt PMU is present: recording Intel PT branches".to_string()
    } else {
        let callgraph = match args.call_graph {
            CallGraph::Fp => "fp",
            CallGraph::Dwarf => "dwarf",
        };
        cmd.arg(format!("--event=cpu-clock:{scope}"))
            .arg("-F")
            .arg(args.frequency.to_string())
            .arg("--call-graph")
            .arg(callgraph);
        let reason = if has_pt {
            "--sampling was given"
        } else {
            "this machine has no Intel PT (no /sys/bus/event_source/devices/intel_pt)"
        };
        format!(
            "{reason}: sampling cpu-clock call stacks at {} Hz, unwound with {}",
            args.frequency,
            match args.call_graph {
                CallGraph::Fp => "frame pointers",
                CallGraph::Dwarf => "DWARF",
            }
        )
    };
    match args.pid {
        Some(pid) => {
            cmd.arg("-p").arg(pid.to_string());
            if let Some(secs) = args.duration {
                cmd.arg("--").arg("sleep").arg(format!("{secs}"));
            }
        }
        None => {
            cmd.arg("--").args(&args.command);
        }
    }
    eprintln!("tracekit: {why}");
    if args.pid.is_some() && args.duration.is_none() {
        eprintln!("tracekit: recording until Ctrl-C");
    }
    let mut child = cmd.stdin(Stdio::inherit()).spawn().with_context(|| {
        format!(
            "cannot run {} (install perf: `apt-get install linux-perf`)",
            args.perf.display()
        )
    })?;
    let status = {
        let _guard = IgnoreInterrupts::new();
        child.wait()?
    };
    if !data.exists() {
        bail!(
            "perf record failed ({status}) and wrote no {}",
            data.display()
        );
    }
    if !status.success() {
        eprintln!("tracekit: perf record exited with {status}; decoding what it wrote");
    }
    let decode_args = DecodeArgs {
        input: Some(data),
        output: if args.transcript {
            None
        } else {
            Some(args.output_dir.join("trace.fxt"))
        },
        transcript: args.transcript,
        no_echo: false,
        scope: args.scope,
        mode: if use_pt {
            Mode::IntelPt
        } else {
            Mode::Sampling
        },
        annotate_inferred_start_times: false,
        filter: None,
        ocaml_pushtraps: None,
        ocaml_poptraps: None,
        ocaml_entertraps: None,
        no_transactions: false,
        perf: args.perf.clone(),
        quiet: args.quiet,
    };
    decode(&decode_args)
}
