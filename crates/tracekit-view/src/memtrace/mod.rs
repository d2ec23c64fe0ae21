//! The JSON answers behind the page: each endpoint runs the same query, with
//! the same options, as the `tracekit memtrace` subcommand of its name, and
//! answers what that subcommand prints with `--json`: from the trace's tables
//! once they are decoded ([`Trace::decode`]), from a pass over its bytes until
//! then (the answers are the same). No I/O: the trace is bytes in memory, the
//! request a list of named parameters ([`Memtrace`] is the [`Api`]).
//!
//! | endpoint | subcommand | parameters |
//! | --- | --- | --- |
//! | `info` | `memtrace info --json` | none |
//! | `top` | `memtrace top --json` | `top`'s options |
//! | `timeline` | `memtrace timeline --json` | `timeline`'s options, `--base` (the compared trace's) |
//! | `flamegraph` | `memtrace flamegraph --json` | `flamegraph`'s options |
//! | `diff` | `memtrace diff --json` (the trace against the compared one) | `diff`'s options |
//! | `hot-paths` | `memtrace hot-paths --json` | `hot-paths`' options |
//! | `flametree` | the flame graph's tree around one node, for drawing | `flamegraph`'s options, `--focus FRAME`..., `--min-share F`, `--depth N`, `--invert`, `--fragment FRAME`..., `--diff`, `--base-between T1 T2` |
//! | `functions` | each function's weight in the flame graph's stacks | `flamegraph`'s options, `--sort total\|self`, `--limit N` (200; 0: all), `--diff`, `--base-between T1 T2` |
//!
//! With `--diff`, `flametree` answers a differential tree: the served trace's
//! tree merged with a baseline's of the same options
//! ([`tracekit_analysis::diff`]), each node weighed by the served trace and
//! carrying its weights in the baseline (`base_total`, `base_self`). The
//! baseline is the compared trace (`--compare`), as `memtrace flamegraph --diff
//! COMPARED SERVED` merges them, or with `--base-between T1 T2` the served
//! trace's allocations made between those times (two ranges of one trace);
//! `functions --diff` answers each function's weights in both, the largest
//! change first.
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
//! The parameters are the subcommand's options by name ([`arguments`]):
//! `/api/top?by=function&limit=10&between=1s,2s&peak` asks what
//! `top --by function --limit 10 --between 1s 2s --peak` does, parsed by the
//! subcommand's own options, so a script asks the server exactly what it
//! would ask the command line. A flag is on given alone or as `=true` (off as
//! `=false`), an option of two values takes them separated by a comma, a
//! repeatable option is given again (`hide=a&hide=b`), and `min_size` is
//! `min-size`. There is no file argument: the trace is the one served.
//!
//! Scripts and saved URLs may give the command line itself, one argument per
//! `arg` parameter (`/api/top?arg=--by&arg=function`); [`arguments`] takes
//! those as they are, before the named ones, so both forms of one query are
//! the same query.

mod args;
mod tree;

use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tracekit_analysis::tables::follow::Follow;

use crate::follow::{self, Growth, Pace};
use tracekit_columns::Spill;
use tracekit_io::follow::Tail;
use tracekit_memtrace::OpenError;

use tracekit_analysis::Filter;
use tracekit_analysis::diff::{self, DiffTree};
use tracekit_analysis::frames::{FrameTree, Unit};
use tracekit_analysis::passes::{Progress, Source, Spilling};
use tracekit_analysis::paths;
use tracekit_analysis::query::{FlameQuery, QueryError};
use tracekit_analysis::render::TraceFile;
use tracekit_analysis::tables::Tables;
use tracekit_columns::TraceBytes;
use tracekit_memtrace::dump::InfoReport;
use tracekit_memtrace::{ReadError, Reader};

pub use args::arguments;
use args::{
    DiffArgs, FlameArgs, FlameTreeArgs, FunctionsArgs, HotPathsArgs, TimelineArgs, TopArgs, parse,
};
use tree::{Around, FlameTreeJson, FunctionChangesJson, FunctionsJson, Shown, nodes_json};

