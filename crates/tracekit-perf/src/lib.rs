//! Running Linux `perf`, reading what it writes and feeding it to the call-stack
//! decoder (`tracekit-callstack`), for `tracekit perf decode`, `record` and
//! `flamegraph`.
//!
//! The decoder reads events and does no I/O; this crate is its edge:
//! - [`text`]: `perf script` text from a file, a pipe or a `perf script` child,
//!   cut into pieces that hold only whole records (the decoder's unit of work);
//! - [`script`]: the `perf script` command for a `perf.data` file, which field
//!   list it asks for (the one the decoder's fast path expects) and how a
//!   recording's mode is told (`perf evlist`);
//! - [`record`]: the `perf record` command for a program or a running process,
//!   Intel PT where the machine has it, sampled call stacks otherwise;
//! - [`decode`]: the decoder driven over a text source, with the two-pass
//!   `--filter` protocol and warnings handed to the caller as they come, or over a
//!   perf.data file read directly;
//! - [`data`]: perf.data read without `perf script` (sampled stacks, unwound and
//!   symbolized here);
//! - [`fold`]: folded stacks of sampled call stacks, for flame graphs;
//! - [`into_fxt`]: a recording or text decoded into FXT by whichever reader
//!   it takes (into a file, or memory for a viewer), and where the names of
//!   objects' addresses are kept between runs.
//!
//! Inputs come in as bytes, readers and paths, outputs go out through
//! `std::io::Write`: opening files, standard input and atomic outputs are the
//! caller's (the `tracekit` binary's `tracekit-io`).

pub mod data;
pub mod decode;
pub mod fold;
pub mod into_fxt;
pub mod pprof;
pub mod record;
pub mod script;
pub mod text;

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// How a `perf.data` file was recorded, which decides how it is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    /// Look at the recorded events (`perf evlist`).
    #[default]
    Auto,
    /// Intel Processor Trace branches (`perf script --itrace=bep`).
    IntelPt,
    /// Sampled call stacks (`cycles`, `cpu-clock`, ...).
    Sampling,
}

/// What went wrong running perf or reading its text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// perf could not be started.
    #[error("cannot run {} (install perf: `apt-get install linux-perf`)", .program.display())]
    Run {
        /// The perf executable.
        program: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// perf ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command, as a user would type it.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it printed on standard error.
        stderr: String,
    },
    /// The text could not be read.
    #[error("cannot read {name}")]
    Read {
        /// The input's name.
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `perf record` was given nothing to record.
    #[error("nothing to record: give `-- COMMAND [ARGS...]` or `--pid PID`")]
    NothingToRecord,
    /// The program to record cannot be started.
    #[error("cannot run {0}: no such executable file (nor on PATH)")]
    NotRunnable(String),
    /// An OCaml trap address was not hexadecimal.
    #[error("not a hex address: {0}")]
    NotHexAddress(String),
    /// Standard input was asked for a second pass.
    #[error("standard input can be read only once")]
    StdinTwice,
    /// `--filter` was given with standard input, which cannot be read twice.
    #[error("--filter needs two passes over the input: give a file, not stdin")]
    FilterNeedsFile,
    /// The input held nothing the decoder could use.
    #[error("{name}: {}", nothing_message(*.records, .first_unparsed.as_deref()))]
    NothingDecoded {
        /// The input's name.
        name: String,
        /// Records read.
        records: u64,
        /// Why the first unparsed record was not understood, if any was.
        first_unparsed: Option<String>,
    },
    /// The FXT writer refused the trace.
    #[error("cannot write {name}: {source}")]
    Fxt {
        /// The output's name.
        name: String,
        /// Why.
        source: tracekit_fxt::write::WriteError,
    },
    /// A perf.data file is damaged or not perf.data.
    #[error("{name}: not a readable perf.data file (at or before byte {offset}): {message}")]
    PerfData {
        /// The file's name.
        name: String,
        /// How far it had been read when the error was found.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// An Intel PT recording given to the direct reader.
    #[error(
        "{name} holds Intel PT branches, which tracekit decodes through `perf script` (drop --direct)"
    )]
    PerfDataIntelPt {
        /// The file's name.
        name: String,
    },
    /// A DWARF recording of an architecture the unwinder here does not handle.
    #[error(
        "{name} was recorded with DWARF stacks on {arch}, which tracekit unwinds only for x86_64: use --via-perf-script"
    )]
    PerfDataArch {
        /// The file's name.
        name: String,
        /// The recording's architecture.
        arch: String,
    },
    /// Folding found no sampled call stack.
    #[error("{name}: no sampled call stacks to fold")]
    NothingToFold {
        /// The input's name.
        name: String,
    },
    /// Writing an output failed; the error is the output's own, which names it.
    #[error(transparent)]
    Write(io::Error),
}

impl Error {
    /// Whether this is a write to a closed pipe (the reader of the output went
    /// away), a normal way for a command to stop.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Write(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

fn nothing_message(records: u64, first: Option<&str>) -> String {
    match (records, first) {
        (0, _) => "no perf script records (no samples?): nothing to decode".to_string(),
        (n, Some(e)) => {
            format!("none of its {n} records is perf script output tracekit can read (first: {e})")
        }
        (n, None) => format!("none of its {n} records holds an event"),
    }
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;
