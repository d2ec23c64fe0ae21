//! The JSON answers behind the timeline page: a trace of slices (FXT, or perf
//! data decoded into it) held as a [`Timeline`], asked what a viewport of N
//! pixels shows, what a slice is, what a range holds and where a name is. No
//! I/O: the timeline is in memory, a request a list of named parameters
//! ([`Api`]).
//!
//! Times in the page's endpoints are nanoseconds from the trace's first time
//! (integers, so that a browser's doubles hold them exactly for 104 days of
//! trace). `slices` and `top` answer what `tracekit fxt slices --json` and
//! `tracekit fxt top --json` print, on the trace's own clock.
//!
//! A timeline may be served before it is built ([`TimelineTrace::building`]):
//! the build runs beside the serving ([`Api::prepare`]), and until it ends
//! every endpoint answers 503 with how much of the trace it has read, which
//! the page shows and asks again after; a build that fails answers 500 with
//! its reason.
//!
//! | endpoint | answers | parameters |
//! | --- | --- | --- |
//! | `stats` | `fxt stats --json` of the trace | none |
//! | `tracks` | the trace's name, span, processes, tracks, counters, damage, and whether a heap is joined (`--heap`) | none |
//! | `window` | what `from..to` drawn on `px` pixels shows of some tracks: per lane, one item per slice of at least a pixel and one merged item per run of the rest that a pixel cannot tell apart; instants (one per pixel), counters (min and max per pixel) and flows in the range | `from`, `to`, `px`, `tracks` (`1,2,5`; default all) |
//! | `details` | one slice: name, category, track, times, self time, arguments | `track`, `lane`, `index` |
//! | `selection` | the slices of a range on some tracks, by name (count, total, self, average, max), as Perfetto's area selection sums them | `from`, `to`, `tracks`, and a baseline's |
//! | `flame` | the range's call tree: its slices merged by their path of names, each with the time it spends in the range (nodes under 1/5000 of the whole left out) | `from`, `to`, `tracks`, and a baseline's |
//! | `search` | the next (or previous) slice whose name contains a text, and how many there are | `text`, `after` (`track,lane,index`), `backward` |
//! | `slices` | `fxt slices --json` | `between` (`T1,T2`, as `1.5s,2s`), `thread` (repeatable), `name`, `limit` |
//! | `top` | `fxt top --json` | `between`, `thread`, `limit` |
//! | `heap-flame` | with `--heap`: the range in the heap trace's time (`from_us`, `to_us`) and `memtrace view`'s `flametree` of the allocations made in it, or with `live` of the objects live at some time in it (`tree`); with `tracks`, of those threads' allocations where their records name their heap's domains (`domains`) | `from`, `to`, `live`, `tracks` |
//!
//! A `selection` or a `flame` is compared with a baseline (A) when `base` is
//! given: `range`, another range of this trace (`base_from`, `base_to`,
//! `base_tracks`, the tracks by default those asked), or `compare`, the trace
//! served beside it (`--compare`; `base_from` and `base_to` by default the
//! whole of it, `base_tracks` all of its tracks). A `selection`
//! then also answers `changes`, each name's figures in both, the largest
//! change of total time first (as `fxt top --diff` ranks them), and a `flame`
//! merges both trees by their paths of names, each node `[parent, name,
//! total, self, base total, base self]`.
//!
//! In a `window` answer a slice drawn as itself is `[start, end, name, index]`
//! and a merged run `[start, end, name, index, count]` (its longest slice's
//! name and index); `end` is `null` for a slice still open at the end of the
//! trace. Names are ids, with their texts in the answer's `names`. A flow is
//! its events, each `[track, time, phase, depth]`: the phase `b`, `s` or `e`,
//! the depth that of the deepest slice open on the track at its time (`null`
//! for none), where the arrow leaves or arrives.

mod draw;
pub mod heap;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tracekit_columns::Spill;
use tracekit_io::follow::Tail;
use tracekit_timeline::follow::Follow;

