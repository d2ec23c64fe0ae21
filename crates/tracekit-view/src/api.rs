//! The JSON answers behind the page: each endpoint runs the same query, with
//! the same options, as the `tracekit memtrace` subcommand of its name, and
//! answers what that subcommand prints with `--json`: from the trace's tables
//! once they are decoded ([`Trace::decode`]), from a pass over its bytes until
//! then (the answers are the same). No I/O: the trace is bytes in memory, the
//! request a list of arguments.
//!
//! | endpoint | subcommand | arguments |
//! | --- | --- | --- |
//! | `info` | `memtrace info --json` | none |
//! | `top` | `memtrace top --json` | `top`'s options |
//! | `timeline` | `memtrace timeline --json` | `timeline`'s options |
//! | `flamegraph` | `memtrace flamegraph --json` | `flamegraph`'s options |
//! | `diff` | `memtrace diff --json` (the trace against the compared one) | `diff`'s options |
//! | `hot-paths` | `memtrace hot-paths --json` | `hot-paths`' options |
//! | `flametree` | the flame graph's tree around one node, for drawing | `flamegraph`'s options, `--focus FRAME`..., `--min-share F`, `--depth N`, `--invert`, `--fragment FRAME`... |
//! | `functions` | each function's weight in the flame graph's stacks | `flamegraph`'s options, `--sort total\|self`, `--limit N` (200; 0: all) |
//!
//! `flametree` and `functions` are the page's own: `flamegraph`'s stacks can be tens of
//! megabytes, while a flame graph shows a few thousand frames and the
//! functions table two hundred rows. `flametree` answers the node reached from the root by the `--focus` frames (as far as they lead),
//! and its callees down to those under `--min-share` of its weight and at most
//! `--depth` levels below it, in preorder, each with its parent's index, its
//! weight and its sampled objects. With `--invert` the tree is of the stacks
//! reversed (allocating frame first, then its callers: the caller table).
//! With `--fragment` (a call sequence, caller first, anywhere in the stacks)
//! the tree is the fragment's callees, merged over its appearances, and the
//! answer also holds its callers' tree (innermost caller first), which
//! `--focus` does not walk. `functions` answers, per frame name, the weight of
//! the stacks it appears in (each once, however deep the recursion: `total`)
//! and of those it ends (`self`), heaviest first. The tree of the last
//! `flamegraph` options asked is kept for both, so that zooming does not fold
//! again.
//!
//! The arguments are a command line's options, one per `arg` query parameter
//! (`/api/top?arg=--by&arg=function`), parsed by the subcommand's own
//! options, so a script asks the server exactly what it would ask the command
//! line. There is no file argument: the trace is the one served.
//!
//! The same options can be named as parameters of their own ([`typed_args`]):
//! `/api/top?by=function&limit=10&between=1s,2s&peak` asks what
//! `top --by function --limit 10 --between 1s 2s --peak` does. A flag is on given
//! alone or as `=true` (off as `=false`), an option of two values takes them
//! separated by a comma, a repeatable option is given again (`hide=a&hide=b`),
//! and `min_size` is `min-size`. The two forms mix; the named parameters become
//! the arguments (after the `arg` ones), so the server takes both forms of one
//! query as the same query.

use std::sync::{Arc, Mutex, OnceLock};

use clap::Parser;
use tracekit_analysis::Filter;
use tracekit_analysis::frames::{FrameId, FrameTree, Unit};
use tracekit_analysis::passes::{Progress, Source};
use tracekit_analysis::paths;
use tracekit_analysis::query::{
    DiffQuery, FlameQuery, HotPathsQuery, QueryError, TimelineQuery, TopQuery,
};
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::tables::Tables;
use tracekit_columns::TraceBytes;
use tracekit_memtrace::dump::InfoReport;
use tracekit_memtrace::{ReadError, Reader};

/// A progress callback for a pass over `bytes` that releases what the pass has read
/// behind it, in steps.
fn releasing(bytes: &TraceBytes) -> impl FnMut(tracekit_analysis::passes::Stage, u64) + use<> {
    let mut pass = bytes.pass();
    move |_, pos| pass.at(pos)
}