use crate::api::{Api, MAX_ROWS, Params};
use crate::json::{Layout, to_json};

/// How the answers are laid out: as the subcommands print them.
const LAYOUT: Layout = Layout::Pretty;

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
    /// The `info` answer, made by a pass over the trace ([`Trace::read_info`]),
    /// or why the trace no longer reads.
    info: OnceLock<Result<String, String>>,
    /// The flame graph trees of the last two `flamegraph` options `flametree`
    /// was asked with (two: a differential tree of two ranges asks for both at
    /// each step), the latest last.
    flame: Mutex<Vec<(FlameQuery, Arc<Flame>)>>,
    /// How [`Trace::decode`] makes the tables, when not by decoding the bytes.
    decoder: Option<Decoder>,
    /// Whether answers wait for [`Trace::decode`] rather than pass over the
    /// bytes meanwhile: while it reads tables kept for the trace, which is
    /// quicker than a pass and holds less memory than one beside it.
    awaited: Mutex<bool>,
    decoded: std::sync::Condvar,
    /// Where a pass grows its large tables ([`Spilling`]): a pass over the
    /// bytes beside a build of the tables, which holds its own, and a query
    /// over the tables that counts millions of sites.
    spill: Spill,
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
    /// This tree merged with the last baseline's it was asked against (the
    /// compared trace's of the same query, or this trace's of another
    /// allocation range), and whether both were inverted.
    diff: Mutex<Option<(Baseline, bool, Arc<DiffTree>)>>,
    /// [`tracekit_io::guard::faults`] when it was folded: kept only while
    /// no cache file it may have read was cut short since.
    faults: u64,
}

impl Trace {
    /// The trace-info record.
    pub fn info(&self) -> &tracekit_memtrace::Info {
        &self.header
    }

    /// A trace named `name` (as its answers print it), its header read. Its
    /// `info` answer needs a pass over its events, made by
    /// [`Trace::read_info`] (which the server runs beside the serving).
    pub fn new(name: String, bytes: TraceBytes) -> Result<Trace, ReadError> {
        let reader = Reader::from_owner(bytes.clone())?;
        Ok(Trace {
            name,
            header: reader.info().clone(),
            bytes,
            tables: OnceLock::new(),
            info: OnceLock::new(),
            flame: Mutex::new(Vec::new()),
            decoder: None,
            awaited: Mutex::new(false),
            decoded: std::sync::Condvar::new(),
            spill: Spill::memory(),
        })
    }

    /// A trace named `name` of which `tables` were decoded and `info` is the
    /// `info` answer (a followed trace, as decoded so far).
    pub(crate) fn decoded(name: String, tables: Tables, info: String) -> Trace {
        Trace {
            name,
            header: tables.info().clone(),
            // Never read: the tables and the info are there.
            bytes: TraceBytes::new(Vec::new()),
            tables: OnceLock::from(tables),
            info: OnceLock::from(Ok(info)),
            flame: Mutex::new(Vec::new()),
            decoder: None,
            awaited: Mutex::new(false),
            decoded: std::sync::Condvar::new(),
            spill: Spill::memory(),
        }
    }

    /// Reads every event once for the `info` answer, unless done before.
    pub fn read_info(&self) {
        self.info.get_or_init(|| {
            let mut reader = Reader::from_owner(self.bytes.clone()).map_err(|e| e.to_string())?;
            let report = InfoReport::collect(&mut reader, &self.name, |_| {}, |_| {});
            self.bytes.release_all();
            Ok(to_json(&report, LAYOUT))
        });
    }

    /// The trace whose tables [`Trace::decode`] makes with `decoder` (one that
    /// keeps them between runs) rather than by decoding its bytes. When
    /// `kept` (the decoder is likely to read them back), answers asked
    /// meanwhile wait for them rather than pass over the bytes.
    pub fn decoded_by(mut self, decoder: Decoder, kept: bool) -> Trace {
        self.decoder = Some(decoder);
        *self.awaited.get_mut().unwrap_or_else(|e| e.into_inner()) = kept;
        self
    }

