//! Re-encoding a trace: every event of a [`Reader`] through
//! [`MultiplexedDomains`], as memtrace's own `copy` test program does. The
//! reference writer is deterministic, so copying a trace that the reference
//! writer produced yields the reference's bytes.

use std::io::Write;

use crate::error::{ReadError, Warning, WriteError};
use crate::read::Reader;
use crate::write::{MultiplexedDomains, WriterOptions};

/// Why a copy failed.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The input trace is malformed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the output failed (or the output format cannot express the input).
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Copies every event of `reader` into a new trace written to `out` with the
/// same [`Info`](crate::Info), and returns `out` and the warnings about
/// skipped input packets.
pub fn copy_trace<W: Write>(
    reader: &mut Reader<'_>,
    out: W,
    options: WriterOptions,
) -> Result<(W, Vec<Warning>), CopyError> {
    let info = reader.info().clone();
    let mut writer = MultiplexedDomains::with_options(out, &info, options)?;
    let mut events = reader.events(true);
    while let Some(item) = events.next_event_with_locations() {
        let (dt, event, table) = item?;
        writer.put_event(
            |code| table.get(code).unwrap_or(&[]),
            info.start_time.offset(dt),
            &event,
        )?;
    }
    let warnings = events.take_warnings();
    writer.flush()?;
    Ok((writer.into_inner()?, warnings))
}
