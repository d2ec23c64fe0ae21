//! `tracekit memtrace ...` subcommands: dump, info, copy and sample.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use tracekit_memtrace::dump::{InfoReport, StreamDumpError, write_dump, write_dump_stream};
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
use tracekit_memtrace::{
    CopyError, FormatVersion, Reader, StreamReader, Warning, WriteError, WriterOptions, copy_trace,
    copy_trace_stream,
};

use crate::common::input;
use crate::common::names::{Format, OutputArg, check_format};
use crate::common::output::{self, InteractiveStdout, OutputFile, Stdout};
use crate::common::{print_answer, progress_bar, progress_spinner, say};

/// `tracekit memtrace` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Print every event, in the `# memtrace-dump 1` text format.
    Dump {
        /// A memtrace trace (`.ctf`), or `-` for standard input.
        file: PathBuf,
    },
    /// Summarise a trace: metadata, duration, events by kind, domains,
    /// locations, backtrace depth.
    Info {
        /// A memtrace trace (`.ctf`), or `-` for standard input.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Decode a trace and encode it again (as memtrace's own copy tool does); the
    /// copy of `x.ctf` is `x.copy.ctf` unless `-o` names it.
    Copy {
        /// The trace to read.
        input: PathBuf,
        #[command(flatten)]
        output: OutputArg,
        /// Format version to write: 3 (current memtrace) or 2 (memtrace 0.2.x,
        /// single domain only).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
        format_version: u8,
    },
    /// Write a synthetic sample trace (a model program's allocations), to
    /// `trace.ctf` unless `-o` names a file.
    Sample {
        #[command(flatten)]
        output: OutputArg,
        /// Number of allocations.
        #[arg(long, default_value_t = 100_000)]
        allocs: u64,
        /// Typical stack depth.
        #[arg(long, default_value_t = 20)]
        depth: usize,
        /// Seed of the pseudo-random model.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Model deep recursion under a driver nest, as a compiler's stacks
        /// (long prediction runs; `--depth` is then the mean depth).
        #[arg(long)]
        recursive: bool,
    },
    /// Serve the trace's analyses to a web browser: info, memory graph, filter,
    /// top sites, flame graph, comparison
    View(crate::view::ViewArgs),
    #[command(flatten)]
    Analysis(Box<crate::memtrace_analysis::Command>),
}

/// Runs one `tracekit memtrace` subcommand.
pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Dump { file } => dump(&file),
        Command::Info { file, json } => info(&file, json),
        Command::Copy {
            input,
            output,
            format_version,
        } => copy(
            &input,
            &output.or_default(Some(&input), Format::Memtrace),
            format_version,
        ),
        Command::Sample {
            output,
            allocs,
            depth,
            seed,
            recursive,
        } => sample(
            &output.or_default(None, Format::Memtrace),
            SynthConfig {
                allocs,
                depth,
                seed,
                recursive,
                ..SynthConfig::default()
            },
        ),
        Command::View(args) => crate::view::run(args),
        Command::Analysis(cmd) => crate::memtrace_analysis::run(*cmd),
    }
}

pub use tracekit_io::memtrace::open as open_shared;

/// Opens a trace, after checking that it is one; `-` reads standard input
/// into memory (the analyses read a trace more than once).
pub fn open(path: &Path) -> Result<Reader<'static>> {
    Ok(open_shared(path)?.0)
}

fn warn(path: &Path, w: &Warning) {
    eprintln!("warning: {}: {w}", input::display(path));
}

fn dump(path: &Path) -> Result<ExitCode> {
    let outcome = if input::is_stdin(path) {
        // Streamed: a packet at a time, its lines out before the next is read.
        let out = InteractiveStdout::new();
        let mut reader = tracekit_io::memtrace::open_stream(path, |s| out.reader(s))?;
        let mut dump_out = out.clone();
        let outcome = write_dump_stream(&mut reader, &mut dump_out, |w| warn(path, w), |_| {})
            .map_err(|e| match e {
                StreamDumpError::Input(e) => {
                    anyhow::Error::new(e).context("cannot read standard input")
                }
                StreamDumpError::Output(e) => anyhow::Error::new(e),
            })?;
        out.finish()?;
        outcome
    } else {
        let mut reader = open(path)?;
        let bar = progress_bar(reader.size_bytes(), "dumping", false);
        let mut out = Stdout::new();
        let outcome = write_dump(
            &mut reader,
            &mut out,
            |w| warn(path, w),
            |pos| bar.set_position(pos),
        )?;
        bar.finish_and_clear();
        out.finish()?;
        outcome
    };
    Ok(stopped(path, outcome.failure.as_ref()))
}