    /// The trace whose passes grow their large tables where `spill` says
    /// ([`Spilling`]) rather than in memory: over its bytes (the answers until
    /// its tables are decoded) their backtrace tries, live objects and sites,
    /// beside the build's; over its tables, the sites of a query that counts
    /// many.
    pub fn spilling(mut self, spill: Spill) -> Trace {
        self.spill = spill;
        self
    }

    /// Waits while answers wait for [`Trace::decode`].
    fn await_decoded(&self) {
        let mut awaited = self.awaited.lock().unwrap_or_else(|e| e.into_inner());
        while *awaited {
            awaited = (self.decoded.wait(awaited)).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Decodes the trace into its tables, which answers are made from once
    /// this returns; `progress` hears the byte position reached. The pages
    /// read are let go as the decoding passes them. A second call does nothing.
    pub fn decode(&self, progress: &mut dyn FnMut(u64)) {
        // However it ends (a decoder that panics too), answers stop waiting.
        struct Release<'t>(&'t Trace);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *self.0.awaited.lock().unwrap_or_else(|e| e.into_inner()) = false;
                self.0.decoded.notify_all();
            }
        }
        let _release = Release(self);
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
        if let Some(tables) = Tables::from_bytes(&self.bytes, &Spill::memory(), progress) {
            let _ = self.tables.set(tables);
        }
    }

    /// The trace's tables, once [`Trace::decode`] has made them; none once a
    /// guarded cache file was cut short while read
    /// ([`tracekit_io::guard::faults`]): the tables may be read from it.
    pub fn tables(&self) -> Option<&Tables> {
        self.tables
            .get()
            .filter(|_| tracekit_io::guard::faults() == 0)
    }

    /// `ask` of the trace's tables, or of a pass over its bytes while they are
    /// not decoded yet, or no longer to be trusted (the answers are the same).
    fn with_source<R>(
        &self,
        ask: impl FnOnce(&mut dyn Source, Progress<'_>) -> R,
    ) -> Result<R, Error> {
        self.await_decoded();
        if let Some(tables) = self.tables() {
            let mut source = Spilling {
                source: tables,
                spill: self.spill.clone(),
            };
            return Ok(ask(&mut source, &mut |_, _| {}));
        }
        let reader =
            Reader::from_owner(self.bytes.clone()).map_err(|e| Error::Unreadable(e.to_string()))?;
        let mut source = Spilling {
            source: reader,
            spill: self.spill.clone(),
        };
        let answer = ask(&mut source, &mut releasing(&self.bytes));
        self.bytes.release_all();
        Ok(answer)
    }

    /// The name the answers give the trace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The flame graph of `query`: the one kept if it is of the same query, else
    /// folded now (and kept).
    fn flame(&self, query: &FlameQuery) -> Result<Arc<Flame>, Error> {
        let kept = (self.flame.lock().unwrap_or_else(|e| e.into_inner()).iter())
            .find(|(q, f)| q == query && f.faults == tracekit_io::guard::faults())
            .map(|(_, f)| Arc::clone(f));
        if let Some(f) = kept {
            return Ok(f);
        }
        let faults = tracekit_io::guard::faults();
        let answer = self
            .with_source(|source, progress| query.run(source, progress))?
            .map_err(query_error)?;
        let f = Arc::new(Flame {
            tree: answer.tree,
            unit: answer.unit,
            what: answer.what,
            recursion_folded: answer.recursion_folded,
            inverted: OnceLock::new(),
            diff: Mutex::new(None),
            faults,
        });
        let mut kept = self.flame.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(q, _)| q != query);
        if kept.len() == 2 {
            kept.remove(0);
        }
        kept.push((query.clone(), Arc::clone(&f)));
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
}

