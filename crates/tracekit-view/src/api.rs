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
//! | `flametree` | the flame graph's tree around one node, for drawing | `flamegraph`'s options, `--focus FRAME`..., `--min-share F` |
//!
//! `flametree` is the page's own: `flamegraph`'s stacks can be tens of
//! megabytes, while a flame graph shows a few thousand frames. It answers the
//! node reached from the root by the `--focus` frames (as far as they lead),
//! and its callees down to those under `--min-share` of its weight, in
//! preorder, each with its parent's index. The tree of the last `flamegraph`
//! options asked is kept, so that zooming does not fold again.
//!
//! The arguments are a command line's options, one per `arg` query parameter
//! (`/api/top?arg=--by&arg=function`), parsed by the subcommand's own
//! options, so a script asks the server exactly what it would ask the command
//! line. There is no file argument: the trace is the one served.

use std::sync::{Arc, Mutex};

use clap::Parser;
use tracekit_analysis::frames::{FrameId, FrameTree, Unit};
use tracekit_analysis::query::{
    DiffQuery, FilterSpec, FlameQuery, QueryError, TimelineQuery, TopQuery,
};
use tracekit_analysis::render::TraceFile;
use tracekit_io::input::ReleaseBehind;
use tracekit_memtrace::dump::InfoReport;
use tracekit_memtrace::{ReadError, Reader};

/// A trace's bytes, shared by the readers of concurrent requests.
#[derive(Clone)]
pub struct Bytes {
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    release: Option<Arc<dyn Fn(std::ops::Range<usize>) + Send + Sync>>,
}

/// How far a pass reads between two releases of the pages behind it.
const RELEASE_STEP: u64 = 32 << 20;

impl Bytes {
    /// Shares `bytes`.
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Bytes {
        Bytes {
            bytes: Arc::new(bytes),
            release: None,
        }
    }

    /// Calls `release` with the byte ranges a pass has read, as it goes, and
    /// with the whole range after it: for a mapped file, to let those pages go,
    /// so that the trace is not resident on top of the answers (a pass maps them
    /// again).
    pub fn on_release(
        mut self,
        release: impl Fn(std::ops::Range<usize>) + Send + Sync + 'static,
    ) -> Bytes {
        self.release = Some(Arc::new(release));
        self
    }

    fn released(&self) {
        if let Some(r) = &self.release {
            r(0..usize::MAX);
        }
    }

    /// A progress callback for a pass over the bytes that releases what the
    /// pass has read behind it, in steps.
    fn progress(&self) -> impl FnMut(tracekit_analysis::passes::Stage, u64) + '_ {
        let mut behind = ReleaseBehind::new(RELEASE_STEP);
        move |_, pos| {
            if let Some(r) = &self.release
                && let Some(range) = behind.at(pos)
            {
                r(range);
            }
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }
}

/// A trace being served: its bytes, the name its answers give it, and what
/// does not change between requests.
pub struct Trace {
    name: String,
    bytes: Bytes,
    info: String,
    /// The flame graph tree of the last `flamegraph` options `flametree` was
    /// asked with.
    flame: Mutex<Option<(FlameQuery, Arc<Flame>)>>,
}

/// A folded flame graph, without the pass it came from.
struct Flame {
    tree: FrameTree,
    unit: Unit,
    what: String,
}

