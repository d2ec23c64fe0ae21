//! Memtrace trace tables kept: `HASH.tables`, the tables read back with their
//! columns in place in the mapped cache file.

use std::path::Path;

use tracekit_analysis::tables::Tables;
use tracekit_columns::TraceBytes;
use tracekit_memtrace::Reader;

use crate::{Kept, Kind, Origin, TablesCache, TraceKey};

/// A memtrace trace's cache file.
const KIND: Kind = Kind {
    ext: "tables",
    version: Tables::FILE_VERSION,
};

impl TablesCache {
    /// Whether tables are kept for the trace at `path` as its size and
    /// modification time are now ([`TablesCache::likely_kept`]): reading
    /// them back is then likely to be quicker than a pass over the trace.
    pub fn tables_likely_kept(&self, path: &Path) -> bool {
        self.likely_kept(path, KIND)
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
        let key = TraceKey::of_bytes(path, bytes.as_ref());
        self.kept_or_built(
            path,
            key.as_ref(),
            KIND,
            |kept| read(kept, bytes),
            // The columns grow in files of the cache folder (which holds
            // their tables next), not in memory.
            || Tables::from_bytes(bytes, &self.spill(), progress).ok_or(()),
            |tables, out| tables.write_to(out),
        )
        .ok()
    }
}

