//! Trace tables and timelines kept between runs, so that a trace viewed again
//! is not decoded again: a file per trace and kind (named by a hash of the
//! trace's path) in a cache folder, `$XDG_CACHE_HOME/tracekit/tables` by
//! default (`~/.cache/tracekit/tables` without it). A memtrace trace's tables
//! are `HASH.tables`; the timeline of an FXT trace or of perf data is
//! `HASH.timeline`.
//!
//! A cache file holds the key of the trace it was made from ([`TraceKey`]:
//! what the file holds and its format's version ([`Kind`]), tracekit's
//! version, the trace's path, size and
//! modification time, and the CRC-32 of all its bytes), then what is
//! kept, from a multiple of 8 bytes so that its columns can be read in place
//! from the mapped file:
//!
//! | bytes | what |
//! | --- | --- |
//! | key | `tracekit VERSION KIND FORMAT` (`tables 6`, `timeline 10`), NUL, the trace's path, NUL, its size, NUL, its modification time (ns since 1970), NUL, `crc32 ` and the CRC-32 of its bytes (8 hex digits), NUL |
//! | to a multiple of 8 | NULs |
//! | 16 | `crc32 ` and the CRC-32 of the rest in 8 hex digits, then two newlines |
//! | the rest | what is kept: the tables as [`Tables::write_to`](tracekit_analysis::tables::Tables::write_to) writes them, or the timeline and its statistics (below) |
//!
//! A timeline file's rest:
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | the length N of the trace's `fxt stats --json` text, little-endian |
//! | N | that text |
//! | to a multiple of 8 | zeros |
//! | the rest | the timeline as [`Timeline::write_to`](tracekit_timeline::Timeline::write_to) writes it |
//!
//! A trace that changed no longer matches its key and is decoded again, and
//! its file replaced. A file whose checksum does not hold, or that does not
//! read as what it says, is damaged: the trace is decoded again, the file
//! replaced, and the note says so; it never answers. The checksum is read
//! over the whole file when it is read back, its pages let go as it goes.
//! What is built to be kept grows in files of the cache folder meanwhile
//! ([`TablesCache::spill`]); once kept, it is read back from its file, as a
//! second start reads it, and what the build grew is let go.
//! A cache that cannot be read is decoded past; one that cannot be written
//! is skipped: neither is an error. Files are written under
//! a temporary name and renamed ([`tracekit_columns::rename`]), so a cache file
//! is whole or absent. A write cut short by the end of its process (a viewer
//! stopped while it writes a large trace's tables) leaves its temporary file,
//! as large as the tables: each writer holds a lock on its own, and the next
//! write removes the temporary files no process holds.

mod key;
#[cfg(feature = "tables")]
mod tables;
#[cfg(feature = "timeline")]
mod timeline;

use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracekit_columns::rename::RenameFile;
use tracekit_columns::{Cursor, Shared, Spill};
use tracekit_io::guard::Guarded;
use tracekit_io::input;

pub use key::TraceKey;

/// How the temporary files of writes in progress are named.
const PARTIAL: &str = ".partial-";

/// Where trace tables and timelines are kept.
#[derive(Clone, Debug)]
pub struct TablesCache {
    dir: PathBuf,
}

/// What a cache file holds: its extension, and the version of its format,
/// which its key names, so that a file an older tracekit kept is not read but
/// made again (as a file kept for another state of the trace is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The file's extension: `tables`, `timeline`.
    pub ext: &'static str,
    /// The version of the format of what the file holds.
    pub version: u8,
}

/// Where [`TablesCache`] found what it was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Read back from this file of the cache.
    Cached(PathBuf),
    /// Decoded from the trace, and kept in this file of this many bytes.
    Built(PathBuf, u64),
    /// Decoded from the trace, and not kept, for the reason given.
    NotKept(String),
    /// The file kept was damaged: decoded from the trace again, and kept in
    /// this file of this many bytes.
    Rebuilt(PathBuf, u64),
}

