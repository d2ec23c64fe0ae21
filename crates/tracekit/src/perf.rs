//! `tracekit perf ...`: call-stack timelines from `perf` (magic-trace style).
//!
//! `decode` reads `perf script` text (a file, or stdin) or a `perf.data` file (for which
//! it runs `perf script` itself) and writes an FXT trace or magic-trace's transcript;
//! `record` runs `perf record` (Intel PT where the machine has it, stack sampling
//! otherwise) and then decodes.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use flate2::Compression;
use flate2::write::GzEncoder;
use tracekit_callstack::decode::{DecodeStats, Decoder, HitCollector};
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::{FxtSink, TRUNCATED_MARKER};
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::script::complete_prefix;
use tracekit_callstack::sink::Sink;
use tracekit_callstack::transcript::{self, Transcriber, TranscriptOptions};
use tracekit_callstack::writer::{Config, TraceScope, Warning};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::Writer;

use crate::common::input::{self, Family, Kind, Peeked};
use crate::common::output::{ChildHandlesInterrupts, OutputFile, Stdout, TempDir};
use crate::common::{progress_bar, progress_spinner};

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
    /// Text from standard input (taken by the one pass that reads it).
    Stdin(Option<Peeked<Box<dyn Read + Send>>>),
    Text(PathBuf),
    PerfData(PathBuf),
}

impl Source {
    /// The input's name in messages.
    fn name(&self) -> String {
        match self {
            Source::Stdin(_) => "standard input".to_string(),
            Source::Text(p) | Source::PerfData(p) => p.display().to_string(),
        }
    }

    /// The input file, if it is one.
    fn path(&self) -> Option<&Path> {
        match self {
            Source::Stdin(_) => None,
            Source::Text(p) | Source::PerfData(p) => Some(p),
        }
    }
}

/// The input, its kind checked: `perf script` text or a perf.data file.
fn source_of(input: &Option<PathBuf>) -> anyhow::Result<Source> {
    let path = input.clone().unwrap_or_else(|| PathBuf::from("-"));
    let stream = input::open_stream(&path, Family::Perf)?;
    if stream.kind() == Kind::Empty {
        bail!("{}: empty input: nothing to decode", input::display(&path));
    }
    Ok(if input::is_stdin(&path) {
        Source::Stdin(Some(stream))
    } else if stream.kind() == Kind::PerfData {
        Source::PerfData(path)
    } else {
        Source::Text(path)
    })
}

