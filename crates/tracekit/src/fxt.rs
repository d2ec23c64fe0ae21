//! `tracekit fxt ...` subcommands: dump, check, copy, to-json and stats for Fuchsia
//! trace format files. The work is `tracekit-fxt`'s (`dump`, `check`, `copy`,
//! `chrome`, `stats`); this module opens files and picks exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use indicatif::ProgressBar;
use tracekit_fxt::ConvertError;
use tracekit_fxt::chrome::write_chrome_json;
use tracekit_fxt::dump::write_dump;
use tracekit_fxt::io::{FinishError, IoDestination};
use tracekit_fxt::read::{ReadError, Reader, Records, StreamReader};
use tracekit_fxt::stats::Stats;
use tracekit_fxt::write::Writer;

use crate::common::input::{self, Family};
use crate::common::output::{InteractiveStdout, Output, OutputFile, print};
use crate::common::print_json;
use crate::common::progress_bar;
use crate::memtrace_analysis::fxt_write_error;

/// `tracekit fxt` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Print one line per record: offset, type, timestamp (ns), thread, category,
    /// name, arguments.
    Dump {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// Stop after this many records.
        #[arg(long, short = 'n')]
        limit: Option<u64>,
    },
    /// Validate strictly: list each problem with its offset and the readers it breaks
    /// (Perfetto, Fuchsia, PyPI fxt, Jane Street). Exit status 0 only for a clean file.
    Check {
        /// The trace (`-` for stdin).
        file: PathBuf,
    },
    /// Read every record and write it back through the writer (repairing what some
    /// readers reject).
    Copy {
        /// Input trace (`-` for stdin).
        input: PathBuf,
        /// Output trace.
        output: PathBuf,
    },
    /// Convert to Chrome trace event JSON (chrome://tracing, Perfetto, speedscope).
    ToJson {
        /// Input trace (`-` for stdin).
        input: PathBuf,
        /// Output JSON file (`-` for stdout).
        output: PathBuf,
    },
    /// Counts by record and event type, providers, processes, threads, time span.
    Stats {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `tracekit fxt` subcommand.
pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Dump { file, limit } => dump(&file, limit),
        Command::Check { file } => check(&file),
        Command::Copy { input, output } => copy(&input, &output),
        Command::ToJson { input, output } => to_json(&input, &output),
        Command::Stats { file, json } => stats(&file, json),
    }
}

/// Runs `f` over the records of `path`: a file is mapped and read in place,
/// standard input is streamed (a record at a time, so output starts at once and
/// memory does not grow with the input; `flush` is flushed before each read). `f`
/// gets the input's size when known. A read error names the input.
fn with_records<T>(
    path: &Path,
    flush: Option<&InteractiveStdout>,
    f: impl FnOnce(&mut dyn Records, &ProgressBar) -> Result<T>,
) -> Result<T> {
    let result = if input::is_stdin(path) {
        let stream = input::open_stream(path, Family::Fxt)?;
        let bar = ProgressBar::hidden();
        match flush {
            Some(out) => f(&mut StreamReader::new(out.reader(stream)), &bar),
            None => f(&mut StreamReader::new(stream), &bar),
        }
    } else {
        let bytes = input::read_all(path, Family::Fxt)?;
        let bar = progress_bar(bytes.len() as u64, "reading", false);
        let r = f(&mut Reader::new(&bytes), &bar);
        bar.finish_and_clear();
        r
    };
    result.map_err(|e| {
        if e.downcast_ref::<ReadError>().is_some() {
            e.context(input::display(path))
        } else {
            e
        }
    })
}

fn print_warnings(path: &Path, reader: &dyn Records) {
    let name = input::display(path);
    for w in reader.warnings() {
        eprintln!("warning: {name}: {w}");
    }
    let more = reader.warning_count() - reader.warnings().len() as u64;
    if more > 0 {
        eprintln!("warning: {name}: {more} more warnings");
    }
}

/// The library's error, as the error of this command: a read error keeps its
/// type (to be named after the input), an I/O error its own (it names the output).
fn lib_error(e: ConvertError) -> anyhow::Error {
    match e {
        ConvertError::Read(e) => e.into(),
        ConvertError::Write(e) => e.into(),
    }
}

fn dump(path: &Path, limit: Option<u64>) -> Result<ExitCode> {
    let out = InteractiveStdout::new();
    with_records(path, Some(&out), |reader, bar| {
        write_dump(reader, &mut out.clone(), limit, |pos| bar.set_position(pos))
            .map_err(lib_error)?;
        out.clone().finish()?;
        print_warnings(path, reader);
        Ok(ExitCode::SUCCESS)
    })
}

fn check(path: &Path) -> Result<ExitCode> {
    let input = input::read_all(path, Family::Fxt)?;
    let bar = progress_bar(input.len() as u64, "checking", false);
    let report = tracekit_fxt::check::check_with_progress(&input, |pos| bar.set_position(pos));
    bar.finish_and_clear();
    print(&report.to_string())?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn copy(input_path: &Path, output: &Path) -> Result<ExitCode> {
    crate::common::output::refuse_same_file(output, &[input_path])?;
    let input = input::read_all(input_path, Family::Fxt)?;
    let file = OutputFile::create(output, &[input_path])?;
    let bar = progress_bar(input.len() as u64, "copying", false);
    let mut writer = Writer::without_header(IoDestination::new(file))
        .map_err(|e| fxt_write_error(output, FinishError::Write(e)))?;
    let report = tracekit_fxt::copy::copy(&input, &mut writer);
    bar.finish_and_clear();
    let file = writer.finish_io().map_err(|e| fxt_write_error(output, e))?;
    let report = report.map_err(|e| anyhow::anyhow!("{}: {e}", input::display(input_path)))?;
    file.commit()?;
    let name = input::display(input_path);
    for w in &report.warnings {
        eprintln!("warning: {name}: {w}");
    }
    eprintln!(
        "copied {} records ({} inserted to repair the trace, {} refs written inline, {} warnings)",
        report.records, report.inserted, report.inlined_refs, report.warning_count
    );
    Ok(ExitCode::SUCCESS)
}

fn to_json(input_path: &Path, output: &Path) -> Result<ExitCode> {
    if !input::is_stdin(output) {
        // Before the input is read, as a wrong input is reported before an output exists.
        crate::common::output::refuse_same_file(output, &[input_path])?;
    }
    with_records(input_path, None, |reader, bar| {
        let mut out = Output::create(output, &[input_path])?;
        let summary =
            write_chrome_json(reader, &mut out, |pos| bar.set_position(pos)).map_err(lib_error)?;
        out.finish()?;
        print_warnings(input_path, reader);
        if summary.skipped > 0 {
            eprintln!(
                "note: {} records without a Chrome JSON equivalent (scheduling, blobs, objects) were left out",
                summary.skipped
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn stats(path: &Path, as_json: bool) -> Result<ExitCode> {
    with_records(path, None, |reader, bar| {
        let st = Stats::collect(reader, |pos| bar.set_position(pos))?;
        print_warnings(path, reader);
        if as_json {
            print_json(&st)?;
        } else {
            print(&st.to_string())?;
        }
        Ok(ExitCode::SUCCESS)
    })
}