use crate::follow::{self, Growth, Pace};

use tracekit_fxt::stats::Stats;
use tracekit_timeline::report::{SlicesQuery, TopQuery};
use tracekit_timeline::{Position, Timeline};

use draw::{Base, details, flame, search, selection, tracks_json, window};

use crate::api::{Api, MAX_ROWS, Params};
use crate::json::{Layout, to_json};

/// How the answers made from plain data are laid out: as the drawing answers
/// written by hand are.
const LAYOUT: Layout = Layout::Compact;

/// Most flows a window answer holds.
const MAX_FLOWS: usize = 2_000;

/// Most pixels a window may be asked for.
const MAX_PX: u64 = 16_384;

/// A timeline's build, run beside the serving: handed a function that it
/// tells how many of the trace's bytes it has read, it gives the timeline
/// and its records' counts as [`stats_json`] writes them, or why it could
/// not build it.
pub type Build = Box<dyn FnOnce(&dyn Fn(u64)) -> Result<(Timeline, String), String> + Send>;

/// A timeline being served.
pub struct TimelineTrace {
    name: String,
    /// The timeline built, or why it could not be, once the build is done;
    /// of a followed trace, the latest built.
    built: RwLock<Option<Result<Arc<Built>, String>>>,
    /// The build not yet started ([`TimelineTrace::building`]), or the file
    /// to follow ([`TimelineTrace::following`]).
    build: Mutex<Option<Source>>,
    /// Of a followed trace: how far it is.
    followed: Option<Growth>,
    /// Bytes of the trace the build has read, of `total`.
    read: AtomicU64,
    total: u64,
    /// The trace served beside it, to compare with (`--compare`).
    compare: Option<Box<TimelineTrace>>,
    /// The memtrace trace of the same program's heap (`--heap`).
    heap: Option<Box<HeapJoin>>,
    /// Where a range's flame graph grows its call tree, which a range of
    /// millions of distinct paths makes as large ([`TimelineTrace::spilling`]).
    spill: Spill,
}

/// The heap joined to a timeline (`--heap`): its trace, whether each thread
/// gets a counter too, and whom to tell how the join went.
struct HeapJoin {
    trace: crate::memtrace::Trace,
    by_thread: bool,
    told: Mutex<Option<Joining>>,
}

/// Told how a heap's join went; an error stops the build.
pub type Joining = Box<dyn FnOnce(&Result<heap::Joined, heap::JoinError>) + Send>;

/// How a served timeline comes to be.
enum Source {
    /// Built once.
    Build(Build),
    /// Built again as a program writes its trace; a trace that turns out not
    /// to be FXT is told to the function.
    Follow(Tail, Box<dyn FnOnce(&str) + Send>),
}

/// A timeline built, with the answers made once.
struct Built {
    timeline: Timeline,
    stats: String,
    tracks: String,
}

/// What a request to a timeline asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimelineEndpoint {
    /// `fxt stats --json`.
    Stats,
    /// The tracks and what else the page draws first.
    Tracks,
    /// What a viewport shows.
    Window,
    /// One slice.
    Details,
    /// A range's slices by name.
    Selection,
    /// A range's call tree.
    Flame,
    /// The next or previous slice of a name.
    Search,
    /// `fxt slices --json`.
    Slices,
    /// `fxt top --json`.
    Top,
    /// What the joined heap allocated in a range: `memtrace view`'s
    /// `flametree` of the allocations made in it.
    HeapFlame,
}

impl TimelineEndpoint {
    /// The parameters it takes.
    fn parameters(self) -> &'static [&'static str] {
        match self {
            TimelineEndpoint::Stats | TimelineEndpoint::Tracks => &[],
            TimelineEndpoint::Window => &["from", "to", "px", "tracks"],
            TimelineEndpoint::HeapFlame => &["from", "to", "live", "tracks"],
            TimelineEndpoint::Details => &["track", "lane", "index"],
            TimelineEndpoint::Selection | TimelineEndpoint::Flame => &[
                "from",
                "to",
                "tracks",
                "base",
                "base_from",
                "base_to",
                "base_tracks",
            ],
            TimelineEndpoint::Search => &["text", "after", "backward"],
            TimelineEndpoint::Slices => &["between", "thread", "name", "limit"],
            TimelineEndpoint::Top => &["between", "thread", "limit"],
        }
    }
}

