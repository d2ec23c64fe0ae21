//! Mapped files that survive being cut short while they are read.
//!
//! A mapped file truncated by another process (or by its owner, by hand)
//! makes the next read of a page past its new end raise SIGBUS, which ends
//! the process. A viewer serves from mapped cache files for hours; it must
//! not die because one was cut. A [`Guarded`] mapping is registered with a
//! SIGBUS handler, installed once: a fault inside a registered mapping
//! replaces the mapping's pages from the faulting one to its end by pages of
//! zeros, counts the fault ([`faults`]) and returns, so that the read goes on
//! and reads zeros. Whoever reads a guarded mapping compares [`faults`] before
//! and after and throws away what it read in between when it moved: the
//! zeros are not the file's bytes. A fault outside every registered mapping
//! is handed to the handler that was there before (Rust's own, which reports
//! a stack overflow, or the default, which ends the process), as if this
//! module were not there.
//!
//! Only files whose readers check [`faults`] are guarded: a command that
//! decodes a trace cut short under it would otherwise decode zeros without
//! a word, where ending on SIGBUS at least says that something went wrong.

use std::ops::Deref;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::input::Bytes;

/// How many mappings can be guarded at once (a viewer has one or two cache
/// files mapped); a mapping beyond that is not guarded.
const SLOTS: usize = 16;

/// Per slot, the start and length of a guarded mapping (0 and 0: free).
/// Read by the signal handler, so atomics and nothing else.
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENGTHS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

/// Faults inside guarded mappings since the process started.
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// Slots taken, and whether the handler is installed; only outside the
/// handler.
static TAKEN: Mutex<([bool; SLOTS], bool)> = Mutex::new(([false; SLOTS], false));

/// The faults inside guarded mappings so far: what was read from one while
/// this moved holds zeros where the file had been cut.
pub fn faults() -> u64 {
    FAULTS.load(Ordering::SeqCst)
}

/// A file's bytes, guarded while it is mapped (see the module docs).
pub struct Guarded {
    bytes: Bytes,
    slot: Option<usize>,
}

impl Guarded {
    /// Guards `bytes` when it is a mapping and a slot is free; bytes read
    /// into memory need no guard.
    pub fn new(bytes: Bytes) -> Guarded {
        let slot = match &bytes {
            Bytes::Mapped(map) if !map.is_empty() => register(map.as_ptr() as usize, map.len()),
            _ => None,
        };
        Guarded { bytes, slot }
    }

    /// Whether a fault in it would be survived.
    pub fn is_guarded(&self) -> bool {
        self.slot.is_some()
    }

    /// The bytes (see [`Bytes::release`]).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
}

impl Deref for Guarded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Guarded {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // Unregistered before the mapping goes (the field is dropped after
        // this), so that the handler never covers an address it no longer owns.
        if let Some(slot) = self.slot {
            LENGTHS[slot].store(0, Ordering::SeqCst);
            STARTS[slot].store(0, Ordering::SeqCst);
            let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
            taken.0[slot] = false;
        }
    }
}

/// Registers `start..start + len`, installing the handler first if needed:
/// its slot, or `None` when none is free or the handler cannot be installed.
fn register(start: usize, len: usize) -> Option<usize> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if !taken.1 {
        if !install() {
            return None;
        }
        taken.1 = true;
    }
    let slot = taken.0.iter().position(|t| !t)?;
    taken.0[slot] = true;
    LENGTHS[slot].store(0, Ordering::SeqCst);
    STARTS[slot].store(start, Ordering::SeqCst);
    LENGTHS[slot].store(len, Ordering::SeqCst);
    Some(slot)
}

#[cfg(target_os = "linux")]
mod handler {
    use super::*;
    use std::mem::MaybeUninit;

    /// The action in place before ours, for faults that are not ours.
    static mut PREVIOUS: MaybeUninit<libc::sigaction> = MaybeUninit::uninit();

    const PAGE: usize = 4096;

    /// Installs the handler; whether it is in place.
    pub(super) fn install() -> bool {
        // SAFETY: `sigaction` is given a zeroed (valid) action with our
        // handler and SA_SIGINFO, which makes the kernel call it with the
        // three arguments `on_sigbus` takes; PREVIOUS is written here once,
        // under TAKEN's lock, before the handler that reads it is installed.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_sigbus;
            action.sa_sigaction = handler as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = &raw mut PREVIOUS;
            libc::sigaction(libc::SIGBUS, &action, (*previous).as_mut_ptr()) == 0
        }
    }

    /// The SIGBUS handler (see the module docs). It only reads atomics and
    /// calls `mmap` and `sigaction`, system calls, which are safe in a handler.
    extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for a handler installed
        // with SA_SIGINFO; `si_addr` is the faulting address for SIGBUS.
        let addr = unsafe { (*info).si_addr() } as usize;
        for slot in 0..SLOTS {
            let (start, len) = (
                STARTS[slot].load(Ordering::SeqCst),
                LENGTHS[slot].load(Ordering::SeqCst),
            );
            if len == 0 || addr < start || addr >= start + len {
                continue;
            }
            let page = addr & !(PAGE - 1);
            let end = (start + len).next_multiple_of(PAGE);
            // SAFETY: `page..end` lies in a mapping this process made and
            // still holds (its slot is cleared before it is unmapped):
            // replacing it with private zero pages (MAP_FIXED) touches no
            // other memory. The readers of the mapping hold `&[u8]` into it,
            // which stay valid (readable) memory; the bytes they read there
            // change, as a mapped file's do when it changes (the caveat of
            // `input::file_bytes`), and `faults` tells them.
            let zeros = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    end - page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                FAULTS.fetch_add(1, Ordering::SeqCst);
                return;
            }
            break;
        }
        // Not ours (or not mended): the action before ours takes it again,
        // as the faulting read runs again once this returns.
        // SAFETY: PREVIOUS was filled by `sigaction` before this handler was
        // installed.
        unsafe {
            let previous = &raw const PREVIOUS;
            libc::sigaction(signal, (*previous).as_ptr(), std::ptr::null_mut());
        }
    }
}

#[cfg(target_os = "linux")]
use handler::install;

/// No guard off Linux: mappings stay unguarded.
#[cfg(not(target_os = "linux"))]
fn install() -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapping_cut_short_while_read_reads_zeros_and_counts_a_fault() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 4 << 20]).unwrap();
        drop(f);
        let file = std::fs::File::open(&path).unwrap();
        let guarded = Guarded::new(crate::input::file_bytes(&file, "kept").unwrap());
        assert!(guarded.is_guarded());
        assert_eq!(guarded[3 << 20], 7);
        // Pages not read yet: cut the file to 1 MiB.
        guarded.bytes().release(0..guarded.len());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let before = faults();
        assert_eq!(guarded[10], 7, "before the cut: the file's bytes");
        assert_eq!(faults(), before);
        let past: u64 = guarded[(2 << 20)..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(past, 0, "past the cut: zeros");
        assert_eq!(faults(), before + 1);
        drop(guarded);
        // Unregistered: its slot is free again.
        let taken = TAKEN.lock().unwrap();
        assert!(taken.0.iter().all(|t| !t));
    }
}
