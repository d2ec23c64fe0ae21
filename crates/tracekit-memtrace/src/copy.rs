//! Re-encoding a trace: every event of a [`Reader`] or a [`StreamReader`]
//! through [`MultiplexedDomains`], as memtrace's own `copy` test program
//! does. The reference writer is deterministic, so copying a trace that the
//! reference writer produced yields the reference's bytes.
//!
//! A copy decodes its input with exactly the rules of a
//! [dump](crate::dump::write_dump): it fails where the dump fails, with the
//! same error (a malformed trace, or a backtrace naming a location code no
//! location event defined), skips the packets the dump skips with the same
//! warnings, and otherwise writes a trace whose dump is the input's. For
//! damaged input that takes more than re-encoding the events: see
//! `Writer::put_event_exact`.

use std::io::{self, Read, Write};

use crate::dump::DumpFailure;
use crate::error::{ReadError, Warning, WriteError};
use crate::event::Event;
use crate::read::{Events, Reader, StreamReader};
use crate::types::{LocationCode, Timestamp};
use crate::write::{MultiplexedDomains, WriterOptions};

/// Why a copy failed. The output is then no trace to keep.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The input trace is malformed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A backtrace in the input refers to a location code no location event
    /// defined (as in the dump, which stops there).
    #[error("invalid location code {:08x}", .0.get())]
    UnknownLocationCode(LocationCode),
    /// Reading the input stream failed.
    #[error("reading the trace")]
    Input(#[source] io::Error),
    /// Writing the output failed (or the output format cannot express the input).
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl CopyError {
    /// The failure a [dump](crate::dump::write_dump) of the input reports,
    /// when the copy failed for the same reason.
    pub fn dump_failure(&self) -> Option<DumpFailure> {
        match self {
            CopyError::Read(e) => Some(DumpFailure::Read(*e)),
            CopyError::UnknownLocationCode(c) => Some(DumpFailure::UnknownLocationCode(*c)),
            CopyError::Input(_) | CopyError::Write(_) => None,
        }
    }
}

/// Copies every event of `reader` into a new trace written to `out` with the
/// same [`Info`](crate::Info), and returns `out` and the warnings about
/// skipped input packets. It fails exactly where [`write_dump`] over the
/// same reader does (see there about a reader's earlier passes), and the
/// output then holds no trace to keep.
///
/// [`write_dump`]: crate::dump::write_dump
pub fn copy_trace<W: Write>(
    reader: &mut Reader<'_>,
    out: W,
    options: WriterOptions,
) -> Result<(W, Vec<Warning>), CopyError> {
    let mut copy = CopyLoop::new(reader.info(), out, options)?;
    copy.pass(&mut reader.events(true))?;
    copy.finish()
}

/// [`copy_trace`] from a [`StreamReader`], packet by packet as the input
/// arrives: the same output and warnings for the same bytes.
pub fn copy_trace_stream<R: Read, W: Write>(
    stream: &mut StreamReader<R>,
    out: W,
    options: WriterOptions,
) -> Result<(W, Vec<Warning>), CopyError> {
    let mut copy = CopyLoop::new(stream.info(), out, options)?;
    while let Some(mut packet) = stream.next_packet().map_err(CopyError::Input)? {
        copy.pass(&mut packet)?;
    }
    copy.finish()
}

/// The copy of the events of one pass after another: one loop for a
/// [`Reader`]'s single pass and a [`StreamReader`]'s per-packet passes.
struct CopyLoop<W: Write> {
    writer: MultiplexedDomains<W>,
    start_time: Timestamp,
    warnings: Vec<Warning>,
}

impl<W: Write> CopyLoop<W> {
    fn new(info: &crate::Info, out: W, options: WriterOptions) -> Result<CopyLoop<W>, CopyError> {
        Ok(CopyLoop {
            writer: MultiplexedDomains::with_options(out, info, options)?,
            start_time: info.start_time,
            warnings: Vec::new(),
        })
    }

    fn pass(&mut self, events: &mut Events<'_>) -> Result<(), CopyError> {
        while let Some(item) = events.next_event_with_locations() {
            let (dt, event, table) = item?;
            if let Event::Alloc(a) = &event {
                // The dump fails at the first frame whose code is unknown.
                // The frames within the common prefix were the previous
                // backtrace's (of the same domain), checked with it, and the
                // table only grows, so only the rest needs a look.
                let checked = a.common_prefix.min(a.backtrace.len());
                if let Some(&code) = a.backtrace[checked..]
                    .iter()
                    .find(|&&code| table.get(code).is_none())
                {
                    return Err(CopyError::UnknownLocationCode(code));
                }
            }
            self.writer.put_event_exact(
                |code| table.get(code).unwrap_or(&[]),
                self.start_time.offset(dt),
                &event,
            )?;
        }
        self.warnings.extend(events.take_warnings());
        Ok(())
    }

    fn finish(mut self) -> Result<(W, Vec<Warning>), CopyError> {
        self.writer.flush()?;
        Ok((self.writer.into_inner()?, self.warnings))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! Inputs a reader accepts but no reference writer produces, which a
    //! copy must still reproduce: built packet by packet.

    use super::*;
    use crate::dump::write_dump;
    use crate::format::{EV_ALLOC, EV_COLLECT, EV_LOCATION, EV_PROMOTE, OCAML_MAX_INT};
    use crate::synth::synth_info;
    use crate::write::buf::{put_i64, put_string, put_u8, put_u16, put_u32, put_vint};
    use crate::write::packet::{finish_header, put_event_header, put_header};
    use crate::{Info, Writer};

    /// A trace of hand-made packets.
    struct Trace {
        info: Info,
        bytes: Vec<u8>,
    }

    impl Trace {
        fn new() -> Trace {
            let info = synth_info();
            let bytes = Writer::new(Vec::new(), &info)
                .unwrap()
                .into_inner()
                .unwrap();
            Trace { info, bytes }
        }

        fn time(&self, dt: i64) -> i64 {
            self.info.start_time.as_micros() + dt
        }

        /// A packet of events at time `dt` whose alloc ids run from
        /// `begin` to `end`.
        fn packet(
            &mut self,
            dt: i64,
            begin: i64,
            end: i64,
            events: impl FnOnce(&mut Vec<u8>, i64),
        ) {
            let t = self.time(dt);
            let mut p = Vec::new();
            put_header(&mut p, 3, self.info.pid, 0, None);
            events(&mut p, t);
            finish_header(&mut p, t, t, begin as u64, end as u64);
            self.bytes.extend_from_slice(&p);
        }
    }

    /// A location event for `code`: one location with new (MTF code 31)
    /// file and definition names.
    fn location(b: &mut Vec<u8>, t: i64, code: i64, file: &[u8], def: &[u8]) {
        put_event_header(b, EV_LOCATION, t);
        put_i64(b, code);
        put_u8(b, 1);
        let word: u64 = 7 | 3 << 20 | 9 << 28 | 31 << 38 | 31 << 43;
        put_u32(b, word as u32);
        put_u16(b, (word >> 32) as u16);
        put_string(b, file);
        put_string(b, def);
    }

    /// A long alloc whose backtrace is `codes`, each a cache miss in bucket
    /// `i + 1`.
    fn alloc(b: &mut Vec<u8>, t: i64, common_prefix: i64, codes: &[i64]) {
        put_event_header(b, EV_ALLOC, t);
        put_vint(b, 100);
        put_vint(b, 1);
        put_u8(b, 1);
        put_vint(b, common_prefix);
        put_u16(b, codes.len() as u16);
        for (i, &code) in codes.iter().enumerate() {
            put_u16(b, (((i + 1) << 2) | 3) as u16);
            put_i64(b, code);
        }
    }

    fn dump(bytes: &[u8]) -> (Vec<u8>, crate::dump::DumpOutcome, usize) {
        let mut reader = Reader::from_bytes(bytes).unwrap();
        let mut text = Vec::new();
        let mut warnings = 0;
        let outcome = write_dump(&mut reader, &mut text, |_| warnings += 1, |_| {}).unwrap();
        (text, outcome, warnings)
    }

    /// `trace` dumps without failure, and so does its copy, to the same text.
    fn copies_exactly(trace: &Trace) -> Vec<u8> {
        let (text, outcome, _) = dump(&trace.bytes);
        assert!(outcome.failure.is_none(), "{:?}", outcome.failure);
        let mut reader = Reader::from_bytes(&trace.bytes).unwrap();
        let (copy, _) = copy_trace(&mut reader, Vec::new(), WriterOptions::new()).unwrap();
        let (copied, outcome, warnings) = dump(&copy);
        assert_eq!(outcome.failure, None);
        assert_eq!(warnings, 0);
        assert_eq!(
            String::from_utf8_lossy(&copied),
            String::from_utf8_lossy(&text)
        );
        copy
    }

    #[test]
    fn code_zero_with_locations_is_copied() {
        // The reference writer never sends code 0 (it hits the never-used
        // cache bucket 0); a trace that defines it must still copy.
        let mut trace = Trace::new();
        trace.packet(1, 0, 2, |b, t| {
            location(b, t, 0, b"zero.ml", b"Zero.f");
            location(b, t, 5, b"five.ml", b"Five.f");
            alloc(b, t, 0, &[5, 0]);
            alloc(b, t, 1, &[0]);
        });
        copies_exactly(&trace);
    }

    #[test]
    fn long_names_and_backtraces_are_copied_whole() {
        // A 5000-byte file name (the reference writer would send
        // `Location.unknown`) and a backtrace of 600 misses, 6 KB encoded
        // (it would drop the innermost frames after 4 KB).
        let mut trace = Trace::new();
        let long = vec![b'x'; 5000];
        let codes: Vec<i64> = (1000..1600).collect();
        trace.packet(1, 0, 1, |b, t| {
            location(b, t, 1000, &long, b"Long.f");
            for &code in &codes[1..] {
                location(b, t, code, b"f.ml", b"F.f");
            }
            alloc(b, t, 0, &codes);
        });
        copies_exactly(&trace);
    }

    #[test]
    fn object_ids_and_deltas_any_header_allows_are_copied() {
        let mut trace = Trace::new();
        let max = OCAML_MAX_INT;
        trace.packet(1, 0, 0, |b, t| location(b, t, 9, b"a.ml", b"A.f"));
        // A promote before any alloc, of an object the packet's ids say is
        // old; then ids jump back.
        trace.packet(2, 500, 501, |b, t| {
            put_event_header(b, EV_PROMOTE, t);
            put_vint(b, 100);
            alloc(b, t, 0, &[9]);
        });
        trace.packet(3, 7, 8, |b, t| alloc(b, t, 1, &[]));
        // The largest collect id a reader decodes: ids at OCaml's max_int,
        // a delta of -2^62.
        trace.packet(4, max, max, |b, t| {
            put_event_header(b, EV_COLLECT, t);
            put_vint(b, -(1 << 62));
        });
        // Ids that run past max_int in one packet, longer than the
        // writer's 32 KB packets: no packet can start at those ids.
        let n = 20_000;
        trace.packet(5, max - 2, max - 2 + n, |b, t| {
            for _ in 0..n {
                alloc(b, t, 1, &[]);
            }
        });
        let (text, _, _) = dump(&trace.bytes);
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(&format!("{:010} collect", (1u64 << 63) - 2)));
        assert!(text.contains(&format!("{:010} alloc_major", max as u64 + 1000)));
        copies_exactly(&trace);
    }

    #[test]
    fn a_copy_fails_with_the_dumps_unknown_location_code() {
        let mut trace = Trace::new();
        trace.packet(1, 0, 2, |b, t| {
            location(b, t, 5, b"five.ml", b"Five.f");
            alloc(b, t, 0, &[5]);
            alloc(b, t, 1, &[6, 7]);
        });
        let (_, outcome, _) = dump(&trace.bytes);
        let failure = outcome.failure.unwrap();
        assert_eq!(
            failure,
            DumpFailure::UnknownLocationCode(LocationCode::new(6))
        );
        let mut reader = Reader::from_bytes(&trace.bytes).unwrap();
        let err = copy_trace(&mut reader, Vec::new(), WriterOptions::new()).unwrap_err();
        assert_eq!(err.dump_failure(), Some(failure));
    }
}
