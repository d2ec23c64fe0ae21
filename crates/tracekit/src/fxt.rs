//! `tracekit fxt ...` subcommands: dump, check, copy, to-json and stats for Fuchsia
//! trace format files. The format work is in `tracekit-fxt`; this module opens files,
//! formats output and picks exit codes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use indicatif::ProgressBar;
use serde_json::{Value, json};
use tracekit_fxt::check::{Readers, Report};
use tracekit_fxt::format::{ArgValue, EventKind, Koid, ObjectType};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::read::{
    Args, Entry, ReadError, Reader, Record, Records, Str, StreamReader, Thread,
};
use tracekit_fxt::write::Writer;

use crate::common::input::{self, Family};
use crate::common::output::{InteractiveStdout, OutputFile, Stdout, print_json};
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
/// memory does not grow with the input). `f` gets the input's size when known.
fn with_records<T>(
    path: &Path,
    flush: Option<&InteractiveStdout>,
    f: impl FnOnce(&mut dyn Records, Option<u64>) -> Result<T>,
) -> Result<T> {
    let result = if input::is_stdin(path) {
        let stream = input::open_stream(path, Family::Fxt)?;
        match flush {
            Some(out) => f(&mut StreamReader::new(out.reader(stream)), None),
            None => f(&mut StreamReader::new(stream), None),
        }
    } else {
        let bytes = input::read_all(path, Family::Fxt)?;
        f(&mut Reader::new(&bytes), Some(bytes.len() as u64))
    };
    // A read error is the input's: say which (write errors name their output).
    result.map_err(|e| {
        if e.downcast_ref::<ReadError>().is_some() {
            e.context(input::display(path))
        } else {
            e
        }
    })
}

/// A progress bar over an input of `size` bytes (standard input has none).
fn progress(size: Option<u64>, what: &str) -> ProgressBar {
    match size {
        Some(n) => progress_bar(n, what, false),
        None => ProgressBar::hidden(),
    }
}

fn tick(bar: &ProgressBar, records: u64, offset: u64) {
    if records.is_multiple_of(8192) {
        bar.set_position(offset);
    }
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

fn quote(s: Str<'_>) -> String {
    format!("{:?}", s.to_string())
}

fn fmt_value(out: &mut String, v: &ArgValue<'_, Str<'_>>) {
    let _ = match v {
        ArgValue::Null => write!(out, "null"),
        ArgValue::Int32(x) => write!(out, "{x}"),
        ArgValue::UInt32(x) => write!(out, "{x}"),
        ArgValue::Int64(x) => write!(out, "{x}"),
        ArgValue::UInt64(x) => write!(out, "{x}"),
        ArgValue::Double(x) => write!(out, "{x:?}"),
        ArgValue::String(s) => write!(out, "{}", quote(*s)),
        ArgValue::Pointer(p) => write!(out, "{p:#x}"),
        ArgValue::Koid(k) => write!(out, "koid:{k}"),
        ArgValue::Bool(b) => write!(out, "{b}"),
        ArgValue::Blob(b) => write!(out, "<{} bytes>", b.len()),
    };
}

fn fmt_args(out: &mut String, args: Args<'_>) {
    if args.is_empty() {
        return;
    }
    out.push_str(" args={");
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: ", quote(a.name));
        fmt_value(out, &a.value);
    }
    out.push('}');
}

fn object_type_name(t: ObjectType) -> String {
    match t {
        ObjectType::PROCESS => "process".into(),
        ObjectType::THREAD => "thread".into(),
        other => other.0.to_string(),
    }
}

