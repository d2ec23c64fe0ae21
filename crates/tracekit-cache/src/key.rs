//! The key of a trace: what a cache file must start with to be the file of
//! that trace as it is now. It names the trace by its canonical path, and
//! tells a changed trace by its size, its modification time and a hash of its
//! first and last [`ENDS`] bytes (a trace rewritten within one tick of the
//! clock, at one size, still differs there: its header holds its start time).
//!
//! The hash is of the bytes, so it is the same whether they are read from the
//! trace already open ([`TraceKey::of_bytes`]) or from the file
//! ([`TraceKey::of_file`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracekit_columns::fnv::{self, fnv1a};

/// Bytes hashed at each end of a trace for its key.
pub const ENDS: usize = 64 << 10;

/// What tells a trace and its version apart (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKey {
    path: PathBuf,
    len: u64,
    mtime_ns: u128,
    ends: u64,
}

impl TraceKey {
    /// The key of the trace at the canonical path `path`, of `len` bytes,
    /// modified at `modified`, whose first and last [`ENDS`] bytes are
    /// `head` and `tail` (overlapping for a trace under twice that size).
    pub fn new(
        path: PathBuf,
        len: u64,
        modified: SystemTime,
        head: &[u8],
        tail: &[u8],
    ) -> TraceKey {
        let mtime_ns = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        TraceKey {
            path,
            len,
            mtime_ns,
            ends: fnv1a(tail, fnv1a(head, fnv::START)),
        }
    }

    /// The key of the trace at `path` whose bytes, already open, are `bytes`;
    /// `None` when the file cannot be named or its size is no longer theirs.
    pub fn of_bytes(path: &Path, bytes: &[u8]) -> Option<TraceKey> {
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        if meta.len() != bytes.len() as u64 {
            return None;
        }
        let head = &bytes[..bytes.len().min(ENDS)];
        let tail = &bytes[bytes.len().saturating_sub(ENDS)..];
        Some(TraceKey::new(
            path,
            meta.len(),
            meta.modified().ok()?,
            head,
            tail,
        ))
    }

    /// The key of the trace at `path`, reading only its ends; `None` when
    /// the file cannot be named or read.
    pub fn of_file(path: &Path) -> Option<TraceKey> {
        use std::io::{Read, Seek, SeekFrom};
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        let mut f = std::fs::File::open(&path).ok()?;
        let mut head = Vec::with_capacity(ENDS);
        (&mut f).take(ENDS as u64).read_to_end(&mut head).ok()?;
        let mut tail = Vec::with_capacity(ENDS);
        f.seek(SeekFrom::Start(meta.len().saturating_sub(ENDS as u64)))
            .ok()?;
        f.take(ENDS as u64).read_to_end(&mut tail).ok()?;
        Some(TraceKey::new(
            path,
            meta.len(),
            meta.modified().ok()?,
            &head,
            &tail,
        ))
    }

    /// The bytes a cache file of kind `kind` of this trace starts with,
    /// NULs after them to a multiple of 8 (so that what follows can be read
    /// in place from the mapped file).
    pub fn text(&self, kind: &str) -> Vec<u8> {
        let mut key = format!(
            "tracekit {} {kind}\0{}\0{}\0{}\0{:016x}\0",
            env!("CARGO_PKG_VERSION"),
            self.path.display(),
            self.len,
            self.mtime_ns,
            self.ends
        );
        while !key.len().is_multiple_of(8) {
            key.push('\0');
        }
        key.into_bytes()
    }

    /// The name of the cache file of kind `kind` of this trace.
    pub fn file_name(&self, kind: &str) -> String {
        let h = fnv1a(self.path.as_os_str().as_encoded_bytes(), fnv::START);
        format!("{h:016x}.{kind}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_from_the_open_bytes_is_the_key_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 10, ENDS - 1, ENDS + 7, 3 * ENDS + 5] {
            let path = dir.path().join(format!("t{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            let from_file = TraceKey::of_file(&path).unwrap();
            assert_eq!(TraceKey::of_bytes(&path, &bytes), Some(from_file.clone()));
            // Changed in its middle only, past both ends: the same key (what
            // the ends and the size and time do not see).
            if len > 2 * ENDS {
                let mut other = bytes.clone();
                other[len / 2] ^= 1;
                assert_eq!(TraceKey::of_bytes(&path, &other), Some(from_file.clone()));
            }
            // Changed at an end: another key.
            if len > 0 {
                let mut other = bytes.clone();
                other[len - 1] ^= 1;
                assert_ne!(TraceKey::of_bytes(&path, &other), Some(from_file));
            }
        }
        // Bytes that are not the file's size: no key.
        let path = dir.path().join("t10");
        assert_eq!(TraceKey::of_bytes(&path, b"short"), None);
    }

    #[test]
    fn the_key_text_is_padded_and_names_the_kind() {
        let key = TraceKey::new(
            PathBuf::from("/t.ctf"),
            3,
            SystemTime::UNIX_EPOCH,
            b"abc",
            b"abc",
        );
        let text = key.text("tables");
        assert_eq!(text.len() % 8, 0);
        let h = fnv1a(b"abc", fnv1a(b"abc", fnv::START));
        let want = format!(
            "tracekit {} tables\0/t.ctf\x003\x000\0{h:016x}\0",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.starts_with(want.as_bytes()));
        assert!(text[want.len()..].iter().all(|&b| b == 0));
        assert_eq!(
            key.file_name("timeline"),
            format!("{:016x}.timeline", fnv1a(b"/t.ctf", fnv::START))
        );
    }
}
