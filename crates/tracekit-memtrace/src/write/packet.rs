//! Writing packet headers and event headers; mirrors [`crate::read`]'s
//! `packet` module (the header layout is in [`crate::format`]; the whole
//! format: `docs/memtrace-format.md` at the repository root, §3 and §4).
//! Fields known only when a packet is complete (its size, time range and id
//! range) are left as zeros and patched by [`finish_header`].

use super::backtrace::BacktraceEncoder;
use super::buf::{patch_i64, patch_u32, put_i64, put_u16, put_u32};
use crate::format::{EVENT_TIME_BITS, EVENT_TIME_MASK, MAGIC};

/// Starts a packet at the beginning of `b` (which must be empty). Without a
/// cache the verifier is the dummy one that checks nothing.
pub(crate) fn put_header(
    b: &mut Vec<u8>,
    version: u16,
    pid: i64,
    domain: u16,
    cache: Option<&mut BacktraceEncoder>,
) {
    debug_assert!(b.is_empty());
    put_u32(b, MAGIC);
    put_u32(b, 0); // packet size
    put_i64(b, 0); // time_begin
    put_i64(b, 0); // time_end
    put_u32(b, 0); // flush duration
    put_u16(b, version);
    put_i64(b, pid);
    if version >= 3 {
        put_u16(b, domain);
    }
    match cache {
        Some(c) => c.put_cache_verifier(b),
        None => {
            put_u16(b, 0xffff);
            put_u16(b, 0);
            put_i64(b, 0);
        }
    }
    put_i64(b, 0); // alloc_id_begin
    put_i64(b, 0); // alloc_id_end
}

/// Fills in the size, time range and id range of the packet in `b`.
pub(crate) fn finish_header(
    b: &mut [u8],
    time_begin: i64,
    time_end: i64,
    id_begin: u64,
    id_end: u64,
) {
    let size_bits = (b.len() as u32).wrapping_mul(8);
    patch_u32(b, 4, size_bits);
    patch_i64(b, 8, time_begin);
    patch_i64(b, 16, time_end);
    patch_u32(b, 24, 0);
    // alloc ids are the last 16 bytes of the header, whose size depends on
    // the version at offset 28.
    let version = u16::from_le_bytes([b[28], b[29]]);
    let ids = crate::format::header_size(version) - 16;
    patch_i64(b, ids, id_begin as i64);
    patch_i64(b, ids + 8, id_end as i64);
}

/// An event header word: the code in the top 7 bits, the low 25 bits of the
/// time below.
#[inline(always)]
pub(crate) fn put_event_header(b: &mut Vec<u8>, code: u8, time: i64) {
    put_u32(
        b,
        (u32::from(code) << EVENT_TIME_BITS) | (time & EVENT_TIME_MASK) as u32,
    );
}