/// One dump line for a record (without the offset).
/// Appends one dump line for a record (without the offset) to `s`.
fn format_record_into(s: &mut String, record: &Record<'_>, ns: impl Fn(u64) -> u64) {
    let _ = match record {
        Record::Magic => write!(s, "magic"),
        Record::ProviderInfo { id, name } => {
            write!(s, "provider_info id={id} name={}", quote(Str(name)))
        }
        Record::ProviderSection { id } => write!(s, "provider_section id={id}"),
        Record::ProviderEvent { id, event } => {
            write!(s, "provider_event id={id} event={}", event.0)
        }
        Record::TraceInfo { info_type, word } => {
            write!(s, "trace_info type={info_type} word={word:#018x}")
        }
        Record::Initialization(i) => {
            let _ = write!(s, "initialization ticks_per_second={}", i.ticks_per_second);
            match i.base {
                Some(b) => write!(s, " base_ticks={} base_time_ns={}", b.ticks, b.unix_ns),
                None => Ok(()),
            }
        }
        Record::String { id, value } => {
            write!(s, "string id={} value={}", id.get(), quote(Str(value)))
        }
        Record::Thread {
            id,
            process,
            thread,
        } => write!(
            s,
            "thread id={} process={process} thread={thread}",
            id.get()
        ),
        Record::Event(e) => {
            let _ = write!(s, "{} ts={}", e.kind.event_type().name(), ns(e.ticks));
            let _ = match e.kind {
                EventKind::DurationComplete { end_ticks } => write!(s, " end={}", ns(end_ticks)),
                EventKind::Counter { id } => write!(s, " counter_id={id}"),
                EventKind::AsyncBegin { id }
                | EventKind::AsyncInstant { id }
                | EventKind::AsyncEnd { id } => write!(s, " async_id={id}"),
                EventKind::FlowBegin { id }
                | EventKind::FlowStep { id }
                | EventKind::FlowEnd { id } => {
                    write!(s, " flow_id={id}")
                }
                _ => Ok(()),
            };
            let _ = write!(
                s,
                " thread={} category={} name={}",
                e.thread,
                quote(e.category),
                quote(e.name)
            );
            fmt_args(s, e.args);
            Ok(())
        }
        Record::Blob(b) => write!(
            s,
            "blob name={} type={} bytes={}",
            quote(b.name),
            b.blob_type.0,
            b.payload.len()
        ),
        Record::UserspaceObject(o) => {
            let _ = write!(
                s,
                "userspace_object process={} pointer={:#x} name={}",
                o.process.process,
                o.pointer,
                quote(o.name)
            );
            fmt_args(s, o.args);
            Ok(())
        }
        Record::KernelObject(o) => {
            let _ = write!(
                s,
                "kernel_object type={} koid={} name={}",
                object_type_name(o.object_type),
                o.koid,
                quote(o.name)
            );
            fmt_args(s, o.args);
            Ok(())
        }
        Record::ContextSwitch(c) => {
            let _ = write!(
                s,
                "context_switch ts={} cpu={} outgoing={} state={} incoming={}",
                ns(c.ticks),
                c.cpu,
                c.outgoing_tid,
                c.outgoing_state.0,
                c.incoming_tid
            );
            fmt_args(s, c.args);
            Ok(())
        }
        Record::ThreadWakeup(c) => {
            let _ = write!(
                s,
                "thread_wakeup ts={} cpu={} waking={}",
                ns(c.ticks),
                c.cpu,
                c.waking_tid
            );
            fmt_args(s, c.args);
            Ok(())
        }
        Record::LegacyContextSwitch(c) => write!(
            s,
            "legacy_context_switch ts={} cpu={} outgoing={} state={} priority={} incoming={} priority={}",
            ns(c.ticks),
            c.cpu,
            c.outgoing,
            c.outgoing_state.0,
            c.outgoing_priority,
            c.incoming,
            c.incoming_priority
        ),
        Record::Log(l) => write!(
            s,
            "log ts={} thread={} message={}",
            ns(l.ticks),
            l.thread,
            quote(Str(l.message))
        ),
        Record::LargeBlob(b) => {
            let _ = write!(s, "large_blob");
            if let Some(m) = &b.meta {
                let _ = write!(s, " ts={} thread={}", ns(m.ticks), m.thread);
            }
            let _ = write!(
                s,
                " category={} name={} bytes={}",
                quote(b.category),
                quote(b.name),
                b.payload.len()
            );
            if let Some(m) = &b.meta {
                fmt_args(s, m.args);
            }
            Ok(())
        }
    };
}

fn dump(path: &Path, limit: Option<u64>) -> Result<ExitCode> {
    let out = InteractiveStdout::new();
    with_records(path, Some(&out), |reader, size| {
        let bar = progress(size, "dumping");
        let mut out = out.clone();
        let mut n = 0u64;
        let mut line = String::new();
        while limit.is_none_or(|l| n < l) {
            let Some(Entry {
                offset,
                record,
                timebase,
            }) = reader.next_entry()?
            else {
                break;
            };
            line.clear();
            let _ = write!(line, "{offset:#010x} ");
            format_record_into(&mut line, &record, |t| timebase.ns(t));
            line.push('\n');
            out.write_all(line.as_bytes())?;
            n += 1;
            tick(&bar, n, offset);
        }
        bar.finish_and_clear();
        out.finish()?;
        print_warnings(path, reader);
        Ok(ExitCode::SUCCESS)
    })
}

