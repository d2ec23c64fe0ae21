//! What one sample of a trace stands for: the trace-info fields that turn sample
//! counts into estimated bytes.

use tracekit_memtrace::Info;

/// The parts of the trace-info record the analysis needs to turn samples into bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Proportion of allocated words that were sampled (`info.sample_rate`).
    pub sample_rate: f64,
    /// Word size in bits (`info.word_size`, 64 on every real trace).
    pub word_size_bits: u32,
}

impl From<&Info> for Sampling {
    /// The sample rate and word size of a trace.
    fn from(info: &Info) -> Sampling {
        Sampling {
            sample_rate: info.sample_rate,
            word_size_bits: u32::from(info.word_size),
        }
    }
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
