//! Event timestamps: microseconds since the Unix epoch, never decreasing.
//!
//! Memtrace timestamps are wall-clock microseconds, and a reader rejects a
//! domain whose timestamps go backwards. A session therefore reads the wall
//! clock once, at its start, and dates every event by the monotonic clock
//! from there; each domain slot additionally clamps to its last timestamp.

use std::sync::atomic::{AtomicI64, Ordering};

/// Wall-clock microseconds minus monotonic microseconds at the session start.
static OFFSET_US: AtomicI64 = AtomicI64::new(0);

/// Reads `CLOCK_MONOTONIC` in nanoseconds (a vDSO call; never allocates).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always
    // supported on Linux, and on failure `ts` simply stays zero.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Wall-clock microseconds since the Unix epoch.
pub(crate) fn wall_us() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(_) => 0,
    }
}

/// Starts a session's clock; returns the session's start time (wall µs).
pub(crate) fn start_session() -> i64 {
    let wall = wall_us();
    let mono = (monotonic_ns() / 1000) as i64;
    OFFSET_US.store(wall - mono, Ordering::Relaxed);
    wall
}

/// Wall-clock microseconds minus `CLOCK_MONOTONIC` microseconds for the
/// session: an event at `t` was at monotonic time `t - offset_us()`, on which
/// other tracers of the process (the tracing layer's FXT) can be joined.
pub(crate) fn offset_us() -> i64 {
    OFFSET_US.load(Ordering::Relaxed)
}

/// The current session time in wall-clock microseconds.
pub(crate) fn now_us() -> i64 {
    (monotonic_ns() / 1000) as i64 + OFFSET_US.load(Ordering::Relaxed)
}