/// Reports the damage that stopped a command after the events before it: an error.
fn stopped(path: &Path, failure: Option<&impl std::fmt::Display>) -> ExitCode {
    let Some(f) = failure else {
        return ExitCode::SUCCESS;
    };
    eprintln!("error: {}: {f}", input::display(path));
    ExitCode::from(2)
}

fn info(path: &Path, json: bool) -> Result<ExitCode> {
    let mut reader = open(path)?;
    let bar = progress_bar(reader.size_bytes(), "reading", false);
    let report = InfoReport::collect(
        &mut reader,
        &input::display(path),
        |w| warn(path, w),
        |pos| bar.set_position(pos),
    );
    bar.finish_and_clear();
    print_answer(json, || &report, || report.to_string())?;
    Ok(stopped(path, report.failure.as_ref()))
}

fn copy(input: &Path, output: &Path, format_version: u8) -> Result<ExitCode> {
    output::refuse_same_file(output, &[input])?;
    check_format(output, Format::Memtrace)?;
    let version = if format_version == 2 {
        FormatVersion::V2
    } else {
        FormatVersion::V3
    };
    let options = WriterOptions::new().format_version(version);
    // Opened first, so that a wrong input is reported before an output exists.
    let mut source = if input::is_stdin(input) {
        CopySource::Stream(tracekit_io::memtrace::open_stream(input, |s| s)?)
    } else {
        CopySource::Whole(open(input)?)
    };
    let file = OutputFile::create(output, &[input])?;
    let out = BufWriter::with_capacity(1 << 16, file);
    let result = match &mut source {
        CopySource::Whole(reader) => {
            let bar = progress_bar(reader.size_bytes(), "copying", false);
            let r = copy_trace(reader, out, options);
            bar.finish_and_clear();
            r
        }
        CopySource::Stream(stream) => copy_trace_stream(stream, out, options),
    };
    let (out, warnings) = result.map_err(|e| match e {
        // The output file's errors name it already.
        CopyError::Write(WriteError::Io(e)) => anyhow::Error::new(e),
        CopyError::Input(e) => {
            anyhow::Error::new(e).context(format!("cannot read {}", input::display(input)))
        }
        e => anyhow::anyhow!(
            "cannot copy {} to {}: {e}",
            input::display(input),
            output.display()
        ),
    })?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.commit()?;
    for w in &warnings {
        warn(input, w);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `copy` reads: a file (mapped), or standard input (streamed).
enum CopySource {
    Whole(Reader<'static>),
    Stream(StreamReader<input::Peeked<Box<dyn std::io::Read + Send>>>),
}

fn sample(output: &Path, config: SynthConfig) -> Result<ExitCode> {
    check_format(output, Format::Memtrace)?;
    let mut file = OutputFile::create(output, &[])?;
    // The size is not known upfront: the spinner counts the bytes written, from a
    // million allocations (a second's work).
    let spinner = progress_spinner("writing", config.allocs >= 1_000_000, false);
    let out = BufWriter::with_capacity(1 << 16, spinner.wrap_write(&mut file));
    let out = write_synthetic(out, &config).map_err(|e| match e {
        WriteError::Io(e) => anyhow::Error::new(e),
        e => anyhow::anyhow!("writing {}: {e}", output.display()),
    })?;
    drop(out.into_inner().map_err(|e| e.into_error())?);
    spinner.finish_and_clear();
    file.commit()?;
    say(format_args!(
        "wrote {} ({} allocations)",
        output.display(),
        config.allocs
    ));
    Ok(ExitCode::SUCCESS)
}