/// Why a request has no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The arguments are not options of the endpoint's subcommand, or their
    /// values are not valid (the message is the option parser's).
    #[error("{0}")]
    BadArguments(String),
    /// The trace's header no longer reads (its bytes were read when the
    /// viewer started).
    #[error("the trace cannot be read: {0}")]
    Unreadable(String),
    /// The `info` answer's pass over the trace is not done yet.
    #[error("reading the trace")]
    Reading,
    /// `diff` without a trace to compare with.
    #[error("no trace to compare with: start the viewer with --compare")]
    NothingToCompare,
}

/// A filter that can keep something (the subcommands check it before reading).
fn checked(filter: &Filter) -> Result<(), Error> {
    filter
        .check()
        .map_err(|e| Error::BadArguments(e.to_string()))
}

fn query_error(e: QueryError) -> Error {
    Error::BadArguments(e.to_string())
}

/// A memtrace trace served, and the one it is compared with (`--compare`);
/// or a trace followed while a program writes it (`--follow`).
pub struct Memtrace(Serving);

// One per server, made once: its size is of no matter.
#[allow(clippy::large_enum_variant)]
enum Serving {
    Whole {
        trace: Trace,
        compare: Option<Trace>,
    },
    Followed(Followed),
}

/// A trace followed while a program writes it: its latest state, made again
/// each time more of it is decoded.
struct Followed {
    name: String,
    /// The trace as decoded so far, or why it cannot be followed.
    latest: RwLock<Option<Result<Arc<Trace>, String>>>,
    /// The file to follow, and whom to tell if it is not a memtrace trace,
    /// until the follow starts.
    source: Mutex<Option<(Tail, Refused)>>,
    progress: Growth,
}

/// Told why a followed file cannot be served.
pub type Refused = Box<dyn FnOnce(&str) + Send>;

impl Memtrace {
    /// Serves `trace`, and `compare` to compare it with.
    pub fn new(trace: Trace, compare: Option<Trace>) -> Memtrace {
        Memtrace(Serving::Whole { trace, compare })
    }

    /// Serves the memtrace trace a program writes to `tail`, named `name`:
    /// each packet decoded once as it comes ([`tables::follow::Follow`]), and
    /// the tables and `info` of what is decoded served each time more is,
    /// until the writer closes the file. Until its trace-info packet is whole
    /// every endpoint answers 503. A file that turns out not to be a memtrace
    /// trace answers 500 with why, which `refused` is told.
    pub fn following(name: String, tail: Tail, refused: Refused) -> Memtrace {
        Memtrace(Serving::Followed(Followed {
            name,
            latest: RwLock::new(None),
            source: Mutex::new(Some((tail, refused))),
            progress: Growth::new(),
        }))
    }

    /// The trace served (of a followed one, none).
    pub fn trace(&self) -> Option<&Trace> {
        match &self.0 {
            Serving::Whole { trace, .. } => Some(trace),
            Serving::Followed(_) => None,
        }
    }
}

