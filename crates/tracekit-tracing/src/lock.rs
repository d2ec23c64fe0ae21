//! The lock around a thread's state: taken on every `tracing` call by the thread
//! that owns the state, with plain stores and a load, and rarely by a flushing
//! thread, which pays for both sides with the asymmetric fence of
//! [`barrier`](crate::barrier).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::barrier;

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
pub(crate) struct Slot<T> {
    /// Written by the owning thread only.
    busy: AtomicBool,
    /// Set by the one flusher that holds the slot.
    flushing: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `Locked`, of which the protocol above
// allows one at a time (the owner's side by `lock`'s contract, flushers' by the
// swap on `flushing`), so sharing a `Slot` between threads shares no
// unsynchronised access; the value may be dropped on another thread, hence `Send`.
unsafe impl<T: Send> Sync for Slot<T> {}

/// The `&mut T` of a slot while its owner or a flusher holds it; released on
/// drop, also when unwinding.
pub(crate) struct Locked<'a, T> {
    slot: &'a Slot<T>,
    /// Held by a flusher (else by the owner).
    flusher: bool,
}

impl<T> Slot<T> {
    /// A slot holding `value`, held by no one.
    pub(crate) fn new(value: T) -> Slot<T> {
        Slot {
            busy: AtomicBool::new(false),
            flushing: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The state, for the owning thread: `None` while a flusher holds it, or when
    /// the owner re-enters (a `tracing` call made while the layer works).
    ///
    /// # Safety
    ///
    /// Only one thread, the slot's owner, ever calls this on a given slot: `busy`
    /// is a plain flag, not a lock between two callers of this method.
    #[inline(always)]
    pub(crate) unsafe fn lock(&self) -> Option<Locked<'_, T>> {
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

    /// The state, for another thread, waiting up to `patience` for its owner to
    /// finish a record; `None` when another flusher holds it, when the fence is
    /// not available, or when the owner does not finish in time.
    pub(crate) fn lock_from_elsewhere(&self, patience: Duration) -> Option<Locked<'_, T>> {
        if self.flushing.swap(true, Ordering::Relaxed) {
            return None;
        }
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

impl<T> std::ops::Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this `Locked` holds the slot (see `Slot`), so no other reference
        // to `value` exists.
        unsafe { &*self.slot.value.get() }
    }
}

impl<T> std::ops::DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through it.
        unsafe { &mut *self.slot.value.get() }
    }
}

impl<T> Drop for Locked<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.flusher {
            self.slot.flushing.store(false, Ordering::Release);
        } else {
            self.slot.busy.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn the_owner_backs_off_from_a_flusher_and_from_itself() {
        let slot = Slot::new(0u32);
        // SAFETY: this thread is the slot's only owner-side caller.
        let owner = || unsafe { slot.lock() };
        let flusher = slot.lock_from_elsewhere(LONG).unwrap();
        assert!(
            owner().is_none(),
            "the owner got in while a flusher held it"
        );
        assert!(
            slot.lock_from_elsewhere(LONG).is_none(),
            "two flushers at once"
        );
        drop(flusher);
        let mut held = owner().unwrap();
        *held += 1;
        assert!(owner().is_none(), "the owner re-entered");
        let start = Instant::now();
        assert!(
            slot.lock_from_elsewhere(Duration::from_millis(20))
                .is_none()
        );
        assert!(start.elapsed() >= Duration::from_millis(20));
        drop(held);
        // A flusher that gave up leaves the slot free for the owner.
        assert_eq!(*owner().unwrap(), 1);
        assert_eq!(*slot.lock_from_elsewhere(LONG).unwrap(), 1);
    }

    #[test]
    fn a_flusher_waits_for_the_owner_and_sees_what_it_wrote() {
        let slot = Arc::new(Slot::new(Vec::<u64>::new()));
        let (inside, entered) = mpsc::channel();
        let owner = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                // SAFETY: this thread is the slot's only owner-side caller.
                let mut held = unsafe { slot.lock() }.unwrap();
                inside.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                held.extend([1, 2, 3]);
            })
        };
        entered.recv().unwrap();
        let start = Instant::now();
        let held = slot.lock_from_elsewhere(LONG).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(10));
        assert_eq!(*held, [1, 2, 3]);
        drop(held);
        owner.join().unwrap();
    }

    /// The owner appends 0, 1, 2, ... under the lock as fast as it can while a
    /// flusher keeps taking what it has: the values taken, in order, are every
    /// value exactly once (no write lost to the flusher, no take unseen by the
    /// owner), the two never hold the slot at once, and neither gets stuck.
    #[test]
    fn owner_and_flusher_exclude_each_other_under_contention() {
        const VALUES: u64 = 200_000;
        const FLUSHES: usize = 200;
        let slot = Arc::new(Slot::new(Vec::<u64>::new()));
        let inside = Arc::new(AtomicBool::new(false));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let flushes = Arc::new(AtomicUsize::new(0));
        let owner_done = Arc::new(AtomicBool::new(false));
        let (done, finished) = mpsc::channel();
        let owner = {
            let (slot, inside, overlaps) = (slot.clone(), inside.clone(), overlaps.clone());
            let (flushes, owner_done) = (flushes.clone(), owner_done.clone());
            let done = done.clone();
            std::thread::spawn(move || {
                let (mut next, mut backed_off) = (0, 0u64);
                while next < VALUES || flushes.load(Ordering::Relaxed) < FLUSHES {
                    // SAFETY: this thread is the slot's only owner-side caller.
                    let Some(mut held) = (unsafe { slot.lock() }) else {
                        backed_off += 1;
                        continue;
                    };
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    held.push(next);
                    next += 1;
                    inside.store(false, Ordering::SeqCst);
                }
                owner_done.store(true, Ordering::Release);
                done.send(()).unwrap();
                (next, backed_off)
            })
        };
        let flusher = {
            let (slot, inside, overlaps) = (slot.clone(), inside.clone(), overlaps.clone());
            let flushes = flushes.clone();
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                loop {
                    let last = owner_done.load(Ordering::Acquire);
                    if let Some(mut held) = slot.lock_from_elsewhere(LONG) {
                        if inside.swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::Relaxed);
                        }
                        taken.append(&mut held);
                        // Stay a while, for the owner to try to get in.
                        std::thread::yield_now();
                        inside.store(false, Ordering::SeqCst);
                        flushes.fetch_add(1, Ordering::Relaxed);
                    }
                    if last {
                        break;
                    }
                    // Flushes are rare: one right after another would leave the
                    // owner only the instant between them to get in.
                    std::thread::sleep(Duration::from_micros(20));
                }
                done.send(()).unwrap();
                taken
            })
        };
        for _ in 0..2 {
            let finished = finished.recv_timeout(Duration::from_secs(60));
            assert!(finished.is_ok(), "a thread is stuck");
        }
        let (written, backed_off) = owner.join().unwrap();
        let taken = flusher.join().unwrap();
        assert_eq!(overlaps.load(Ordering::Relaxed), 0, "both held the slot");
        assert!(written >= VALUES);
        assert!(
            taken.iter().copied().eq(0..written),
            "values lost or repeated"
        );
        // The flusher did get in while the owner was writing.
        assert!(flushes.load(Ordering::Relaxed) >= FLUSHES);
        eprintln!("{backed_off} owner calls backed off");
    }
}
