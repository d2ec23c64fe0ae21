//! `tracekit fxt ...` subcommands.

use std::process::ExitCode;

use clap::Subcommand;

/// `tracekit fxt` subcommands.
#[derive(Subcommand)]
pub enum Command {}

/// Runs one `tracekit fxt` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {}
}
