//! The lock around a thread's state: taken on every `tracing` call by the thread
//! that owns the state, with plain stores and a load, and rarely by a flushing
//! thread, which pays for both sides with the asymmetric fence of
//! [`barrier`](crate::barrier).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::barrier;
use crate::local::Local;

/// A thread's state, reachable from other threads so that a flush can hand over
/// its partial buffer (a thread alive but idle, such as a parked async runtime's
/// worker, would otherwise hold its last records until it exits).
///
/// The owner marks itself `busy` with a plain store and then checks `flushing`; a
/// flusher sets `flushing`, runs the heavy fence of [`barrier`] (which orders the
/// owner's store before its load, as a locked instruction would) and waits for
/// `busy` to clear. So either the owner sees `flushing` and backs off, or the
/// flusher sees `busy` and waits: never both inside. The hot path pays two plain
/// stores and a load instead of an atomic swap, which cost as much as reading the
/// clock.
pub(crate) struct Slot {
    /// The layer this state belongs to.
    pub(crate) layer: u64,
    /// Written by the owning thread only.
    pub(crate) busy: AtomicBool,
    /// Written by a flushing thread only (one at a time: `Shared::flushing`).
    pub(crate) flushing: AtomicBool,
    pub(crate) local: UnsafeCell<Local>,
}

// SAFETY: `local` is only reached through a `Locked`, of which the protocol above
// allows one at a time, so sharing a `Slot` between threads shares no
// unsynchronised access; `Local` itself is `Send`.
unsafe impl Sync for Slot {}

/// The `&mut Local` of a slot while its owner or a flusher holds it; released on
/// drop, also when unwinding.
pub(crate) struct Locked<'a> {
    pub(crate) slot: &'a Slot,
    /// Held by a flusher (else by the owner).
    pub(crate) flusher: bool,
}

impl Slot {
    /// The state, for the owning thread: `None` while a flusher holds it, or when
    /// the owner re-enters (a `tracing` call made while the layer works).
    #[inline(always)]
    pub(crate) fn lock(&self) -> Option<Locked<'_>> {
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        self.busy.store(true, Ordering::Relaxed);
        // With the flusher's heavy fence, orders the store above before the load
        // below.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        if self.flushing.load(Ordering::Acquire) {
            self.busy.store(false, Ordering::Release);
            return None;
        }
        Some(Locked {
            slot: self,
            flusher: false,
        })
    }

    /// The state, for another thread (holding `Shared::flushing`), waiting up to
    /// `patience` for its owner to finish a record; `None` when the fence is not
    /// available or the owner does not finish in time.
    pub(crate) fn lock_from_elsewhere(&self, patience: Duration) -> Option<Locked<'_>> {
        self.flushing.store(true, Ordering::Relaxed);
        let locked = Locked {
            slot: self,
            flusher: true,
        };
        if !barrier::heavy() {
            return None;
        }
        let start = Instant::now();
        while self.busy.load(Ordering::Acquire) {
            if start.elapsed() > patience {
                return None;
            }
            std::thread::yield_now();
        }
        Some(locked)
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = Local;
    fn deref(&self) -> &Local {
        // SAFETY: this `Locked` holds the slot (see `Slot`), so no other reference
        // to `local` exists.
        unsafe { &*self.slot.local.get() }
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Local {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through it.
        unsafe { &mut *self.slot.local.get() }
    }
}

impl Drop for Locked<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.flusher {
            self.slot.flushing.store(false, Ordering::Release);
        } else {
            self.slot.busy.store(false, Ordering::Release);
        }
    }
}
