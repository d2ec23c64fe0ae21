//! Per-thread state: the sampling countdown, the reentrancy guard, the
//! thread's domain slot and its stack bounds.
//!
//! Everything here is a `const`-initialised thread local without a
//! destructor, so reading it never allocates, never registers anything and
//! works at any point of a thread's life, including while other thread locals
//! are being destroyed. The single exception is [`SlotClaim`], whose destructor
//! hands the thread's domain slot back; it is touched only on the sampled path
//! and only through `try_with`.

use std::cell::Cell;

use crate::sampler::Rng;
use crate::slots::{self, SlotId};

/// Countdown value used while the thread runs the tracer's own code: far from
/// zero, so that nested allocations never reach the slow path.
pub(crate) const COUNTDOWN_INTERNAL: i64 = i64::MAX;

/// Countdown used while no session is active: the thread looks at the global
/// state again after this many bytes, so a session started later is noticed
/// soon (see `start_tracing`'s docs for what that means).
pub(crate) const COUNTDOWN_IDLE: i64 = 256 * 1024;

/// The rarely-touched part of the thread's state (copied in and out whole).
#[derive(Clone, Copy)]
pub(crate) struct Local {
    /// Session generation whose countdown this thread is running (0: none).
    pub(crate) seen_generation: u32,
    /// True while the thread runs tracer code (the reentrancy guard).
    pub(crate) internal: bool,
    /// True once `rng` has been seeded.
    pub(crate) seeded: bool,
    /// The gap generator.
    pub(crate) rng: Rng,
    /// The thread's domain slot, if it has claimed one.
    pub(crate) slot: Option<SlotId>,
    /// Stack bounds `[lo, hi)` for the frame-pointer walk (0, 0: unknown).
    pub(crate) stack: (usize, usize),
}

impl Local {
    const INIT: Local = Local {
        seen_generation: 0,
        internal: false,
        seeded: false,
        rng: Rng::new(0),
        slot: None,
        stack: (0, 0),
    };
}

thread_local! {
    /// Bytes left before the next sampled word; the fast path decrements it.
    static COUNTDOWN: Cell<i64> = const { Cell::new(0) };
    /// The thread's sampled allocations so far: samples, allocations.
    static SAMPLED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    static LOCAL: Cell<Local> = const { Cell::new(Local::INIT) };
    static CLAIM: SlotClaim = const { SlotClaim(Cell::new(None)) };
}

/// The fast path: charges `size` bytes and reports whether the countdown
/// expired (the caller then takes the slow path).
#[inline(always)]
pub(crate) fn charge(size: usize) -> bool {
    COUNTDOWN.with(|c| {
        let left = c.get().wrapping_sub(size as i64);
        c.set(left);
        left <= 0
    })
}

/// The current countdown (after the fast path's decrement).
pub(crate) fn countdown() -> i64 {
    COUNTDOWN.with(Cell::get)
}

/// Sets the countdown.
pub(crate) fn set_countdown(value: i64) {
    COUNTDOWN.with(|c| c.set(value));
}

/// Counts a sampled allocation of `nsamples` samples (on the sampled path
/// only, so the fast path pays nothing for it).
pub(crate) fn add_sampled(nsamples: u64) {
    SAMPLED.with(|c| {
        let (samples, allocations) = c.get();
        c.set((samples.wrapping_add(nsamples), allocations.wrapping_add(1)));
    });
}

/// The thread's sampled allocations so far: samples, allocations.
pub(crate) fn sampled() -> (u64, u64) {
    SAMPLED.with(Cell::get)
}

/// Copies the thread's rarely-used state out.
pub(crate) fn local() -> Local {
    LOCAL.with(Cell::get)
}

/// Writes the thread's rarely-used state back.
pub(crate) fn set_local(local: Local) {
    LOCAL.with(|l| l.set(local));
}

/// True while the current thread runs tracekit-alloc's own code: its
/// background thread, or the slow path of a sampled allocation or free.
pub(crate) fn in_tracer() -> bool {
    LOCAL.with(|l| l.get().internal)
}

/// The reentrancy guard: while it lives, allocations on this thread are not
/// sampled (their countdown cannot expire) and [`in_tracer`] is true.
pub(crate) struct Internal {
    saved: Option<i64>,
}

impl Internal {
    /// Enters tracer code; nests (an inner guard restores nothing).
    pub(crate) fn enter() -> Internal {
        let mut l = local();
        if l.internal {
            return Internal { saved: None };
        }
        l.internal = true;
        set_local(l);
        let saved = countdown();
        set_countdown(COUNTDOWN_INTERNAL);
        Internal { saved: Some(saved) }
    }

    /// Marks the current thread as tracer-internal for the rest of its life
    /// (the background thread).
    pub(crate) fn enter_forever() {
        std::mem::forget(Internal::enter());
    }
}

impl Drop for Internal {
    fn drop(&mut self) {
        if let Some(saved) = self.saved {
            set_countdown(saved);
            let mut l = local();
            l.internal = false;
            set_local(l);
        }
    }
}

/// Holds the thread's domain slot and gives it back when the thread exits.
pub(crate) struct SlotClaim(Cell<Option<SlotId>>);

impl Drop for SlotClaim {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            let mut l = local();
            l.slot = None;
            set_local(l);
            slots::release(slot);
        }
    }
}

/// The domain slot of the current thread, claiming one on first use.
///
/// Once the thread's [`SlotClaim`] has been destroyed (late in thread exit),
/// a shared slot is used without a claim.
pub(crate) fn slot() -> SlotId {
    let mut l = local();
    if let Some(slot) = l.slot {
        return slot;
    }
    let claimed = CLAIM.try_with(|claim| {
        let slot = slots::claim();
        claim.0.set(Some(slot));
        slot
    });
    match claimed {
        Ok(slot) => {
            l.slot = Some(slot);
            set_local(l);
            slot
        }
        Err(_) => slots::shared_fallback(),
    }
}

/// Seeds the thread's generator once, from its address and the clock.
pub(crate) fn seed_rng(l: &mut Local) {
    if !l.seeded {
        let here = &l as *const _ as u64;
        let t = crate::clock::monotonic_ns();
        l.rng = Rng::new(here.rotate_left(32) ^ t ^ 0x5851_F42D_4C95_7F2D);
        l.seeded = true;
    }
}

/// Makes the next allocation of this thread draw a fresh gap (the thread
/// just started a session).
pub(crate) fn restart_countdown() {
    let mut l = local();
    l.seen_generation = 0;
    set_local(l);
    set_countdown(0);
}
