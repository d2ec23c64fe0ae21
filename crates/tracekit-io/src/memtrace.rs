//! Memtrace traces opened from a path: a file read whole (mapped when large, its
//! pages releasable as a pass goes), standard input read into memory (analyses
//! read a trace more than once) or streamed, and the errors of a trace whose
//! trace-info packet cannot be read, naming it.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use tracekit_columns::TraceBytes;
use tracekit_memtrace::{OpenError, Reader, StreamReader};

use crate::input::{self, Family, Peeked};
use crate::{Error, Result};

/// Opens the trace at `path` (`-`: standard input, read into memory) after
/// checking that it is one; with the reader's bytes when they are a file's, shared
/// so that the pages a pass has read can be released as it goes.
pub fn open(path: &Path) -> Result<(Reader<'static>, Option<TraceBytes>)> {
    if input::is_stdin(path) {
        let reader = Reader::from_read(input::open_stream(path, Family::Memtrace)?);
        return Ok((reader.map_err(|e| open_error(path, e))?, None));
    }
    // `trace_bytes` checks the kind on the first bytes; a large file is mapped,
    // not read, before that.
    let bytes = trace_bytes(path)?;
    let reader =
        Reader::from_owner(bytes.clone()).map_err(|e| open_error(path, OpenError::from(e)))?;
    Ok((reader, Some(bytes)))
}

/// The bytes of the memtrace trace at `path`, mapped when the file is large;
/// a mapped file's pages are released as a pass over them goes.
pub fn trace_bytes(path: &Path) -> Result<TraceBytes> {
    Ok(shared(input::read_all(path, Family::Memtrace)?))
}

/// A memtrace trace's `bytes`, already read, shared; a mapped file's pages are
/// released as a pass over them goes.
pub fn shared(bytes: input::Bytes) -> TraceBytes {
    let bytes = Arc::new(bytes);
    let pages = Arc::clone(&bytes);
    TraceBytes::from_shared(bytes).on_release(move |range| pages.release(range))
}

/// A streaming reader of the trace at `path` (`-`: standard input), a packet at a
/// time; `flush` wraps the input (to flush an output before each read).
pub fn open_stream<R: Read>(
    path: &Path,
    flush: impl FnOnce(Peeked<Box<dyn Read + Send>>) -> R,
) -> Result<StreamReader<R>> {
    let stream = flush(input::open_stream(path, Family::Memtrace)?);
    StreamReader::new(stream, true).map_err(|e| open_error(path, e))
}

/// The error of the trace at `path` whose trace-info packet cannot be read.
pub fn open_error(path: &Path, e: OpenError) -> Error {
    let name = input::display(path);
    match e {
        OpenError::Io(source) => Error::Read { name, source },
        OpenError::Malformed(e) => Error::Damaged {
            name,
            what: format!("damaged trace-info packet: {e}"),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_trace_info_packet_is_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.ctf");
        // A CTF packet's magic, then nothing a trace-info packet needs.
        std::fs::write(&path, b"\xc1\x1f\xfc\xc1\0\0\0\0").unwrap();
        let e = open(&path).err().unwrap();
        let text = e.to_string();
        assert!(
            text.contains("bad.ctf: damaged trace-info packet: "),
            "{text}"
        );
        assert!(std::error::Error::source(&e).is_none());
        let e = open(&dir.path().join("missing.ctf")).err().unwrap();
        assert!(e.to_string().starts_with("cannot open "), "{e}");
    }
}
