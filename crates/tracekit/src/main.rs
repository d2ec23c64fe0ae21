//! `tracekit`: one binary that inspects, checks, converts and analyses memtrace,
//! FXT and perf call-stack traces. Argument parsing, files, progress and exit codes
//! live here; the formats live in the library crates.

mod common;
mod fxt;
mod memtrace;
mod memtrace_analysis;
mod perf;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect, check, convert and analyse memtrace, FXT and perf call-stack traces.
#[derive(Parser)]
#[command(name = "tracekit", version, about)]
struct Cli {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Memtrace(cmd) => memtrace::run(cmd),
        Command::Fxt(cmd) => fxt::run(cmd),
        Command::Perf(cmd) => perf::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