/// A trace being served: its bytes, its tables once decoded, the name its
/// answers give it, and what does not change between requests.
pub struct Trace {
    name: String,
    bytes: TraceBytes,
    /// Set once [`Trace::decode`] is done; until then answers are passes over
    /// the bytes.
    tables: OnceLock<Tables>,
    /// The trace-info record.
    header: tracekit_memtrace::Info,
    /// The `info` answer.
    info: String,
    /// The flame graph tree of the last `flamegraph` options `flametree` was
    /// asked with.
    flame: Mutex<Option<(FlameQuery, Arc<Flame>)>>,
    /// How [`Trace::decode`] makes the tables, when not by decoding the bytes.
    decoder: Option<Decoder>,
}

/// Makes a trace's tables from its bytes (`None`: they cannot be made),
/// reporting the byte position reached.
pub type Decoder = Box<dyn Fn(&TraceBytes, &mut dyn FnMut(u64)) -> Option<Tables> + Send + Sync>;

/// A folded flame graph, without the pass it came from.
struct Flame {
    tree: FrameTree,
    unit: Unit,
    what: String,
    recursion_folded: bool,
    /// The tree of the stacks reversed, made when first asked.
    inverted: OnceLock<FrameTree>,
}

impl Trace {
    /// A trace named `name` (as its answers print it). Reads it once, for its
    /// `info` answer.
    pub fn new(name: String, bytes: TraceBytes) -> Result<Trace, ReadError> {
        let mut reader = Reader::from_owner(bytes.clone())?;
        let report = InfoReport::collect(&mut reader, &name, |_| {}, |_| {});
        let info = to_json(&report);
        bytes.release_all();
        Ok(Trace {
            name,
            header: reader.info().clone(),
            bytes,
            tables: OnceLock::new(),
            info,
            flame: Mutex::new(None),
            decoder: None,
        })
    }

    /// The trace whose tables [`Trace::decode`] makes with `decoder` (one that
    /// keeps them between runs) rather than by decoding its bytes.
    pub fn decoded_by(mut self, decoder: Decoder) -> Trace {
        self.decoder = Some(decoder);
        self
    }

    /// Decodes the trace into its tables, which answers are made from once
    /// this returns; `progress` hears the byte position reached. The pages
    /// read are let go as the decoding passes them. A second call does nothing.
    pub fn decode(&self, progress: &mut dyn FnMut(u64)) {
        if self.tables.get().is_some() {
            return;
        }
        if let Some(decoder) = &self.decoder {
            if let Some(tables) = decoder(&self.bytes, progress) {
                let _ = self.tables.set(tables);
            }
            return;
        }
        // The header read when the trace was made, so this gives tables.
        if let Some(tables) = Tables::from_bytes(&self.bytes, progress) {
            let _ = self.tables.set(tables);
        }
    }

    /// The trace's tables, once [`Trace::decode`] has made them.
    pub fn tables(&self) -> Option<&Tables> {
        self.tables.get()
    }

    /// `ask` of the trace's tables, or of a pass over its bytes while they are
    /// not decoded yet (the answers are the same).
    fn with_source<R>(
        &self,
        ask: impl FnOnce(&mut dyn Source, Progress<'_>) -> R,
    ) -> Result<R, ApiError> {
        if let Some(mut tables) = self.tables.get() {
            return Ok(ask(&mut tables, &mut |_, _| {}));
        }
        let mut reader = Reader::from_owner(self.bytes.clone())
            .map_err(|e| ApiError::Unreadable(e.to_string()))?;
        let answer = ask(&mut reader, &mut releasing(&self.bytes));
        self.bytes.release_all();
        Ok(answer)
    }

    /// The name the answers give the trace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The flame graph of `query`: the one kept if it is of the same query, else
    /// folded now (and kept).
    fn flame(&self, query: &FlameQuery) -> Result<Arc<Flame>, ApiError> {
        let kept = self.flame.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((q, f)) = kept
            && q == *query
        {
            return Ok(f);
        }
        let answer = self
            .with_source(|source, progress| query.run(source, progress))?
            .map_err(query_error)?;
        let f = Arc::new(Flame {
            tree: answer.tree,
            unit: answer.unit,
            what: answer.what,
            recursion_folded: answer.recursion_folded,
            inverted: OnceLock::new(),
        });
        *self.flame.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((query.clone(), Arc::clone(&f)));
        Ok(f)
    }

    fn file(&self) -> TraceFile {
        TraceFile::new(self.name.clone(), &self.header)
    }
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// `memtrace hot-paths --json`.
    HotPaths,
    /// The flame graph around one node (the page's own).
    FlameTree,
    /// Each function's weight in the flame graph's stacks (the page's own).
    Functions,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 8] = [
        Endpoint::Info,
        Endpoint::Top,
        Endpoint::Timeline,
        Endpoint::Flamegraph,
        Endpoint::Diff,
        Endpoint::HotPaths,
        Endpoint::FlameTree,
        Endpoint::Functions,
    ];