/// Why a request has no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The parameters are not the endpoint's, or their values are not valid.
    #[error("{0}")]
    BadParameters(String),
    /// The timeline is still being built: `read` of the trace's `total`
    /// bytes read so far.
    #[error("building the timeline: {} of {} MB read", read / 1_000_000, total / 1_000_000)]
    Building {
        /// Bytes read.
        read: u64,
        /// The trace's bytes.
        total: u64,
    },
    /// The timeline could not be built.
    #[error("the timeline could not be built: {0}")]
    Failed(String),
}

impl Api for TimelineTrace {
    type Endpoint = TimelineEndpoint;
    /// The parameters, checked, in the order asked.
    type Query = Params;
    type Error = Error;

    const KIND: &'static str = "timeline";

    const PAGE: &'static str = "/timeline.html";

    const ENDPOINTS: &'static [(&'static str, TimelineEndpoint)] = &[
        ("stats", TimelineEndpoint::Stats),
        ("tracks", TimelineEndpoint::Tracks),
        ("window", TimelineEndpoint::Window),
        ("details", TimelineEndpoint::Details),
        ("selection", TimelineEndpoint::Selection),
        ("flame", TimelineEndpoint::Flame),
        ("heap-flame", TimelineEndpoint::HeapFlame),
        ("search", TimelineEndpoint::Search),
        ("slices", TimelineEndpoint::Slices),
        ("top", TimelineEndpoint::Top),
    ];

    fn is_ready(endpoint: TimelineEndpoint) -> bool {
        matches!(endpoint, TimelineEndpoint::Stats | TimelineEndpoint::Tracks)
    }

    fn status(error: &Error) -> u16 {
        match error {
            Error::BadParameters(_) => 400,
            Error::Building { .. } => 503,
            Error::Failed(_) => 500,
        }
    }

    fn query(&self, endpoint: TimelineEndpoint, params: Params) -> Result<Params, Error> {
        // The memtrace page's command-line form has no meaning here.
        if params.iter().any(|(name, _)| name == "arg") {
            return Err(bad(
                "a timeline's parameters are named: ?from=0&to=1000".to_string()
            ));
        }
        Checked::check(endpoint, &params)?;
        Ok(params)
    }

    fn query_bytes(params: &Params) -> usize {
        (params.iter())
            .map(|(k, v)| k.len() + v.len() + 2 * size_of::<String>())
            .sum()
    }

    fn answer(&self, endpoint: TimelineEndpoint, params: &Params) -> Result<String, Error> {
        self.answer_checked(endpoint, Checked(params))
    }

    fn compares(&self) -> bool {
        self.compare.is_some()
    }

    fn followed(&self) -> Option<(u64, bool)> {
        self.followed.as_ref().map(Growth::now)
    }

    fn prepare(&self) {
        if let Some(other) = &self.compare {
            other.prepare();
        }
        let source = self.build.lock().unwrap_or_else(|e| e.into_inner()).take();
        let build = match source {
            None => return,
            Some(Source::Follow(tail, refused)) => return self.follow(tail, refused),
            Some(Source::Build(build)) => build,
        };
        let mut built = build(&|read| self.read.store(read, Ordering::Relaxed));
        if let (Some(h), Ok((timeline, _))) = (&self.heap, &mut built) {
            // Joined from the heap's tables, decoded once for this and its
            // flame graphs: a thread's counter is then a scan of them.
            h.trace.read_info();
            h.trace.decode(&mut |_| {});
            let joined = match h.trace.tables() {
                Some(mut tables) => heap::join_heap(timeline, &mut tables, h.by_thread),
                None => Err(heap::JoinError::Read(
                    "its tables could not be made".to_string(),
                )),
            };
            let told = h.told.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(told) = told {
                told(&joined);
            }
            if let Err(e) = joined {
                built = Err(format!("--heap: {e}"));
            }
        }
        self.publish(built);
    }
}

