//! Decoding the backtraces of allocation events: the codewords and the
//! per-domain backtrace cache they refer to, and the cache verifier of packet
//! headers. The encoder is [`crate::write`]'s `backtrace` module. The whole
//! format: `docs/memtrace-format.md` at the repository root, §9 "Backtrace
//! codewords and the cache verifier".
//!
//! An alloc event's backtrace is `nencoded` codewords (u16 each):
//!
//! | `w & 3` | meaning | followed by |
//! | --- | --- | --- |
//! | 0 | hit in bucket `w >> 2`, then 0 predicted frames | – |
//! | 1 | hit, then 1 predicted frame | – |
//! | 2 | hit, then N predicted frames | u8 N |
//! | 3 | miss: bucket `w >> 2` now holds the code | i64 code |
//!
//! Each domain has a cache of 2^14 buckets, zero at the start of the trace,
//! each holding a location code and the bucket predicted to follow it. For
//! every codeword the decoder records the codeword's bucket as the prediction
//! of the previous bucket, emits the bucket's code (a miss first stores the
//! code that follows), then follows N predictions, emitting each predicted
//! bucket's code. The previous bucket starts at 0 for every backtrace. The
//! decoded frames are appended, caller first, after the `common_prefix` frames
//! kept from the previous backtrace; when `common_prefix` is longer than that
//! backtrace (the writer truncated it), the codewords only update the cache.
//!
//! The verifier in a packet header names a bucket (`0xffff`: none), the bucket
//! it predicts and its code; a reader that decodes backtraces checks them
//! against its cache before the packet's events.

use super::buf::{Cursor, Eof};
use super::packet::CacheVerifier;
use crate::format::{CACHE_MASK, CACHE_SIZE, ocaml_int};
use crate::types::LocationCode;

/// Most frames one domain's backtrace may hold; beyond it decoding fails
/// rather than allocate without bound (real stacks are far smaller).
pub(crate) const MAX_BACKTRACE_FRAMES: usize = 1 << 22;

/// Why a backtrace could not be decoded.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BtError {
    Eof,
    TooLong,
}

impl From<Eof> for BtError {
    fn from(_: Eof) -> BtError {
        BtError::Eof
    }
}

/// One domain's backtrace cache, decoder side.
///
/// Both arrays are in one allocation, so that the decoding loop needs one
/// base register for them, not two.
pub(crate) struct BacktraceCache {
    slots: Box<Slots>,
}

struct Slots {
    loc: [i64; CACHE_SIZE],
    pred: [u16; CACHE_SIZE],
}

/// The empty cache, all zeros, allocated without a copy through the stack
/// (`Box::new_zeroed` is newer than the crate's minimum Rust).
fn zeroed_slots() -> Box<Slots> {
    let layout = std::alloc::Layout::new::<Slots>();
    // SAFETY: `Slots` is not zero-sized; all zeros is a valid `Slots` (integer
    // arrays); the pointer comes from the global allocator with `Slots`'s
    // layout, as `Box` requires.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<Slots>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(p)
    }
}

impl BacktraceCache {
    pub(crate) fn new() -> BacktraceCache {
        BacktraceCache {
            slots: zeroed_slots(),
        }
    }

    /// Whether the packet's verifier agrees with this cache (a verifier with
    /// index `0xffff` checks nothing).
    pub(crate) fn verify(&self, v: &CacheVerifier) -> bool {
        if v.ix == 0xffff {
            return true;
        }
        let ix = usize::from(v.ix);
        ix < CACHE_SIZE && self.slots.pred[ix] == v.pred && self.slots.loc[ix] == ocaml_int(v.value)
    }

    /// Whether a verifier agrees with a cache that is still all zeros.
    pub(crate) fn verify_empty(v: &CacheVerifier) -> bool {
        v.ix == 0xffff || (usize::from(v.ix) < CACHE_SIZE && v.pred == 0 && v.value == 0)
    }