impl Origin {
    /// The note that tells a user where `what` ("tables are", "timeline is")
    /// came from.
    pub fn note(&self, what: &str) -> String {
        match self {
            Origin::Built(file, bytes) => format!(
                "note: the trace's {what} kept in {} ({:.1} MB; --no-cache keeps none)",
                file.display(),
                *bytes as f64 / 1e6
            ),
            Origin::NotKept(why) => format!("note: the trace's {what} not kept: {why}"),
            Origin::Rebuilt(file, bytes) => format!(
                "note: the trace's {what} kept in {} was damaged: made again ({:.1} MB)",
                file.display(),
                *bytes as f64 / 1e6
            ),
            Origin::Cached(file) => {
                format!("note: the trace's {what} read back from {}", file.display())
            }
        }
    }
}

/// tracekit's folder in the user's cache folder (`$XDG_CACHE_HOME/tracekit`, else
/// `$HOME/.cache/tracekit`), or `None` when neither variable says where it is.
pub fn user_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("tracekit"))
}

/// A cache file read back: its bytes (mapped when large, and then guarded:
/// a file cut short while it is read reads zeros and counts a fault in
/// [`tracekit_io::guard::faults`], which its readers check), which start
/// with the key it was asked for.
pub struct Kept {
    bytes: Arc<Guarded>,
    start: usize,
}

impl Kept {
    /// The file's bytes, to be read in place.
    pub fn shared(&self) -> Shared {
        Arc::clone(&self.bytes) as Shared
    }

    /// Where what is kept starts, after the key (a multiple of 8).
    pub fn start(&self) -> usize {
        self.start
    }

    /// A cursor over what is kept, copying what it reads.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self.bytes.get(self.start..).unwrap_or_default())
    }

    /// Lets the pages of `range` of the file go (see [`input::Bytes::release`]).
    pub fn release(&self, range: std::ops::Range<usize>) {
        self.bytes.bytes().release(range)
    }
}

impl TablesCache {
    /// The user's cache folder, or `None` when neither `XDG_CACHE_HOME` nor
    /// `HOME` says where it is.
    pub fn user() -> Option<TablesCache> {
        Some(TablesCache::in_dir(user_cache_dir()?.join("tables")))
    }

    /// A cache in `dir` (made when first written).
    pub fn in_dir(dir: impl Into<PathBuf>) -> TablesCache {
        TablesCache { dir: dir.into() }
    }

    /// The folder of the cache.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache file of kind `kind` (its extension) of the trace `key` is of.
    pub fn file(&self, key: &TraceKey, kind: Kind) -> PathBuf {
        self.dir.join(key.file_name(kind))
    }

    /// Where what is built to be kept grows meanwhile: the cache folder (made
    /// if it is not there), so that it costs the process no memory of its
    /// own ([`tracekit_columns::spill`]); memory when the folder cannot be
    /// made.
    pub fn spill(&self) -> Spill {
        match make_private_dir(&self.dir) {
            Ok(()) => Spill::to(&self.dir),
            Err(_) => Spill::memory(),
        }
    }

    /// Whether the cache folder holds a file of kind `kind` kept for the
    /// trace at `path` at its size and modification time now: found without
    /// reading the trace, a file that reading back may still find made of
    /// other bytes or damaged, and build again.
    pub fn likely_kept(&self, path: &Path, kind: Kind) -> bool {
        use std::io::Read;
        let Some((name, text)) = TraceKey::text_before_crc(path, kind) else {
            return false;
        };
        let Ok(f) = std::fs::File::open(self.dir.join(name)) else {
            return false;
        };
        let mut head = Vec::with_capacity(text.len());
        private(&f) && f.take(text.len() as u64).read_to_end(&mut head).is_ok() && head == text
    }

