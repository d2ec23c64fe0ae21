//! Decoding the trace-info packet: the first packet of every trace, which
//! carries the trace's metadata ([`Info`]). Its encoder is
//! [`crate::write`]'s `info` module; the whole format is described in
//! `docs/memtrace-format.md` at the repository root, §5 "Trace-info packet".
//!
//! The packet is an ordinary packet (header layout in [`crate::format`])
//! whose content is exactly one event, event code 0, stamped with the
//! packet's `time_begin`. Its header has `time_begin = time_end =` the trace's
//! start time, object ids 0 to 0, and the cache verifier that checks nothing;
//! its domain field (v3) is the initial domain.
//!
//! The event's body, after its 4-byte event header:
//!
//! | offset | size | field | meaning |
//! | --- | --- | --- | --- |
//! | 0 | 8 | sample_rate | f64 (IEEE-754 bits, little-endian): the probability that a word of allocation is sampled |
//! | 8 | 1 | word_size | u8, the traced program's word size in bits (64) |
//! | 9 | n + 1 | executable_name | bytes up to a NUL terminator |
//! | … | n + 1 | host_name | bytes up to a NUL terminator |
//! | … | n + 1 | ocaml_runtime_params | bytes up to a NUL terminator (OCaml's `Sys.runtime_parameters ()`) |
//! | … | 8 | pid | i64, the traced process |
//! | … | n + 1 | context | bytes up to a NUL terminator; **v2 and v3 only** (absent in v1); the empty string means no context |
//!
//! What the decoder checks, each failure an error at the offset named:
//!
//! * the first packet's header is well formed, and its content is all in
//!   the input;
//! * the event code is 0 and the event's time equals the header's
//!   `time_begin` ([`ReadErrorKind::BadTraceInfo`]);
//! * the body ends exactly at the end of the packet: nothing may follow the
//!   last field ([`ReadErrorKind::BadTraceInfo`]).
//!
//! [`Info::start_time`] is the header's `time_begin` and
//! [`Info::initial_domain`] its domain. The pid in the body, not the one in
//! the packet header, is the one every later packet's header is compared
//! with: packets of another pid (a forked child) are skipped.

use super::buf::{Cursor, Eof};
use super::packet::{event_code, event_time, read_packet_header};
use crate::error::{ReadError, ReadErrorKind};
use crate::format::EV_TRACE_INFO;
use crate::types::{DomainId, FormatVersion, Info, Name, Timestamp};

/// Decodes the trace-info packet at the start of `data`.
pub(super) fn read_trace_info(data: &[u8]) -> Result<(Info, FormatVersion, usize), ReadError> {
    let header = read_packet_header(data, 0)?;
    let start = header.header_size;
    let end = start + header.content_size;
    let bad = |kind, at: usize| ReadError::new(kind, at as u64);
    if data.len() < end {
        return Err(bad(ReadErrorKind::UnexpectedEof, data.len()));
    }
    let mut c = Cursor {
        data: &data[..end],
        pos: start,
    };
    let eof = |c: &Cursor<'_>| bad(ReadErrorKind::UnexpectedEof, c.pos);
    let word = c.u32().map_err(|_| eof(&c))?;
    let time = event_time(word, header.time_begin);
    if event_code(word) != EV_TRACE_INFO || time != header.time_begin {
        return Err(bad(ReadErrorKind::BadTraceInfo, start));
    }
    let info = (|| -> Result<Info, Eof> {
        let sample_rate = c.f64()?;
        let word_size = c.u8()?;
        let executable_name = Name::new(c.string()?);
        let host_name = Name::new(c.string()?);
        let ocaml_runtime_params = Name::new(c.string()?);
        let pid = c.i64()?;
        let context = if header.version >= 2 {
            match c.string()? {
                b"" => None,
                s => Some(Name::new(s)),
            }
        } else {
            None
        };
        Ok(Info {
            sample_rate,
            word_size,
            executable_name,
            host_name,
            ocaml_runtime_params,
            pid,
            initial_domain: DomainId::new(header.domain),
            start_time: Timestamp::from_micros(header.time_begin),
            context,
        })
    })()
    .map_err(|_| eof(&c))?;
    if c.remaining() != 0 {
        return Err(bad(ReadErrorKind::BadTraceInfo, c.pos));
    }
    let version = FormatVersion::from_number(header.version).unwrap_or(FormatVersion::V3);
    Ok((info, version, end))
}
