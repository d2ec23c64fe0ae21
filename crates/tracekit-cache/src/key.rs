//! The key of a trace: what a cache file must start with to be the file of
//! that trace as it is now. It names the trace by its canonical path, and
//! tells a changed trace by its size, its modification time and the CRC-32
//! of all its bytes: a trace rewritten in place, at one size and within one
//! tick of the clock, or changed only in its middle, is another trace.
//!
//! The checksum is of the bytes, so it is the same whether they are read from
//! the trace already open ([`TraceKey::of_bytes`]) or from the file
//! ([`TraceKey::of_file`]). It reads the whole trace once per start.

use crate::Kind;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracekit_columns::fnv::{self, fnv1a};

/// What tells a trace and its version apart (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKey {
    path: PathBuf,
    len: u64,
    mtime_ns: u128,
    crc: u32,
}

impl TraceKey {
    /// The key of the trace at the canonical path `path`, of `len` bytes,
    /// modified at `modified`, whose bytes' CRC-32 is `crc`.
    pub fn new(path: PathBuf, len: u64, modified: SystemTime, crc: u32) -> TraceKey {
        let mtime_ns = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        TraceKey {
            path,
            len,
            mtime_ns,
            crc,
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
        let mut crc = crc32fast::Hasher::new();
        crc.update(bytes);
        let modified = meta.modified().ok()?;
        Some(TraceKey::new(path, meta.len(), modified, crc.finalize()))
    }

    /// The key of the trace at `path`, read from its file; `None` when the
    /// file cannot be named or read.
    pub fn of_file(path: &Path) -> Option<TraceKey> {
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        let mut f = std::fs::File::open(&path).ok()?;
        let mut crc = crc32fast::Hasher::new();
        let mut buf = vec![0; 1 << 20];
        let mut len = 0u64;
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    crc.update(&buf[..n]);
                    len += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        // Read while it changed size: no key it could be kept under.
        if len != meta.len() {
            return None;
        }
        let modified = meta.modified().ok()?;
        Some(TraceKey::new(path, len, modified, crc.finalize()))
    }

    /// The bytes a cache file of kind `kind` of this trace starts with,
    /// NULs after them to a multiple of 8 (so that what follows can be read
    /// in place from the mapped file).
    pub fn text(&self, kind: Kind) -> Vec<u8> {
        let mut key = format!(
            "tracekit {} {} {}\0{}\0{}\0{}\0crc32 {:08x}\0",
            env!("CARGO_PKG_VERSION"),
            kind.ext,
            kind.version,
            self.path.display(),
            self.len,
            self.mtime_ns,
            self.crc
        );
        while !key.len().is_multiple_of(8) {
            key.push('\0');
        }
        key.into_bytes()
    }

    /// The key's text up to the trace's CRC-32, as a file kept for the trace
    /// at `path` as its size and modification time are now would begin (so
    /// found without reading the trace); `None` when the file cannot be
    /// named.
    pub fn text_before_crc(path: &Path, kind: Kind) -> Option<(String, Vec<u8>)> {
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        let key = TraceKey::new(path, meta.len(), meta.modified().ok()?, 0);
        let mut text = key.text(kind);
        let end = text.windows(6).rposition(|w| w == b"crc32 ")? + 6;
        text.truncate(end);
        Some((key.file_name(kind), text))
    }

    /// The name of the cache file of kind `kind` of this trace.
    pub fn file_name(&self, kind: Kind) -> String {
        let h = fnv1a(self.path.as_os_str().as_encoded_bytes(), fnv::START);
        format!("{h:016x}.{}", kind.ext)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_from_the_open_bytes_is_the_key_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 10, 65_535, 65_543, 3 * 65_536 + 5, (1 << 20) + 17] {
            let path = dir.path().join(format!("t{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            let from_file = TraceKey::of_file(&path).unwrap();
            assert_eq!(TraceKey::of_bytes(&path, &bytes), Some(from_file.clone()));
            // Changed anywhere, its middle too, at the same size: another key.
            for at in [0, len / 2, len.saturating_sub(1)]
                .into_iter()
                .filter(|_| len > 0)
            {
                let mut other = bytes.clone();
                other[at] ^= 1;
                assert_ne!(TraceKey::of_bytes(&path, &other), Some(from_file.clone()));
            }
        }
        // Bytes that are not the file's size: no key.
        let path = dir.path().join("t10");
        assert_eq!(TraceKey::of_bytes(&path, b"short"), None);
    }

    #[test]
    fn the_key_text_is_padded_and_names_the_kind() {
        let key = TraceKey::new(PathBuf::from("/t.ctf"), 3, SystemTime::UNIX_EPOCH, 0xabc);
        let text = key.text(Kind {
            ext: "tables",
            version: 5,
        });
        assert_eq!(text.len() % 8, 0);
        let want = format!(
            "tracekit {} tables 5\0/t.ctf\x003\x000\0crc32 00000abc\0",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.starts_with(want.as_bytes()));
        assert!(text[want.len()..].iter().all(|&b| b == 0));
        assert_eq!(
            key.file_name(Kind {
                ext: "timeline",
                version: 1,
            }),
            format!("{:016x}.timeline", fnv1a(b"/t.ctf", fnv::START))
        );
    }
}
