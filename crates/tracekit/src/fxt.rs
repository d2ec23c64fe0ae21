//! `tracekit fxt ...` subcommands: dump, check, copy, to-json, top, slices and
//! stats for Fuchsia trace format files. The work is `tracekit-fxt`'s (`dump`,
//! `check`, `copy`, `chrome`, `stats`) and `tracekit-timeline`'s (`top`,
//! `slices`); this module opens files and picks exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use indicatif::ProgressBar;
use tracekit_fxt::ConvertError;
use tracekit_fxt::chrome::write_chrome_json;
use tracekit_fxt::dump::write_dump;
use tracekit_fxt::io::{FinishError, IoDestination};
use tracekit_fxt::read::{ReadError, Records};
use tracekit_fxt::stats::Stats;
use tracekit_fxt::synth::{SynthConfig, write_synthetic};
use tracekit_fxt::write::Writer;
use tracekit_timeline::Timeline;
use tracekit_timeline::open::build_timeline;
use tracekit_timeline::report::{SlicesQuery, TopOrder, TopQuery, duration};

use crate::common::input::{self, Family};
use crate::common::names::{Format, OutputArg, check_format};
use crate::common::output::{InteractiveStdout, Output, OutputFile, print};
use crate::common::{fxt_write_error, print_answer, progress_bar, progress_spinner, say};