    /// The cache file of kind `kind` of the trace `key` is of, when it holds
    /// something kept for the trace as it is now, whole.
    pub fn kept(&self, key: &TraceKey, kind: Kind) -> Result<(PathBuf, Kept), Missing> {
        let file = self.file(key, kind);
        let f = std::fs::File::open(&file).map_err(|_| Missing::Absent)?;
        if !private(&f) {
            return Err(Missing::Absent);
        }
        let bytes = input::file_bytes(&f, &file.display().to_string());
        let bytes = bytes.map_err(|_| Missing::Absent)?;
        let text = key.text(kind);
        if !bytes.starts_with(&text) {
            return Err(Missing::Absent);
        }
        let start = text.len() + SUM_BYTES;
        let sum = bytes.get(text.len()..start).ok_or(Missing::Damaged)?;
        let rest = bytes.get(start..).ok_or(Missing::Damaged)?;
        // The pages the check reads are let go as it goes, to be paged in
        // again as what is kept is read: the file is never resident whole.
        const STEP: usize = 32 << 20;
        let mut h = crc32fast::Hasher::new();
        for (i, chunk) in rest.chunks(STEP).enumerate() {
            h.update(chunk);
            bytes.release(0..start + (i + 1) * STEP);
        }
        let holds = sum == checksum_slot(h.finalize());
        bytes.release(0..bytes.len());
        if !holds {
            return Err(Missing::Damaged);
        }
        let kept = Kept {
            bytes: Arc::new(Guarded::new(bytes)),
            start,
        };
        Ok((file, kept))
    }