impl TimelineTrace {
    /// A timeline named `name`, with the counts of the records it was built
    /// from as `fxt stats --json` prints them ([`stats_json`]).
    pub fn new(name: String, timeline: Timeline, stats: String) -> TimelineTrace {
        let tracks = tracks_json(&name, &timeline, false);
        TimelineTrace {
            name,
            built: RwLock::new(Some(Ok(Arc::new(Built {
                timeline,
                stats,
                tracks,
            })))),
            build: Mutex::new(None),
            followed: None,
            read: AtomicU64::new(0),
            total: 0,
            compare: None,
            heap: None,
            spill: Spill::memory(),
        }
    }

    /// A timeline named `name` that `build` makes from a trace of `total`
    /// bytes once the server runs, answering 503 until then.
    pub fn building(name: String, total: u64, build: Build) -> TimelineTrace {
        TimelineTrace {
            name,
            built: RwLock::new(None),
            build: Mutex::new(Some(Source::Build(build))),
            followed: None,
            read: AtomicU64::new(0),
            total,
            compare: None,
            heap: None,
            spill: Spill::memory(),
        }
    }

    /// The timeline of the FXT trace a program writes to `tail`, named `name`:
    /// built from what is written so far, then again as more is written (read
    /// once, as it comes: [`Follow`]), until the writer closes the file. Until
    /// the first build every endpoint answers 503 with the bytes read. A file
    /// whose first bytes are not FXT's answers 500 with why, which `refused`
    /// is told.
    pub fn following(
        name: String,
        tail: Tail,
        refused: Box<dyn FnOnce(&str) + Send>,
    ) -> TimelineTrace {
        let total = std::fs::metadata(tail.path()).map_or(0, |m| m.len());
        TimelineTrace {
            name,
            built: RwLock::new(None),
            build: Mutex::new(Some(Source::Follow(tail, refused))),
            followed: Some(Growth::new()),
            read: AtomicU64::new(0),
            total,
            compare: None,
            heap: None,
            spill: Spill::memory(),
        }
    }

    /// Serves `built`, the timeline and its counts or why there is none.
    fn publish(&self, built: Result<(Timeline, String), String>) {
        let heap = self.heap.is_some();
        let built = built.map(|(timeline, stats)| {
            Arc::new(Built {
                tracks: tracks_json(&self.name, &timeline, heap),
                timeline,
                stats,
            })
        });
        *self.built.write().unwrap_or_else(|e| e.into_inner()) = Some(built);
        if let Some(p) = &self.followed {
            p.grew();
        }
    }

