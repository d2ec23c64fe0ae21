//! `tracekit view` (and `tracekit memtrace view`): serves a trace to a
//! browser. A memtrace trace is served with its analyses; an FXT trace, a
//! perf.data file or `perf script` text as a timeline of slices (perf data
//! decoded into FXT first, into an unnamed temporary file), its URL printed
//! before the timeline is built.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use clap::Args;
use tracekit_cache::{Origin, TablesCache, TraceKey};
use tracekit_columns::{Spill, TraceBytes};
use tracekit_io::input::{Bytes, Family, Kind};
use tracekit_timeline::Timeline;
use tracekit_timeline::open::build_timeline_releasing;
use tracekit_view::timeline::{Build, Joining};
use tracekit_view::{Decoder, Served, TimelineTrace, Trace, Viewer};

use crate::common::input;
use crate::common::output;
use crate::common::progress_spinner;

/// Options of `view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// The trace: memtrace, FXT, perf.data or `perf script` text.
    file: PathBuf,
    /// A trace of the same kind to compare with (the baseline): for memtrace, the
    /// Compare table and the differential flame graph (as `memtrace diff OTHER FILE`
    /// and `memtrace flamegraph --diff OTHER FILE`); for timelines, a range's
    /// figures and flame graph against the same range of OTHER (as `fxt top
    /// --diff OTHER FILE` for the whole trace).
    #[arg(long, value_name = "OTHER")]
    compare: Option<PathBuf>,
    /// For an FXT trace of a program's spans (tracekit-tracing), the memtrace
    /// trace of its heap (tracekit-alloc, the same run): its live heap becomes a
    /// counter track of the process, on the spans' clock, and a range has a heap
    /// flame graph of what was allocated in it.
    #[arg(long, value_name = "HEAP.ctf")]
    heap: Option<PathBuf>,
    /// With --heap, also a counter per thread of what it allocated that is still
    /// live, for the threads whose records name their heap (tracekit-tracing with
    /// tracekit-alloc's heap tracing on).
    #[arg(long, requires = "heap")]
    heap_by_thread: bool,
    /// Follow a trace a program is still writing (FXT from the tracing layer,
    /// memtrace from tracekit-alloc or OCaml's memtrace): the page grows as the
    /// program writes, until it closes the file. Waits for the file to be made,
    /// and for its first bytes while it is empty.
    #[arg(long, conflicts_with_all = ["compare", "heap"])]
    follow: bool,
    /// Port to listen on (default: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on. Anything but a loopback address lets other machines read
    /// the trace.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Open the page in the default browser.
    #[arg(long)]
    open: bool,
    /// Do not keep the trace's tables between runs (by default they are kept
    /// under `$XDG_CACHE_HOME/tracekit/tables`, so that viewing the trace again
    /// does not decode it again).
    #[arg(long)]
    no_cache: bool,
}

impl ViewArgs {
    /// Serves `file` on a free loopback port and opens the page.
    pub fn opening(file: PathBuf) -> ViewArgs {
        ViewArgs {
            file,
            compare: None,
            heap: None,
            heap_by_thread: false,
            follow: false,
            port: 0,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            open: true,
            no_cache: false,
        }
    }
}

/// Reads a trace for serving (its bytes from `read`); its answers name it as
/// the command line did. Its tables are kept in `cache`, if any.
fn load(
    path: &Path,
    read: impl FnOnce() -> tracekit_io::Result<TraceBytes>,
    cache: Option<&TablesCache>,
) -> Result<Trace> {
    let name = input::display(path);
    let spinner = progress_spinner(&format!("reading {name}"), true, false);
    let trace = Trace::new(name.clone(), read()?);
    spinner.finish_and_clear();
    let trace = trace.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(match cache {
        None => trace,
        Some(cache) => {
            let kept = cache.tables_likely_kept(path);
            // Built rather than read back, the tables grow their columns in the
            // cache folder: so do the passes that answer meanwhile, and later
            // the queries' passes over the tables.
            let spill = cache.spill();
            let (cache, path) = (cache.clone(), path.to_path_buf());
            let decoder: Decoder = Box::new(move |bytes, progress| {
                let (tables, origin) = cache.tables(&path, bytes, progress)?;
                tell_origin("tables are", &origin);
                Some(tables)
            });
            trace.decoded_by(decoder, kept).spilling(spill)
        }
    })
}

