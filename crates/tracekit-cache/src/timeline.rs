//! Timelines kept: `HASH.timeline`, the timeline of an FXT trace or of perf
//! data and its `fxt stats --json` text, read back with its lanes' columns in
//! place in the mapped cache file.

use std::io::Write;
use std::path::Path;

use tracekit_timeline::Timeline;

use crate::{Kept, Kind, Origin, TablesCache, TraceKey};

/// A timeline's cache file.
const KIND: Kind = Kind {
    ext: "timeline",
    version: Timeline::FILE_VERSION,
};

impl TablesCache {
    /// The timeline of the trace at `path` (FXT, or perf data) and its `fxt
    /// stats --json` text: read back when the cache holds them for the trace
    /// as it is now, else made by `build` (`None`: it cannot be) and kept.
    /// The trace's key is read from the ends of its file.
    pub fn timeline<E>(
        &self,
        path: &Path,
        build: impl FnOnce() -> Result<(Timeline, String), E>,
    ) -> Result<(Timeline, String, Origin), E> {
        self.timeline_keyed(path, TraceKey::of_file(path), build)
    }

    /// [`TablesCache::timeline`] of a trace whose bytes are open: its key
    /// is read from them ([`TraceKey::of_bytes`]) rather than from its file.
    pub fn timeline_of<E>(
        &self,
        path: &Path,
        bytes: &[u8],
        build: impl FnOnce() -> Result<(Timeline, String), E>,
    ) -> Result<(Timeline, String, Origin), E> {
        self.timeline_keyed(path, TraceKey::of_bytes(path, bytes), build)
    }

    /// [`TablesCache::timeline`] of a trace whose key is `key`, made by the
    /// caller from the bytes it has open ([`TraceKey::of_bytes`]); `None`
    /// keeps nothing.
    pub fn timeline_keyed<E>(
        &self,
        path: &Path,
        key: Option<TraceKey>,
        build: impl FnOnce() -> Result<(Timeline, String), E>,
    ) -> Result<(Timeline, String, Origin), E> {
        let write = |(timeline, stats): &(Timeline, String), out: &mut dyn Write| {
            out.write_all(&(stats.len() as u64).to_le_bytes())?;
            out.write_all(stats.as_bytes())?;
            out.write_all(&[0; 8][..(8 - stats.len() % 8) % 8])?;
            timeline.write_to(out)
        };
        let read = |kept: Kept| read(&kept);
        let ((timeline, stats), origin) =
            self.kept_or_built(path, key.as_ref(), KIND, read, build, write)?;
        Ok((timeline, stats, origin))
    }
}

/// The timeline and statistics `kept`.
fn read(kept: &Kept) -> Option<(Timeline, String)> {
    let mut r = kept.cursor();
    let n = r.count64(1).ok()?;
    let stats = std::str::from_utf8(r.take(n).ok()?).ok()?.to_string();
    r.pad().ok()?;
    let base = kept.start() + r.at();
    // The pages read are let go: the lanes' columns are paged in again as
    // answers read them, and the rest is copied into memory, so that the
    // file is not resident beside the timeline read from it.
    let mut done = |at: usize| kept.release(0..base + at);
    // SAFETY: `input::Bytes` gives the same bytes at one address for as long
    // as it lives: a vector, or a read-only mapping of the cache file, which
    // nothing changes while it is mapped (a new cache file replaces it by a
    // rename, leaving the mapped one as it is; `file_bytes` states what
    // mapping needs of a file).
    let timeline = unsafe { Timeline::read_in_place(kept.shared(), base, &mut done) }.ok()?;
    Some((timeline, stats))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
        // Keyed from the bytes already open: the same key, so the same file.
        let bytes = std::fs::read(&path).unwrap();
        let (_, _, origin) = cache.timeline_of(&path, &bytes, unused).unwrap();
        assert!(matches!(origin, Origin::Cached(_)), "{origin:?}");
        // Changed: built again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let path = write(5);
        let (changed, _, origin) = cache.timeline(&path, || build(&path)).unwrap();
        assert!(matches!(origin, Origin::Built(..)), "{origin:?}");
        assert_eq!(changed.slices(), 5);
        // A flipped byte in what is kept: damaged, built again, never read.
        let Origin::Built(file, _) = origin else {
            unreachable!()
        };
        let whole = std::fs::read(&file).unwrap();
        for at in [whole.len() - 1, whole.len() - 40, whole.len() / 2 + 20] {
            let mut damaged = whole.clone();
            damaged[at] ^= 0x04;
            std::fs::write(&file, &damaged).unwrap();
            let (again, _, origin) = cache.timeline(&path, || build(&path)).unwrap();
            assert!(matches!(origin, Origin::Rebuilt(..)), "{at}: {origin:?}");
            assert_eq!(again.slices(), 5);
            assert_eq!(std::fs::read(&file).unwrap(), whole);
        }
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
}