impl Trace {
    /// A trace named `name` (as its answers print it). Reads it once, for its
    /// `info` answer.
    pub fn new(name: String, bytes: Bytes) -> Result<Trace, ReadError> {
        let mut reader = Reader::from_owner(bytes.clone())?;
        let report = InfoReport::collect(&mut reader, &name, |_| {}, |_| {});
        let info = to_json(&report);
        bytes.released();
        Ok(Trace {
            name,
            bytes,
            info,
            flame: Mutex::new(None),
        })
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
    /// The flame graph around one node (the page's own).
    FlameTree,
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
            "flametree" => Endpoint::FlameTree,
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

#[derive(Parser)]
#[command(name = "flametree", no_binary_name = true, disable_help_flag = true)]
struct FlameTreeArgs {
    #[command(flatten)]
    query: FlameQuery,
    /// The frames from the root to the node to show, in order (repeatable).
    #[arg(long, value_name = "FRAME")]
    focus: Vec<String>,
    /// Leave out callees under this share of the shown node's weight.
    #[arg(long, default_value_t = 0.0005)]
    min_share: f64,
}

/// Most nodes a `flametree` answer holds.
const MAX_NODES: usize = 20_000;

fn parse<P: Parser>(args: &[String]) -> Result<P, ApiError> {
    P::try_parse_from(args).map_err(|e| ApiError::BadArguments(e.render().to_string()))
}

/// A filter that can keep something (the subcommands check it before reading).
fn checked(filter: &FilterSpec) -> Result<(), ApiError> {
    filter
        .filter()
        .map(drop)
        .map_err(|e| ApiError::BadArguments(e.to_string()))
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
    let answer = ask(trace, compare, endpoint, args);
    trace.bytes.released();
    if let Some(c) = compare {
        c.bytes.released();
    }
    answer
}

fn ask(
    trace: &Trace,
    compare: Option<&Trace>,
    endpoint: Endpoint,
    args: &[String],
) -> Result<String, ApiError> {
    let mut quiet = trace.bytes.progress();
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
            checked(&q.filter)?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file(&reader))))
        }
        Endpoint::Timeline => {
            let q = parse::<TimelineArgs>(args)?.query;
            checked(&q.filter)?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file(&reader))))
        }
        Endpoint::Flamegraph => {
            let q = parse::<FlameArgs>(args)?.query;
            checked(&q.filter)?;
            let mut reader = trace.reader()?;
            let answer = q.run(&mut reader, &mut quiet).map_err(query_error)?;
            Ok(to_json(&answer.json()))
        }
        Endpoint::FlameTree => {
            let a = parse::<FlameTreeArgs>(args)?;
            checked(&a.query.filter)?;
            if !(0.0..=1.0).contains(&a.min_share) {
                return Err(ApiError::BadArguments(format!(
                    "--min-share {}: a share is between 0 and 1",
                    a.min_share
                )));
            }
            // The tree depends on the flamegraph options alone.
            let cached = trace
                .flame
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let flame = match cached {
                Some((q, f)) if q == a.query => f,
                _ => {
                    let mut reader = trace.reader()?;
                    let answer = a.query.run(&mut reader, &mut quiet).map_err(query_error)?;
                    let f = Arc::new(Flame {
                        tree: answer.tree,
                        unit: answer.unit,
                        what: answer.what,
                    });
                    *trace.flame.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((a.query.clone(), Arc::clone(&f)));
                    f
                }
            };
            Ok(to_json(&flame_tree(&flame, &a.focus, a.min_share)))
        }
        Endpoint::Diff => {
            let other = compare.ok_or(ApiError::NothingToCompare)?;
            let q = parse::<DiffArgs>(args)?.query;
            checked(&q.filter)?;
            // As `memtrace diff A B`: the compared trace is the baseline.
            let (mut ra, mut rb) = (other.reader()?, trace.reader()?);
            let pa = q
                .pass(&mut ra, &mut other.bytes.progress())
                .map_err(query_error)?;
            let pb = q.pass(&mut rb, &mut quiet).map_err(query_error)?;
            let ctx = q.context(other.file(&ra), trace.file(&rb));
            let answer = q.compare((pa, ra.locations()), (pb, rb.locations()));
            Ok(to_json(&answer.json(&ctx)))
        }
    }
}

/// The `flametree` answer: the node `focus` leads to and its callees of at
/// least `min_share` of its weight, in preorder.
fn flame_tree(flame: &Flame, focus: &[String], min_share: f64) -> serde_json::Value {
    use serde_json::json;
    let tree = &flame.tree;
    let mut node = FrameId::ROOT;
    let mut followed = Vec::new();
    for name in focus {
        match tree.children(node).find(|&c| tree.name(c) == name) {
            Some(c) => {
                node = c;
                followed.push(name.clone());
            }
            None => break,
        }
    }
    let shown = tree.weight(node).1;
    let floor = ((shown as f64 * min_share).ceil() as u64).max(1);
    let mut nodes = Vec::new();
    let mut truncated = false;
    // (node, its parent's index in `nodes`)
    let mut stack = vec![(node, -1i64)];
    while let Some((n, parent)) = stack.pop() {
        if nodes.len() == MAX_NODES {
            truncated = true;
            break;
        }
        let (own, total) = tree.weight(n);
        let index = nodes.len() as i64;
        nodes.push(json!({"name": tree.name(n), "total": total, "self": own, "parent": parent}));
        let kids: Vec<FrameId> = tree
            .children(n)
            .filter(|&c| tree.weight(c).1 >= floor)
            .collect();
        stack.extend(kids.into_iter().rev().map(|c| (c, index)));
    }
    json!({
        "unit": match flame.unit { Unit::Bytes => "bytes", Unit::Samples => "samples" },
        "what": flame.what,
        "total": tree.total(),
        "focus": followed,
        "min_weight": floor,
        "truncated": truncated,
        "nodes": nodes,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    #[test]
    fn the_pages_read_are_released_after_each_answer() {
        let config = SynthConfig {
            allocs: 1000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let calls: Arc<Mutex<Vec<std::ops::Range<usize>>>> = Arc::default();
        let seen = Arc::clone(&calls);
        let b = Bytes::new(bytes).on_release(move |r| seen.lock().unwrap().push(r));
        let trace = Trace::new("t".into(), b).unwrap();
        assert_eq!(calls.lock().unwrap().len(), 1, "after reading the info");
        answer(&trace, None, Endpoint::Top, &[]).unwrap();
        assert_eq!(calls.lock().unwrap().last(), Some(&(0..usize::MAX)));
        assert_eq!(calls.lock().unwrap().len(), 2);
        // A refused request reads nothing but still lets go.
        assert!(answer(&trace, None, Endpoint::Top, &["--nope".into()]).is_err());
        assert_eq!(calls.lock().unwrap().len(), 3);
    }
}
