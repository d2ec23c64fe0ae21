//! A trace's bytes, shared by the passes that read them, and the release of the
//! pages a pass has read.
//!
//! The analyses read a whole trace from memory, often more than once (a pass to find
//! the peak, then the pass that answers), and a trace larger than memory is a mapped
//! file. A mapped page that has been read stays counted in the process's memory until
//! the system is told it will not be read again soon, so a pass over a 40 GB trace
//! would otherwise end with the whole file resident. The owner of the bytes (the one
//! that mapped them) says how its pages are let go ([`TraceBytes::on_release`]); a
//! pass only reports how far it has read ([`PassRelease::at`]), and the pages behind it
//! are let go a step ([`RELEASE_STEP`]) at a time. Released bytes stay readable: a
//! later read maps them again.

use std::ops::Range;
use std::sync::Arc;

/// How far a pass reads between two releases of the pages behind it: large enough
/// that the calls cost nothing next to the reading, small enough that a pass keeps
/// little resident.
pub const RELEASE_STEP: u64 = 64 << 20;

type Release = Arc<dyn Fn(Range<usize>) + Send + Sync>;

/// A trace's bytes, cheap to clone and share between threads, with the way their
/// owner releases the pages a pass has read (none for bytes read into memory).
#[derive(Clone)]
pub struct TraceBytes {
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    release: Option<Release>,
}

impl TraceBytes {
    /// Shares `bytes`; nothing is released.
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> TraceBytes {
        TraceBytes {
            bytes: Arc::new(bytes),
            release: None,
        }
    }

    /// Shares bytes already shared with their owner (who keeps a handle to release
    /// their pages, [`TraceBytes::on_release`]).
    pub fn from_shared(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> TraceBytes {
        TraceBytes {
            bytes,
            release: None,
        }
    }

    /// Calls `release` with each byte range passes have read (in steps of
    /// [`RELEASE_STEP`], and `0..usize::MAX` for [`TraceBytes::release_all`]): for a
    /// mapped file, to tell the system its pages there will not be read again soon.
    pub fn on_release(mut self, release: impl Fn(Range<usize>) + Send + Sync + 'static) -> Self {
        self.release = Some(Arc::new(release));
        self
    }

    /// Releases every page: the passes are done for now.
    pub fn release_all(&self) {
        if let Some(r) = &self.release {
            r(0..usize::MAX);
        }
    }

    /// What a new pass over the bytes uses to release the pages behind it.
    pub fn pass(&self) -> PassRelease {
        PassRelease {
            release: self.release.clone(),
            released: 0,
        }
    }
}

impl AsRef<[u8]> for TraceBytes {
    fn as_ref(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }
}

/// Where a pass over [`TraceBytes`] stands in releasing the pages behind it.
pub struct PassRelease {
    release: Option<Release>,
    released: u64,
}

impl PassRelease {
    /// The pass has read up to byte `pos`: releases what lies behind it once a whole
    /// step has been read since the last release. A position before the last one
    /// starts over (another pass from the start).
    pub fn at(&mut self, pos: u64) {
        let Some(range) = step(&mut self.released, pos, RELEASE_STEP) else {
            return;
        };
        if let Some(r) = &self.release {
            r(range);
        }
    }
}

/// The range to release now that a pass that released up to `released` is at
/// `pos`, if it has read a whole `step` since.
fn step(released: &mut u64, pos: u64, step: u64) -> Option<Range<usize>> {
    if pos < *released {
        *released = 0;
    }
    if pos - *released < step {
        return None;
    }
    let range = *released as usize..pos as usize;
    *released = pos;
    Some(range)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn release_steps_follow_the_pass_and_start_over_with_the_next() {
        let mut r = 0;
        assert_eq!(step(&mut r, 0, 100), None);
        assert_eq!(step(&mut r, 99, 100), None);
        assert_eq!(step(&mut r, 150, 100), Some(0..150));
        assert_eq!(step(&mut r, 200, 100), None);
        assert_eq!(step(&mut r, 250, 100), Some(150..250));
        // A second pass.
        assert_eq!(step(&mut r, 10, 100), None);
        assert_eq!(step(&mut r, 120, 100), Some(0..120));
    }

    #[test]
    fn the_owner_releases_what_passes_have_read() {
        let seen: Arc<Mutex<Vec<Range<usize>>>> = Arc::default();
        let s = Arc::clone(&seen);
        let bytes = TraceBytes::new(vec![7u8; 3]).on_release(move |r| s.lock().unwrap().push(r));
        assert_eq!(bytes.as_ref(), &[7, 7, 7]);
        let mut pass = bytes.pass();
        pass.at(RELEASE_STEP - 1);
        pass.at(RELEASE_STEP + 5);
        bytes.release_all();
        let step = RELEASE_STEP as usize;
        assert_eq!(*seen.lock().unwrap(), vec![0..step + 5, 0..usize::MAX]);
        // Bytes read into memory have nothing to release.
        TraceBytes::new(Vec::<u8>::new()).pass().at(u64::MAX);
    }
}