impl Followed {
    /// The trace as decoded so far.
    fn latest(&self) -> Result<Arc<Trace>, Error> {
        match &*self.latest.read().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(t)) => Ok(Arc::clone(t)),
            Some(Err(why)) => Err(Error::Unreadable(why.clone())),
            None => Err(Error::Reading),
        }
    }

    fn publish(&self, latest: Result<Trace, String>) {
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = Some(latest.map(Arc::new));
        self.progress.grew();
    }

    /// Serves why the file cannot be followed, and tells `refused`.
    fn refuse(&self, refused: Refused, why: String) {
        refused(&why);
        self.publish(Err(why));
        self.progress.ended();
    }

    /// Follows the trace until its writer is done (see [`Memtrace::following`]).
    fn follow(&self) {
        let source = self.source.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some((mut tail, refused)) = source else {
            return;
        };
        // Decoding starts once the trace-info packet is whole.
        let mut follow = loop {
            let input = match Tail::open(tail.path()) {
                Ok(t) => t,
                Err(e) => return self.refuse(refused, e.to_string()),
            };
            match Follow::new(input) {
                Ok(f) => break f,
                Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    let why = format!("{}: {e}", self.name);
                    return self.refuse(refused, why);
                }
            }
            if tail.is_ended() {
                let why = format!(
                    "{}: its writer closed it before its header was whole",
                    self.name
                );
                return self.refuse(refused, why);
            }
            tail.wait(follow::EVERY);
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut pace = Pace::new();
        loop {
            pace.read(follow.read());
            let writing = follow.is_waiting();
            pace.serve(writing, || {
                let tables = follow.tables();
                let info = to_json(&follow.info(&self.name), LAYOUT);
                self.publish(Ok(Trace::decoded(self.name.clone(), tables, info)));
            });
            if !writing {
                if let Some(why) = follow.failure() {
                    eprintln!("warning: {}: {why}", self.name);
                }
                self.progress.ended();
                return;
            }
            follow.input().wait(follow::EVERY);
        }
    }
}

impl Api for Memtrace {
    type Endpoint = Endpoint;
    /// The command line asked.
    type Query = Vec<String>;
    type Error = Error;

    const KIND: &'static str = "memtrace";

    const PAGE: &'static str = "/index.html";

    const ENDPOINTS: &'static [(&'static str, Endpoint)] = &[
        ("info", Endpoint::Info),
        ("top", Endpoint::Top),
        ("timeline", Endpoint::Timeline),
        ("flamegraph", Endpoint::Flamegraph),
        ("diff", Endpoint::Diff),
        ("hot-paths", Endpoint::HotPaths),
        ("flametree", Endpoint::FlameTree),
        ("functions", Endpoint::Functions),
    ];

    fn is_ready(endpoint: Endpoint) -> bool {
        // The info is made when the trace is read.
        endpoint == Endpoint::Info
    }

    fn status(error: &Error) -> u16 {
        match error {
            Error::BadArguments(_) | Error::NothingToCompare => 400,
            Error::Unreadable(_) => 500,
            Error::Reading => 503,
        }
    }

    fn query(&self, endpoint: Endpoint, params: Params) -> Result<Vec<String>, Error> {
        arguments(endpoint, params)
    }

    fn query_bytes(args: &Vec<String>) -> usize {
        args.iter().map(|a| a.len() + size_of::<String>()).sum()
    }

    fn answer(&self, endpoint: Endpoint, args: &Vec<String>) -> Result<String, Error> {
        match &self.0 {
            Serving::Whole { trace, compare } => answer(trace, compare.as_ref(), endpoint, args),
            Serving::Followed(f) => answer(&*f.latest()?, None, endpoint, args),
        }
    }

    fn compares(&self) -> bool {
        matches!(
            &self.0,
            Serving::Whole {
                compare: Some(_),
                ..
            }
        )
    }

    fn followed(&self) -> Option<(u64, bool)> {
        match &self.0 {
            Serving::Whole { .. } => None,
            Serving::Followed(f) => Some(f.progress.now()),
        }
    }

    /// Reads the traces for their `info` answers (asked for 503 until then),
    /// and beside that decodes them into their tables: until that is done, answers are
    /// passes over the bytes. A decoding that fails (panics) leaves the
    /// passes to answer.
    fn prepare(&self) {
        let (trace, compare) = match &self.0 {
            Serving::Whole { trace, compare } => (trace, compare),
            Serving::Followed(f) => return f.follow(),
        };
        let traces = || std::iter::once(trace).chain(compare);
        // Side by side: the info pass is what the page asks for first, and
        // the decoding would otherwise wait for it.
        std::thread::scope(|scope| {
            scope.spawn(|| traces().for_each(Trace::read_info));
            for trace in traces() {
                let decode = || trace.decode(&mut |_| {});
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).is_err() {
                    return;
                }
            }
        });
    }
}

