//! The JSON answers behind the page: each endpoint runs the same query, with
//! the same options, as the `tracekit memtrace` subcommand of its name, and
//! answers what that subcommand prints with `--json`. No I/O: the trace is
//! bytes in memory, the request a list of arguments.
//!
//! | endpoint | subcommand | arguments |
//! | --- | --- | --- |
//! | `info` | `memtrace info --json` | none |
//! | `top` | `memtrace top --json` | `top`'s options |
//! | `timeline` | `memtrace timeline --json` | `timeline`'s options |
//! | `flamegraph` | `memtrace flamegraph --json` | `flamegraph`'s options |
//! | `diff` | `memtrace diff --json` (the trace against the compared one) | `diff`'s options |
//!
//! The arguments are a command line's options, one per `arg` query parameter
//! (`/api/top?arg=--by&arg=function`), parsed by the subcommand's own
//! options, so a script asks the server exactly what it would ask the command
//! line. There is no file argument: the trace is the one served.

use std::sync::Arc;

use clap::Parser;
use tracekit_analysis::query::{DiffQuery, FlameQuery, QueryError, TimelineQuery, TopQuery};
use tracekit_analysis::render::TraceFile;
use tracekit_memtrace::dump::InfoReport;
use tracekit_memtrace::{ReadError, Reader};

/// A trace's bytes, shared by the readers of concurrent requests.
#[derive(Clone)]
pub struct Bytes(Arc<dyn AsRef<[u8]> + Send + Sync>);

impl Bytes {
    /// Shares `bytes`.
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Bytes {
        Bytes(Arc::new(bytes))
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

/// A trace being served: its bytes, the name its answers give it, and what
/// does not change between requests.
pub struct Trace {
    name: String,
    bytes: Bytes,
    info: String,
}

impl Trace {
    /// A trace named `name` (as its answers print it). Reads it once, for its
    /// `info` answer.
    pub fn new(name: String, bytes: Bytes) -> Result<Trace, ReadError> {
        let mut reader = Reader::from_owner(bytes.clone())?;
        let report = InfoReport::collect(&mut reader, &name, |_| {}, |_| {});
        let info = to_json(&report);
        Ok(Trace { name, bytes, info })
    }

    /// The name the answers give the trace.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn reader(&self) -> Result<Reader<'static>, ApiError> {
        // The same bytes parsed when the trace was made, so this does not fail.
        Reader::from_owner(self.bytes.clone()).map_err(|e| ApiError::Unreadable(e.to_string()))
    }

    fn file(&self, reader: &Reader<'_>) -> TraceFile {
        TraceFile::new(self.name.clone(), reader.info())
    }
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `memtrace info --json`.
    Info,
    /// `memtrace top --json`.
    Top,
    /// `memtrace timeline --json`.
    Timeline,
    /// `memtrace flamegraph --json`.
    Flamegraph,
    /// `memtrace diff --json` of the served trace against the compared one.
    Diff,
}

impl Endpoint {
    /// The endpoint named `name` (the path after `/api/`).
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Some(match name {
            "info" => Endpoint::Info,
            "top" => Endpoint::Top,
            "timeline" => Endpoint::Timeline,
            "flamegraph" => Endpoint::Flamegraph,
            "diff" => Endpoint::Diff,
            _ => return None,
        })
    }
}

/// Why a request has no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    /// The arguments are not options of the endpoint's subcommand, or their
    /// values are not valid (the message is the option parser's).
    #[error("{0}")]
    BadArguments(String),
    /// The trace's header no longer reads (its bytes were read when the
    /// viewer started).
    #[error("the trace cannot be read: {0}")]
    Unreadable(String),
    /// `diff` without a trace to compare with.
    #[error("no trace to compare with: start the viewer with --compare")]
    NothingToCompare,
}

#[derive(Parser)]
#[command(name = "top", no_binary_name = true, disable_help_flag = true)]
struct TopArgs {
    #[command(flatten)]
    query: TopQuery,
}

#[derive(Parser)]
#[command(name = "timeline", no_binary_name = true, disable_help_flag = true)]
struct TimelineArgs {
    #[command(flatten)]
    query: TimelineQuery,
}

#[derive(Parser)]
#[command(name = "flamegraph", no_binary_name = true, disable_help_flag = true)]
struct FlameArgs {
    #[command(flatten)]
    query: FlameQuery,
}

#[derive(Parser)]
#[command(name = "diff", no_binary_name = true, disable_help_flag = true)]
struct DiffArgs {
    #[command(flatten)]
    query: DiffQuery,
}

fn parse<P: Parser>(args: &[String]) -> Result<P, ApiError> {
    P::try_parse_from(args).map_err(|e| ApiError::BadArguments(e.render().to_string()))
}

fn query_error(e: QueryError) -> ApiError {
    ApiError::BadArguments(e.to_string())
}

fn to_json(value: &impl serde::Serialize) -> String {
    // Serializing the reports' plain data cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The answer of `endpoint` to `args` about `trace` (and `compare`, for
/// [`Endpoint::Diff`]): the JSON its subcommand prints.
pub fn answer(
    trace: &Trace,
    compare: Option<&Trace>,
    endpoint: Endpoint,
    args: &[String],
) -> Result<String, ApiError> {
    let mut quiet = |_, _| {};
    match endpoint {
        Endpoint::Info => {
            if let Some(a) = args.first() {
                return Err(ApiError::BadArguments(format!(
                    "info takes no arguments: {a}"
                )));
            }
            Ok(trace.info.clone())
        }
        Endpoint::Top => {
            let q = parse::<TopArgs>(args)?.query;
            q.filter
                .filter()
                .map_err(|e| ApiError::BadArguments(e.to_string()))?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file(&reader))))
        }
        Endpoint::Timeline => {
            let q = parse::<TimelineArgs>(args)?.query;
            q.filter
                .filter()
                .map_err(|e| ApiError::BadArguments(e.to_string()))?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file(&reader))))
        }
        Endpoint::Flamegraph => {
            let q = parse::<FlameArgs>(args)?.query;
            q.filter
                .filter()
                .map_err(|e| ApiError::BadArguments(e.to_string()))?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json()))
        }
        Endpoint::Diff => {
            let other = compare.ok_or(ApiError::NothingToCompare)?;
            let q = parse::<DiffArgs>(args)?.query;
            q.filter
                .filter()
                .map_err(|e| ApiError::BadArguments(e.to_string()))?;
            // As `memtrace diff A B`: the compared trace is the baseline.
            let (mut ra, mut rb) = (other.reader()?, trace.reader()?);
            let pa = q.pass(&mut ra, &mut quiet).map_err(query_error)?;
            let pb = q.pass(&mut rb, &mut quiet).map_err(query_error)?;
            let ctx = q.context(other.file(&ra), trace.file(&rb));
            let answer = q.compare((pa, ra.locations()), (pb, rb.locations()));
            Ok(to_json(&answer.json(&ctx)))
        }
    }
}
