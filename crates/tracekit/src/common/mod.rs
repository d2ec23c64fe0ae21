//! What the subcommand families share: inputs ([`input`]), outputs ([`output`]),
//! progress on the terminal, `-q`, and how sizes are shown.

pub use tracekit_io::output::{quiet, say};
pub use tracekit_io::{input, names, output};

use std::io::{self, IsTerminal, Write};

use tracekit_fxt::io::FinishError;
use tracekit_io::output::Stdout;

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// Work over an input at least this large shows progress (when stderr is a
/// terminal); smaller inputs finish before a bar would be read.
pub const PROGRESS_THRESHOLD_BYTES: u64 = 32 * 1024 * 1024;

/// The one progress style: a bar over the input's bytes, for every long job.
/// Hidden when the input is small, stderr is not a terminal, or `quiet` (or `-q`).
pub fn progress_bar(total_bytes: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet
        || self::quiet()
        || total_bytes < PROGRESS_THRESHOLD_BYTES
        || !io::stderr().is_terminal()
    {
        return ProgressBar::hidden();
    }
    // Cleared when dropped: an error or an early return leaves no bar behind.
    let bar = ProgressBar::new(total_bytes).with_finish(ProgressFinish::AndClear);
    let style = ProgressStyle::with_template(
        "{msg:>12} [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// The same style for work whose size is not known upfront (standard input, a
/// child's output, a pass after the reading): bytes so far, or a ticking clock.
/// Hidden when `show` is false (the job is small), stderr is not a terminal, or
/// `quiet` (or `-q`).
pub fn progress_spinner(what: &str, show: bool, quiet: bool) -> ProgressBar {
    if quiet || output::quiet() || !show || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear);
    let style = ProgressStyle::with_template("{msg:>12} {spinner} {bytes} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// [`progress_spinner`] over whole input `files`, for work that reports no
/// position within a file: shown when they add up to [`PROGRESS_THRESHOLD_BYTES`];
/// with each file's size, to move the bar by as it is done.
pub fn files_spinner(files: &[std::path::PathBuf], what: &str) -> (ProgressBar, Vec<u64>) {
    let sizes: Vec<u64> = (files.iter())
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .collect();
    let total = sizes.iter().sum::<u64>();
    let bar = progress_spinner(what, total >= PROGRESS_THRESHOLD_BYTES, false);
    (bar, sizes)
}

/// Writes `value` as pretty JSON (and a newline) to standard output.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = Stdout::new();
    serde_json::to_writer_pretty(&mut out, value).map_err(io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(out.finish()?)
}

/// Prints an answer: its JSON `value` (pretty) when `json`, else its `text`.
pub fn print_answer<J: serde::Serialize>(
    json: bool,
    value: impl FnOnce() -> J,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    match json {
        true => print_json(&value()),
        false => Ok(output::print(&text())?),
    }
}

/// The error of an FXT writer over an output file: the I/O error (which names
/// the file) when there is one, else the writer's own.
pub fn fxt_write_error(path: &std::path::Path, e: FinishError) -> anyhow::Error {
    match e {
        FinishError::Io(io) => anyhow::Error::new(io),
        FinishError::Write(e) => anyhow::anyhow!("writing {}: {e}", path.display()),
    }
}

/// Whether `err` (or what caused it) is a write to a closed pipe: the reader of
/// our output went away (`| head`), which is a normal way to stop.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<tracekit_io::Error>()
                .is_some_and(tracekit_io::Error::is_broken_pipe)
            || e.downcast_ref::<tracekit_perf::Error>()
                .is_some_and(tracekit_perf::Error::is_broken_pipe)
    })
}
