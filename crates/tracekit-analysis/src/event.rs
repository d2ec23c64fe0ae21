//! The events the analysis consumes: the allocation, promotion and collection events of
//! a memtrace trace (format notes section 5 and `Event.t` in the reference API), with the
//! time already made relative to the trace start.
//!
//! The types borrow the backtrace from the event source, so a reader that reuses one
//! backtrace buffer (as the reference reader does) can feed the analysis without a copy.

use tracekit_memtrace::{AllocationSource, DomainId, LocationCode, ObjId, Timedelta};

/// One entry of a backtrace as an event source stores it.
///
/// Implemented for [`LocationCode`], `u64` and `i64` so that sources can hand over
/// their own buffers without converting them; integers are codes as
/// [`LocationCode::new`] takes them.
pub trait Frame: Copy {
    /// The location code of this entry.
    fn code(self) -> LocationCode;
}

impl Frame for LocationCode {
    #[inline]
    fn code(self) -> LocationCode {
        self
    }
}

impl Frame for u64 {
    #[inline]
    fn code(self) -> LocationCode {
        LocationCode::new(self as i64)
    }
}

impl Frame for i64 {
    #[inline]
    fn code(self) -> LocationCode {
        LocationCode::new(self)
    }
}

/// An allocation event.
#[derive(Clone, Copy, Debug)]
pub struct Alloc<'a, F> {
    /// Time since the trace start.
    pub time: Timedelta,
    /// The new object's id.
    pub obj_id: ObjId,
    /// Domain that allocated it.
    pub domain: DomainId,
    /// Size of the sampled object in words, without the header.
    pub length: u64,
    /// Number of samples that fell in this object (at least 1 in real traces).
    pub nsamples: u64,
    /// Where it was allocated.
    pub source: AllocationSource,
    /// The backtrace, caller first: index 0 is the entry point, the last entry is the
    /// allocation site.
    pub backtrace: &'a [F],
    /// How many leading entries are the same as in the previous alloc of the same
    /// domain. Sources that do not know pass 0; values larger than the backtrace (after
    /// a truncated backtrace) are allowed.
    pub common_prefix: usize,
}

/// One event of a trace, in the order the source delivers them.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a, F> {
    /// An object was allocated (and sampled).
    Alloc(Alloc<'a, F>),
    /// A minor-heap object survived into the major heap.
    Promote {
        /// Time since the trace start.
        time: Timedelta,
        /// The object.
        obj_id: ObjId,
        /// Domain that reported it.
        domain: DomainId,
    },
    /// An object was collected (or an external allocation freed).
    Collect {
        /// Time since the trace start.
        time: Timedelta,
        /// The object.
        obj_id: ObjId,
        /// Domain that reported it.
        domain: DomainId,
    },
}

impl<F> Event<'_, F> {
    /// The event's time.
    pub fn time(&self) -> Timedelta {
        match self {
            Event::Alloc(a) => a.time,
            Event::Promote { time, .. } | Event::Collect { time, .. } => *time,
        }
    }
}

/// The parts of the trace-info record the analysis needs to turn samples into bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Proportion of allocated words that were sampled (`info.sample_rate`).
    pub sample_rate: f64,
    /// Word size in bits (`info.word_size`, 64 on every real trace).
    pub word_size_bits: u32,
}

impl Default for Sampling {
    /// Every word sampled, 64-bit words.
    fn default() -> Self {
        Sampling {
            sample_rate: 1.0,
            word_size_bits: 64,
        }
    }
}

impl Sampling {
    /// Estimated bytes one sample stands for: `1 / sample_rate` words of
    /// `word_size / 8` bytes each. Returns 0 for a non-positive or non-finite rate,
    /// which no valid trace has, rather than an infinity that would poison every sum.
    pub fn bytes_per_sample(self) -> f64 {
        let rate = self.sample_rate;
        if !(rate.is_finite() && rate > 0.0) {
            return 0.0;
        }
        f64::from(self.word_size_bits) / 8.0 / rate
    }

    /// Estimated bytes of `samples` samples, rounded to the nearest byte.
    pub fn bytes(self, samples: u64) -> u64 {
        let b = samples as f64 * self.bytes_per_sample();
        if b.is_finite() && b >= 0.0 {
            b.round() as u64
        } else {
            0
        }
    }

    /// Bytes in one word.
    pub fn word_bytes(self) -> u64 {
        u64::from(self.word_size_bits / 8)
    }
}
