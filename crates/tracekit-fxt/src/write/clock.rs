//! Ticks for the timestamps of records being written, and the initialization
//! record (`docs/fxt-format.md`, §5 "Initialization record") that declares their
//! rate. The writer itself only takes the caller's tick values; this is where a
//! caller gets them.
//!
//! The CPU's time-stamp counter where it ticks at a constant rate (`constant_tsc`
//! and `nonstop_tsc` in `/proc/cpuinfo`), calibrated against the monotonic clock
//! when the clock is made, else the monotonic clock in nanoseconds. Reading the
//! counter takes a few nanoseconds; the monotonic clock, through the vDSO, several
//! times that, which on the tracing layer's span path is a tenth of its cost.

use std::time::{Duration, Instant};

use super::Initialization;

/// A clock whose ticks the trace's initialization record declares
/// ([`initialization`](Clock::initialization)).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    #[cfg(target_arch = "x86_64")]
    tsc_start: Option<u64>,
    ticks_per_second: u64,
}

/// How long the counter is calibrated for: enough for an error well under a
/// part in ten thousand, short enough not to be felt at start-up.
const CALIBRATION: Duration = Duration::from_millis(10);

impl Clock {
    /// The best clock here; calibrating the counter takes 10 ms.
    pub fn new() -> Clock {
        #[cfg(target_arch = "x86_64")]
        if invariant_tsc() {
            let (start, tsc_start) = (Instant::now(), rdtsc());
            while start.elapsed() < CALIBRATION {
                std::hint::spin_loop();
            }
            let (elapsed, ticks) = (start.elapsed(), rdtsc().wrapping_sub(tsc_start));
            let nanos = elapsed.as_nanos().max(1);
            let per_second = u64::try_from(u128::from(ticks) * 1_000_000_000 / nanos).unwrap_or(0);
            if per_second > 0 {
                return Clock {
                    start,
                    tsc_start: Some(tsc_start),
                    ticks_per_second: per_second,
                };
            }
        }
        Clock {
            start: Instant::now(),
            #[cfg(target_arch = "x86_64")]
            tsc_start: None,
            ticks_per_second: 1_000_000_000,
        }
    }

    /// Ticks per second.
    pub fn ticks_per_second(&self) -> u64 {
        self.ticks_per_second
    }

    /// The initialization record for these ticks.
    pub fn initialization(&self) -> Initialization {
        Initialization::new(self.ticks_per_second)
    }

    /// Ticks since the clock was made.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some(t0) = self.tsc_start {
            return rdtsc().saturating_sub(t0);
        }
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` reads a counter every x86_64 CPU has; it has no
    // preconditions and no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether the counter ticks at one rate whatever the core's frequency and state.
#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_follow_the_monotonic_clock() {
        let c = Clock::new();
        assert_eq!(
            c.initialization(),
            Initialization::new(c.ticks_per_second())
        );
        let (t0, i0) = (c.now(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (t1, elapsed) = (c.now(), i0.elapsed());
        let measured = (t1 - t0) as f64 / c.ticks_per_second() as f64;
        let real = elapsed.as_secs_f64();
        assert!(
            (measured - real).abs() < real * 0.02,
            "{measured} s against {real} s"
        );
    }
}