    /// Follows the trace `tail` reads while its writer writes it, serving a
    /// timeline of what is written each time more is (as [`Pace`] paces it),
    /// and the timeline of the whole trace once the writer is done.
    fn follow(&self, mut tail: Tail, refused: Box<dyn FnOnce(&str) + Send>) {
        // The kind, from the first bytes once there are enough to tell.
        loop {
            let head = match tail.head(64) {
                Ok(head) => head,
                Err(e) => return self.refuse(refused, format!("{}: {e}", self.name)),
            };
            if head.len() >= 8 || tail.is_ended() {
                if !tracekit_fxt::read::looks_like_fxt(&head) {
                    let why = format!(
                        "{} is not an FXT trace: only FXT traces are followed",
                        self.name
                    );
                    return self.refuse(refused, why);
                }
                break;
            }
            // Short of 8 bytes, the size has grown and `wait` says so at once.
            tail.wait(follow::EVERY);
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut follow = Follow::new(tail);
        let mut pace = Pace::new();
        loop {
            pace.read(follow.read(&mut |read| self.read.store(read, Ordering::Relaxed)));
            self.read.store(follow.position(), Ordering::Relaxed);
            let writing = follow.is_waiting();
            pace.serve(writing, || {
                let built = follow.built();
                for w in built.timeline.warnings() {
                    eprintln!("warning: {}: {w}", self.name);
                }
                let stats = stats_json(&built.stats.unwrap_or_default());
                self.publish(Ok((built.timeline, stats)));
            });
            if !writing {
                if let Some(p) = &self.followed {
                    p.ended();
                }
                return;
            }
            follow.input().wait(follow::EVERY);
        }
    }

    /// Serves why the followed trace has no timeline, and tells `refused`.
    fn refuse(&self, refused: Box<dyn FnOnce(&str) + Send>, why: String) {
        refused(&why);
        self.publish(Err(why));
        if let Some(p) = &self.followed {
            p.ended();
        }
    }

    /// The timeline whose flame graphs of ranges grow their call trees where
    /// `spill` says (in files of its folder past a few MiB) rather than in
    /// memory.
    pub fn spilling(self, spill: Spill) -> TimelineTrace {
        TimelineTrace { spill, ..self }
    }

    /// The same, served with `other` to compare with.
    pub fn compared_with(self, other: TimelineTrace) -> TimelineTrace {
        TimelineTrace {
            compare: Some(Box::new(other)),
            ..self
        }
    }

    /// Serves `heap`, the memtrace trace of the same run of the program, beside
    /// it: its live heap joined to the timeline once built, as a counter (and
    /// with `by_thread` each thread's, [`heap::join_heap`]), which `told` hears
    /// of (a join that fails fails the build), and a range's heap flame graph
    /// (`heap-flame`).
    pub fn with_heap(
        self,
        heap: crate::memtrace::Trace,
        by_thread: bool,
        told: Joining,
    ) -> TimelineTrace {
        TimelineTrace {
            heap: Some(Box::new(HeapJoin {
                trace: heap,
                by_thread,
                told: Mutex::new(Some(told)),
            })),
            ..self
        }
    }

    /// Its name, as its answers give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `f` of the timeline, once built (the latest, when followed).
    pub fn with_timeline<R>(&self, f: impl FnOnce(&Timeline) -> R) -> Option<R> {
        let built = self.built().ok()?;
        Some(f(&built.timeline))
    }

    /// The timeline built, or why there is none (yet, or any longer: once a
    /// guarded cache file was cut short while read, which the timeline may
    /// be read from, [`tracekit_io::guard::faults`]).
    fn built(&self) -> Result<Arc<Built>, Error> {
        if tracekit_io::guard::faults() > 0 {
            return Err(Error::Failed(
                "its cache file was cut short while it was read; start the viewer again to \
                 build it again"
                    .to_string(),
            ));
        }
        match &*self.built.read().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(built)) => Ok(Arc::clone(built)),
            Some(Err(why)) => Err(Error::Failed(why.clone())),
            None => Err(Error::Building {
                read: self.read.load(Ordering::Relaxed).min(self.total),
                total: self.total,
            }),
        }
    }

    /// The answer of `endpoint` to `p`.
    fn answer_checked(&self, endpoint: TimelineEndpoint, p: Checked<'_>) -> Result<String, Error> {
        let built = self.built()?;
        let t = &built.timeline;
        let span = || span(t);
        Ok(match endpoint {
            TimelineEndpoint::Stats => built.stats.clone(),
            TimelineEndpoint::Tracks => built.tracks.clone(),
            TimelineEndpoint::Window => {
                let (from, to) = (p.time("from")?.unwrap_or(0), p.time("to")?);
                let to = to.unwrap_or_else(span);
                let px = p.number("px")?.unwrap_or(1000);
                if px == 0 || px > MAX_PX {
                    return Err(bad(format!("px: between 1 and {MAX_PX}")));
                }
                if to <= from {
                    return Err(bad("to: after from".to_string()));
                }
                let tracks = p.window_tracks(t)?;
                window(t, from, to, px, &tracks)
            }
            TimelineEndpoint::Details => {
                let at = Position {
                    track: p.required("track")?,
                    lane: p.required("lane")?,
                    index: p.required("index")?,
                };
                details(t, at).ok_or_else(|| bad("no such slice".to_string()))?
            }
            TimelineEndpoint::Selection | TimelineEndpoint::Flame => {
                let from = p.time("from")?.unwrap_or(0);
                let to = p.time("to")?.unwrap_or_else(span);
                if to < from {
                    return Err(bad("to: not before from".to_string()));
                }
                let tracks = p.tracks("tracks", t)?;
                // The compared trace's timeline, held while the answer uses it.
                let other = match (p.get("base"), self.compare.as_deref()) {
                    (Some("compare"), Some(other)) => Some(other.built()?),
                    _ => None,
                };
                let base = self.base(&p, &tracks, t, other.as_deref())?;
                match endpoint {
                    TimelineEndpoint::Flame => {
                        flame(t, from, to, &tracks, base.as_ref(), &self.spill)
                    }
                    _ => selection(t, from, to, &tracks, base.as_ref()),
                }
            }
            TimelineEndpoint::HeapFlame => {
                let heap = (self.heap.as_deref()).map(|h| &h.trace).ok_or_else(|| {
                    bad("no heap: view the trace with --heap HEAP.ctf".to_string())
                })?;
                let from = p.time("from")?.unwrap_or(0);
                let to = p.time("to")?.unwrap_or_else(span);
                if to < from {
                    return Err(bad("to: not before from".to_string()));
                }
                let first = t.first_ns().unwrap_or(0);
                let micros = |ns: u64| heap::heap_micros(t, heap.info(), first.saturating_add(ns));
                let (Some(a), Some(b)) = (micros(from), micros(to)) else {
                    return Err(bad("the range is not on the heap's clock".to_string()));
                };
                // The range in the heap's time; ending before it began is an
                // empty range at its start.
                let (a, b) = (a.max(0), b.max(0));
                // What was allocated in the range, or what was live in it.
                let live = p.flag("live")?;
                let filter = match live {
                    true => "--live-between",
                    false => "--between",
                };
                let mut args = vec![filter.to_string(), format!("{a}us"), format!("{b}us")];
                // The selected threads' allocations, where their records
                // name their heap's domains (every thread's otherwise).
                let mut domains: Vec<u16> = match p.get("tracks") {
                    None => Vec::new(),
                    Some(_) => (p.tracks("tracks", t)?.iter())
                        .filter_map(|&i| t.tracks().get(i)?.heap_domain)
                        .collect(),
                };
                domains.sort_unstable();
                domains.dedup();
                for d in &domains {
                    args.extend(["--domain".to_string(), d.to_string()]);
                }
                let answer = crate::memtrace::flametree(heap, &args)
                    .map_err(|e| bad(format!("the heap's flame graph: {e}")))?;
                let domains = serde_json::to_string(&domains).unwrap_or_default();
                format!(
                    "{{\"from_us\":{a},\"to_us\":{b},\"live\":{live},\"domains\":{domains},\"tree\":{answer}}}"
                )
            }
            TimelineEndpoint::Search => {
                let text = p.get("text").unwrap_or_default();
                if text.is_empty() {
                    return Err(bad("text: what to search for".to_string()));
                }
                let after = p.get("after").map(position).transpose()?;
                let backward = p.flag("backward")?;
                search(t, text, after, backward)
            }
            TimelineEndpoint::Slices => to_json(
                &SlicesQuery {
                    between: p.between()?,
                    threads: p.numbers("thread")?,
                    name: p.get("name").map(str::to_string),
                    limit: p.limit(50)?,
                }
                .run(t),
                LAYOUT,
            ),
            TimelineEndpoint::Top => to_json(
                &TopQuery {
                    between: p.between()?,
                    threads: p.numbers("thread")?,
                    limit: p.limit(20)?,
                    ..TopQuery::default()
                }
                .run(t),
                LAYOUT,
            ),
        })
    }
}

