//! Encoding the bodies of allocation, promotion and collection events into
//! the current packet. It mirrors [`crate::read`]'s `events` module, whose
//! docs give the byte layout of each body; the whole format is described in
//! `docs/memtrace-format.md` at the repository root, §7 "Allocation events"
//! and §8 "Promotions and collections".
//!
//! What the writer decides, so that its bytes are the reference writer's:
//!
//! * **Common prefix.** The callstack is given innermost frame first; the
//!   common prefix is the length of the longest common *suffix* of this
//!   callstack and the previous allocation's (each without its first
//!   `drop_slots` frames), that is, the outermost frames the two share. Only
//!   the other frames are coded.
//! * **Short or long form.** The short form (event code `100 + length`) when
//!   the length is 1 to 16 words, the source minor, one sample, and fewer than
//!   256 frames are coded; the long form (code 2) otherwise. The codeword
//!   count is written as a placeholder and patched once the backtrace coder
//!   has run.
//! * **Limits.** Lengths and sample counts are OCaml integers: at most
//!   2^62 − 1, or [`WriteError::ValueOutOfRange`].
//! * **Object ids.** An allocation takes the packet's next id; a promotion
//!   or collection of object `id` writes `next − 1 − id` (a promotion of an
//!   id not yet allocated is refused).
//!
//! The `WHOLE`/`EXACT` variants serve [`Writer::put_event_exact`]: they code
//! every frame and location list whole (never truncated), with the common
//! prefix a decoded event carries, so that a copy of a trace reads back as
//! the original did.

use std::io::Write;

use super::Writer;
use super::buf::{self, put_u8, put_vint};
use crate::error::WriteError;
use crate::format::{EV_ALLOC, EV_PROMOTE, EV_SHORT_ALLOC_BASE, OCAML_MAX_INT};
use crate::types::{AllocationSource, Location, LocationCode, ObjId};

/// Which frames of an allocation's backtrace [`Writer`] codes.
#[derive(Clone, Copy, Debug)]
struct Encoding {
    /// The common prefix written in the event.
    common_prefix: usize,
    /// The frames to code: the innermost-first callstack up to here.
    new_len: usize,
}

/// Length of the longest common suffix of `prev[prev_start..]` and
/// `curr[curr_start..]`.
fn common_suffix_len(
    prev: &[LocationCode],
    prev_start: usize,
    curr: &[LocationCode],
    curr_start: usize,
) -> usize {
    let a = curr.get(curr_start..).unwrap_or(&[]);
    let b = prev.get(prev_start..).unwrap_or(&[]);
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    // Whole blocks first: stacks share long suffixes (their outer frames).
    // The block test does not short-circuit, so it compiles to vector code.
    let mut k = n;
    while k >= 8 {
        let diff = a[k - 8..k]
            .iter()
            .zip(&b[k - 8..k])
            .fold(0, |d, (x, y)| d | (x.get() ^ y.get()));
        if diff != 0 {
            break;
        }
        k -= 8;
    }
    while k > 0 && a[k - 1] == b[k - 1] {
        k -= 1;
    }
    n - k
}

fn check_int(v: u64) -> Result<i64, WriteError> {
    match i64::try_from(v) {
        Ok(v) if v <= OCAML_MAX_INT => Ok(v),
        _ => Err(WriteError::ValueOutOfRange),
    }
}

