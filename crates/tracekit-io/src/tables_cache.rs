//! Trace tables kept between runs, so that a trace viewed again is not decoded
//! again: a file per trace (named by a hash of the trace's path) in a cache
//! folder, `$XDG_CACHE_HOME/tracekit/tables` by default
//! (`~/.cache/tracekit/tables` without it). A memtrace trace's tables are
//! `HASH.tables`; the timeline of an FXT trace or of perf data is
//! `HASH.timeline`.
//!
//! A cache file holds the key of the trace it was made from (what the file
//! holds, tracekit's version, the trace's path, size and modification time,
//! and a hash of its first and last 64 KiB), then the tables as
//! [`Tables::write_to`](tracekit_analysis::tables::Tables::write_to) writes
//! them, or the timeline:
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | the length N of the trace's `fxt stats --json` text, little-endian |
//! | N | that text |
//! | to a multiple of 8 | zeros |
//! | the rest | the timeline as [`Timeline::write_to`](tracekit_timeline::Timeline::write_to) writes it |
//! A trace that changed no longer matches its key and is decoded again,
//! and its file replaced. A cache that cannot be read is decoded past; one
//! that cannot be written is skipped: neither is an error. Files are written
//! under a temporary name and renamed, so a cache file is whole or absent.
//! A write cut short by the end of its process (a viewer stopped while it
//! writes a large trace's tables) leaves its temporary file, as large as the
//! tables: each writer holds a lock on its own, and the next write removes the
//! temporary files no process holds.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracekit_analysis::tables::Tables;
use tracekit_analysis::trace_bytes::TraceBytes;
use tracekit_memtrace::Reader;
use tracekit_timeline::Timeline;

use crate::input;

/// How the temporary files of writes in progress are named.
const PARTIAL: &str = ".partial-";

/// Bytes hashed at each end of a trace for its key.
const ENDS: usize = 64 << 10;

/// Where trace tables are kept.
#[derive(Clone, Debug)]
pub struct TablesCache {
    dir: PathBuf,
}

/// Where [`TablesCache::tables`] found the tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Read back from this file of the cache.
    Cached(PathBuf),
    /// Decoded from the trace, and kept in this file of this many bytes.
    Built(PathBuf, u64),
    /// Decoded from the trace, and not kept, for the reason given.
    NotKept(String),
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