    /// What is kept of kind `kind` for the trace at `path` (`key`: its key),
    /// as `read` reads it back; else made by `build` and kept as `write`
    /// writes it. A file that is kept but does not check, or does not read,
    /// is damaged: made again and replaced ([`Origin::Rebuilt`]).
    fn kept_or_built<T, E>(
        &self,
        path: &Path,
        key: Option<&TraceKey>,
        kind: Kind,
        read: impl Fn(Kept) -> Option<T>,
        build: impl FnOnce() -> Result<T, E>,
        write: impl Fn(&T, &mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(T, Origin), E> {
        let mut damaged = false;
        if let Some(key) = key {
            match self.kept(key, kind) {
                Ok((file, kept)) => match read(kept) {
                    Some(t) => return Ok((t, Origin::Cached(file))),
                    None => damaged = true,
                },
                Err(missing) => damaged = missing == Missing::Damaged,
            }
        }
        let made = build()?;
        let origin = self.keep(path, key, kind, &mut |out| write(&made, out));
        // What was built is answered from the file just kept, as a second
        // start would be: what the build grew in files of the cache folder
        // (`Spill`) is let go rather than kept beside it, on disk and in
        // the system's memory.
        let made = match (&origin, key) {
            (Origin::Built(..), Some(key)) => match self.kept(key, kind).ok() {
                Some((_, kept)) => read(kept).unwrap_or(made),
                None => made,
            },
            _ => made,
        };
        let origin = match (origin, damaged) {
            (Origin::Built(file, bytes), true) => Origin::Rebuilt(file, bytes),
            (origin, _) => origin,
        };
        Ok((made, origin))
    }

    /// Keeps what `write` writes as the file of kind `kind` of the trace at
    /// `path` (`key`: its key, `None` when it has none); how that went.
    pub fn keep(
        &self,
        path: &Path,
        key: Option<&TraceKey>,
        kind: Kind,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Origin {
        let Some(key) = key else {
            return Origin::NotKept(format!("{}: cannot name its cache file", path.display()));
        };
        let file = self.file(key, kind);
        match self.write(&file, &key.text(kind), write) {
            Ok(bytes) => Origin::Built(file, bytes),
            Err(e) => Origin::NotKept(format!("{}: {e}", file.display())),
        }
    }

    /// Writes the cache file with `write`; its size.
    fn write(
        &self,
        file: &Path,
        key: &[u8],
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        make_private_dir(&self.dir)?;
        self.remove_abandoned();
        let temp = RenameFile::create(file, PARTIAL, "", None)?;
        // Held until the file is renamed or removed, and let go by the system
        // if the process ends first: a temporary file nobody holds is
        // abandoned. (Where locks are not supported, none is removed.)
        try_lock(temp.file());
        let mut out = BufWriter::with_capacity(1 << 20, temp);
        out.write_all(key)?;
        // The checksum's place, filled in once the rest is written.
        out.write_all(&[0; SUM_BYTES])?;
        let mut summed = Summed {
            out,
            crc: crc32fast::Hasher::new(),
        };
        write(&mut summed)?;
        let temp = summed.out.into_inner().map_err(|e| e.into_error())?;
        let mut file = temp.file();
        file.seek(SeekFrom::Start(key.len() as u64))?;
        file.write_all(&checksum_slot(summed.crc.finalize()))?;
        let bytes = temp.file().metadata()?.len();
        temp.commit()?;
        Ok(bytes)
    }

    /// Removes the temporary files of writes whose process ended before they
    /// were renamed: those whose lock no one holds.
    fn remove_abandoned(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            // `.tmp` is how tempfile names its files by default.
            let name = entry.file_name();
            let name = name.as_encoded_bytes();
            if !name.starts_with(PARTIAL.as_bytes()) && !name.starts_with(b".tmp") {
                continue;
            }
            let path = entry.path();
            if let Ok(f) = std::fs::File::open(&path)
                && try_lock(&f)
            {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// Why the cache has nothing to give for a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No file, or one kept for another state of the trace.
    Absent,
    /// A file for the trace as it is now, whose checksum does not hold.
    Damaged,
}

/// Bytes of the checksum line after the key.
const SUM_BYTES: usize = 16;

/// The checksum line of what is kept, whose CRC-32 is `crc`.
fn checksum_slot(crc: u32) -> [u8; SUM_BYTES] {
    let mut slot = [b'\n'; SUM_BYTES];
    let text = format!("crc32 {crc:08x}");
    slot[..text.len()].copy_from_slice(text.as_bytes());
    slot
}

/// A writer that sums what passes through it.
struct Summed<W> {
    out: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Makes the cache folder, readable and writable by its owner alone when it
/// is new: what is mapped from it is changed by no one else.
#[cfg(unix)]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Whether the cache file `f` is one only this user could have written: its
/// owner's, and writable by no one else. Another's file is not mapped: it
/// could change, or be cut short, under the mapping.
#[cfg(unix)]
fn private(f: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid reads no memory of ours and cannot fail.
    let me = unsafe { libc::geteuid() };
    f.metadata()
        .is_ok_and(|m| m.uid() == me && m.mode() & 0o022 == 0)
}

#[cfg(not(unix))]
fn private(_: &std::fs::File) -> bool {
    true
}

/// Takes an exclusive lock on `f` if no one holds one, without waiting;
/// whether it did. The system lets it go when the file's last handle closes,
/// or its process ends.
#[cfg(unix)]
fn try_lock(f: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock reads and writes no memory of ours; the descriptor is
    // `f`'s, open for the whole call.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Without locks, no temporary file can be told abandoned.
#[cfg(not(unix))]
fn try_lock(_: &std::fs::File) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_says_where_what_was_asked_for_came_from() {
        let file = PathBuf::from("/c/t.tables");
        assert_eq!(
            Origin::Built(file.clone(), 2_500_000).note("tables are"),
            "note: the trace's tables are kept in /c/t.tables (2.5 MB; --no-cache keeps none)"
        );
        assert_eq!(
            Origin::Cached(file).note("timeline is"),
            "note: the trace's timeline is read back from /c/t.tables"
        );
        assert_eq!(
            Origin::NotKept("full".into()).note("tables are"),
            "note: the trace's tables are not kept: full"
        );
    }
}
