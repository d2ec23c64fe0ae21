//! `tracekit memtrace ...` subcommands: dump, info, copy and sample.

use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use serde::Serialize;
use tracekit_memtrace::dump::{StreamDumpError, Summary, write_dump, write_dump_stream};
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
use tracekit_memtrace::{
    CopyError, Event, FormatVersion, OpenError, Reader, StreamReader, Warning, WriteError,
    WriterOptions, copy_trace, copy_trace_stream,
};

use crate::common::input::{self, Family};
use crate::common::output::{self, InteractiveStdout, OutputFile, Stdout, print_json};
use crate::common::{human_bytes, progress_bar};

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
    /// Decode a trace and encode it again (as memtrace's own copy tool does).
    Copy {
        /// The trace to read.
        input: PathBuf,
        /// Where to write the copy.
        output: PathBuf,
        /// Format version to write: 3 (current memtrace) or 2 (memtrace 0.2.x,
        /// single domain only).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
        format_version: u8,
    },
    /// Write a synthetic sample trace (a model program's allocations).
    Sample {
        /// Where to write the trace.
        output: PathBuf,
        /// Number of allocations.
        #[arg(long, default_value_t = 100_000)]
        allocs: u64,
        /// Typical stack depth.
        #[arg(long, default_value_t = 20)]
        depth: usize,
        /// Seed of the pseudo-random model.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    #[command(flatten)]
    Analysis(crate::memtrace_analysis::Command),
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
        } => copy(&input, &output, format_version),
        Command::Sample {
            output,
            allocs,
            depth,
            seed,
        } => sample(&output, allocs, depth, seed),
        Command::Analysis(cmd) => crate::memtrace_analysis::run(cmd),
    }
}

/// Opens a trace, after checking that it is one; `-` reads standard input
/// into memory (the analyses read a trace more than once), a large file is
/// memory-mapped.
pub fn open(path: &Path) -> Result<Reader<'static>> {
    let reader = if input::is_stdin(path) {
        Reader::from_read(input::open_stream(path, Family::Memtrace)?)
    } else {
        let head = input::open_stream(path, Family::Memtrace)?;
        drop(head);
        Reader::from_owner(input::read_all(path, Family::Memtrace)?).map_err(OpenError::from)
    };
    reader.map_err(|e| open_error(path, e))
}

/// The error of a trace whose trace-info packet cannot be read.
fn open_error(path: &Path, e: OpenError) -> anyhow::Error {
    let name = input::display(path);
    match e {
        OpenError::Io(e) => anyhow::Error::new(e).context(format!("cannot read {name}")),
        OpenError::Malformed(e) => anyhow::anyhow!("{name}: damaged trace-info packet: {e}"),
    }
}

fn warn(path: &Path, w: &Warning) {
    eprintln!("warning: {}: {w}", input::display(path));
}