impl<W: Write> Writer<W> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn alloc<L: AsRef<[Location]>>(
        &mut self,
        now: i64,
        length: u64,
        nsamples: u64,
        source: AllocationSource,
        callstack: &[LocationCode],
        drop_slots: usize,
        decode: impl FnMut(LocationCode) -> L,
    ) -> Result<ObjId, WriteError> {
        let common_len = common_suffix_len(
            &self.last_callstack,
            self.last_dropped_slots,
            callstack,
            drop_slots,
        );
        let encoding = Encoding {
            common_prefix: common_len,
            new_len: callstack.len() - common_len,
        };
        self.encode_alloc::<false, L>(
            now, length, nsamples, source, callstack, drop_slots, encoding, decode,
        )
    }

    /// Writes an allocation of `callstack` (innermost first, the first
    /// `drop_slots` left out) as `encoding` says, with the next object id.
    /// `WHOLE` codes every frame and every location list whole, never
    /// truncated (for [`Writer::put_event_exact`]); a constant, so that the
    /// tracer's path carries none of that.
    #[allow(clippy::too_many_arguments)]
    fn encode_alloc<const WHOLE: bool, L: AsRef<[Location]>>(
        &mut self,
        now: i64,
        length: u64,
        nsamples: u64,
        source: AllocationSource,
        callstack: &[LocationCode],
        drop_slots: usize,
        encoding: Encoding,
        mut decode: impl FnMut(LocationCode) -> L,
    ) -> Result<ObjId, WriteError> {
        let length = check_int(length)?;
        let nsamples = check_int(nsamples)?;
        let Encoding {
            common_prefix,
            new_len,
        } = encoding;
        let short = (1..=16).contains(&length)
            && source == AllocationSource::Minor
            && nsamples == 1
            && new_len < 256;
        let code = if short {
            EV_SHORT_ALLOC_BASE + length as u8
        } else {
            EV_ALLOC
        };
        self.begin_event::<WHOLE>(code, now)?;
        self.last_callstack.clear();
        self.last_callstack.extend_from_slice(callstack);
        self.last_dropped_slots = drop_slots;
        let id = self.ids.next;
        self.ids.next += 1;
        let b = &mut self.packet;
        let count_at = if short {
            put_vint(b, common_prefix as i64);
            put_u8(b, 0);
            b.len() - 1
        } else {
            put_vint(b, length);
            put_vint(b, nsamples);
            put_u8(b, source.code());
            put_vint(b, common_prefix as i64);
            buf::put_u16(b, 0);
            b.len() - 2
        };
        let locations = &mut self.locations;
        let pending = &mut self.pending_locs;
        let ends = &mut self.pending_loc_ends;
        // Two calls, so that the tracer's path captures nothing it does not use.
        let (nencoded, as_is) = if WHOLE {
            let mut as_is = true;
            let mut zero_sent = self.zero_sent;
            let nencoded =
                self.cache
                    .put_backtrace::<true>(b, id, callstack, drop_slots, new_len, |index| {
                        let code = callstack[index];
                        as_is &= locations.put_location(pending, code, decode(code).as_ref(), true);
                        ends.push(pending.len());
                        zero_sent |= code.get() == 0;
                    });
            if !zero_sent && callstack[drop_slots..new_len].contains(&LocationCode::new(0)) {
                // Code 0 hits the cache's never-written bucket 0, so the
                // backtrace coder never reports it as new and the reference
                // writer never sends its locations; a reader then cannot
                // print it. Written whole, it is sent like any other code.
                let code = LocationCode::new(0);
                as_is &= locations.put_location(pending, code, decode(code).as_ref(), true);
                ends.push(pending.len());
                zero_sent = true;
            }
            self.zero_sent = zero_sent;
            (nencoded, as_is)
        } else {
            let nencoded =
                self.cache
                    .put_backtrace::<false>(b, id, callstack, drop_slots, new_len, |index| {
                        let code = callstack[index];
                        locations.put_location(pending, code, decode(code).as_ref(), false);
                        ends.push(pending.len());
                    });
            (nencoded, true)
        };
        if short {
            b[count_at] = nencoded as u8;
        } else {
            buf::patch_u16(b, count_at, nencoded as u16);
        }
        if WHOLE && (nencoded > usize::from(u16::MAX) || !as_is) {
            // The packet holds an event that would not read back as given;
            // nothing more may be written (not even by `drop`).
            self.closed = true;
            return Err(WriteError::NotReproducible(if as_is {
                "a backtrace needing more than 65535 codewords"
            } else {
                "a location code with more than 255 locations"
            }));
        }
        Ok(ObjId::new(id))
    }

    /// [`Writer::put_event_exact`]'s allocation, its ids already in place;
    /// `callstack` is its backtrace innermost first.
    #[cfg(feature = "read")]
    pub(super) fn alloc_exact<L: AsRef<[Location]>>(
        &mut self,
        now: i64,
        a: &crate::event::Alloc<'_>,
        callstack: &[LocationCode],
        decode: impl FnMut(LocationCode) -> L,
    ) -> Result<(), WriteError> {
        let stored = a.common_prefix;
        let (len, prev_len) = (callstack.len(), self.last_callstack.len());
        // What a reader does with the stored prefix: keep that much of the
        // previous backtrace and decode the rest, or, if the previous one is
        // shorter, keep it whole and decode nothing into it.
        let new_len = if stored <= prev_len {
            let kept = len >= stored
                && callstack[len - stored..] == self.last_callstack[prev_len - stored..];
            if !kept {
                return Err(WriteError::NotReproducible(
                    "a backtrace that does not start with its common prefix",
                ));
            }
            len - stored
        } else {
            if callstack != self.last_callstack.as_slice() {
                return Err(WriteError::NotReproducible(
                    "a common prefix beyond the previous backtrace, which differs",
                ));
            }
            0
        };
        let encoding = Encoding {
            common_prefix: stored,
            new_len,
        };
        let id = self.encode_alloc::<true, L>(
            now, a.length, a.nsamples, a.source, callstack, 0, encoding, decode,
        )?;
        debug_assert_eq!(id, a.obj_id);
        Ok(())
    }

    pub(super) fn promote_or_collect(
        &mut self,
        code: u8,
        now: i64,
        id: ObjId,
    ) -> Result<(), WriteError> {
        let raw = id.get();
        let id = check_int(raw)?;
        // A collect may name another domain's object (a negative delta, which
        // current readers accept); a promote may not. The next id only grows
        // (a new packet may take a new chunk), so checking before the event
        // starts is enough; the delta is taken after, against the packet's ids.
        if code == EV_PROMOTE && id >= self.ids.next as i64 {
            return Err(WriteError::PromoteOfUnallocated {
                id: raw,
                next: self.ids.next,
            });
        }
        self.begin_event::<false>(code, now)?;
        put_vint(&mut self.packet, self.ids.next as i64 - 1 - id);
        Ok(())
    }
}
