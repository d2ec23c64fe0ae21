//! Encoding backtraces and the packet headers' cache verifier; mirrors
//! [`crate::read`]'s `backtrace` module, whose docs lay out the codewords.
//! The whole format: `docs/memtrace-format.md` at the repository root, §9
//! "Backtrace codewords and the cache verifier".
//!
//! The encoder keeps, per bucket, the cached code, when it was last used (an
//! allocation id, for eviction) and the bucket that followed it last time (the
//! prediction). A frame goes to one of two buckets chosen by two hashes of its
//! code, `((code × 0x4983723) >> 11) & 0x3fff` and
//! `((code × 0xfdea731) >> 21) & 0x3fff`: a hit if either holds the code, else
//! a miss that evicts the one used less recently. After a hit, a run of
//! correctly predicted frames costs nothing beyond a count (up to 255 per
//! codeword). Frames are coded from the outermost new frame inwards; the
//! coding stops once the backtrace's codewords pass 4096 − 10 bytes, dropping
//! the innermost frames.
//!
//! The verifier's bucket index starts at 4242 and advances by 5413 modulo
//! 2^14 with every packet.

use super::buf::{put_i64, put_u8, put_u16};
use crate::format::{BACKTRACE_MAX_LENGTH, CACHE_MASK, CACHE_SIZE};
use crate::types::LocationCode;

fn boxed_array<T: Copy + Default, const N: usize>() -> Box<[T; N]> {
    let v = vec![T::default(); N].into_boxed_slice();
    match v.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("length is N"),
    }
}

/// One domain's backtrace cache, encoder side.
pub(crate) struct BacktraceEncoder {
    cache: Box<[i64; CACHE_SIZE]>,
    date: Box<[u64; CACHE_SIZE]>,
    next: Box<[u16; CACHE_SIZE]>,
    next_verify_ix: usize,
}

/// The two candidate buckets of a code, computed with OCaml's 63-bit
/// arithmetic (only bits 11..35 of the product matter, so 64-bit wrapping
/// multiplication gives the same buckets).
#[inline(always)]
fn buckets(code: i64) -> (usize, usize) {
    let c = code as u64;
    let h1 = (c.wrapping_mul(0x4983723) >> 11) as usize & CACHE_MASK;
    let h2 = (c.wrapping_mul(0xfdea731) >> 21) as usize & CACHE_MASK;
    (h1, h2)
}

#[inline(always)]
fn put_hit(b: &mut Vec<u8>, bucket: usize, ncorrect: u32) {
    let w = (bucket << 2) as u16;
    match ncorrect {
        0 => put_u16(b, w),
        1 => put_u16(b, w | 1),
        n => {
            put_u16(b, w | 2);
            put_u8(b, n as u8);
        }
    }
}

impl BacktraceEncoder {
    pub(crate) fn new() -> BacktraceEncoder {
        BacktraceEncoder {
            cache: boxed_array(),
            date: boxed_array(),
            next: boxed_array(),
            next_verify_ix: 4242,
        }
    }

    /// Appends the cache verifier of a new packet: a bucket index (a fixed
    /// sequence), the bucket it predicts, and its code.
    pub(crate) fn put_cache_verifier(&mut self, b: &mut Vec<u8>) {
        let ix = self.next_verify_ix;
        self.next_verify_ix = (ix + 5413) & CACHE_MASK;
        put_u16(b, ix as u16);
        put_u16(b, self.next[ix]);
        put_i64(b, self.cache[ix]);
    }

    /// Encodes `callstack[lo..len]` (innermost first) from index `len - 1`
    /// down to `lo`, calling `new_location` with the index of each frame that
    /// missed the cache. Unless `WHOLE`, stops early when the encoding would
    /// pass 4 KiB (dropping the innermost frames), as the reference writer
    /// does. Returns the number of codewords.
    pub(crate) fn put_backtrace<const WHOLE: bool>(
        &mut self,
        b: &mut Vec<u8>,
        alloc_id: u64,
        callstack: &[LocationCode],
        lo: usize,
        len: usize,
        mut new_location: impl FnMut(usize),
    ) -> usize {
        let limit = if WHOLE {
            usize::MAX - (2 + 8)
        } else {
            b.len() + BACKTRACE_MAX_LENGTH - (2 + 8)
        };
        let lo = lo as isize;
        let mut pos = len as isize - 1;
        let mut ncodes = 0usize;
        let mut predictor = 0usize;
        // Each turn codes one frame without prediction, then follows the
        // predictions from it as far as they go.
        'no_prediction: loop {
            if pos < lo || b.len() > limit {
                return ncodes;
            }
            let code = callstack[pos as usize].get();
            let (h1, h2) = buckets(code);
            let mut hit = if self.cache[h1] == code {
                h1
            } else if self.cache[h2] == code {
                h2
            } else {
                new_location(pos as usize);
                let bucket = if self.date[h1] < self.date[h2] {
                    h1
                } else {
                    h2
                };
                self.cache[bucket] = code;
                self.date[bucket] = alloc_id;
                self.next[predictor] = bucket as u16;
                put_u16(b, ((bucket << 2) | 3) as u16);
                put_i64(b, code);
                predictor = bucket;
                pos -= 1;
                ncodes += 1;
                continue 'no_prediction;
            };
            loop {
                // A hit in bucket `hit`, the first of a run of predictions.
                self.date[hit] = alloc_id;
                self.next[predictor] = hit as u16;
                let orig_hit = hit;
                predictor = hit;
                ncodes += 1;
                pos -= 1;
                let mut ncorrect = 0u32;
                loop {
                    if pos < lo || b.len() + 2 > limit {
                        put_hit(b, orig_hit, ncorrect);
                        return ncodes;
                    }
                    let code = callstack[pos as usize].get();
                    let pred_bucket = usize::from(self.next[predictor]) & CACHE_MASK;
                    if self.cache[pred_bucket] != code {
                        put_hit(b, orig_hit, ncorrect);
                        continue 'no_prediction;
                    }
                    if ncorrect == 255 {
                        put_hit(b, orig_hit, ncorrect);
                        hit = pred_bucket;
                        break;
                    }
                    predictor = pred_bucket;
                    ncorrect += 1;
                    pos -= 1;
                }
            }
        }
    }
}