/// Refuses a `--limit` outside 1 to [`MAX_ROWS`] (`--limit 0` is "all").
fn bounded(limit: usize) -> Result<(), Error> {
    match (1..=MAX_ROWS).contains(&limit) {
        true => Ok(()),
        false => Err(Error::BadArguments(format!(
            "--limit {limit}: between 1 and {MAX_ROWS} here"
        ))),
    }
}

/// What a differential tree is compared with: the compared trace (`None`), or
/// this trace's allocations made between two times.
type Baseline = Option<Vec<tracekit_memtrace::Timedelta>>;

/// `flame` (the served trace's tree of `query`) merged with the baseline's
/// tree: the compared trace's of the same query, or with `base_between` this
/// trace's of the same query for the allocations made then (both inverted with
/// `invert`), and the baseline's flame graph; the last merge is kept with
/// `flame`.
fn diff_tree(
    flame: &Flame,
    (trace, compare): (&Trace, Option<&Trace>),
    query: &FlameQuery,
    base_between: &Baseline,
    invert: bool,
) -> Result<(Arc<DiffTree>, Arc<Flame>), Error> {
    let base = match base_between {
        None => compare.ok_or(Error::NothingToCompare)?.flame(query)?,
        Some(range) => {
            let mut q = query.clone();
            q.filter.between = Some(range.clone());
            trace.flame(&q)?
        }
    };
    let mut kept = flame.diff.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((b, i, d)) = kept.as_ref()
        && b == base_between
        && *i == invert
    {
        return Ok((Arc::clone(d), base));
    }
    let d = Arc::new(match invert {
        true => {
            let a = base.inverted.get_or_init(|| paths::inverted(&base.tree));
            let b = flame.inverted.get_or_init(|| paths::inverted(&flame.tree));
            diff::diff(a, b)
        }
        false => diff::diff(&base.tree, &flame.tree),
    });
    *kept = Some((base_between.clone(), invert, Arc::clone(&d)));
    Ok((d, base))
}

/// The answer of `endpoint` to `args` about `trace` (and `compare`, for
/// [`Endpoint::Diff`]): the JSON its subcommand prints, made from the traces'
/// tables.
/// The `flametree` answer of `trace` for `args` (a timeline's joined heap
/// asks it of a range).
pub(crate) fn flametree(trace: &Trace, args: &[String]) -> Result<String, Error> {
    answer(trace, None, Endpoint::FlameTree, args)
}