impl TimelineTrace {
    /// The baseline `p` asks a range `from..to` of `tracks` to be compared
    /// with, if any (the module docs say how).
    /// `this` is the served timeline, `other` the compared one's when `p`
    /// asks for it.
    fn base<'a>(
        &self,
        p: &Checked<'_>,
        tracks: &[usize],
        this: &'a Timeline,
        other: Option<&'a Built>,
    ) -> Result<Option<Base<'a>>, Error> {
        let (timeline, default_tracks) =
            match p.get("base") {
                None => return Ok(None),
                Some("range") => {
                    let t = this;
                    if p.get("base_from").is_none() || p.get("base_to").is_none() {
                        return Err(bad(
                            "base=range: base_from and base_to say which".to_string()
                        ));
                    }
                    (t, Some(tracks.to_vec()))
                }
                Some("compare") => {
                    let other = other.ok_or_else(|| {
                    bad("base=compare: no trace to compare with (start the viewer with --compare)"
                        .to_string())
                })?;
                    (&other.timeline, None)
                }
                Some(other) => return Err(bad(format!("base={other}: range or compare"))),
            };
        // A range of this trace is given; the compared trace's is by default
        // the whole of it.
        let (from, to) = (
            p.time("base_from")?.unwrap_or(0),
            p.time("base_to")?.unwrap_or_else(|| span(timeline)),
        );
        if to < from {
            return Err(bad("base_to: not before base_from".to_string()));
        }
        let tracks = match (p.get("base_tracks"), default_tracks) {
            (None, Some(tracks)) => tracks,
            _ => p.tracks("base_tracks", timeline)?,
        };
        Ok(Some(Base {
            timeline,
            from,
            to,
            tracks,
        }))
    }
}