/// The tables `kept`, of the trace whose bytes are `bytes`.
fn read(kept: Kept, bytes: &TraceBytes) -> Option<Tables> {
    let info = Reader::from_owner(bytes.clone()).ok()?.info().clone();
    let size = bytes.as_ref().len() as u64;
    let start = kept.start();
    // The pages of each section read and checked are let go: the columns are
    // paged in again as passes read them, and the rest is decoded into
    // memory, so that the file is not also resident.
    let shared = kept.shared();
    let mut done = |at: usize| kept.release(0..start + at);
    // SAFETY: `input::Bytes` gives the same bytes at one address for as long
    // as it lives: a vector, or a read-only mapping of the cache file, which
    // nothing changes while it is mapped (a new cache file replaces it by a
    // rename, leaving the mapped one as it is; `file_bytes` states what
    // mapping needs of a file).
    unsafe { Tables::read_in_place(shared, start, info, size, &mut done) }.ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::PARTIAL;
    use std::path::PathBuf;
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
        let bytes = tracekit_io::memtrace::trace_bytes(path).unwrap();
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
        assert!(crate::try_lock(&held));
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
            "so is one named as tempfile names them by default"
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
        assert!(!cache.tables_likely_kept(&path));
        let (first, origin) = ask(&cache, &path);
        let Origin::Built(file, bytes) = origin else {
            panic!("{origin:?}")
        };
        assert_eq!(std::fs::metadata(&file).unwrap().len(), bytes);
        assert!(cache.tables_likely_kept(&path));
        let (again, origin) = ask(&cache, &path);
        assert_eq!(origin, Origin::Cached(file.clone()));
        assert_eq!(again.allocations(), first.allocations());
        // The columns are read where they are in the cache file's bytes,
        // from the start that built them too: what it built is let go.
        if cfg!(target_endian = "little") {
            assert_eq!(first.column_bytes(), 0);
            assert_eq!(again.column_bytes(), 0);
        }
        assert_eq!(again.end(), first.end());
        // Another trace at the same path: decoded again, its file replaced.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let path = trace(dir.path(), 2);
        assert!(
            !cache.tables_likely_kept(&path),
            "its time is not the kept one's"
        );
        let (changed, origin) = ask(&cache, &path);
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        assert_ne!(changed.end(), first.end());
        assert!(matches!(ask(&cache, &path).1, Origin::Cached(_)));
        let files = std::fs::read_dir(cache.dir()).unwrap().count();
        assert_eq!(files, 1, "one file per trace, no temporary left");
    }

    /// A file an older tracekit kept, in its own format, is not read: the
    /// tables are made again and replace it, without a note of damage.
    #[test]
    fn a_file_of_an_older_format_is_made_again_not_taken_for_damage() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let path = trace(dir.path(), 6);
        let (first, _) = ask(&cache, &path);
        let bytes = tracekit_io::memtrace::trace_bytes(&path).unwrap();
        let key = TraceKey::of_bytes(&path, bytes.as_ref()).unwrap();
        let older = Kind {
            version: KIND.version - 1,
            ..KIND
        };
        let origin = cache.keep(&path, Some(&key), older, &mut |out| {
            out.write_all(b"TKTABLE\x04 an older format")
        });
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        let (again, origin) = ask(&cache, &path);
        let Origin::Built(file, _) = origin else {
            panic!("{origin:?}")
        };
        assert_eq!(again.allocations(), first.allocations());
        assert_eq!(ask(&cache, &path).1, Origin::Cached(file));
    }

    /// A flipped byte anywhere past the key, or a cut, is damage: the tables
    /// are made again (and answer as the trace's own), the file replaced,
    /// the note says so; a damaged file never answers.
    #[test]
    fn a_damaged_cache_file_is_made_again_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let path = trace(dir.path(), 5);
        let (first, origin) = ask(&cache, &path);
        let Origin::Built(file, _) = origin else {
            panic!("{origin:?}")
        };
        let whole = std::fs::read(&file).unwrap();
        // The checksum line, after the key (which names the trace's own CRC).
        let key_len = (0..whole.len() - 16)
            .find(|&p| whole[p..].starts_with(b"crc32 ") && &whole[p + 14..p + 16] == b"\n\n")
            .unwrap();
        let step = (whole.len() - key_len) / 40;
        let mut damages: Vec<Vec<u8>> = (key_len..whole.len())
            .step_by(step.max(1))
            .map(|at| {
                let mut d = whole.clone();
                d[at] ^= 0x10;
                d
            })
            .collect();
        damages.push(whole[..whole.len() - 8].to_vec());
        damages.push(whole[..key_len + 3].to_vec());
        for damaged in damages {
            std::fs::write(&file, &damaged).unwrap();
            let (again, origin) = ask(&cache, &path);
            assert_eq!(origin, Origin::Rebuilt(file.clone(), whole.len() as u64));
            assert!(origin.note("tables are").contains("was damaged"));
            assert_eq!(again.allocations(), first.allocations());
            assert_eq!(again.end(), first.end());
            assert_eq!(std::fs::read(&file).unwrap(), whole, "replaced");
        }
        assert_eq!(ask(&cache, &path).1, Origin::Cached(file));
    }

    /// A trace changed only in its middle, its size and modification time
    /// put back as they were, is another trace: decoded again, not answered
    /// from the tables of what it was.
    #[test]
    fn a_trace_changed_in_its_middle_is_decoded_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        // Large enough that its first and last 64 KiB leave a middle out.
        let large = |seed| {
            let config = SynthConfig {
                allocs: 60_000,
                seed,
                ..SynthConfig::default()
            };
            write_synthetic(Vec::new(), &config).unwrap()
        };
        let path = dir.path().join("t.ctf");
        std::fs::write(&path, large(6)).unwrap();
        let (_, origin) = ask(&cache, &path);
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() > 4 << 16, "{}", bytes.len());
        let other = large(7);
        // The same header and end, another middle.
        let (a, b) = (bytes.len() / 3, bytes.len() / 2);
        let n = (b - a).min(other.len().saturating_sub(a));
        bytes[a..a + n].copy_from_slice(&other[a..a + n]);
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(modified).unwrap();
        drop(f);
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified
        );
        // (Mixed from two traces, it reads as damaged: decoded, and not kept.)
        let (_, origin) = ask(&cache, &path);
        assert!(!matches!(origin, Origin::Cached(_)), "{origin:?}");
    }

    /// The cache folder is its owner's alone, and a cache file others can
    /// write is not read: what is mapped changes under no one's hand.
    #[cfg(unix)]
    #[test]
    fn the_cache_is_private_and_a_file_others_can_write_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = TablesCache::in_dir(dir.path().join("cache"));
        let path = trace(dir.path(), 8);
        let Origin::Built(file, _) = ask(&cache, &path).1 else {
            panic!()
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(cache.dir()), 0o700);
        assert_eq!(mode(&file) & 0o022, 0);
        assert!(matches!(ask(&cache, &path).1, Origin::Cached(_)));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(ask(&cache, &path).1, Origin::Built(..)));
        assert_eq!(mode(&file) & 0o022, 0, "replaced by a private one");
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
        // A cache file cut short: damaged, decoded again and replaced.
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
        assert!(matches!(ask(&cache, &path).1, Origin::Rebuilt(..)));
        assert!(matches!(ask(&cache, &path).1, Origin::Cached(_)));
    }
}