    /// The options of the endpoint's subcommand (`info` has none).
    fn options(self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(match self {
            Endpoint::Info => return None,
            Endpoint::Top => TopArgs::command(),
            Endpoint::Timeline => TimelineArgs::command(),
            Endpoint::Flamegraph => FlameArgs::command(),
            Endpoint::Diff => DiffArgs::command(),
            Endpoint::HotPaths => HotPathsArgs::command(),
            Endpoint::FlameTree => FlameTreeArgs::command(),
            Endpoint::Functions => FunctionsArgs::command(),
        })
    }

    /// The endpoint named `name` (the path after `/api/`).
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Some(match name {
            "info" => Endpoint::Info,
            "top" => Endpoint::Top,
            "timeline" => Endpoint::Timeline,
            "flamegraph" => Endpoint::Flamegraph,
            "diff" => Endpoint::Diff,
            "flametree" => Endpoint::FlameTree,
            "hot-paths" => Endpoint::HotPaths,
            "functions" => Endpoint::Functions,
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
#[command(name = "hot-paths", no_binary_name = true, disable_help_flag = true)]
struct HotPathsArgs {
    #[command(flatten)]
    query: HotPathsQuery,
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
    /// Show at most this many levels below the shown node.
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
    /// The tree of the stacks reversed: allocating frame first, then callers.
    #[arg(long, conflicts_with = "fragment")]
    invert: bool,
    /// A call sequence anywhere in the stacks, caller first (repeatable): show
    /// its callees and its callers.
    #[arg(long, value_name = "FRAME")]
    fragment: Vec<String>,
}

#[derive(Parser)]
#[command(name = "functions", no_binary_name = true, disable_help_flag = true)]
struct FunctionsArgs {
    #[command(flatten)]
    query: FlameQuery,
    /// Rank by the weight of the stacks a function ends (`self`) instead of
    /// those it appears in (`total`).
    #[arg(long, value_parser = ["total", "self"], default_value = "total")]
    sort: String,
    /// Answer this many functions (0: all).
    #[arg(long, default_value_t = 200)]
    limit: usize,
}

/// How much of a tree a `flametree` answer shows.
#[derive(Clone, Copy)]
struct Shown {
    min_share: f64,
    depth: usize,
}

/// The options named by query parameters of their own (`by=function`, see the
/// module docs) as the arguments the `arg` form gives (`--by`, `function`).
pub fn typed_args(
    endpoint: Endpoint,
    params: &[(String, String)],
) -> Result<Vec<String>, ApiError> {
    let mut args = Vec::new();
    if params.is_empty() {
        return Ok(args);
    }
    let command = endpoint
        .options()
        .unwrap_or_else(|| clap::Command::new("info"));
    let known = || {
        let mut names: Vec<&str> = command
            .get_arguments()
            .filter_map(|a| a.get_long())
            .collect();
        names.sort_unstable();
        match names.is_empty() {
            true => "none".to_string(),
            false => names.join(", "),
        }
    };
    for (name, value) in params {
        let long = name.replace('_', "-");
        let Some(arg) = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
        else {
            return Err(ApiError::BadArguments(format!(
                "unknown parameter {name:?}: this endpoint's options are {}",
                known()
            )));
        };
        let flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let values = arg.get_num_args().map_or(1, |r| r.max_values());
        if flag {
            match value.as_str() {
                "" | "true" | "1" => args.push(format!("--{long}")),
                "false" | "0" => {}
                _ => {
                    return Err(ApiError::BadArguments(format!(
                        "{name}={value}: a flag is on given alone or as =true, off as =false"
                    )));
                }
            }
        } else if values > 1 {
            args.push(format!("--{long}"));
            args.extend(value.split(',').map(str::to_string));
        } else {
            args.push(format!("--{long}"));
            args.push(value.clone());
        }
    }
    Ok(args)
}

/// Most nodes a `flametree` answer holds.
const MAX_NODES: usize = 20_000;

fn parse<P: Parser>(args: &[String]) -> Result<P, ApiError> {
    P::try_parse_from(args).map_err(|e| ApiError::BadArguments(e.render().to_string()))
}

/// A filter that can keep something (the subcommands check it before reading).
fn checked(filter: &Filter) -> Result<(), ApiError> {
    filter
        .check()
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
/// [`Endpoint::Diff`]): the JSON its subcommand prints, made from the traces'
/// tables.
pub fn answer(
    trace: &Trace,
    compare: Option<&Trace>,
    endpoint: Endpoint,
    args: &[String],
) -> Result<String, ApiError> {
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
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file())))
        }
        Endpoint::Timeline => {
            let q = parse::<TimelineArgs>(args)?.query;
            checked(&q.filter)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file())))
        }
        Endpoint::Flamegraph => {
            let q = parse::<FlameArgs>(args)?.query;
            checked(&q.filter)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json()))
        }
        Endpoint::FlameTree => {
            let mut a = parse::<FlameTreeArgs>(args)?;
            // The tables show each frame's count.
            a.query.count_objects = true;
            checked(&a.query.filter)?;
            if !(0.0..=1.0).contains(&a.min_share) {
                return Err(ApiError::BadArguments(format!(
                    "--min-share {}: a share is between 0 and 1",
                    a.min_share
                )));
            }
            let flame = trace.flame(&a.query)?;
            let shown = Shown {
                min_share: a.min_share,
                depth: a.depth.unwrap_or(usize::MAX),
            };
            let (nodes, around) = match (a.invert, a.fragment.is_empty()) {
                (true, _) => {
                    let inverted = flame.inverted.get_or_init(|| paths::inverted(&flame.tree));
                    (nodes_json(inverted, &a.focus, shown), None)
                }
                (false, true) => (nodes_json(&flame.tree, &a.focus, shown), None),
                (false, false) => {
                    let fragment: Vec<&str> = a.fragment.iter().map(String::as_str).collect();
                    let f = paths::focus(&flame.tree, &fragment);
                    let callers = nodes_json(&f.callers, &[], shown);
                    let around = Around {
                        fragment: a.fragment[..f.found].to_vec(),
                        callers: callers.nodes,
                        callers_truncated: callers.truncated,
                    };
                    (nodes_json(&f.callees, &a.focus, shown), Some(around))
                }
            };
            Ok(to_json(&FlameTreeJson {
                unit: flame.unit.name(),
                what: flame.what.clone(),
                total: flame.tree.total(),
                recursion_folded: flame.recursion_folded,
                nodes,
                around,
            }))
        }
        Endpoint::Functions => {
            let mut a = parse::<FunctionsArgs>(args)?;
            // The same tree as `flametree`'s, kept for both.
            a.query.count_objects = true;
            checked(&a.query.filter)?;
            let flame = trace.flame(&a.query)?;
            let mut functions = paths::functions(&flame.tree);
            if a.sort == "self" {
                functions.sort_by(|x, y| y.own.cmp(&x.own).then_with(|| x.name.cmp(&y.name)));
            }
            let count = functions.len();
            if a.limit > 0 {
                functions.truncate(a.limit);
            }
            Ok(to_json(&FunctionsJson {
                unit: flame.unit.name(),
                what: flame.what.clone(),
                total: flame.tree.total(),
                count,
                functions,
            }))
        }
        Endpoint::HotPaths => {
            let q = parse::<HotPathsArgs>(args)?.query;
            checked(&q.flame.filter)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file())))
        }
        Endpoint::Diff => {
            let other = compare.ok_or(ApiError::NothingToCompare)?;
            let q = parse::<DiffArgs>(args)?.query;
            checked(&q.filter)?;
            // As `memtrace diff A B`: the compared trace is the baseline.
            let ctx = q.context(other.file(), trace.file());
            // Each pass with its trace's locations, while its source is at hand.
            let json = other
                .with_source(|sa, p| {
                    let pa = q.pass(sa, p).map_err(query_error)?;
                    trace
                        .with_source(|sb, p| {
                            let pb = q.pass(sb, p).map_err(query_error)?;
                            let answer = q.compare((pa, sa.locations()), (pb, sb.locations()));
                            Ok(to_json(&answer.json(&ctx)))
                        })
                        .and_then(|r| r)
                })
                .and_then(|r| r)?;
            Ok(json)
        }
    }
}

