//! `tracekit export`: traces as Parquet tables (`tracekit-export`), several at once.
//! This module opens the inputs, runs the exports on a few threads, reports each
//! and picks the exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use tracekit_export::{ExportOptions, Input, MemoryTables, Summary, TraceFiles, TraceId};
use tracekit_io::input::{self, Family, Kind};

use crate::common::output::{self, TempDir};
use crate::common::{files_spinner, print_json, quiet};

/// Table formats.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// Apache Parquet (Snappy-compressed).
    Parquet,
}

/// `tracekit export` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Traces to export: memtrace (`.ctf`), FXT (`.fxt`) and sampled perf.data files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The dataset folder: each table of each trace goes to
    /// DIR/<table>/<trace id>.parquet (made if missing).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Table format.
    #[arg(long, value_enum, default_value = "parquet")]
    format: Format,
    /// Traces exported at once (default: one per core).
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Rows per Parquet row group: what bounds the memory of each export.
    #[arg(long, default_value_t = ExportOptions::default().row_group_rows, hide = true)]
    row_group_rows: usize,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

/// One input's result.
#[derive(serde::Serialize)]
struct Exported {
    file: String,
    trace_id: String,
    rows: std::collections::BTreeMap<&'static str, u64>,
    warnings: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Format::Parquet = args.format;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, args.files.len().max(1));
    let next = AtomicUsize::new(0);
    // The exports report no position: the bar moves by whole inputs and its clock
    // ticks in between, so that a long export is not silent.
    let (bar, sizes) = files_spinner(&args.files, "exporting");
    let results: Mutex<Vec<(usize, Result<Exported>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = args.files.get(i) else { break };
                    let r = export_one(path, &args);
                    bar.inc(sizes.get(i).copied().unwrap_or(0));
                    if let (Ok(e), false, false) = (&r, quiet(), args.json) {
                        bar.suspend(|| report(e));
                    }
                    if let Err(e) = &r
                        && !args.json
                    {
                        bar.suspend(|| eprintln!("error: {e:#}"));
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, r));
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if args.json {
        let out: Vec<serde_json::Value> = results
            .iter()
            .map(|(i, r)| match r {
                Ok(e) => serde_json::to_value(e).unwrap_or_default(),
                Err(e) => serde_json::json!({
                    "file": args.files[*i].display().to_string(),
                    "error": format!("{e:#}"),
                }),
            })
            .collect();
        print_json(&out)?;
    }
    if failed > 0 {
        let exported: Vec<String> = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|e| format!("{} (trace {})", e.file, e.trace_id))
            .collect();
        let kept = if exported.is_empty() {
            format!("nothing was written to {}", args.output.display())
        } else {
            format!(
                "exported into {}: {}",
                args.output.display(),
                exported.join(", ")
            )
        };
        anyhow::bail!(
            "{failed} of {} traces not exported (see above); {kept}",
            results.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn report(e: &Exported) {
    let rows: Vec<String> = e.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
    eprintln!("{} ({}): {}", e.file, e.trace_id, rows.join(", "));
    for w in &e.warnings {
        eprintln!("warning: {}: {w}", e.file);
    }
}

fn export_one(path: &Path, args: &Args) -> Result<Exported> {
    let summary = export_file_noted(path, &args.output, args.row_group_rows, true)?;
    Ok(Exported {
        file: input::display(path),
        trace_id: summary.trace_id.map(|t| t.to_string()).unwrap_or_default(),
        rows: summary.rows.iter().copied().collect(),
        warnings: summary.warnings,
    })
}

/// Reads trace `path` and builds its tables in memory, for `tracekit sql`; the
/// tables and the warnings of the reader, each naming the file.
pub(crate) fn tables_in_memory(path: &Path) -> Result<(MemoryTables, Vec<String>)> {
    let name = input::display(path);
    let (bytes, kind, options) = read(path, ExportOptions::default().row_group_rows)?;
    let (summary, tables) = tracekit_export::export_to_memory(&bytes, kind, &options)
        .with_context(|| format!("reading {name}"))?;
    let warnings = summary
        .warnings
        .iter()
        .map(|w| format!("warning: {name}: {w}"))
        .collect();
    Ok((tables, warnings))
}

/// Reads trace `path`: its bytes, kind, and how to export it.
fn read(path: &Path, row_group_rows: usize) -> Result<(input::Bytes, Input, ExportOptions)> {
    let (bytes, kind) = input::read_all_sniffed(path, Family::Export)?;
    // `Family::Export` admits these three kinds only.
    let kind = match kind {
        Kind::Fxt => Input::Fxt,
        Kind::PerfData => Input::Perf,
        _ => Input::Memtrace,
    };
    let options = ExportOptions {
        row_group_rows,
        file: path.display().to_string(),
    };
    Ok((bytes, kind, options))
}

/// Reads trace `path` and exports it into dataset folder `dir` (made if missing),
/// through a temporary folder there that an interrupt removes; with `noted`, the
/// trace is named, once its tables are in place, in the message of a later
/// interrupt (which keeps them).
fn export_file_noted(
    path: &Path,
    dir: &Path,
    row_group_rows: usize,
    noted: bool,
) -> Result<Summary> {
    let name = input::display(path);
    let (bytes, kind, options) = read(path, row_group_rows)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let temp = TempDir::new_in(dir)?;
    let id = TraceId::of(&bytes);
    let mut files = TraceFiles::with_temp_dir(dir, temp.path(), id)?;
    let summary = tracekit_export::write_tables(&bytes, kind, &mut files, &options)
        .with_context(|| format!("exporting {name}"))?;
    let what = format!("the tables of {name} (trace {id}) in {}", dir.display());
    if noted {
        output::commit_noted(&what, || files.commit())
    } else {
        files.commit()
    }
    .with_context(|| format!("exporting {name}"))?;
    drop(temp);
    Ok(summary)
}
