//! Decoding packet headers and event headers (the header layout is in
//! [`crate::format`]; the whole format: `docs/memtrace-format.md` at the
//! repository root, §3 "Packet header" and §4 "Event header and event
//! codes"). The encoder is [`crate::write`]'s `packet` module.
//!
//! A header is rejected if its magic is wrong, its version above 3, its size
//! (in bits) negative or smaller than the header, or its time or object-id
//! range reversed. An event's time is the packet's `time_begin` with its low
//! 25 bits replaced by the event's, plus 2^25 µs if those are lower than
//! `time_begin`'s (the 25-bit counter wrapped within the packet; a packet
//! spans at most 30 s, less than 2^25 µs).

use super::buf::{Cursor, Eof};
use crate::error::{ReadError, ReadErrorKind};
use crate::format::{CURRENT_VERSION, EVENT_TIME_BITS, EVENT_TIME_MASK, MAGIC, header_size};

/// The cache verifier of a packet header: bucket `ix` of the decoder's
/// backtrace cache must hold `value` and predict `pred`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheVerifier {
    pub(crate) ix: u16,
    pub(crate) pred: u16,
    pub(crate) value: i64,
}

/// A decoded packet header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PacketHeader {
    pub(crate) header_size: usize,
    /// Content bytes after the header.
    pub(crate) content_size: usize,
    pub(crate) time_begin: i64,
    pub(crate) time_end: i64,
    pub(crate) version: u16,
    pub(crate) pid: i64,
    pub(crate) domain: u16,
    pub(crate) verifier: CacheVerifier,
    pub(crate) alloc_id_begin: i64,
    pub(crate) alloc_id_end: i64,
}

/// Decodes the packet header at `offset` of `data`. Fields are read first and
/// checked afterwards, in the reference reader's order.
pub(crate) fn read_packet_header(data: &[u8], offset: usize) -> Result<PacketHeader, ReadError> {
    let mut c = Cursor::new(data);
    c.pos = offset;
    let eof = |c: &Cursor<'_>| ReadError::new(ReadErrorKind::UnexpectedEof, c.pos as u64);
    macro_rules! get {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(Eof) => return Err(eof(&c)),
            }
        };
    }
    let magic = get!(c.u32());
    let packet_size = get!(c.u32()) as i32;
    let time_begin = get!(c.i64());
    let time_end = get!(c.i64());
    let _flush_duration = get!(c.u32());
    let version = get!(c.u16());
    let pid = get!(c.i64());
    let domain = if version >= 3 { get!(c.u16()) } else { 0 };
    let verifier = CacheVerifier {
        ix: get!(c.u16()),
        pred: get!(c.u16()),
        value: get!(c.i64()),
    };
    let alloc_id_begin = get!(c.i64());
    let alloc_id_end = get!(c.i64());
    let err = |kind| Err(ReadError::new(kind, offset as u64));
    if magic != MAGIC {
        return err(ReadErrorKind::BadMagic(magic));
    }
    if version > CURRENT_VERSION {
        return err(ReadErrorKind::UnsupportedVersion(version));
    }
    let header_size = header_size(version);
    // The size is in bits and must at least cover the header; the reference
    // only rejects negative sizes and then misbehaves on smaller ones.
    let content_size = match usize::try_from(packet_size / 8) {
        Ok(total) if packet_size >= 0 && total >= header_size => total - header_size,
        _ => return err(ReadErrorKind::BadPacketSize),
    };
    if time_begin > time_end {
        return err(ReadErrorKind::PacketTimestampsNotMonotone);
    }
    if alloc_id_begin > alloc_id_end {
        return err(ReadErrorKind::PacketAllocIdsNotMonotone);
    }
    Ok(PacketHeader {
        header_size,
        content_size,
        time_begin,
        time_end,
        version,
        pid,
        domain,
        verifier,
        alloc_id_begin,
        alloc_id_end,
    })
}

/// The absolute time of an event whose header word is `word`, in a packet
/// starting at `time_begin`: the low 25 bits come from the word, the rest from
/// `time_begin`, plus one wrap of 2^25 µs when the low bits went backwards.
#[inline(always)]
pub(crate) fn event_time(word: u32, time_begin: i64) -> i64 {
    let start_low = time_begin & EVENT_TIME_MASK;
    let mut low = i64::from(word) & EVENT_TIME_MASK;
    if low < start_low {
        low += 1 << EVENT_TIME_BITS;
    }
    (time_begin & !EVENT_TIME_MASK).wrapping_add(low)
}

/// [`event_time`] split at the packet start, so that each event's time costs
/// one compare and one add.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PacketClock {
    /// `time_begin` without its low bits, then the same plus one wrap.
    base: i64,
    base_wrapped: i64,
    /// The low bits of `time_begin`.
    low: i64,
}

impl PacketClock {
    pub(crate) fn new(time_begin: i64) -> PacketClock {
        let base = time_begin & !EVENT_TIME_MASK;
        PacketClock {
            base,
            base_wrapped: base.wrapping_add(1 << EVENT_TIME_BITS),
            low: time_begin & EVENT_TIME_MASK,
        }
    }

    /// The same as `event_time(word, time_begin)`.
    #[inline(always)]
    pub(crate) fn event_time(&self, word: u32) -> i64 {
        let low = i64::from(word) & EVENT_TIME_MASK;
        if low < self.low {
            self.base_wrapped.wrapping_add(low)
        } else {
            self.base.wrapping_add(low)
        }
    }
}

/// The event code of an event header word.
#[inline(always)]
pub(crate) fn event_code(word: u32) -> u8 {
    (word >> EVENT_TIME_BITS) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_time_wraps_within_packet() {
        let tb = (5 << 25) + (1 << 25) - 10;
        assert_eq!(event_time(((1 << 25) - 10) as u32, tb), tb);
        assert_eq!(event_time(5, tb), tb + 15);
        assert_eq!(event_code((103 << 25) | 7), 103);
    }

    #[test]
    fn packet_clock_is_event_time() {
        let starts = [
            0,
            1,
            (1 << 25) - 1,
            1 << 25,
            (5 << 25) + 12345,
            -1,
            -(1 << 25) - 7,
            i64::MAX,
            i64::MAX - (1 << 25) + 3,
            i64::MIN,
            i64::MIN + 5,
        ];
        let words = [
            0u32,
            1,
            12344,
            12345,
            12346,
            (1 << 25) - 1,
            1 << 25,
            u32::MAX,
        ];
        for tb in starts {
            let clock = PacketClock::new(tb);
            for w in words {
                assert_eq!(clock.event_time(w), event_time(w, tb), "{tb} {w}");
            }
        }
    }
}