/// `/api/flametree`: the part of a flame graph's tree the page draws.
#[derive(Debug, serde::Serialize)]
struct FlameTreeJson {
    /// `bytes` or `samples`.
    unit: &'static str,
    /// What the weights measure.
    what: String,
    /// The weight of the whole tree.
    total: u64,
    /// Whether recursion is folded (asked, or the stacks were deeper than a
    /// screen).
    recursion_folded: bool,
    #[serde(flatten)]
    nodes: NodesJson,
    /// With a fragment: where it was found and who calls it.
    #[serde(flatten)]
    around: Option<Around>,
}

/// The callers of a fragment of frames.
#[derive(Debug, serde::Serialize)]
struct Around {
    /// The part of the fragment the tree holds.
    fragment: Vec<String>,
    /// Its callers, as the callees are.
    callers: Vec<NodeJson>,
    /// Whether the callers were cut at the most nodes sent.
    callers_truncated: bool,
}

/// Nodes of a tree around a focus ([`nodes_json`]).
#[derive(Debug, serde::Serialize)]
struct NodesJson {
    /// The frames followed from the root.
    focus: Vec<String>,
    /// The least weight of a node sent.
    min_weight: u64,
    /// Whether nodes were cut at the most sent.
    truncated: bool,
    /// The nodes, in preorder.
    nodes: Vec<NodeJson>,
}