    /// Decodes `nencoded` codewords, appending the frames to `bt`.
    ///
    /// The cursor and the frame buffer's length stay in locals for the whole
    /// backtrace and are written back once: through `&mut` they were
    /// reloaded and stored at every frame. The loop is a function marked
    /// `inline(always)` rather than a closure called in place: LLVM inlined
    /// the closure in some crates' builds of the reader and not in others.
    ///
    /// Inlined into a sink's loop ([`crate::Events::read_into`]), the loop's
    /// state spilled to the stack at every codeword; the fewer registers it
    /// needs, the less it spills. So the unread bytes are a shrinking slice,
    /// the frame buffer two pointers, the loop a countdown, and the cache one
    /// allocation. (The measurements behind each choice are in
    /// `docs/performance.md`.)
    #[inline(always)]
    fn decode(
        &mut self,
        c: &mut Cursor<'_>,
        nencoded: usize,
        bt: &mut Vec<LocationCode>,
        budget: &mut usize,
    ) -> Result<(), BtError> {
        let data = c.data;
        let mut rest = data.get(c.pos..).unwrap_or(&[]);
        let mut out = FrameWriter::new(bt);
        let result = self.decode_words(&mut rest, nencoded, &mut out, budget);
        c.pos = data.len() - rest.len();
        out.finish();
        result
    }

    #[inline(always)]
    fn decode_words(
        &mut self,
        rest: &mut &[u8],
        nencoded: usize,
        out: &mut FrameWriter<'_>,
        budget: &mut usize,
    ) -> Result<(), BtError> {
        let Slots { loc, pred: pred_of } = &mut *self.slots;
        let mut pred = 0usize;
        // Counting down keeps one register for the loop, not a counter and a
        // bound.
        let mut left = nencoded;
        while left != 0 {
            left -= 1;
            let w = u16::from_le_bytes(*take::<2>(rest)?);
            let bucket = usize::from(w >> 2) & CACHE_MASK;
            pred_of[pred] = bucket as u16;
            pred = bucket;
            let tag = usize::from(w & 3);
            if tag == 3 {
                let code = ocaml_int(i64::from_le_bytes(*take::<8>(rest)?));
                loc[bucket] = code;
                out.reserve(1, budget)?;
                // SAFETY: `reserve` made room for the frame.
                unsafe { out.push_unchecked(LocationCode::from_canonical(code)) };
                continue;
            }
            // Tags 0, 1 and 2 come mixed in real traces, so a branch on the
            // tag is mispredicted half the time: the count and the step past
            // its byte are selected without one. Tag 2's count byte follows.
            let wide = tag >> 1;
            let byte = match rest.first() {
                Some(&b) => usize::from(b),
                None if wide == 0 => 0,
                None => return Err(BtError::Eof),
            };
            // `wide` is 1 only when a byte was there.
            *rest = rest.get(wide..).unwrap_or_default();
            let n = if wide != 0 { byte } else { tag };
            // One slot more than the run needs: the first predicted frame is
            // written whether or not there is one, and counted only if there is.
            out.reserve(n + 2, budget)?;
            let next = usize::from(pred_of[bucket]) & CACHE_MASK;
            // SAFETY: `reserve` made room for two frames, the second counted
            // only when the run has one (`n >= 1`).
            unsafe {
                out.write_two(
                    LocationCode::from_canonical(loc[bucket]),
                    LocationCode::from_canonical(loc[next]),
                    n != 0,
                );
            }
            if n != 0 {
                pred = next;
            }
            if n > 1 {
                // SAFETY: `n - 1` frames of room are left; the run so far is
                // the last two frames out.
                pred = unsafe { follow(loc, pred_of, bucket, next, n, out) };
            }
        }
        Ok(())
    }

    /// Steps over `nencoded` codewords, only updating the cache.
    #[inline(always)]
    fn update_cache(&mut self, c: &mut Cursor<'_>, nencoded: usize) -> Result<(), BtError> {
        let Slots { loc, pred: pred_of } = &mut *self.slots;
        let mut pred = 0usize;
        for _ in 0..nencoded {
            let w = c.u16()?;
            let bucket = usize::from(w >> 2) & CACHE_MASK;
            pred_of[pred] = bucket as u16;
            pred = bucket;
            match w & 3 {
                3 => loc[bucket] = ocaml_int(c.i64()?),
                tag => {
                    let n = match tag {
                        0 => 0,
                        1 => 1,
                        _ => c.u8()?,
                    };
                    for _ in 0..n {
                        pred = usize::from(pred_of[pred]) & CACHE_MASK;
                    }
                }
            }
        }
        Ok(())
    }

