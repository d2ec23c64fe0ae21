//! `tracekit`: one binary that inspects, checks, converts and analyses memtrace,
//! FXT and perf call-stack traces. Argument parsing, files, progress and exit codes
//! live here; the formats live in the library crates.
//!
//! Exit codes: 0 success (also when a pipe reading the output closes early, as
//! with `| head`); 1 a command's verdict is negative (`fxt check` found problems, an
//! analysis stopped at damage); 2 an error, printed as `error: ...` naming the file;
//! 130 interrupted (no partial output is left). `perf record` passes on the
//! recorded program's failing status.

mod common;
mod export;
mod fxt;
mod memtrace;
mod memtrace_analysis;
mod perf;
mod sql;
mod view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect, check, convert and analyse memtrace, FXT and perf call-stack traces.
#[derive(Parser)]
#[command(name = "tracekit", version, about)]
struct Cli {
    /// No progress, summaries or notes on stderr (warnings and errors are still printed).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Memtrace allocation traces (OCaml memtrace `.ctf` files).
    #[command(subcommand)]
    Memtrace(memtrace::Command),
    /// Fuchsia trace format (`.fxt`) files.
    #[command(subcommand)]
    Fxt(fxt::Command),
    /// Call-stack timelines from `perf` (magic-trace style).
    #[command(subcommand)]
    Perf(perf::Command),
    /// Serve a trace to a web browser: a memtrace trace's analyses, or the
    /// timeline of an FXT trace, a perf.data file or `perf script` text.
    View(view::ViewArgs),
    /// Export traces as Parquet tables for SQL engines (DuckDB, Spark, Trino).
    Export(export::Args),
    /// SQL over exported tables, or over traces (their tables built in memory).
    Sql(sql::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::output::set_quiet(cli.quiet);
    common::output::install_interrupt_handler();
    let result = match cli.command {
        Command::Memtrace(cmd) => memtrace::run(cmd),
        Command::Fxt(cmd) => fxt::run(cmd),
        Command::Perf(cmd) => perf::run(cmd),
        Command::View(args) => view::run(args),
        Command::Export(args) => export::run(args),
        Command::Sql(args) => sql::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader of our output went away (`| head`): a normal way to stop.
        Err(err) if common::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