/// One node.
#[derive(Debug, serde::Serialize)]
struct NodeJson {
    name: String,
    total: u64,
    #[serde(rename = "self")]
    own: u64,
    objects: u64,
    /// Its parent's index, -1 for the first.
    parent: i64,
    /// How many callees it has (sent or not).
    callees: usize,
}

/// `/api/functions`.
#[derive(Debug, serde::Serialize)]
struct FunctionsJson {
    unit: &'static str,
    what: String,
    total: u64,
    /// Functions in the tree.
    count: usize,
    /// The first of them.
    functions: Vec<paths::FunctionWeight>,
}

/// The node of `tree` that `focus` leads to from the root (as far as it
/// leads), and its callees as `shown` says, in preorder, each with its
/// parent's index.
fn nodes_json(tree: &FrameTree, focus: &[String], shown: Shown) -> NodesJson {
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
    let weight = tree.weight(node).1;
    let floor = ((weight as f64 * shown.min_share).ceil() as u64).max(1);
    let mut nodes = Vec::new();
    let mut truncated = false;
    // (node, its parent's index in `nodes`, its depth below `node`)
    let mut stack = vec![(node, -1i64, 0usize)];
    while let Some((n, parent, depth)) = stack.pop() {
        if nodes.len() == MAX_NODES {
            truncated = true;
            break;
        }
        let ((own, total), (_, objects)) = (tree.weight(n), tree.objects(n));
        let index = nodes.len() as i64;
        let kids: Vec<FrameId> = tree
            .children(n)
            .filter(|&c| tree.weight(c).1 >= floor)
            .collect();
        nodes.push(NodeJson {
            name: tree.name(n).to_string(),
            total,
            own,
            objects,
            parent,
            callees: tree.children(n).count(),
        });
        if depth < shown.depth {
            stack.extend(kids.into_iter().rev().map(|c| (c, index, depth + 1)));
        }
    }
    NodesJson {
        focus: followed,
        min_weight: floor,
        truncated,
        nodes,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    #[test]
    fn functions_are_weighed_as_the_flame_graphs_stacks_say() {
        let config = SynthConfig {
            allocs: 3000,
            recursive: true,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let trace = Trace::new("t".into(), TraceBytes::new(bytes)).unwrap();
        let ask = |e: Endpoint, args: &[&str]| -> serde_json::Value {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            serde_json::from_str(&answer(&trace, None, e, &args).unwrap()).unwrap()
        };
        let stacks = ask(Endpoint::Flamegraph, &["--peak"]);
        let mut want: std::collections::HashMap<String, (u64, u64)> = Default::default();
        for s in stacks["stacks"].as_array().unwrap() {
            let frames: Vec<&str> = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            let w = s["weight"].as_u64().unwrap();
            let distinct: std::collections::HashSet<&str> = frames.iter().copied().collect();
            for f in distinct {
                want.entry(f.to_string()).or_default().0 += w;
            }
            if let Some(leaf) = frames.last() {
                want.entry(leaf.to_string()).or_default().1 += w;
            }
        }
        for sort in ["total", "self"] {
            let got = ask(
                Endpoint::Functions,
                &["--peak", "--sort", sort, "--limit", "0"],
            );
            let rows = got["functions"].as_array().unwrap();
            assert_eq!(rows.len(), want.len());
            assert_eq!(got["count"].as_u64(), Some(want.len() as u64));
            let mut last = u64::MAX;
            for r in rows {
                let name = r["name"].as_str().unwrap();
                let (total, own) = (r["total"].as_u64().unwrap(), r["self"].as_u64().unwrap());
                assert_eq!(want[name], (total, own), "{name}");
                let key = if sort == "self" { own } else { total };
                assert!(key <= last, "sorted by {sort}");
                last = key;
            }
        }
        let top = ask(Endpoint::Functions, &["--peak", "--limit", "5"]);
        assert_eq!(top["functions"].as_array().unwrap().len(), 5);
        assert!(
            answer(
                &trace,
                None,
                Endpoint::Functions,
                &["--sort".into(), "x".into()]
            )
            .is_err()
        );
    }

    #[test]
    fn answers_are_the_same_before_and_after_decoding_and_read_no_page_after() {
        let config = SynthConfig {
            allocs: 1000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let calls: Arc<Mutex<Vec<std::ops::Range<usize>>>> = Arc::default();
        let seen = Arc::clone(&calls);
        let b = TraceBytes::new(bytes).on_release(move |r| seen.lock().unwrap().push(r));
        let trace = Trace::new("t".into(), b).unwrap();
        assert_eq!(calls.lock().unwrap().len(), 1, "after reading the info");
        let asked: [(Endpoint, &[&str]); 4] = [
            (Endpoint::Top, &["--by", "function", "--between", "0", "1"]),
            (Endpoint::Timeline, &["--never-collected"]),
            (Endpoint::FlameTree, &["--peak"]),
            (Endpoint::HotPaths, &["--function", "nope"]),
        ];
        let ask = |e: Endpoint, args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            answer(&trace, None, e, &args).unwrap()
        };
        let before: Vec<String> = asked.iter().map(|(e, a)| ask(*e, a)).collect();
        assert!(trace.tables().is_none());
        // A pass over the bytes lets go of them when done.
        assert_eq!(calls.lock().unwrap().last(), Some(&(0..usize::MAX)));
        let mut positions = Vec::new();
        trace.decode(&mut |p| positions.push(p));
        assert!(!positions.is_empty(), "the decoding reports its progress");
        assert_eq!(trace.tables().map(|t| t.allocations()), Some(1000));
        let released = calls.lock().unwrap().len();
        // The flame tree of the same options is kept: ask another first.
        ask(Endpoint::FlameTree, &[]);
        let after: Vec<String> = asked.iter().map(|(e, a)| ask(*e, a)).collect();
        assert_eq!(before, after);
        assert_eq!(
            calls.lock().unwrap().len(),
            released,
            "answers read no page"
        );
    }
}