    /// Decodes a backtrace into `bt`, which holds the domain's previous
    /// backtrace. If `common_prefix` is longer than that (the previous one was
    /// truncated by the writer), the codewords still update the cache but
    /// `bt` keeps the previous backtrace, as the reference reader does.
    /// `budget` is how many more frames of buffer all domains may allocate.
    #[inline(always)]
    pub(crate) fn read_backtrace(
        &mut self,
        c: &mut Cursor<'_>,
        nencoded: usize,
        common_prefix: usize,
        bt: &mut Vec<LocationCode>,
        budget: &mut usize,
    ) -> Result<(), BtError> {
        if common_prefix <= bt.len() {
            bt.truncate(common_prefix);
            self.decode(c, nencoded, bt, budget)
        } else {
            self.update_cache(c, nencoded)
        }
    }
}

/// Emits the rest of a run of `n` frames predicted after `start`, whose first
/// predicted frame, bucket `first`, is out; returns the bucket the run ends
/// in.
///
/// Each step is a load whose address is the previous load's value, so a run
/// costs a load latency per frame. But a run only reads the cache, so once
/// the chain comes back to a bucket it has visited it repeats itself: deep
/// OCaml stacks are recursion, and their runs are mostly a bucket predicting
/// itself (a function calling itself from one site) or a short cycle through
/// the run's first bucket (mutual recursion). From there the frames are a
/// copy of the last period's, which costs no load chain.
///
/// # Safety
///
/// `out` has room for `n - 1` more frames.
#[inline(always)]
unsafe fn follow(
    loc: &[i64; CACHE_SIZE],
    pred_of: &[u16; CACHE_SIZE],
    start: usize,
    first: usize,
    n: usize,
    out: &mut FrameWriter<'_>,
) -> usize {
    let mut b = first;
    for k in 1..n {
        let next = usize::from(pred_of[b]) & CACHE_MASK;
        if (next == b || next == start) && n - k >= LONG_REPEAT {
            // SAFETY: `n - k` frames are left of the room the caller made;
            // the last `k + 1` frames out are this run's.
            return unsafe { repeat(loc, pred_of, start, b, next, k, n, out) };
        }
        b = next;
        // SAFETY: the caller made room for `n - 1` frames; this is the `k`th.
        unsafe { out.push_unchecked(LocationCode::from_canonical(loc[b])) };
    }
    b
}

/// How many frames must be left of a run for [`repeat`] to take it over: a
/// call and a mispredicted branch cost more than a few steps of the chain.
const LONG_REPEAT: usize = 16;

/// The rest of a run from step `k` (of `n`), at bucket `b`, whose successor
/// `next` is `b` itself or the run's first bucket `start`: the frames repeat
/// with period 1 or `k + 1`.
///
/// # Safety
///
/// `out` has room for `n - k` more frames and its last `k + 1` frames are the
/// run's so far (`start`'s frame and `k` predicted ones).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn repeat(
    loc: &[i64; CACHE_SIZE],
    pred_of: &[u16; CACHE_SIZE],
    start: usize,
    b: usize,
    next: usize,
    k: usize,
    n: usize,
    out: &mut FrameWriter<'_>,
) -> usize {
    let left = n - k;
    if next == b {
        let code = LocationCode::from_canonical(loc[b]);
        for _ in 0..left {
            // SAFETY: the caller made room for `left` frames.
            unsafe { out.push_unchecked(code) };
        }
        return b;
    }
    let period = k + 1;
    for _ in 0..left {
        // SAFETY: room for `left` frames (the caller's contract); the frame
        // `period` back is initialised: the run's own, or one this loop wrote.
        unsafe { out.push_back_copy(period) };
    }
    // The run ends `n` steps along a cycle of `period` buckets from `start`.
    let mut end = start;
    for _ in 0..n % period {
        end = usize::from(pred_of[end]) & CACHE_MASK;
    }
    end
}

/// Appends to a frame buffer through raw pointers to the next slot and the
/// end of the allocation, which the optimiser holds in registers for a whole
/// backtrace (the `Vec`'s own length is reloaded and stored at every push, as
/// the `Vec` is behind a reference). [`FrameWriter::finish`] writes the length
/// back.
///
/// Invariant: `next` and `end` point into `bt`'s allocation (or one past it):
/// the slots before `next` are initialised, `end` is one past its capacity, and
/// `next <= end`.
struct FrameWriter<'v> {
    bt: &'v mut Vec<LocationCode>,
    next: *mut LocationCode,
    end: *mut LocationCode,
}

