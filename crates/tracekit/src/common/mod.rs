//! Helpers shared by the subcommand families: output that tolerates a closed
//! pipe, and progress bars that appear only where they help.

use std::io::{self, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

/// Inputs at least this large get a progress bar (when stderr is a terminal).
pub const PROGRESS_THRESHOLD_BYTES: u64 = 50 * 1024 * 1024;

/// A byte-position progress bar on stderr for work over an input of
/// `total_bytes`, or a hidden one when the input is small or stderr is not a
/// terminal.
pub fn progress_bar(total_bytes: u64, what: &str) -> ProgressBar {
    if total_bytes < PROGRESS_THRESHOLD_BYTES || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total_bytes);
    let style =
        ProgressStyle::with_template("{msg} [{wide_bar}] {bytes}/{total_bytes} ({eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// Whether `err` means the reader of our output went away (`| head`), which
/// is a normal way to stop.
pub fn is_broken_pipe(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::BrokenPipe
}

/// Buffered standard output.
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

/// Flushes `out`, treating a closed pipe as success.
pub fn finish_output(out: &mut impl Write) -> io::Result<()> {
    match out.flush() {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        r => r,
    }
}