/// FNV-1a, 64 bits: stable across builds, unlike the standard hasher.
fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

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

    /// The cache file of kind `kind` (its extension) of the trace at `path`,
    /// and the key its contents must start with.
    fn entry(&self, path: &Path, kind: &str) -> Option<(PathBuf, Vec<u8>)> {
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        let modified = meta.modified().ok()?;
        let mtime = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let ends = ends_hash(&path, meta.len()).ok()?;
        let mut key = format!(
            "tracekit {} {kind}\0{}\0{}\0{}\0{:016x}\0",
            env!("CARGO_PKG_VERSION"),
            path.display(),
            meta.len(),
            mtime,
            ends
        );
        // The tables after it start at a multiple of 8 bytes, so that their
        // columns can be read in place from the mapped file.
        while !key.len().is_multiple_of(8) {
            key.push('\0');
        }
        let name = format!(
            "{:016x}.{kind}",
            fnv(path.as_os_str().as_encoded_bytes(), FNV_START)
        );
        Some((self.dir.join(name), key.into_bytes()))
    }

    /// The tables of the trace at `path`, whose bytes are `bytes`: read back
    /// when the cache holds them for the trace as it is now, else decoded
    /// (`progress` hears the byte position reached; the pages read are let
    /// go as the decoding passes them) and kept. `None` when the trace's
    /// header does not read.
    pub fn tables(
        &self,
        path: &Path,
        bytes: &TraceBytes,
        progress: &mut dyn FnMut(u64),
    ) -> Option<(Tables, Origin)> {
        let entry = self.entry(path, "tables");
        if let Some((file, key)) = &entry
            && let Some(tables) = Self::read(file, key, bytes)
        {
            return Some((tables, Origin::Cached(file.clone())));
        }
        let tables = Tables::from_bytes(bytes, progress)?;
        let origin = match entry {
            None => Origin::NotKept(format!("{}: cannot name its cache file", path.display())),
            Some((file, key)) => match self.write(&file, &key, &mut |out| tables.write_to(out)) {
                Ok(bytes) => Origin::Built(file, bytes),
                Err(e) => Origin::NotKept(format!("{}: {e}", file.display())),
            },
        };
        Some((tables, origin))
    }

    fn read(file: &Path, key: &[u8], bytes: &TraceBytes) -> Option<Tables> {
        let f = std::fs::File::open(file).ok()?;
        let cached = Arc::new(input::file_bytes(&f, &file.display().to_string()).ok()?);
        if !cached.starts_with(key) {
            return None;
        }
        let info = Reader::from_owner(bytes.clone()).ok()?.info().clone();
        let size = bytes.as_ref().len() as u64;
        // The pages of each section read and checked are let go: the columns
        // are paged in again as passes read them, and the rest is decoded
        // into memory, so that the file is not also resident.
        let release = Arc::clone(&cached);
        let mut done = |at: usize| release.release(0..key.len() + at);
        // SAFETY: `input::Bytes` gives the same bytes at one address for as
        // long as it lives: a vector, or a read-only mapping of the cache file,
        // which nothing changes while it is mapped (a new cache file replaces
        // it by a rename, leaving the mapped one as it is; `file_bytes` states
        // what mapping needs of a file).
        unsafe { Tables::read_in_place(cached, key.len(), info, size, &mut done) }.ok()
    }

    /// The timeline of the trace at `path` (FXT, or perf data) and its `fxt
    /// stats --json` text: read back when the cache holds them for the trace
    /// as it is now, else made by `build` (`None`: it cannot be) and kept.
    pub fn timeline<E>(
        &self,
        path: &Path,
        build: impl FnOnce() -> Result<(Timeline, String), E>,
    ) -> Result<(Timeline, String, Origin), E> {
        let entry = self.entry(path, "timeline");
        if let Some((file, key)) = &entry
            && let Some((timeline, stats)) = Self::read_timeline(file, key)
        {
            return Ok((timeline, stats, Origin::Cached(file.clone())));
        }
        let (timeline, stats) = build()?;
        let origin = match entry {
            None => Origin::NotKept(format!("{}: cannot name its cache file", path.display())),
            Some((file, key)) => {
                let mut write = |out: &mut dyn Write| {
                    out.write_all(&(stats.len() as u64).to_le_bytes())?;
                    out.write_all(stats.as_bytes())?;
                    out.write_all(&[0; 8][..(8 - stats.len() % 8) % 8])?;
                    timeline.write_to(out)
                };
                match self.write(&file, &key, &mut write) {
                    Ok(bytes) => Origin::Built(file, bytes),
                    Err(e) => Origin::NotKept(format!("{}: {e}", file.display())),
                }
            }
        };
        Ok((timeline, stats, origin))
    }

    fn read_timeline(file: &Path, key: &[u8]) -> Option<(Timeline, String)> {
        let f = std::fs::File::open(file).ok()?;
        let cached = input::file_bytes(&f, &file.display().to_string()).ok()?;
        let rest = cached.strip_prefix(key)?;
        let n = usize::try_from(u64::from_le_bytes(rest.get(..8)?.try_into().ok()?)).ok()?;
        let stats = std::str::from_utf8(rest.get(8..8usize.checked_add(n)?)?).ok()?;
        let skip = (8 + n).next_multiple_of(8);
        let base = key.len() + skip;
        // The pages copied are let go: the file is not resident beside the
        // timeline read from it.
        let mut done = |at: usize| cached.release(0..base + at);
        let timeline = Timeline::read_from_releasing(rest.get(skip..)?, &mut done).ok()?;
        Some((timeline, stats.to_string()))
    }

    /// Writes the cache file with `write`; its size.
    fn write(
        &self,
        file: &Path,
        key: &[u8],
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        std::fs::create_dir_all(&self.dir)?;
        self.remove_abandoned();
        let temp = tempfile::Builder::new()
            .prefix(PARTIAL)
            .tempfile_in(&self.dir)?;
        // Held until the file is renamed or removed, and let go by the system
        // if the process ends first: a temporary file nobody holds is
        // abandoned. (Where locks are not supported, none is removed.)
        try_lock(temp.as_file());
        let mut out = BufWriter::with_capacity(1 << 20, temp);
        out.write_all(key)?;
        write(&mut out)?;
        let temp = out.into_inner().map_err(|e| e.into_error())?;
        let bytes = temp.as_file().metadata()?.len();
        temp.persist(file).map_err(|e| e.error)?;
        Ok(bytes)
    }

    /// Removes the temporary files of writes whose process ended before they
    /// were renamed: those whose lock no one holds.
    fn remove_abandoned(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            // `.tmp` is how earlier versions named theirs.
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

/// A hash of the first and last [`ENDS`] bytes of the file at `path`, of `len`
/// bytes.
fn ends_hash(path: &Path, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let mut head = Vec::with_capacity(ENDS);
    (&mut f).take(ENDS as u64).read_to_end(&mut head)?;
    let mut tail = Vec::with_capacity(ENDS);
    f.seek(SeekFrom::Start(len.saturating_sub(ENDS as u64)))?;
    f.take(ENDS as u64).read_to_end(&mut tail)?;
    Ok(fnv(&tail, fnv(&head, FNV_START)))
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    fn trace(dir: &Path, seed: u64) -> PathBuf {
        let config = SynthConfig {
            allocs: 2_000,
            seed,
            ..SynthConfig::default()
        };
        let path = dir.join("t.ctf");
        std::fs::write(&path, write_synthetic(Vec::new(), &config).unwrap()).unwrap();
        path
    }

    fn ask(cache: &TablesCache, path: &Path) -> (Tables, Origin) {
        let bytes = crate::memtrace::trace_bytes(path).unwrap();
        cache.tables(path, &bytes, &mut |_| {}).unwrap()
    }

    /// A write cut short leaves its temporary file; the next write removes it,
    /// and not the file of a write still in progress (whose lock is held).
    #[cfg(unix)]
    #[test]
    fn abandoned_writes_are_removed_and_writes_in_progress_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        std::fs::create_dir_all(cache.dir()).unwrap();
        let abandoned = cache.dir().join(format!("{PARTIAL}abc123"));
        std::fs::write(&abandoned, vec![7u8; 4096]).unwrap();
        let older = cache.dir().join(".tmpAbC123");
        std::fs::write(&older, vec![7u8; 4096]).unwrap();
        let writing = cache.dir().join(format!("{PARTIAL}def456"));
        std::fs::write(&writing, b"in progress").unwrap();
        let held = std::fs::File::open(&writing).unwrap();
        assert!(try_lock(&held));
        let other = cache.dir().join("0123456789abcdef.tables");
        std::fs::write(&other, b"another trace's tables").unwrap();
        let path = trace(dir.path(), 3);
        let (_, origin) = ask(&cache, &path);
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        assert!(
            !abandoned.exists(),
            "the abandoned temporary file is removed"
        );
        assert!(
            !older.exists(),
            "so is one named as earlier versions named them"
        );
        assert!(writing.exists(), "a write in progress is left alone");
        assert!(other.exists(), "other cache files are left alone");
        // The cache's own write left no temporary file of its own behind.
        let left: Vec<_> = std::fs::read_dir(cache.dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(PARTIAL))
            .map(|e| e.path())
            .collect();
        assert_eq!(left, vec![writing.clone()]);
        drop(held);
    }

    #[test]
    fn a_second_start_reads_the_tables_back_and_a_changed_trace_is_decoded_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let path = trace(dir.path(), 1);
        let (first, origin) = ask(&cache, &path);
        let Origin::Built(file, bytes) = origin else {
            panic!("{origin:?}")
        };
        assert_eq!(std::fs::metadata(&file).unwrap().len(), bytes);
        let (again, origin) = ask(&cache, &path);
        assert_eq!(origin, Origin::Cached(file.clone()));
        assert_eq!(again.allocations(), first.allocations());
        // The columns are read where they are in the cache file's bytes.
        assert!(first.column_bytes() > 0);
        if cfg!(target_endian = "little") {
            assert_eq!(again.column_bytes(), 0);
        }
        assert_eq!(again.end(), first.end());
        // Another trace at the same path: decoded again, its file replaced.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let path = trace(dir.path(), 2);
        let (changed, origin) = ask(&cache, &path);
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        assert_ne!(changed.end(), first.end());
        assert!(matches!(ask(&cache, &path).1, Origin::Cached(_)));
        let files = std::fs::read_dir(cache.dir()).unwrap().count();
        assert_eq!(files, 1, "one file per trace, no temporary left");
    }

    #[test]
    fn a_timeline_is_kept_beside_tables_and_read_back_until_its_trace_changes() {
        use tracekit_fxt::format::Koid;
        use tracekit_fxt::write::{VecDestination, Writer};
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let write = |slices: u64| {
            let mut w = Writer::new(VecDestination::new()).unwrap();
            let th = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
            let (cat, name) = (w.intern("c").unwrap(), w.intern("n").unwrap());
            for i in 0..slices {
                w.duration_complete(th, cat, name, i * 10, i * 10 + 5, &[])
                    .unwrap();
            }
            let path = dir.path().join("t.fxt");
            std::fs::write(&path, w.finish().unwrap().into_vec()).unwrap();
            path
        };
        let build = |path: &Path| {
            let bytes = std::fs::read(path).unwrap();
            let t = Timeline::build(&mut tracekit_fxt::read::Reader::new(&bytes), &mut |_| {});
            Ok::<_, ()>((t, format!("{{\"stats of\": {}}}", bytes.len())))
        };
        let path = write(3);
        let (first, stats, origin) = cache.timeline(&path, || build(&path)).unwrap();
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        let unused = || -> Result<(Timeline, String), ()> { panic!("built again") };
        let (again, same, origin) = cache.timeline(&path, unused).unwrap();
        assert!(matches!(origin, Origin::Cached(_)), "{origin:?}");
        assert_eq!((again.slices(), same), (first.slices(), stats));
        // Changed: built again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let path = write(5);
        let (changed, _, origin) = cache.timeline(&path, || build(&path)).unwrap();
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        assert_eq!(changed.slices(), 5);
        // A build that fails is the caller's error, and nothing is kept.
        let other = dir.path().join("u.fxt");
        std::fs::write(&other, b"x").unwrap();
        assert!(
            cache
                .timeline(&other, || Err::<(Timeline, String), _>("no"))
                .is_err()
        );
        let names: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].ends_with(".timeline"), "{names:?}");
    }

    #[test]
    fn a_cache_that_cannot_be_written_or_read_is_decoded_past() {
        let dir = tempfile::tempdir().unwrap();
        let path = trace(dir.path(), 1);
        // The cache folder is a file: nothing can be written under it.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, b"a file").unwrap();
        let cache = TablesCache::in_dir(&blocked);
        let (tables, origin) = ask(&cache, &path);
        assert!(matches!(origin, Origin::NotKept(_)), "{origin:?}");
        assert_eq!(tables.allocations(), 2_000);
        // A cache file that is not tables: decoded again and replaced.
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        assert!(matches!(ask(&cache, &path).1, Origin::Built(..)));
        let file = std::fs::read_dir(cache.dir())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&file).unwrap();
        let n = bytes.len();
        bytes.truncate(n - 7);
        std::fs::write(&file, &bytes).unwrap();
        assert!(matches!(ask(&cache, &path).1, Origin::Built(..)));
        assert!(matches!(ask(&cache, &path).1, Origin::Cached(_)));
    }
}