fn answer(
    trace: &Trace,
    compare: Option<&Trace>,
    endpoint: Endpoint,
    args: &[String],
) -> Result<String, Error> {
    match endpoint {
        Endpoint::Info => {
            if let Some(a) = args.first() {
                return Err(Error::BadArguments(format!("info takes no arguments: {a}")));
            }
            match trace.info.get() {
                Some(Ok(info)) => Ok(info.clone()),
                Some(Err(why)) => Err(Error::Unreadable(why.clone())),
                None => Err(Error::Reading),
            }
        }
        Endpoint::Top => {
            let q = parse::<TopArgs>(args)?.query;
            checked(&q.filter)?;
            bounded(q.limit)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file()), LAYOUT))
        }
        Endpoint::Timeline => {
            let a = parse::<TimelineArgs>(args)?;
            let (q, trace) = match a.base {
                true => (a.query, compare.ok_or(Error::NothingToCompare)?),
                false => (a.query, trace),
            };
            checked(&q.filter)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file()), LAYOUT))
        }
        Endpoint::Flamegraph => {
            let q = parse::<FlameArgs>(args)?.query;
            checked(&q.filter)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(), LAYOUT))
        }
        Endpoint::FlameTree => {
            let mut a = parse::<FlameTreeArgs>(args)?;
            // The tables show each frame's count.
            a.query.count_objects = true;
            checked(&a.query.filter)?;
            if !(0.0..=1.0).contains(&a.min_share) {
                return Err(Error::BadArguments(format!(
                    "--min-share {}: a share is between 0 and 1",
                    a.min_share
                )));
            }
            let flame = trace.flame(&a.query)?;
            let shown = Shown {
                min_share: a.min_share,
                depth: a.depth.unwrap_or(usize::MAX),
            };
            let merged = match a.diff {
                true => {
                    let traces = (trace, compare);
                    Some(diff_tree(&flame, traces, &a.query, &a.base_between, a.invert)?.0)
                }
                false => None,
            };
            let merged = merged.as_deref();
            let (nodes, around) = match (merged, a.invert, a.fragment.is_empty()) {
                (Some(d), _, _) => (nodes_json(d.tree(), Some(d), &a.focus, shown), None),
                (None, true, _) => {
                    let inverted = flame.inverted.get_or_init(|| paths::inverted(&flame.tree));
                    (nodes_json(inverted, None, &a.focus, shown), None)
                }
                (None, false, true) => (nodes_json(&flame.tree, None, &a.focus, shown), None),
                (None, false, false) => {
                    let fragment: Vec<&str> = a.fragment.iter().map(String::as_str).collect();
                    let f = paths::focus(&flame.tree, &fragment);
                    let callers = nodes_json(&f.callers, None, &[], shown);
                    let around = Around {
                        fragment: a.fragment[..f.found].to_vec(),
                        callers: callers.nodes,
                        callers_truncated: callers.truncated,
                    };
                    (nodes_json(&f.callees, None, &a.focus, shown), Some(around))
                }
            };
            Ok(to_json(
                &FlameTreeJson {
                    unit: flame.unit.name(),
                    what: flame.what.clone(),
                    total: flame.tree.total(),
                    base_total: merged.map(DiffTree::base_total),
                    recursion_folded: flame.recursion_folded,
                    nodes,
                    around,
                },
                LAYOUT,
            ))
        }
        Endpoint::Functions => {
            let mut a = parse::<FunctionsArgs>(args)?;
            // The same tree as `flametree`'s, kept for both.
            a.query.count_objects = true;
            checked(&a.query.filter)?;
            let flame = trace.flame(&a.query)?;
            if a.diff {
                let traces = (trace, compare);
                let (merged, base) = diff_tree(&flame, traces, &a.query, &a.base_between, false)?;
                let mut functions = merged.functions(&base.tree);
                let count = functions.len();
                if a.limit > 0 {
                    functions.truncate(a.limit);
                }
                return Ok(to_json(
                    &FunctionChangesJson {
                        unit: flame.unit.name(),
                        what: flame.what.clone(),
                        total: flame.tree.total(),
                        base_total: merged.base_total(),
                        count,
                        functions,
                    },
                    LAYOUT,
                ));
            }
            let mut functions = paths::functions(&flame.tree);
            if a.sort == "self" {
                functions.sort_by(|x, y| y.own.cmp(&x.own).then_with(|| x.name.cmp(&y.name)));
            }
            let count = functions.len();
            if a.limit > 0 {
                functions.truncate(a.limit);
            }
            Ok(to_json(
                &FunctionsJson {
                    unit: flame.unit.name(),
                    what: flame.what.clone(),
                    total: flame.tree.total(),
                    count,
                    functions,
                },
                LAYOUT,
            ))
        }
        Endpoint::HotPaths => {
            let q = parse::<HotPathsArgs>(args)?.query;
            checked(&q.flame.filter)?;
            bounded(q.limit)?;
            let answer = trace
                .with_source(|s, p| q.run(s, p))?
                .map_err(query_error)?;
            Ok(to_json(&answer.json(&trace.file()), LAYOUT))
        }
        Endpoint::Diff => {
            let other = compare.ok_or(Error::NothingToCompare)?;
            let q = parse::<DiffArgs>(args)?.query;
            checked(&q.filter)?;
            bounded(q.limit)?;
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
                            Ok(to_json(&answer.json(&ctx), LAYOUT))
                        })
                        .and_then(|r| r)
                })
                .and_then(|r| r)?;
            Ok(json)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