/// `tracekit fxt` subcommands.
/// What ranks `fxt top`'s names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// Total time.
    Total,
    /// Bytes allocated inside the slices.
    Allocated,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print one line per record: offset, type, timestamp (ns), thread, category,
    /// name, arguments.
    Dump {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// Stop after this many records (`-n` is the same).
        #[arg(long, short = 'n')]
        limit: Option<u64>,
    },
    /// Validate strictly: list each problem with its offset and the readers it breaks
    /// (Perfetto, Fuchsia, PyPI fxt, Jane Street). An issue found more than once is
    /// shown once, at its first offset, with its count. Exit status 0 only for a clean
    /// file.
    Check {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// List every offset of every issue.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Read every record and write it back through the writer (repairing what some
    /// readers reject); the copy of `x.fxt` is `x.copy.fxt` unless `-o` names it.
    Copy {
        /// Input trace (`-` for stdin).
        input: PathBuf,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Convert to Chrome trace event JSON (chrome://tracing, Perfetto, speedscope),
    /// written to `x.json` for `x.fxt` unless `-o` names a file (`-`: stdout).
    ToJson {
        /// Input trace (`-` for stdin).
        input: PathBuf,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Slices by name, the largest total first: count, total, self time (less
    /// the slices nested in them), average and longest, as the Perfetto UI's
    /// area selection sums them.
    Top {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// Only slices that overlap this time range, from the trace's first time
        /// (e.g. `1.5s 2s`, `300ms 400ms`).
        #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = time_arg)]
        between: Option<Vec<u64>>,
        /// Only slices of this thread, by its koid (repeatable; async slices are
        /// on no thread).
        #[arg(long, value_name = "KOID")]
        thread: Vec<u64>,
        /// Show this many names (0: all).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Compare with this baseline trace (A; FILE is B), asked the same:
        /// each name's count, total and self time in both, the largest change
        /// of total time first.
        #[arg(long, value_name = "BASE")]
        diff: Option<PathBuf>,
        /// What ranks the names: total time, or the bytes allocated inside
        /// the slices (a `tracing` program traced with tracekit-alloc too:
        /// the `allocated`, `self` and `allocs` columns).
        #[arg(long, value_enum, default_value_t = By::Total)]
        by: By,
    },
    /// The slices of a trace, the earliest first: start (from the trace's first
    /// time), duration, thread, depth, name and arguments.
    Slices {
        /// The trace (`-` for stdin).
        file: PathBuf,
        /// Only slices that overlap this time range, from the trace's first time.
        #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = time_arg)]
        between: Option<Vec<u64>>,
        /// Only slices of this thread, by its koid (repeatable).
        #[arg(long, value_name = "KOID")]
        thread: Vec<u64>,
        /// Only slices whose name contains this text (ASCII case ignored).
        #[arg(long, value_name = "TEXT")]
        name: Option<String>,
        /// List this many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a synthetic trace of magic-trace's shape (nested calls, recursion,
    /// short leaves, an instant and a counter now and then), to `trace.fxt`
    /// unless `-o` names a file: a large trace in seconds, for trying the
    /// viewer or measuring.
    Sample {
        #[command(flatten)]
        output: OutputArg,
        /// At least this many slices.
        #[arg(long, default_value_t = 1_000_000)]
        slices: u64,
        /// Threads (1 to 255).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..))]
        threads: u8,
        /// Seed of the pseudo-random model.
        #[arg(long, default_value_t = 1)]
        seed: u64,
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
        Command::Check { file, verbose } => check(&file, verbose),
        Command::Copy { input, output } => {
            copy(&input, &output.or_default(Some(&input), Format::Fxt))
        }
        Command::ToJson { input, output } => {
            to_json(&input, &output.or_default(Some(&input), Format::Json))
        }
        Command::Top {
            file,
            between,
            thread,
            limit,
            json,
            diff,
            by,
        } => {
            let query = TopQuery {
                between: pair(between),
                threads: thread,
                limit,
                by: match by {
                    By::Total => TopOrder::Total,
                    By::Allocated => TopOrder::Allocated,
                },
            };
            match diff {
                Some(base) => top_diff(&base, &file, &query, json),
                None => top(&file, &query, json),
            }
        }
        Command::Slices {
            file,
            between,
            thread,
            name,
            limit,
            json,
        } => {
            let query = SlicesQuery {
                between: pair(between),
                threads: thread,
                name,
                limit,
            };
            slices(&file, &query, json)
        }
        Command::Stats { file, json } => stats(&file, json),
        Command::Sample {
            output,
            slices,
            threads,
            seed,
        } => sample(
            &output.or_default(None, Format::Fxt),
            &SynthConfig {
                slices,
                threads,
                seed,
            },
        ),
    }
}

/// The two values of a two-value option.
fn pair(v: Option<Vec<u64>>) -> Option<(u64, u64)> {
    v.and_then(|v| Some((*v.first()?, *v.get(1)?)))
}

/// A time from the trace's first time, in nanoseconds.
fn time_arg(s: &str) -> Result<u64, String> {
    tracekit_analysis::parse_time_ns(s).map_err(|e| e.to_string())
}

/// [`tracekit_io::fxt::with_records`] with a progress bar over a file; a read
/// error names the input.
fn with_records<T>(
    path: &Path,
    flush: Option<&InteractiveStdout>,
    f: impl FnOnce(&mut dyn Records, &ProgressBar) -> Result<T>,
) -> Result<T> {
    let result = tracekit_io::fxt::with_records(path, flush, |reader, size| {
        let bar = size.map_or_else(ProgressBar::hidden, |n| progress_bar(n, "reading", false));
        f(reader, &bar)
    });
    result.map_err(|e| match e.downcast_ref::<ReadError>() {
        Some(_) => e.context(input::display(path)),
        None => e,
    })
}

fn print_warnings(path: &Path, reader: &dyn Records) {
    tracekit_io::fxt::warning_lines(path, reader)
        .iter()
        .for_each(|l| eprintln!("{l}"));
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

fn check(path: &Path, verbose: bool) -> Result<ExitCode> {
    let input = input::read_all(path, Family::Fxt)?;
    let bar = progress_bar(input.len() as u64, "checking", false);
    let progress = |pos| bar.set_position(pos);
    let report = match verbose {
        true => tracekit_fxt::check::check_keeping_all(&input, progress),
        false => tracekit_fxt::check::check_with_progress(&input, progress),
    };
    bar.finish_and_clear();
    match verbose {
        true => print(&report.verbose().to_string())?,
        false => print(&report.to_string())?,
    }
    if !verbose && report.has_repeats() {
        say("note: --verbose lists every offset");
    }
    Ok(ExitCode::from(u8::from(!report.is_clean())))
}

fn copy(input_path: &Path, output: &Path) -> Result<ExitCode> {
    crate::common::output::refuse_same_file(output, &[input_path])?;
    check_format(output, Format::Fxt)?;
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
    say(format_args!(
        "copied {} records ({} inserted to repair the trace, {} refs written inline, {} warnings)",
        report.records, report.inserted, report.inlined_refs, report.warning_count
    ));
    Ok(ExitCode::SUCCESS)
}

fn to_json(input_path: &Path, output: &Path) -> Result<ExitCode> {
    if !input::is_stdin(output) {
        // Before the input is read, as a wrong input is reported before an output exists.
        crate::common::output::refuse_same_file(output, &[input_path])?;
    }
    check_format(output, Format::Json)?;
    with_records(input_path, None, |reader, bar| {
        let mut out = Output::create(output, &[input_path])?;
        let summary =
            write_chrome_json(reader, &mut out, |pos| bar.set_position(pos)).map_err(lib_error)?;
        out.finish()?;
        print_warnings(input_path, reader);
        if summary.skipped > 0 {
            say(format_args!(
                "note: {} records without a Chrome JSON equivalent (scheduling, blobs, objects) were left out",
                summary.skipped
            ));
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn top(path: &Path, query: &TopQuery, as_json: bool) -> Result<ExitCode> {
    timeline_answer(path, query.between, |t| {
        let answer = query.run(t);
        print_answer(as_json, || &answer, || answer.table())
    })
}

/// `top --diff BASE FILE`: both timelines built, then compared.
fn top_diff(base: &Path, path: &Path, query: &TopQuery, as_json: bool) -> Result<ExitCode> {
    let mut code_a = ExitCode::SUCCESS;
    let mut answer = None;
    let code_b = timeline_answer(path, query.between, |b| {
        code_a = timeline_answer(base, query.between, |a| {
            answer = Some(query.diff(a, b));
            Ok(())
        })?;
        Ok(())
    })?;
    if let Some(answer) = answer {
        print_answer(as_json, || &answer, || answer.table())?;
    }
    Ok(if code_a != ExitCode::SUCCESS {
        code_a
    } else {
        code_b
    })
}

fn slices(path: &Path, query: &SlicesQuery, as_json: bool) -> Result<ExitCode> {
    timeline_answer(path, query.between, |t| {
        let answer = query.run(t);
        print_answer(as_json, || &answer, || answer.table())
    })
}

/// Builds the trace's timeline (with a progress bar) and prints `answer`'s
/// answer of it; a trace cut short at damage answers what was read before it,
/// and exits 1.
fn timeline_answer(
    path: &Path,
    between: Option<(u64, u64)>,
    answer: impl FnOnce(&Timeline) -> Result<()>,
) -> Result<ExitCode> {
    if let Some((a, b)) = between
        && a > b
    {
        anyhow::bail!("--between: {} is after {}", duration(a), duration(b));
    }
    with_records(path, None, |reader, bar| {
        let timeline = build_timeline(
            reader,
            false,
            &tracekit_columns::Spill::memory(),
            &mut |pos| bar.set_position(pos),
        )
        .timeline;
        bar.finish_and_clear();
        print_warnings(path, reader);
        answer(&timeline)?;
        Ok(match timeline.error() {
            None => ExitCode::SUCCESS,
            Some(e) => {
                eprintln!(
                    "error: {}: {e}; the results cover the {} records before it",
                    input::display(path),
                    timeline.records()
                );
                ExitCode::from(1)
            }
        })
    })
}

fn stats(path: &Path, as_json: bool) -> Result<ExitCode> {
    with_records(path, None, |reader, bar| {
        let st = Stats::collect(reader, |pos| bar.set_position(pos))?;
        print_warnings(path, reader);
        print_answer(as_json, || &st, || st.to_string())?;
        Ok(ExitCode::SUCCESS)
    })
}

fn sample(output: &Path, config: &SynthConfig) -> Result<ExitCode> {
    check_format(output, Format::Fxt)?;
    let mut file = OutputFile::create(output, &[])?;
    // The size is not known upfront: the spinner counts the bytes written,
    // from a million slices (a second's work).
    let spinner = progress_spinner("writing", config.slices >= 1_000_000, false);
    let written = write_synthetic(spinner.wrap_write(&mut file), config);
    let (_, done) = written.map_err(|e| fxt_write_error(output, e))?;
    spinner.finish_and_clear();
    file.commit()?;
    say(format_args!(
        "wrote {} ({} slices on {} threads, {} instants, {} counter samples)",
        output.display(),
        done.slices,
        config.threads,
        done.instants,
        done.counters
    ));
    Ok(ExitCode::SUCCESS)
}
