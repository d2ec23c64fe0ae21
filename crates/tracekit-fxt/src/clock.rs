//! Optional tick sources for the fast path. The writer itself only takes caller-supplied
//! tick values; these helpers produce them and the matching initialization record.

use std::time::Instant;

use crate::write::Initialization;

/// Nanoseconds since the clock was created, from the monotonic OS clock. Pair with
/// [`Initialization::new(1_000_000_000)`](Initialization::new), the writer's default.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock whose tick 0 is now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Nanoseconds since creation.
    #[inline]
    pub fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The initialization record for these ticks.
    pub fn initialization(&self) -> Initialization {
        Initialization::new(1_000_000_000)
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

/// The CPU time-stamp counter (x86-64 `rdtsc`), calibrated against the OS clock.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct TscClock {
    ticks_per_second: u64,
}

#[cfg(target_arch = "x86_64")]
impl TscClock {
    /// Calibrates the counter over `calibration` (10 ms is plenty for ~0.1%).
    pub fn calibrate(calibration: std::time::Duration) -> Self {
        let t0 = Instant::now();
        let c0 = Self::read();
        while t0.elapsed() < calibration {
            std::hint::spin_loop();
        }
        let c1 = Self::read();
        let ns = t0.elapsed().as_nanos().max(1);
        let ticks = u128::from(c1.wrapping_sub(c0));
        let tps = (ticks * 1_000_000_000 / ns).clamp(1, u128::from(u64::MAX));
        Self {
            ticks_per_second: u64::try_from(tps).unwrap_or(u64::MAX),
        }
    }

    /// The current counter value.
    #[inline(always)]
    pub fn read() -> u64 {
        // SAFETY: rdtsc has no memory effects and exists on every x86-64 CPU.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }

    /// The calibrated rate.
    pub fn ticks_per_second(&self) -> u64 {
        self.ticks_per_second
    }

    /// The initialization record for these ticks.
    pub fn initialization(&self) -> Initialization {
        Initialization::new(self.ticks_per_second)
    }
}