/// The span of `t`'s trace, nanoseconds, at least 1.
fn span(t: &Timeline) -> u64 {
    match (t.first_ns(), t.last_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a).max(1),
        _ => 1,
    }
}

/// The counts of a trace's records as `fxt stats --json` prints them.
pub fn stats_json(stats: &Stats) -> String {
    to_json(stats, LAYOUT)
}

fn bad(message: String) -> Error {
    Error::BadParameters(message)
}

/// A request's parameters, checked against its endpoint's.
struct Checked<'a>(&'a [(String, String)]);

impl<'a> Checked<'a> {
    fn check(endpoint: TimelineEndpoint, params: &'a [(String, String)]) -> Result<Self, Error> {
        let known = endpoint.parameters();
        for (name, _) in params {
            if !known.contains(&name.as_str()) {
                let names = match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                };
                return Err(bad(format!(
                    "unknown parameter {name:?}: this endpoint's parameters are {names}"
                )));
            }
        }
        Ok(Checked(params))
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> Result<Option<u64>, Error> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("{name}={v}: not a whole number")))
            })
            .transpose()
    }

    fn required(&self, name: &str) -> Result<usize, Error> {
        self.number(name)?
            .map(|n| n as usize)
            .ok_or_else(|| bad(format!("{name}: required")))
    }

    /// A time in nanoseconds from the trace's first time: a whole number of
    /// nanoseconds, or a time with its unit (`1.5ms`).
    fn time(&self, name: &str) -> Result<Option<u64>, Error> {
        self.get(name).map(|v| nanoseconds(name, v)).transpose()
    }

    fn numbers(&self, name: &str) -> Result<Vec<u64>, Error> {
        let mut out = Vec::new();
        for (n, v) in self.0 {
            if n == name {
                for part in v.split(',').filter(|p| !p.is_empty()) {
                    out.push(
                        part.parse()
                            .map_err(|_| bad(format!("{name}={v}: not a whole number")))?,
                    );
                }
            }
        }
        Ok(out)
    }

    fn flag(&self, name: &str) -> Result<bool, Error> {
        match self.get(name) {
            None | Some("false" | "0") => Ok(false),
            Some("" | "true" | "1") => Ok(true),
            Some(v) => Err(bad(format!(
                "{name}={v}: a flag is on given alone or as =true, off as =false"
            ))),
        }
    }

    /// The `limit` asked (`default` if none): 1 to [`MAX_ROWS`], so that
    /// an answer's size is bounded whatever the trace's.
    fn limit(&self, default: usize) -> Result<usize, Error> {
        match self.number("limit")? {
            None => Ok(default),
            Some(n) if (1..=MAX_ROWS as u64).contains(&n) => Ok(n as usize),
            Some(n) => Err(bad(format!("limit={n}: between 1 and {MAX_ROWS}"))),
        }
    }

    fn between(&self) -> Result<Option<(u64, u64)>, Error> {
        let Some(v) = self.get("between") else {
            return Ok(None);
        };
        let Some((a, b)) = v.split_once(',') else {
            return Err(bad(format!("between={v}: two times, as 1s,2s")));
        };
        let (a, b) = (nanoseconds("between", a)?, nanoseconds("between", b)?);
        if a > b {
            return Err(bad(format!("between={v}: the first is after the second")));
        }
        Ok(Some((a, b)))
    }

    /// The tracks the parameter `name` asks for (all of them when none are),
    /// each checked.
    /// A window's tracks (all without `tracks`), each with how many of its
    /// lanes, the outermost first, are drawn: `ID:LANES` for a folded track
    /// that shows its outer lanes alone (the inner ones, most of a deep
    /// track's slices, are not sent), `ID` for all.
    fn window_tracks(&self, t: &Timeline) -> Result<Vec<(usize, usize)>, Error> {
        self.asked_tracks("tracks", t, true)
    }

    fn tracks(&self, name: &str, t: &Timeline) -> Result<Vec<usize>, Error> {
        let asked = self.asked_tracks(name, t, false)?;
        Ok(asked.into_iter().map(|(i, _)| i).collect())
    }

    /// The tracks `name` asks for (all without it), each with its lane
    /// count: all its lanes, or with `lanes` as `ID:LANES` asks. A track
    /// asked twice is answered once, as first asked: its slices count once,
    /// and an answer is never larger than the whole trace's.
    fn asked_tracks(
        &self,
        name: &str,
        t: &Timeline,
        lanes: bool,
    ) -> Result<Vec<(usize, usize)>, Error> {
        let all = |i: usize| t.tracks().get(i).map_or(0, |tr| tr.lanes.len());
        let Some(v) = self.get(name) else {
            return Ok((0..t.tracks().len()).map(|i| (i, all(i))).collect());
        };
        let what = match lanes {
            true => "a track or TRACK:LANES",
            false => "a track",
        };
        let mut asked = vec![false; t.tracks().len()];
        let mut out = Vec::new();
        for part in v.split(',').filter(|p| !p.is_empty()) {
            let not = || bad(format!("{name}={v}: {part} is not {what}"));
            let (id, count) = match part.split_once(':') {
                Some((id, count)) if lanes => (id, Some(count)),
                _ => (part, None),
            };
            let i = (id.parse::<usize>().ok())
                .filter(|&i| i < t.tracks().len())
                .ok_or_else(not)?;
            let count = match count {
                Some(n) => n.parse::<usize>().map_err(|_| not())?.min(all(i)),
                None => all(i),
            };
            if !std::mem::replace(&mut asked[i], true) {
                out.push((i, count));
            }
        }
        Ok(out)
    }
}

fn nanoseconds(name: &str, v: &str) -> Result<u64, Error> {
    if let Ok(n) = v.parse::<u64>() {
        return Ok(n);
    }
    tracekit_analysis::parse_time_ns(v).map_err(|e| bad(format!("{name}={v}: {e}")))
}

fn position(v: &str) -> Result<Position, Error> {
    let mut parts = v.split(',').map(str::parse::<usize>);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Ok(track)), Some(Ok(lane)), Some(Ok(index)), None) => {
            Ok(Position { track, lane, index })
        }
        _ => Err(bad(format!("after={v}: track,lane,index"))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
