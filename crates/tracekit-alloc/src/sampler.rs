//! The per-thread geometric sampler (memprof's sampling, applied to bytes).
//!
//! Every word allocated is sampled independently with probability `rate`, as in
//! OCaml's `Gc.Memprof` and memtrace's `External` allocations. Rather than draw
//! once per word, each thread keeps a *countdown*: the number of bytes left
//! before the next sampled word. The gap between two sampled words is
//! geometric with mean `1 / rate` words, so a countdown is refilled only when a
//! sample happens. An allocation of `b` bytes that drives the countdown to zero
//! or below carries `nsamples` = the number of gaps needed to lift the
//! countdown above zero again; `nsamples * word_bytes / rate` is then an
//! unbiased estimate of the bytes allocated.
//!
//! The countdown lives in [`crate::thread`]; this module holds the pure
//! arithmetic so that it can be tested without a global allocator.

/// Bytes per word in the traces this crate writes (the `word_size` of the
/// trace info is 64 bits).
pub(crate) const WORD_BYTES: u64 = 8;

/// A small, fast pseudo-random generator (xoshiro256** step on a 64-bit
/// state via splitmix64). Statistical quality is ample for drawing gaps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded from `seed`; any seed, including 0, is fine.
    pub(crate) const fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits (splitmix64).
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in (0, 1].
    fn next_open_unit(&mut self) -> f64 {
        // 53 random bits, shifted into (0, 1] so that `ln` is finite.
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The sampling parameters of one tracing session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rate {
    /// `1 / ln(1 - rate)`, or 0 when `rate == 1` (every word is sampled).
    one_over_log1m: f64,
}

/// The largest gap drawn, in words: keeps byte arithmetic far from overflow
/// even at absurdly small rates.
const MAX_GAP_WORDS: u64 = 1 << 56;

impl Rate {
    /// Parameters for sampling each word with probability `rate`, which must be
    /// in (0, 1] (checked by the caller).
    pub(crate) fn new(rate: f64) -> Rate {
        let one_over_log1m = if rate >= 1.0 {
            0.0
        } else {
            1.0 / (-rate).ln_1p()
        };
        Rate { one_over_log1m }
    }

    /// The probability of sampling a word.
    pub(crate) fn rate(self) -> f64 {
        if self.one_over_log1m == 0.0 {
            1.0
        } else {
            -(1.0 / self.one_over_log1m).exp_m1()
        }
    }

    /// Bit pattern for storing the rate in an atomic.
    pub(crate) fn to_bits(self) -> u64 {
        self.one_over_log1m.to_bits()
    }

    /// Inverse of [`Rate::to_bits`].
    pub(crate) fn from_bits(bits: u64) -> Rate {
        Rate {
            one_over_log1m: f64::from_bits(bits),
        }
    }

    /// Draws the number of words up to and including the next sampled word:
    /// geometric on {1, 2, ...} with success probability `rate`.
    pub(crate) fn draw_gap_words(self, rng: &mut Rng) -> u64 {
        // Inverse transform: floor(ln(u) / ln(1 - rate)) + 1 with u in (0, 1].
        let exp = rng.next_open_unit().ln() * self.one_over_log1m;
        // `exp` is >= 0 (both factors are <= 0) or NaN-free 0 when rate == 1;
        // the float-to-int cast saturates, and the clamp bounds the result.
        (exp as u64).min(MAX_GAP_WORDS) + 1
    }

    /// Draws a gap in bytes (memtrace's External sampler: draw x word bytes).
    pub(crate) fn draw_gap_bytes(self, rng: &mut Rng) -> i64 {
        (self.draw_gap_words(rng) * WORD_BYTES) as i64
    }
}

/// Charges an allocation of `size` bytes to a countdown that the fast path has
/// already driven to `countdown` (= previous countdown - size, <= 0).
/// Returns `(nsamples, new_countdown)` with `nsamples >= 1` and
/// `new_countdown > 0`.
pub(crate) fn charge_expired(mut countdown: i64, rate: Rate, rng: &mut Rng) -> (u64, i64) {
    let mut nsamples = 0;
    while countdown <= 0 {
        countdown += rate.draw_gap_bytes(rng);
        nsamples += 1;
    }
    (nsamples, countdown)
}

/// Number of words needed for `bytes` bytes (rounded up), the `length` of the
/// `External` alloc event.
pub(crate) fn words_for(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(WORD_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates the countdown over a stream of allocations.
    fn simulate(rate: f64, sizes: impl Iterator<Item = usize>, seed: u64) -> (u64, u64, u64) {
        let r = Rate::new(rate);
        let mut rng = Rng::new(seed);
        let mut countdown = r.draw_gap_bytes(&mut rng);
        let (mut bytes, mut samples, mut sampled_allocs) = (0u64, 0u64, 0u64);
        for size in sizes {
            bytes += size as u64;
            countdown -= size as i64;
            if countdown <= 0 {
                let (n, c) = charge_expired(countdown, r, &mut rng);
                samples += n;
                sampled_allocs += 1;
                countdown = c;
            }
        }
        (bytes, samples, sampled_allocs)
    }

    #[test]
    fn gaps_have_the_geometric_mean() {
        for rate in [1e-1, 1e-3, 1e-5] {
            let r = Rate::new(rate);
            let mut rng = Rng::new(7);
            let n = 200_000;
            let sum: f64 = (0..n).map(|_| r.draw_gap_words(&mut rng) as f64).sum();
            let mean = sum / n as f64;
            let expected = 1.0 / rate;
            // The standard deviation of the mean is about expected / sqrt(n).
            assert!(
                (mean - expected).abs() < 5.0 * expected / (n as f64).sqrt(),
                "rate {rate}: mean gap {mean}, expected {expected}"
            );
        }
    }

    #[test]
    fn rate_one_samples_every_word() {
        let r = Rate::new(1.0);
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            assert_eq!(r.draw_gap_words(&mut rng), 1);
        }
        let (bytes, samples, allocs) =
            simulate(1.0, [8usize, 16, 24, 80].into_iter().cycle().take(400), 3);
        assert_eq!(samples * WORD_BYTES, bytes);
        assert_eq!(allocs, 400);
    }

    #[test]
    fn estimates_are_unbiased_for_mixed_sizes() {
        // Sizes that are not multiples of the word size, small and large.
        let sizes = (0..2_000_000u64)
            .map(|i| [3usize, 17, 40, 100, 1000, 4099, 65_536][(i * 2_654_435_761 % 7) as usize]);
        let rate = 1e-3;
        let (bytes, samples, _) = simulate(rate, sizes, 11);
        let estimate = samples as f64 * WORD_BYTES as f64 / rate;
        let rel = (estimate - bytes as f64) / bytes as f64;
        // ~ 1.3e9 bytes at 1/8000 per byte: ~160k samples, 1 sigma ~ 0.25%.
        assert!(rel.abs() < 0.015, "relative error {rel}");
    }

    #[test]
    fn huge_allocations_carry_many_samples() {
        let r = Rate::new(1e-2);
        let mut rng = Rng::new(5);
        let size = 80_000_000i64; // 10M words: ~100k samples
        let (n, c) = charge_expired(1 - size, r, &mut rng);
        assert!(c > 0);
        assert!((n as f64 - 100_000.0).abs() < 2_000.0, "nsamples {n}");
    }

    #[test]
    fn words_round_up() {
        assert_eq!(words_for(1), 1);
        assert_eq!(words_for(8), 1);
        assert_eq!(words_for(9), 2);
        assert_eq!(words_for(0), 0);
    }
}