/// Calls `f` on successive pieces of `r` that hold only complete records.
///
/// A thread reads `r`, so that a piece goes to `f` as soon as it is complete: a
/// slow producer (a pipe, `perf script`) gets its records decoded as they come,
/// while a fast one is batched into pieces of up to [`CHUNK`] bytes.
fn for_each_chunk(mut r: impl Read + Send, mut f: impl FnMut(&str, u64)) -> io::Result<()> {
    const READ: usize = 1 << 20;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(16);
        scope.spawn(move || {
            loop {
                let mut piece = vec![0u8; READ];
                let n = loop {
                    match r.read(&mut piece) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        other => break other,
                    }
                };
                let done = !matches!(n, Ok(k) if k > 0);
                let sent = tx.send(n.map(|k| {
                    piece.truncate(k);
                    piece
                }));
                if done || sent.is_err() {
                    return;
                }
            }
        });
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + READ);
        let mut offset = 0u64;
        let mut eof = false;
        while !eof {
            // One piece, waiting for it; then whatever else is already there.
            let mut next = rx.recv().map_err(|_| ());
            loop {
                match next {
                    Ok(Ok(piece)) if piece.is_empty() => eof = true,
                    Ok(Ok(piece)) => buf.extend_from_slice(&piece),
                    Ok(Err(e)) => return Err(e),
                    Err(()) => eof = true,
                }
                if eof || buf.len() >= CHUNK {
                    break;
                }
                next = match rx.try_recv() {
                    Ok(x) => Ok(x),
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(()),
                };
            }
            let cut = complete_prefix(&buf, eof);
            if cut > 0 {
                match std::str::from_utf8(&buf[..cut]) {
                    Ok(text) => f(text, offset),
                    Err(_) => f(&String::from_utf8_lossy(&buf[..cut]), offset),
                }
                offset += cut as u64;
                buf.drain(..cut);
            }
        }
        Ok(())
    })
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
    source: &mut Source,
    args_perf: &Path,
    mode: Mode,
    quiet: bool,
    mut f: impl FnMut(&str, u64),
) -> anyhow::Result<()> {
    match source {
        Source::Stdin(stream) => {
            let Some(stream) = stream.take() else {
                bail!("standard input can be read only once");
            };
            for_each_chunk(stream, f).context("cannot read standard input")
        }
        Source::Text(path) => {
            let map = input::file_bytes(&input::open_file(path)?, &input::display(path))?;
            let len = map.len() as u64;
            if len == 0 {
                return Ok(());
            }
            let bar = progress_bar(len, "decoding", quiet);
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
            let bar = progress_spinner("decoding", true, quiet);
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
    let mut source = source_of(&args.input)?;
    if args.transcript {
        return decode_transcript(args, config, filter, &mut source);
    }
    decode_fxt(args, config, filter, &mut source)
}

/// The error when nothing in the input was perf script output.
fn nothing_decoded(source: &Source, records: u64, first: Option<String>) -> anyhow::Error {
    let name = source.name();
    match (records, first) {
        (0, _) => {
            anyhow::anyhow!("{name}: no perf script records (no samples?): nothing to decode")
        }
        (n, Some(e)) => anyhow::anyhow!(
            "{name}: none of its {n} records is perf script output tracekit can read (first: {e})"
        ),
        (n, None) => anyhow::anyhow!("{name}: none of its {n} records holds an event"),
    }
}

/// Where a transcript goes: a file (`-o`) or standard output.
enum TextOut {
    File(OutputFile),
    Stdout(Stdout),
}

impl TextOut {
    fn write(&mut self, text: &str) -> io::Result<()> {
        match self {
            TextOut::File(f) => f.write_all(text.as_bytes()),
            TextOut::Stdout(s) => s.write_all(text.as_bytes()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            TextOut::File(f) => f.flush(),
            TextOut::Stdout(s) => s.flush(),
        }
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            TextOut::File(f) => Ok(f.commit()?),
            TextOut::Stdout(s) => Ok(s.finish()?),
        }
    }
}

fn decode_transcript(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &mut Source,
) -> anyhow::Result<ExitCode> {
    let mut out = match &args.output {
        Some(path) if !input::is_stdin(path) => {
            let inputs: Vec<&Path> = source.path().into_iter().collect();
            TextOut::File(OutputFile::create(path, &inputs)?)
        }
        _ => TextOut::Stdout(Stdout::new()),
    };
    let opts = TranscriptOptions {
        scope: config.scope,
        annotate_inferred_start_times: config.annotate_inferred_start_times,
        echo: !args.no_echo,
        time_origin_first_event: true,
        ocaml_exception_info: config.ocaml_exception_info,
        filter,
        events_output: false,
    };
    let t = if opts.filter.is_some() {
        // The filter pairs its hits over the whole input first.
        let mut text = String::new();
        with_text(source, &args.perf, args.mode, true, |t, _| text.push_str(t))?;
        transcript::run(&text, &opts)
    } else {
        // Streamed: each piece's lines go out as soon as it is transcribed.
        let mut tr = Transcriber::new(&opts);
        let mut write_error = None;
        with_text(source, &args.perf, args.mode, true, |text, _| {
            if write_error.is_some() {
                return;
            }
            tr.feed(text);
            for line in tr.take_stderr() {
                eprintln!("{line}");
            }
            // Out before the next piece is waited for.
            if let Err(e) = out.write(&tr.take_stdout()).and_then(|()| out.flush()) {
                write_error = Some(e);
            }
        })?;
        if let Some(e) = write_error {
            return Err(e.into());
        }
        tr.finish()
    };
    for line in &t.stderr {
        eprintln!("{line}");
    }
    out.write(&t.stdout)?;
    if t.events == 0 {
        let first = t.unparsed.first().map(|e| e.to_string());
        return Err(nothing_decoded(source, t.records, first));
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

fn default_output(source: &Source) -> PathBuf {
    match source {
        Source::Stdin(_) => PathBuf::from("trace.fxt"),
        Source::Text(p) | Source::PerfData(p) => p.with_extension("fxt"),
    }
}

fn decode_fxt(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &mut Source,
) -> anyhow::Result<ExitCode> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(source));
    let inputs: Vec<&Path> = source.path().into_iter().collect();
    let file = if input::is_stdin(&output) {
        FxtOut::Stdout(Stdout::new())
    } else {
        FxtOut::File(OutputFile::create(&output, &inputs)?)
    };
    let out = if output.extension().is_some_and(|e| e == "gz") {
        FxtFile::Gz(GzEncoder::new(file, Compression::default()))
    } else {
        FxtFile::Plain(file)
    };
    let shown = output.display().to_string();
    let writer = Writer::new(IoDestination::with_buffer_size(out, 1 << 20))
        .map_err(|e| anyhow::anyhow!("cannot write {shown}: {e}"))?;
    let started = Instant::now();
    let (mut sink, stats) = run_decoder(args, config, filter, source, FxtSink::new(writer))?;
    if stats.events == 0 {
        let first = stats.first_unparsed.first().map(|e| e.to_string());
        return Err(nothing_decoded(source, stats.records, first));
    }
    let truncated = sink.truncated_strings();
    let records = sink.records();
    let closed = sink.close();
    if let Some(e) = sink.destination_mut().take_error() {
        // The output's own error, which names it.
        return Err(e.into());
    }
    if let Err(e) = closed {
        bail!("cannot write {shown}: {e}");
    }
    let dest = sink
        .finish()
        .map_err(|e| anyhow::anyhow!("cannot write {shown}: {e}"))?;
    dest.into_inner().finish()?;
    if truncated > 0 {
        eprintln!(
            "warning: {truncated} names longer than FXT's 32,000 bytes were cut (they end in \"{TRUNCATED_MARKER}\")"
        );
    }
    if !args.quiet {
        eprintln!(
            "decoded {} records ({} events, {} decode errors) in {:.2?}: wrote {} FXT records to {}",
            stats.records,
            stats.events,
            stats.decode_errors,
            started.elapsed(),
            records,
            shown
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Where FXT bytes go: a file, or standard output (`-o -`).
enum FxtOut {
    File(OutputFile),
    Stdout(Stdout),
}

impl Write for FxtOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            FxtOut::File(f) => f.write(buf),
            FxtOut::Stdout(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            FxtOut::File(f) => f.flush(),
            FxtOut::Stdout(s) => s.flush(),
        }
    }
}

impl FxtOut {
    fn finish(self) -> anyhow::Result<()> {
        match self {
            FxtOut::File(f) => Ok(f.commit()?),
            FxtOut::Stdout(s) => Ok(s.finish()?),
        }
    }
}

/// The FXT output, plain or gzip-compressed (`.gz`).
enum FxtFile {
    Plain(FxtOut),
    Gz(GzEncoder<FxtOut>),
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
    fn finish(self) -> anyhow::Result<()> {
        match self {
            FxtFile::Plain(mut f) => {
                f.flush()?;
                f.finish()
            }
            FxtFile::Gz(g) => {
                let mut f = g.finish()?;
                f.flush()?;
                f.finish()
            }
        }
    }
}

fn run_decoder<S: Sink>(
    args: &DecodeArgs,
    config: Config,
    filter: Option<RangeFilter>,
    source: &mut Source,
    sink: S,
) -> anyhow::Result<(S, DecodeStats)> {
    let hits = match filter {
        Some(f) => {
            if matches!(source, Source::Stdin(_)) {
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

/// Whether `program` can be started: a path to an executable file, or a name
/// found on `PATH`.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

fn record(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    if args.pid.is_none() && args.command.is_empty() {
        bail!("nothing to record: give `-- COMMAND [ARGS...]` or `--pid PID`");
    }
    if let Some(program) = args.command.first()
        && !runnable(program)
    {
        bail!("cannot run {program}: no such executable file (nor on PATH)");
    }
    std::fs::create_dir_all(&args.output_dir)
        .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    // perf writes into a fresh folder; its file replaces DIR/perf.data only once
    // perf is done, so an old recording survives a failed one.
    let staging = TempDir::new_in(&args.output_dir)?;
    let final_data = args.output_dir.join("perf.data");
    let data = staging.path().join("perf.data");
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
    let decoded = decode(&decode_args);
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
