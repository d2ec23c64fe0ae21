//! What both kinds share when a trace is followed while a program writes it
//! (`tracekit view --follow`): how far it is, as `/api/features` reports it,
//! and when its answers are made again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often at most a followed trace's answers are made again while its
/// writer writes, and in what share of the time at most: answers that take
/// 300 ms to make are made again every 600 ms at most.
pub(crate) const EVERY: Duration = Duration::from_millis(100);
const SHARE: u32 = 2;

/// How far a followed trace is: how many times its answers were made, and
/// whether its writer may still write more ([`crate::Api::followed`]).
#[derive(Debug)]
pub(crate) struct Growth {
    generation: AtomicU64,
    writing: AtomicBool,
}

impl Growth {
    /// None made yet, the writer writing.
    pub(crate) fn new() -> Growth {
        Growth {
            generation: AtomicU64::new(0),
            writing: AtomicBool::new(true),
        }
    }

    /// Answers were made again.
    pub(crate) fn grew(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The writer is done (or the trace cannot be followed).
    pub(crate) fn ended(&self) {
        self.writing.store(false, Ordering::Release);
    }

    /// How many times answers were made, and whether the writer writes.
    pub(crate) fn now(&self) -> (u64, bool) {
        (
            self.generation.load(Ordering::Acquire),
            self.writing.load(Ordering::Acquire),
        )
    }
}

/// When to make a followed trace's answers again: when something was read
/// since they were last made, at most every [`EVERY`] and in at most a
/// [`SHARE`]th of the time, and at once when the writer is done.
#[derive(Debug)]
pub(crate) struct Pace {
    made: Option<Instant>,
    cost: Duration,
    unserved: bool,
}

impl Pace {
    /// Nothing made yet: the first answers are due.
    pub(crate) fn new() -> Pace {
        Pace {
            made: None,
            cost: Duration::ZERO,
            unserved: true,
        }
    }

    /// Whether a read found more.
    pub(crate) fn read(&mut self, more: bool) {
        self.unserved |= more;
    }

    /// Makes the answers with `make` if they are due, the writer `writing`
    /// still or done.
    pub(crate) fn serve(&mut self, writing: bool, make: impl FnOnce()) {
        let due = (self.made).is_none_or(|t| t.elapsed() >= EVERY.max(self.cost * SHARE));
        if self.unserved && (due || !writing) {
            let started = Instant::now();
            make();
            (self.made, self.cost, self.unserved) = (Some(started), started.elapsed(), false);
        }
    }
}