/// A timeline of an FXT trace (or of perf data, decoded first) served
/// before it is built: its build, from `bytes` of `kind` with progress or
/// read back from `cache`, runs beside the serving; its answers name it as
/// the command line did. A build that fails says why and stops the server,
/// and `failed` is set.
fn load_timeline(
    path: &Path,
    bytes: Bytes,
    kind: Kind,
    cache: Option<TablesCache>,
    failed: Arc<AtomicBool>,
) -> TimelineTrace {
    let name = input::display(path);
    let total = bytes.len() as u64;
    // Built to be kept, the lanes grow in files of the cache folder, and so
    // does a range's flame graph, which grows with the range's distinct paths.
    let spill = cache
        .as_ref()
        .map_or_else(Spill::memory, TablesCache::spill);
    let (path, shown) = (path.to_path_buf(), name.clone());
    let lanes = spill.clone();
    let build: Build = Box::new(move |told| {
        let built = build_timeline(&path, &shown, bytes, kind, cache.as_ref(), &lanes, told);
        built.map_err(|e| {
            let why = format!("{e:#}");
            eprintln!("error: {why}");
            failed.store(true, Ordering::Relaxed);
            output::stop_on_interrupt().store(true, Ordering::Relaxed);
            why
        })
    });
    TimelineTrace::building(name, total, build).spilling(spill)
}

/// Tells how the heap `path` joined the timeline named `name`; a join that
/// failed says why, sets `failed` and stops the server (its build fails).
fn tell_joined(path: &Path, name: &str, by_thread: bool, failed: Arc<AtomicBool>) -> Joining {
    let shown = input::display(path);
    let name = name.to_string();
    Box::new(move |joined| match joined {
        Ok(joined) => {
            let threads = match (by_thread, joined.threads) {
                (false, _) => String::new(),
                (true, 0) => "; no thread names its heap, so no thread has a counter".to_string(),
                (true, n) => format!(", and {n} threads' own"),
            };
            output::tell(format!(
                "{shown}: the live heap joined as a counter ({} samples, peak {} bytes){threads}",
                joined.samples, joined.peak_bytes
            ));
        }
        Err(e) => {
            eprintln!("error: --heap {shown} with {name}: {e}");
            failed.store(true, Ordering::Relaxed);
            output::stop_on_interrupt().store(true, Ordering::Relaxed);
        }
    })
}

/// Builds the timeline of `bytes` (of `kind`, from `path`, named `name`), its
/// lanes grown where `spill` says, or reads it back from `cache`, telling
/// `told` how much of the trace it has read.
fn build_timeline(
    path: &Path,
    name: &str,
    bytes: Bytes,
    kind: Kind,
    cache: Option<&TablesCache>,
    spill: &Spill,
    told: &dyn Fn(u64),
) -> Result<(Timeline, String)> {
    // The cache's key is read from the bytes already open, not from the file again.
    let key = cache.and_then(|_| TraceKey::of_bytes(path, &bytes));
    // The key read every page: let them go (a build pages them in again).
    bytes.release(0..bytes.len());
    let build = || -> Result<(Timeline, String)> {
        let quiet = crate::common::quiet();
        let bytes = match kind {
            Kind::Fxt => bytes,
            _ => {
                let decoded = crate::perf::decode_for_view(path, bytes, kind, quiet, spill)?;
                // Naming the recording's addresses read its objects' debug
                // information, since let go: given back before the build.
                tracekit_columns::huge::give_back();
                decoded
            }
        };
        let bar = crate::common::progress_bar(bytes.len() as u64, "building the timeline", quiet);
        let progress = &mut |pos| {
            bar.set_position(pos);
            told(pos);
        };
        let built =
            build_timeline_releasing(&bytes, true, spill, progress, &mut |r| bytes.release(r));
        bar.finish_and_clear();
        let stats = tracekit_view::timeline::stats_json(&built.stats.unwrap_or_default());
        if built.unkept_warnings > 0 {
            eprintln!("warning: {name}: {} more warnings", built.unkept_warnings);
        }
        Ok((built.timeline, stats))
    };
    let (timeline, stats) = match cache {
        None => build()?,
        Some(cache) => {
            let (timeline, stats, origin) = cache.timeline_keyed(path, key, build)?;
            tell_origin("timeline is", &origin);
            (timeline, stats)
        }
    };
    for w in timeline.warnings() {
        eprintln!("warning: {name}: {w}");
    }
    if let Some(e) = timeline.error() {
        eprintln!(
            "warning: {name}: {e}; the timeline shows the {} records before it",
            timeline.records()
        );
    }
    Ok((timeline, stats))
}

