//! `tracekit memtrace view`: serves a trace's analyses to a browser.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use tracekit_io::tables_cache::{Origin, TablesCache};
use tracekit_view::{Served, Trace, Viewer};

use crate::common::input;
use crate::common::output;
use crate::common::progress_spinner;

/// Options of `memtrace view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// The trace.
    file: PathBuf,
    /// Another trace to compare with (the "Compare" view, as `memtrace diff OTHER FILE`).
    #[arg(long, value_name = "OTHER")]
    compare: Option<PathBuf>,
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

/// Reads a trace for serving; its answers name it as the command line did.
/// Its tables are kept in `cache`, if any.
fn load(path: &Path, cache: Option<&TablesCache>) -> Result<Trace> {
    let name = input::display(path);
    let spinner = progress_spinner(&format!("reading {name}"), true, false);
    let trace = Trace::new(name.clone(), tracekit_io::memtrace::trace_bytes(path)?);
    spinner.finish_and_clear();
    let trace = trace.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(match cache {
        None => trace,
        Some(cache) => {
            let (cache, path) = (cache.clone(), path.to_path_buf());
            trace.decoded_by(Box::new(move |bytes, progress| {
                let (tables, origin) = cache.tables(&path, bytes, progress)?;
                match origin {
                    Origin::Built(file, bytes) => output::tell(format_args!(
                        "note: the trace's tables are kept in {} ({:.1} MB; --no-cache keeps none)",
                        file.display(),
                        bytes as f64 / 1e6
                    )),
                    Origin::NotKept(why) => {
                        output::tell(format_args!("note: the trace's tables are not kept: {why}"))
                    }
                    Origin::Cached(file) => output::tell(format_args!(
                        "note: the trace's tables are read back from {}",
                        file.display()
                    )),
                }
                Some(tables)
            }))
        }
    })
}

/// Runs `memtrace view`.
pub fn run(args: ViewArgs) -> Result<ExitCode> {
    let cache = (!args.no_cache).then(TablesCache::user).flatten();
    let trace = load(&args.file, cache.as_ref())?;
    let compare = args
        .compare
        .as_deref()
        .map(|p| load(p, cache.as_ref()))
        .transpose()?;
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
    output::print(&format!(
        "serving {} at {url} (Ctrl-C stops)\n",
        trace.name()
    ))?;
    if args.open {
        let shown = url.clone();
        let warn =
            move |why: String| output::tell(format_args!("warning: {why}; open {shown} yourself"));
        tracekit_view::browser::open(&url, warn);
    }
    viewer
        .serve(Arc::new(Served::new(trace, compare)), stop)
        .map_err(|e| anyhow::anyhow!("cannot serve: {e}"))?;
    output::tell("stopped");
    Ok(ExitCode::SUCCESS)
}
