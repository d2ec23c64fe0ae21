//! Encoding the trace-info packet, the first packet of every trace, from an
//! [`Info`]. It mirrors [`crate::read`]'s `info` module, whose docs give the
//! byte layout of the event body; the whole format is described in
//! `docs/memtrace-format.md` at the repository root, §5 "Trace-info packet".
//!
//! The writer fills the packet as a reader expects it: a header with
//! `time_begin = time_end = start_time`, object ids 0 to 0 and the verifier
//! that checks nothing, whose pid is the writer's (from
//! [`WriterOptions::getpid`](super::WriterOptions::getpid) if given) and
//! whose domain is [`Info::initial_domain`]; then the one trace-info event,
//! stamped `start_time`, with the body fields in order. Names are written up
//! to their first NUL byte. The context string is always written (the writer
//! writes v2 and v3 only), `None` as the empty string.

use super::buf::{put_f64, put_i64, put_string, put_u8};
use super::packet::{finish_header, put_event_header, put_header};
use crate::format::EV_TRACE_INFO;
use crate::types::{FormatVersion, Info};

/// The whole trace-info packet of a trace in format `version` written by
/// process `pid`.
pub(super) fn trace_info_packet(version: FormatVersion, pid: i64, info: &Info) -> Vec<u8> {
    let start = info.start_time.as_micros();
    let mut b = Vec::with_capacity(256);
    put_header(
        &mut b,
        version.number(),
        pid,
        info.initial_domain.get(),
        None,
    );
    put_event_header(&mut b, EV_TRACE_INFO, start);
    put_f64(&mut b, info.sample_rate);
    put_u8(&mut b, info.word_size);
    put_string(&mut b, &info.executable_name);
    put_string(&mut b, &info.host_name);
    put_string(&mut b, &info.ocaml_runtime_params);
    put_i64(&mut b, info.pid);
    put_string(&mut b, info.context.as_deref().unwrap_or(b""));
    finish_header(&mut b, start, start, 0, 0);
    b
}