impl<'v> FrameWriter<'v> {
    #[inline(always)]
    fn new(bt: &'v mut Vec<LocationCode>) -> Self {
        let base = bt.as_mut_ptr();
        // SAFETY: both stay within (or one past) the allocation.
        let (next, end) = unsafe { (base.add(bt.len()), base.add(bt.capacity())) };
        FrameWriter { bt, next, end }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        // SAFETY: the invariant: both are in the same allocation, `next` after
        // its start.
        unsafe { self.next.offset_from(self.bt.as_ptr()) as usize }
    }

    /// Makes room for `more` frames (within the reader's memory bound).
    #[inline(always)]
    fn reserve(&mut self, more: usize, budget: &mut usize) -> Result<(), BtError> {
        // SAFETY: the invariant (`next <= end`, same allocation).
        let room = unsafe { self.end.offset_from(self.next) as usize };
        if room < more {
            let len = self.len();
            // SAFETY: the invariant.
            unsafe { self.bt.set_len(len) };
            grow(self.bt, more, budget)?;
            let base = self.bt.as_mut_ptr();
            // SAFETY: within (or one past) the new allocation.
            unsafe {
                self.next = base.add(len);
                self.end = base.add(self.bt.capacity());
            }
        }
        Ok(())
    }

    /// # Safety
    ///
    /// `next < end` (`reserve` made room).
    #[inline(always)]
    unsafe fn push_unchecked(&mut self, code: LocationCode) {
        // SAFETY: `next < end` (the caller's contract), so the write stays
        // within the allocation, which nothing else touches meanwhile; it keeps
        // the invariant.
        unsafe {
            self.next.write(code);
            self.next = self.next.add(1);
        }
    }

    /// Writes `first` and `second` to the next two slots and counts the
    /// second only if `keep_second`, without a branch on it.
    ///
    /// # Safety
    ///
    /// At least two slots of room (`next + 1 < end`).
    #[inline(always)]
    unsafe fn write_two(&mut self, first: LocationCode, second: LocationCode, keep_second: bool) {
        // SAFETY: both slots are within the allocation (the caller's
        // contract); the slots before the new `next` are initialised.
        unsafe {
            self.next.write(first);
            self.next.add(1).write(second);
            self.next = self.next.add(1 + usize::from(keep_second));
        }
    }

    /// Appends a copy of the frame `back` slots before the next one.
    ///
    /// # Safety
    ///
    /// `next < end`, and at least `back` frames are written (`back >= 1`).
    #[inline(always)]
    unsafe fn push_back_copy(&mut self, back: usize) {
        // SAFETY: the frame `back` before `next` is initialised and in the
        // allocation (the caller's contract); the write is as `push_unchecked`.
        unsafe {
            let code = self.next.sub(back).read();
            self.push_unchecked(code);
        }
    }

    /// Sets the buffer's length to the frames written.
    #[inline(always)]
    fn finish(self) {
        let len = self.len();
        // SAFETY: the invariant.
        unsafe { self.bt.set_len(len) };
    }
}

/// The next `N` bytes of `rest`, which moves past them.
#[inline(always)]
fn take<'a, const N: usize>(rest: &mut &'a [u8]) -> Result<&'a [u8; N], Eof> {
    let (head, tail) = rest.split_first_chunk::<N>().ok_or(Eof)?;
    *rest = tail;
    Ok(head)
}

/// Makes room for `more` frames, within the reader's memory bound.
#[cold]
#[inline(never)]
fn grow(bt: &mut Vec<LocationCode>, more: usize, budget: &mut usize) -> Result<(), BtError> {
    if bt.len() + more > MAX_BACKTRACE_FRAMES {
        return Err(BtError::TooLong);
    }
    let before = bt.capacity();
    bt.reserve(more.max(64));
    let grown = bt.capacity() - before;
    *budget = budget.checked_sub(grown).ok_or(BtError::TooLong)?;
    Ok(())
}

/// Steps over a backtrace without decoding it (and without touching any
/// cache), for iteration without backtraces.
#[inline(always)]
pub(crate) fn skip_backtrace(c: &mut Cursor<'_>, nencoded: usize) -> Result<(), Eof> {
    for _ in 0..nencoded {
        let w = c.u16()?;
        match w & 3 {
            2 => {
                c.u8()?;
            }
            3 => {
                c.i64()?;
            }
            _ => {}
        }
    }
    Ok(())
}
