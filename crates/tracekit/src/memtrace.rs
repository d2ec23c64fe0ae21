//! `tracekit memtrace ...` subcommands.

use std::process::ExitCode;

use clap::Subcommand;

/// `tracekit memtrace` subcommands.
#[derive(Subcommand)]
pub enum Command {}

/// Runs one `tracekit memtrace` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {}
}