fn dump(path: &Path) -> Result<ExitCode> {
    let outcome = if input::is_stdin(path) {
        // Streamed: a packet at a time, its lines out before the next is read.
        let out = InteractiveStdout::new();
        let stream = out.reader(input::open_stream(path, Family::Memtrace)?);
        let mut reader = StreamReader::new(stream, true).map_err(|e| open_error(path, e))?;
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
    Ok(match outcome.failure {
        None => ExitCode::SUCCESS,
        Some(f) => {
            eprintln!("error: {}: {f}", input::display(path));
            ExitCode::from(2)
        }
    })
}

#[derive(Serialize)]
struct DomainInfo {
    domain: u16,
    events: u64,
    allocs: u64,
}

#[derive(Serialize)]
struct TraceInfo {
    file: String,
    file_size_bytes: u64,
    format_version: u16,
    executable_name: String,
    host_name: String,
    pid: i64,
    word_size: u8,
    sample_rate: f64,
    ocaml_runtime_params: String,
    context: Option<String>,
    initial_domain: u16,
    start_time_us: i64,
    /// The start time as an RFC 3339 date in UTC.
    start_time: String,
    duration_us: i64,
    events: u64,
    allocs: u64,
    minor: u64,
    major: u64,
    external: u64,
    promotes: u64,
    collects: u64,
    sampled_words: u64,
    estimated_allocated_bytes: f64,
    domains: Vec<DomainInfo>,
    distinct_locations: usize,
    deepest_backtrace: u64,
    mean_backtrace: f64,
    skipped_packets: usize,
    error: Option<String>,
}

fn info(path: &Path, json: bool) -> Result<ExitCode> {
    let mut reader = open(path)?;
    let bar = progress_bar(reader.size_bytes(), "reading", false);
    let mut summary = Summary::default();
    let mut domains: BTreeMap<u16, DomainInfo> = BTreeMap::new();
    let mut domains_run: Vec<DomainInfo> = Vec::with_capacity(1);
    let mut duration = 0i64;
    let mut sampled_words = 0u64;
    let mut nsamples_words = 0f64;
    let mut skipped = 0usize;
    let mut error = None;
    {
        let mut events = reader.events(true);
        loop {
            let (dt, event) = match events.next_event() {
                None => break,
                Some(Ok(x)) => x,
                Some(Err(e)) => {
                    error = Some(e.to_string());
                    break;
                }
            };
            summary.add(&event);
            duration = duration.max(dt.as_micros());
            let dom = event.domain().get();
            // Events come in runs of one domain: look the map up only on a change.
            if domains_run.first().is_none_or(|d| d.domain != dom) {
                flush_run(&mut domains, &mut domains_run);
                domains_run.push(DomainInfo {
                    domain: dom,
                    events: 0,
                    allocs: 0,
                });
            }
            let d = &mut domains_run[0];
            d.events += 1;
            if let Event::Alloc(a) = &event {
                d.allocs += 1;
                sampled_words = sampled_words.saturating_add(a.length.saturating_add(1));
                nsamples_words += a.nsamples as f64;
            }
            if summary.events % 65536 == 0 {
                bar.set_position(events.position());
            }
            for w in events.take_warnings() {
                warn(path, &w);
                skipped += 1;
            }
        }
        for w in events.take_warnings() {
            warn(path, &w);
            skipped += 1;
        }
    }
    flush_run(&mut domains, &mut domains_run);
    bar.finish_and_clear();
    let i = reader.info();
    let word_bytes = f64::from(i.word_size) / 8.0;
    let t = TraceInfo {
        file: input::display(path),
        file_size_bytes: reader.size_bytes(),
        format_version: reader.format_version().number(),
        executable_name: i.executable_name.to_string(),
        host_name: i.host_name.to_string(),
        pid: i.pid,
        word_size: i.word_size,
        sample_rate: i.sample_rate,
        ocaml_runtime_params: i.ocaml_runtime_params.to_string(),
        context: i.context.as_ref().map(|c| c.to_string()),
        initial_domain: i.initial_domain.get(),
        start_time_us: i.start_time.as_micros(),
        start_time: utc_date(i.start_time.as_micros()),
        duration_us: duration,
        events: summary.events,
        allocs: summary.allocs,
        minor: summary.minor,
        major: summary.major,
        external: summary.external,
        promotes: summary.promotes,
        collects: summary.collects,
        sampled_words,
        // Each sample stands for 1/sample_rate words of allocation.
        estimated_allocated_bytes: if i.sample_rate > 0.0 {
            nsamples_words / i.sample_rate * word_bytes
        } else {
            0.0
        },
        domains: domains.into_values().collect(),
        distinct_locations: reader.locations().len(),
        deepest_backtrace: summary.max_bt,
        mean_backtrace: if summary.allocs > 0 {
            summary.bt_entries as f64 / summary.allocs as f64
        } else {
            0.0
        },
        skipped_packets: skipped,
        error,
    };
    if json {
        print_json(&t)?;
    } else {
        let mut out = Stdout::new();
        write_info_text(&mut out, &t)?;
        out.finish()?;
    }
    Ok(match &t.error {
        None => ExitCode::SUCCESS,
        Some(e) => {
            eprintln!("error: {}: {e}", path.display());
            ExitCode::from(2)
        }
    })
}

/// Adds the counts of the current run of one domain's events to `domains`.
fn flush_run(domains: &mut BTreeMap<u16, DomainInfo>, run: &mut Vec<DomainInfo>) {
    if let Some(r) = run.pop() {
        let d = domains.entry(r.domain).or_insert(DomainInfo {
            domain: r.domain,
            events: 0,
            allocs: 0,
        });
        d.events += r.events;
        d.allocs += r.allocs;
    }
}

/// Microseconds since the epoch as a date in UTC (RFC 3339), or the number
/// itself when it is no date.
fn utc_date(micros: i64) -> String {
    let Ok(us) = u64::try_from(micros) else {
        return format!("{micros} µs since the epoch");
    };
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us);
    humantime::format_rfc3339_micros(t).to_string()
}