/// Says where the cache found what it was asked for (`what`: "tables are" or
/// "timeline is").
fn tell_origin(what: &str, origin: &Origin) {
    output::tell(origin.note(what));
}

/// Runs `view`.
pub fn run(args: ViewArgs) -> Result<ExitCode> {
    if input::is_stdin(&args.file) {
        anyhow::bail!("tracekit view reads a file, not standard input");
    }
    if args.follow {
        return follow(&args);
    }
    // Read once: its kind is told from the bytes read.
    let (bytes, kind) = input::read_all_sniffed(&args.file, Family::View)?;
    let cache = (!args.no_cache).then(TablesCache::user).flatten();
    if kind != Kind::Memtrace {
        let failed = Arc::new(AtomicBool::new(false));
        let compare = match &args.compare {
            None => None,
            Some(other) => {
                let (bytes, other_kind) = input::read_all_sniffed(other, Family::View)?;
                if other_kind == Kind::Memtrace {
                    anyhow::bail!(
                        "--compare: {} is a memtrace trace and {} a timeline; a trace is compared with one of its kind",
                        input::display(other),
                        input::display(&args.file)
                    );
                }
                let c = cache.clone();
                Some(load_timeline(
                    other,
                    bytes,
                    other_kind,
                    c,
                    Arc::clone(&failed),
                ))
            }
        };
        // Read now, so that a heap that cannot be read stops before serving;
        // its tables (kept in the cache) answer the join and the range's heap
        // flame graphs.
        let heap = match &args.heap {
            None => None,
            Some(p) => Some((
                p.clone(),
                load(p, || tracekit_io::memtrace::trace_bytes(p), cache.as_ref())?,
            )),
        };
        let timeline = load_timeline(&args.file, bytes, kind, cache, Arc::clone(&failed));
        let timeline = match compare {
            Some(other) => timeline.compared_with(other),
            None => timeline,
        };
        let timeline = match heap {
            Some((p, h)) => {
                let name = timeline.name().to_string();
                let told = tell_joined(&p, &name, args.heap_by_thread, Arc::clone(&failed));
                timeline.with_heap(h, args.heap_by_thread, told)
            }
            None => timeline,
        };
        let name = timeline.name().to_string();
        serve(&args, &name, Served::timeline(timeline))?;
        return Ok(match failed.load(Ordering::Relaxed) {
            true => ExitCode::FAILURE,
            false => ExitCode::SUCCESS,
        });
    }
    if args.heap.is_some() {
        anyhow::bail!(
            "--heap joins a memtrace trace to the FXT trace of the same program's spans; {} is a memtrace trace",
            input::display(&args.file)
        );
    }
    let shared = || Ok(tracekit_io::memtrace::shared(bytes));
    let trace = load(&args.file, shared, cache.as_ref())?;
    let compare = args
        .compare
        .as_deref()
        .map(|p| load(p, || tracekit_io::memtrace::trace_bytes(p), cache.as_ref()))
        .transpose()?;
    let name = trace.name().to_string();
    serve(&args, &name, Served::new(trace, compare))
}

/// A wait for a followed file, said once; Ctrl-C ends it.
#[derive(Default)]
struct Waiting {
    told: bool,
}

