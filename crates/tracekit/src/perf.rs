//! `tracekit perf ...` subcommands.

use std::process::ExitCode;

use clap::Subcommand;

/// `tracekit perf` subcommands.
#[derive(Subcommand)]
pub enum Command {}

/// Runs one `tracekit perf` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {}
}