fn write_info_text(out: &mut impl std::io::Write, t: &TraceInfo) -> std::io::Result<()> {
    writeln!(
        out,
        "file:            {} ({}, {} bytes)",
        t.file,
        human_bytes(t.file_size_bytes as f64),
        t.file_size_bytes
    )?;
    writeln!(out, "format:          memtrace v{:03}", t.format_version)?;
    writeln!(out, "executable:      {}", t.executable_name)?;
    writeln!(out, "host, pid:       {}, {}", t.host_name, t.pid)?;
    writeln!(
        out,
        "context:         {}",
        t.context.as_deref().unwrap_or("-")
    )?;
    writeln!(out, "runtime params:  {}", t.ocaml_runtime_params)?;
    writeln!(
        out,
        "sample rate:     {} (1 sample per {:.0} words), word size {}",
        t.sample_rate,
        1.0 / t.sample_rate,
        t.word_size
    )?;
    writeln!(out, "start time:      {}", t.start_time)?;
    writeln!(out, "duration:        {:.6} s", t.duration_us as f64 / 1e6)?;
    writeln!(
        out,
        "events:          {} ({} allocs, {} promotes, {} collects)",
        t.events, t.allocs, t.promotes, t.collects
    )?;
    writeln!(
        out,
        "allocs by kind:  {} minor, {} major, {} external",
        t.minor, t.major, t.external
    )?;
    writeln!(
        out,
        "est. allocated:  {}",
        human_bytes(t.estimated_allocated_bytes)
    )?;
    let doms: Vec<String> = t
        .domains
        .iter()
        .map(|d| format!("{} ({} events)", d.domain, d.events))
        .collect();
    writeln!(
        out,
        "domains:         {}",
        if doms.is_empty() {
            "-".into()
        } else {
            doms.join(", ")
        }
    )?;
    writeln!(
        out,
        "locations:       {} distinct location codes",
        t.distinct_locations
    )?;
    writeln!(
        out,
        "backtraces:      deepest {} frames, mean {:.1}",
        t.deepest_backtrace, t.mean_backtrace
    )?;
    if t.skipped_packets > 0 {
        writeln!(out, "skipped packets: {}", t.skipped_packets)?;
    }
    if let Some(e) = &t.error {
        writeln!(out, "error:           {e}")?;
    }
    Ok(())
}

fn copy(input: &Path, output: &Path, format_version: u8) -> Result<ExitCode> {
    output::refuse_same_file(output, &[input])?;
    let version = if format_version == 2 {
        FormatVersion::V2
    } else {
        FormatVersion::V3
    };
    let options = WriterOptions::new().format_version(version);
    // Opened first, so that a wrong input is reported before an output exists.
    let mut source = if input::is_stdin(input) {
        let stream = input::open_stream(input, Family::Memtrace)?;
        CopySource::Stream(StreamReader::new(stream, true).map_err(|e| open_error(input, e))?)
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

fn sample(output: &Path, allocs: u64, depth: usize, seed: u64) -> Result<ExitCode> {
    let file = OutputFile::create(output, &[])?;
    let config = SynthConfig {
        allocs,
        depth,
        seed,
        ..SynthConfig::default()
    };
    let out =
        write_synthetic(BufWriter::with_capacity(1 << 16, file), &config).map_err(|e| match e {
            WriteError::Io(e) => anyhow::Error::new(e),
            e => anyhow::anyhow!("writing {}: {e}", output.display()),
        })?;
    out.into_inner().map_err(|e| e.into_error())?.commit()?;
    eprintln!("wrote {} ({allocs} allocations)", output.display());
    Ok(ExitCode::SUCCESS)
}