impl Waiting {
    /// Whether Ctrl-C stopped the wait (said so); else says `what` the first
    /// time.
    fn stopped(&mut self, what: impl FnOnce() -> String) -> bool {
        if output::stop_on_interrupt().load(Ordering::Relaxed) {
            output::tell("stopped");
            return true;
        }
        if !self.told {
            output::tell(what());
            self.told = true;
        }
        false
    }
}

/// Serves the trace a program writes to `args.file` as it grows
/// (`--follow`): an FXT trace's timeline, or a memtrace trace's analyses. Its
/// kind is told from its first bytes, waited for while the file is empty. A
/// file not made yet, in a folder that is there, is waited for too: the
/// command may be started before the program it watches.
fn follow(args: &ViewArgs) -> Result<ExitCode> {
    let name = input::display(&args.file);
    let mut waiting = Waiting::default();
    let mut tail = loop {
        let e = match tracekit_io::follow::Tail::open(&args.file) {
            Ok(tail) => break tail,
            Err(e) => e,
        };
        let missing = matches!(&e, tracekit_io::Error::Open { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound);
        let folder = args.file.parent().filter(|p| !p.as_os_str().is_empty());
        if !missing || folder.is_some_and(|f| !f.is_dir()) {
            return Err(e.into());
        }
        if waiting.stopped(|| format!("waiting for {name} to be made (Ctrl-C stops)")) {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut waiting = Waiting::default();
    let first = loop {
        let first = tail.head(64).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        if first.len() >= 8 || tail.is_ended() {
            break first;
        }
        if waiting.stopped(|| format!("waiting for {name}'s first bytes (Ctrl-C stops)")) {
            return Ok(ExitCode::SUCCESS);
        }
        tail.wait(std::time::Duration::from_millis(100));
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let kind = match input::sniff(&first) {
        Kind::Empty => anyhow::bail!("--follow: {name} is empty and no program writes it"),
        Kind::Memtrace => Kind::Memtrace,
        kind => {
            input::expect(Family::Fxt, kind, &name)?;
            Kind::Fxt
        }
    };
    if tail.is_ended() {
        output::tell(format!("{name}: no program writes it; served as it is"));
    }
    let failed = Arc::new(AtomicBool::new(false));
    let why = Arc::clone(&failed);
    let refused = Box::new(move |e: &str| {
        eprintln!("error: {e}");
        why.store(true, Ordering::Relaxed);
        output::stop_on_interrupt().store(true, Ordering::Relaxed);
    });
    let served = match kind {
        Kind::Memtrace => Served::of(tracekit_view::Memtrace::following(
            name.clone(),
            tail,
            refused,
        )),
        _ => Served::timeline(TimelineTrace::following(name.clone(), tail, refused)),
    };
    serve(args, &name, served)?;
    Ok(match failed.load(Ordering::Relaxed) {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

/// Serves `served` (named `name`) until Ctrl-C.
fn serve(args: &ViewArgs, name: &str, served: Served) -> Result<ExitCode> {
    if !args.bind.is_loopback() {
        eprintln!(
            "warning: listening on {}: other machines that reach it can read the trace",
            args.bind
        );
    }
    let viewer = Viewer::bind(SocketAddr::new(args.bind, args.port))?;
    // From here on Ctrl-C stops the server, which then says so: a Ctrl-C that
    // came between the browser's warning and the server's start would otherwise
    // take the path of commands that write files.
    let stop = output::stop_on_interrupt();
    let url = viewer.url();
    output::print(&format!("serving {name} at {url} (Ctrl-C stops)\n"))?;
    if args.open {
        let shown = url.clone();
        let warn =
            move |why: String| output::tell(format_args!("warning: {why}; open {shown} yourself"));
        tracekit_view::browser::open(&url, warn);
    }
    viewer
        .serve(Arc::new(served), stop)
        .map_err(|e| anyhow::anyhow!("cannot serve: {e}"))?;
    output::tell("stopped");
    Ok(ExitCode::SUCCESS)
}
