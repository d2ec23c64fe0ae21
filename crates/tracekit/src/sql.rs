//! `tracekit sql`: a query over exported tables (`tracekit-sql`), or over traces
//! whose tables are built in memory for it. This module parses the datasets,
//! picks the query and the output format.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use tracekit_sql::{Dataset, Tables};

use crate::common::files_spinner;
use crate::common::output::Stdout;

/// `tracekit sql` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The query: SQL, or the name of a shipped query (`--list` shows them).
    // SQL may open with a `--` comment, which is not an option.
    #[arg(allow_hyphen_values = true)]
    query: Option<String>,
    /// Traces to query, their tables built in memory (memtrace `.ctf`, FXT `.fxt`,
    /// perf.data); rows carry `traces` in column `dataset`.
    files: Vec<PathBuf>,
    /// An export folder to query, `[LABEL=]DIR` (repeatable; rows carry the label in
    /// column `dataset`, by default the folder's name).
    #[arg(long, value_name = "[LABEL=]DIR")]
    over: Vec<String>,
    /// Print the answer as a JSON array of objects.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the answer as CSV.
    #[arg(long)]
    csv: bool,
    /// List the shipped queries.
    #[arg(long)]
    list: bool,
    /// Show at most this many rows.
    #[arg(long)]
    limit: Option<usize>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut out = Stdout::new();
    if args.list {
        tracekit_sql::write_list(&mut out)?;
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(query) = args.query.as_deref() else {
        anyhow::bail!("give a query (SQL, or a name from `tracekit sql --list`)");
    };
    // Before any export: a misspelt name is refused at once.
    let named = tracekit_sql::resolve(query)?;
    let mut datasets: Vec<Dataset> = args.over.iter().map(|a| Dataset::parse(a)).collect();
    for dir in datasets.iter().filter_map(Dataset::dir) {
        if !dir.is_dir() {
            anyhow::bail!(
                "{}: no such folder (give a `tracekit export` output)",
                dir.display()
            );
        }
    }
    // Traces given directly: one dataset, its tables in memory.
    if !args.files.is_empty() {
        let (bar, sizes) = files_spinner(&args.files, "reading");
        let mut traces = Vec::new();
        for (path, size) in args.files.iter().zip(sizes) {
            let (tables, warnings) = crate::export::tables_in_memory(path)?;
            bar.suspend(|| warnings.iter().for_each(|w| eprintln!("{w}")));
            bar.inc(size);
            traces.push(tables);
        }
        bar.finish_and_clear();
        datasets.push(Dataset {
            label: "traces".to_string(),
            tables: Tables::Memory(traces),
        });
    }
    if datasets.is_empty() {
        anyhow::bail!("nothing to query: give traces, or export folders with --over DIR");
    }
    let sql = match named {
        Some(q) => q.render(&datasets)?,
        None => query.to_string(),
    };
    let mut answer = tracekit_sql::query(&datasets, &sql)?;
    if let Some(n) = args.limit {
        answer.truncate(n);
    }
    if args.json {
        answer.write_json(&mut out)?;
    } else if args.csv {
        answer.write_csv(&mut out)?;
    } else {
        answer.write_table(&mut out)?;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