fn check(path: &Path) -> Result<ExitCode> {
    let input = input::read_all(path, Family::Fxt)?;
    let bar = progress_bar(input.len() as u64, "checking", false);
    let report = tracekit_fxt::check::check_with_progress(&input, |pos| bar.set_position(pos));
    bar.finish_and_clear();
    let mut out = Stdout::new();
    print_check(&report, &mut out)?;
    out.finish()?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Prints a check report.
pub fn print_check(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let describe = |issue: tracekit_fxt::check::Issue| {
        let breaks = issue.breaks();
        let ignored = issue.ignored_by();
        let mut s = String::new();
        if !breaks.is_empty() {
            let _ = write!(s, " [breaks: {breaks}]");
        } else if !ignored.is_empty() {
            let _ = write!(s, " [ignored by: {ignored}]");
        } else {
            s.push_str(" [note]");
        }
        s
    };
    for f in &report.findings {
        writeln!(out, "{:#010x}: {}{}", f.offset, f.issue, describe(f.issue))?;
    }
    if let Some(f) = &report.fatal {
        writeln!(
            out,
            "{:#010x}: fatal: {}{}",
            f.offset,
            f.issue,
            describe(f.issue)
        )?;
    }
    for (issue, n) in &report.counts {
        if *n > Report::MAX_PER_ISSUE {
            writeln!(out, "... {issue}: {n} in total")?;
        }
    }
    let broken = report.broken_readers();
    if report.is_clean() {
        writeln!(
            out,
            "clean: {} records; every known reader accepts this trace",
            report.records
        )
    } else if broken == Readers::NONE {
        writeln!(out, "{} records; reading stopped early", report.records)
    } else {
        writeln!(out, "{} records; breaks: {broken}", report.records)
    }
}

fn copy(input_path: &Path, output: &Path) -> Result<ExitCode> {
    crate::common::output::refuse_same_file(output, &[input_path])?;
    let input = input::read_all(input_path, Family::Fxt)?;
    let file = OutputFile::create(output, &[input_path])?;
    let bar = progress_bar(input.len() as u64, "copying", false);
    let mut writer = Writer::without_header(IoDestination::new(file))
        .map_err(|e| fxt_write_error(output, e, None))?;
    let report = tracekit_fxt::copy::copy(&input, &mut writer);
    bar.finish_and_clear();
    let closed = writer.close();
    let io_error = writer.destination_mut().take_error();
    if let Some(io) = io_error {
        // Named by the output file, and the root of any writer error.
        return Err(io.into());
    }
    if let Err(e) = closed {
        return Err(fxt_write_error(output, e, None));
    }
    let report = report.map_err(|e| anyhow::anyhow!("{}: {e}", input::display(input_path)))?;
    let file = writer
        .finish()
        .map_err(|e| fxt_write_error(output, e, None))?
        .into_inner();
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

fn json_args(args: Args<'_>) -> Value {
    let mut map = serde_json::Map::new();
    for a in args.iter() {
        let v = match a.value {
            ArgValue::Null => Value::Null,
            ArgValue::Int32(x) => json!(x),
            ArgValue::UInt32(x) => json!(x),
            ArgValue::Int64(x) => json!(x),
            ArgValue::UInt64(x) => json!(x),
            ArgValue::Double(x) if x.is_finite() => json!(x),
            ArgValue::Double(x) => json!(x.to_string()),
            ArgValue::String(s) => json!(s.to_string()),
            ArgValue::Pointer(p) => json!(format!("{p:#x}")),
            ArgValue::Koid(k) => json!(k.0),
            ArgValue::Bool(b) => json!(b),
            ArgValue::Blob(b) => json!(format!("<{} bytes>", b.len())),
        };
        map.insert(a.name.to_string(), v);
    }
    Value::Object(map)
}

fn us(ns: u64) -> Value {
    // Microseconds with the nanoseconds kept as the fraction.
    json!(ns as f64 / 1000.0)
}

/// Converts the records of `reader` to Chrome trace events, calling `emit` for each.
fn chrome_events(
    reader: &mut dyn Records,
    mut emit: impl FnMut(Value) -> Result<()>,
    bar: &ProgressBar,
) -> Result<u64> {
    let mut skipped = 0u64;
    let mut n = 0u64;
    while let Some(Entry {
        offset,
        record: rec,
        timebase,
    }) = reader.next_entry()?
    {
        n += 1;
        tick(bar, n, offset);
        let ns = |t| timebase.ns(t);
        let event = match rec {
            Record::Event(e) => {
                let Thread { process, thread } = e.thread;
                let mut v = json!({
                    "name": e.name.to_string(),
                    "cat": e.category.to_string(),
                    "ts": us(ns(e.ticks)),
                    "pid": process.0,
                    "tid": thread.0,
                });
                let (ph, extra) = match e.kind {
                    EventKind::Instant => ("i", json!({"s": "t"})),
                    EventKind::Counter { id } => ("C", json!({"id": id})),
                    EventKind::DurationBegin => ("B", json!({})),
                    EventKind::DurationEnd => ("E", json!({})),
                    EventKind::DurationComplete { end_ticks } => (
                        "X",
                        json!({"dur": us(ns(end_ticks).saturating_sub(ns(e.ticks)))}),
                    ),
                    EventKind::AsyncBegin { id } => ("b", json!({"id": format!("{id:#x}")})),
                    EventKind::AsyncInstant { id } => ("n", json!({"id": format!("{id:#x}")})),
                    EventKind::AsyncEnd { id } => ("e", json!({"id": format!("{id:#x}")})),
                    EventKind::FlowBegin { id } => ("s", json!({"id": id})),
                    EventKind::FlowStep { id } => ("t", json!({"id": id, "bp": "e"})),
                    EventKind::FlowEnd { id } => ("f", json!({"id": id, "bp": "e"})),
                };
                if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
                    obj.insert("ph".into(), json!(ph));
                    obj.extend(extra.clone());
                    if !e.args.is_empty() {
                        obj.insert("args".into(), json_args(e.args));
                    }
                }
                v
            }
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => json!({
                "ph": "M", "name": "process_name", "pid": o.koid.0,
                "args": {"name": o.name.to_string()},
            }),
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                let pid = o
                    .args
                    .iter()
                    .find_map(|a| match a.value {
                        ArgValue::Koid(k) if a.name == "process" => Some(k),
                        _ => None,
                    })
                    .unwrap_or(Koid(0));
                json!({
                    "ph": "M", "name": "thread_name", "pid": pid.0, "tid": o.koid.0,
                    "args": {"name": o.name.to_string()},
                })
            }
            Record::Log(l) => json!({
                "ph": "i", "s": "t", "cat": "log", "name": Str(l.message).to_string(),
                "ts": us(ns(l.ticks)), "pid": l.thread.process.0, "tid": l.thread.thread.0,
            }),
            Record::ContextSwitch(_)
            | Record::ThreadWakeup(_)
            | Record::LegacyContextSwitch(_)
            | Record::Blob(_)
            | Record::LargeBlob(_)
            | Record::UserspaceObject(_)
            | Record::KernelObject(_) => {
                skipped += 1;
                continue;
            }
            _ => continue,
        };
        emit(event)?;
    }
    Ok(skipped)
}

fn to_json(input_path: &Path, output: &Path) -> Result<ExitCode> {
    if !input::is_stdin(output) {
        crate::common::output::refuse_same_file(output, &[input_path])?;
    }
    with_records(input_path, None, |reader, size| {
        let bar = progress(size, "converting");
        let skipped = if input::is_stdin(output) {
            let mut out = Stdout::new();
            let skipped = write_chrome_json(reader, &mut out, &bar)?;
            out.finish()?;
            skipped
        } else {
            let file = OutputFile::create(output, &[input_path])?;
            let mut out = BufWriter::with_capacity(1 << 16, file);
            let skipped = write_chrome_json(reader, &mut out, &bar)?;
            out.into_inner().map_err(|e| e.into_error())?.commit()?;
            skipped
        };
        bar.finish_and_clear();
        print_warnings(input_path, reader);
        if skipped > 0 {
            eprintln!(
                "note: {skipped} records without a Chrome JSON equivalent (scheduling, blobs, objects) were left out"
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Writes the whole Chrome JSON document; returns the records left out.
fn write_chrome_json(
    reader: &mut dyn Records,
    out: &mut impl Write,
    bar: &ProgressBar,
) -> Result<u64> {
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let skipped = chrome_events(
        reader,
        |v| {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut *out, &v).map_err(io::Error::from)?;
            Ok(())
        },
        bar,
    )?;
    out.write_all(b"\n]}\n")?;
    Ok(skipped)
}

#[derive(Default, serde::Serialize)]
struct ThreadStats {
    name: Option<String>,
    events: u64,
}

#[derive(Default, serde::Serialize)]
struct Stats {
    bytes: u64,
    records: u64,
    record_types: BTreeMap<&'static str, u64>,
    event_types: BTreeMap<&'static str, u64>,
    providers: BTreeMap<u32, String>,
    processes: BTreeMap<u64, Option<String>>,
    threads: BTreeMap<String, ThreadStats>,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    warnings: u64,
}

fn stats(path: &Path, as_json: bool) -> Result<ExitCode> {
    with_records(path, None, |reader, size| {
        stats_of(path, reader, size, as_json)
    })
}

fn stats_of(
    path: &Path,
    reader: &mut dyn Records,
    size: Option<u64>,
    as_json: bool,
) -> Result<ExitCode> {
    let bar = progress(size, "reading");
    let mut st = Stats::default();
    let key = |t: Thread| format!("{}/{}", t.process, t.thread);
    while let Some(Entry {
        offset,
        record: rec,
        timebase,
    }) = reader.next_entry()?
    {
        st.records += 1;
        tick(&bar, st.records, offset);
        *st.record_types.entry(rec.type_name()).or_default() += 1;
        if let Some(t) = rec.ticks() {
            let ns = timebase.ns(t);
            st.first_ns = Some(st.first_ns.map_or(ns, |f| f.min(ns)));
            st.last_ns = Some(st.last_ns.map_or(ns, |l| l.max(ns)));
        }
        match rec {
            Record::ProviderInfo { id, name } => {
                st.providers.insert(id, Str(name).to_string());
            }
            Record::Event(e) => {
                *st.event_types
                    .entry(e.kind.event_type().name())
                    .or_default() += 1;
                st.threads.entry(key(e.thread)).or_default().events += 1;
                st.processes.entry(e.thread.process.0).or_default();
                if let EventKind::DurationComplete { end_ticks } = e.kind {
                    let ns = timebase.ns(end_ticks);
                    st.last_ns = Some(st.last_ns.map_or(ns, |l| l.max(ns)));
                }
            }
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                st.processes.insert(o.koid.0, Some(o.name.to_string()));
            }
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                let pid = o
                    .args
                    .iter()
                    .find_map(|a| match a.value {
                        ArgValue::Koid(k) if a.name == "process" => Some(k),
                        _ => None,
                    })
                    .unwrap_or(Koid(0));
                let t = Thread {
                    process: pid,
                    thread: o.koid,
                };
                st.threads.entry(key(t)).or_default().name = Some(o.name.to_string());
            }
            _ => {}
        }
    }
    bar.finish_and_clear();
    st.bytes = reader.position();
    st.warnings = reader.warning_count();
    print_warnings(path, reader);
    if as_json {
        print_json(&st)?;
    } else {
        crate::common::output::print(&format_stats(&st))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn format_stats(st: &Stats) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "bytes              {}", st.bytes);
    let _ = writeln!(s, "records            {}", st.records);
    for (k, v) in &st.record_types {
        let _ = writeln!(s, "  {k:<22} {v}");
    }
    let events: u64 = st.event_types.values().sum();
    let _ = writeln!(s, "events             {events}");
    for (k, v) in &st.event_types {
        let _ = writeln!(s, "  {k:<22} {v}");
    }
    match (st.first_ns, st.last_ns) {
        (Some(a), Some(b)) => {
            let _ = writeln!(
                s,
                "time span          {a} .. {b} ns ({:.3} ms)",
                b.saturating_sub(a) as f64 / 1e6
            );
        }
        _ => {
            let _ = writeln!(s, "time span          (no timestamped records)");
        }
    }
    let _ = writeln!(s, "providers          {}", st.providers.len());
    for (id, name) in &st.providers {
        let _ = writeln!(s, "  {id:<22} {name:?}");
    }
    let _ = writeln!(s, "processes          {}", st.processes.len());
    for (pid, name) in &st.processes {
        let _ = writeln!(
            s,
            "  {pid:<22} {}",
            name.as_deref()
                .map(|n| format!("{n:?}"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(s, "threads            {}", st.threads.len());
    for (k, t) in &st.threads {
        let name = t
            .name
            .as_deref()
            .map(|n| format!("{n:?}"))
            .unwrap_or_default();
        let _ = writeln!(s, "  {k:<22} {:>8} events {name}", t.events);
    }
    let _ = writeln!(s, "warnings           {}", st.warnings);
    s
}
