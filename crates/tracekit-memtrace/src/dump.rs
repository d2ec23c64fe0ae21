//! The `# memtrace-dump 1` text form of a trace: the trace info, one line per
//! event as OCaml memtrace's `Event.to_string` prints it, and a summary. This
//! is the format of the conformance corpus' expected dumps; `tracekit
//! memtrace dump` prints it. [`write_dump`] dumps a [`Reader`]'s trace and
//! [`write_dump_stream`] a [`StreamReader`]'s as it arrives, through one loop.
//!
//! ```text
//! # memtrace-dump 1
//! info.sample_rate_bits: 0x<IEEE-754 bits>
//! # info.sample_rate: <%.17g>
//! info.word_size: 64
//! info.executable_name: ...
//! info.host_name: ...
//! info.ocaml_runtime_params: ...
//! info.pid: ...
//! info.initial_domain: 0
//! info.start_time: <µs since the epoch>
//! info.context: None | Some <context>
//! events:
//! <%010d time since start> <Event.to_string>
//! [error: <message>]
//! # summary: events=.. allocs=.. minor=.. major=.. external=.. promotes=.. collects=.. bt_entries=.. max_bt=..
//! ```

use std::fmt;
use std::io::{self, Read, Write};

use crate::error::{ReadError, Warning};
use crate::event::{DisplayError, Event};
use crate::read::{Events, Reader, StreamReader};
use crate::types::{AllocationSource, Info, LocationCode};

/// Event counts of a trace, as in the dump's summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// All events (allocations, promotions and collections).
    pub events: u64,
    /// Allocations.
    pub allocs: u64,
    /// Allocations on the minor heap.
    pub minor: u64,
    /// Allocations directly on the major heap.
    pub major: u64,
    /// External allocations.
    pub external: u64,
    /// Promotions.
    pub promotes: u64,
    /// Collections.
    pub collects: u64,
    /// Sum of the backtrace lengths of all allocations.
    pub bt_entries: u64,
    /// Longest backtrace.
    pub max_bt: u64,
}

impl Summary {
    /// Counts `event`.
    pub fn add(&mut self, event: &Event<'_>) {
        self.events += 1;
        match event {
            Event::Alloc(a) => {
                self.allocs += 1;
                match a.source {
                    AllocationSource::Minor => self.minor += 1,
                    AllocationSource::Major => self.major += 1,
                    AllocationSource::External => self.external += 1,
                }
                let len = a.backtrace.len() as u64;
                self.bt_entries += len;
                self.max_bt = self.max_bt.max(len);
            }
            Event::Promote(..) => self.promotes += 1,
            Event::Collect(..) => self.collects += 1,
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "events={} allocs={} minor={} major={} external={} promotes={} collects={} bt_entries={} max_bt={}",
            self.events,
            self.allocs,
            self.minor,
            self.major,
            self.external,
            self.promotes,
            self.collects,
            self.bt_entries,
            self.max_bt
        )
    }
}

/// Why a dump stopped before the end of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DumpFailure {
    /// The trace is malformed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A backtrace refers to a location code no location event defined.
    #[error("invalid location code {:08x}", .0.get())]
    UnknownLocationCode(LocationCode),
}

/// What [`write_dump`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpOutcome {
    /// Counts of the events dumped.
    pub summary: Summary,
    /// Why the dump stopped early, if it did (an `error:` line was written).
    pub failure: Option<DumpFailure>,
}

/// C's `printf("%.17g", x)`, as OCaml prints floats with that format.
pub fn format_g17(x: f64) -> String {
    const P: i32 = 17;
    if x.is_nan() {
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.*e}", (P - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..P).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mantissa), sign, exp.abs())
    } else {
        strip(&format!("{:.*}", (P - 1 - exp) as usize, x))
    }
}

/// Writes the dump's header: everything up to and including `events:`.
pub fn write_header<W: Write + ?Sized>(out: &mut W, info: &Info) -> io::Result<()> {
    writeln!(out, "# memtrace-dump 1")?;
    writeln!(
        out,
        "info.sample_rate_bits: 0x{:016x}",
        info.sample_rate.to_bits()
    )?;
    writeln!(out, "# info.sample_rate: {}", format_g17(info.sample_rate))?;
    writeln!(out, "info.word_size: {}", info.word_size)?;
    let raw = |out: &mut W, key: &str, v: &[u8]| -> io::Result<()> {
        out.write_all(key.as_bytes())?;
        out.write_all(v)?;
        out.write_all(b"\n")
    };
    raw(out, "info.executable_name: ", &info.executable_name)?;
    raw(out, "info.host_name: ", &info.host_name)?;
    raw(
        out,
        "info.ocaml_runtime_params: ",
        &info.ocaml_runtime_params,
    )?;
    writeln!(out, "info.pid: {}", info.pid)?;
    writeln!(out, "info.initial_domain: {}", info.initial_domain.get())?;
    writeln!(out, "info.start_time: {}", info.start_time.as_micros())?;
    match &info.context {
        None => writeln!(out, "info.context: None")?,
        Some(c) => raw(out, "info.context: Some ", c)?,
    }
    writeln!(out, "events:")
}

/// Dumps the whole trace to `out`, calling `on_warning` for each skipped
/// packet and `on_progress` with the byte offset reached every 65536 events.
/// A decoding failure is written as an `error:` line after the events
/// decoded before it, and returned in the outcome; the summary line follows
/// in every case. Only I/O errors of `out` are errors.
///
/// A reader keeps the location table of its earlier passes (as OCaml's
/// does): a code whose location event comes after its first use is unknown
/// only to a reader's first pass. `tracekit memtrace dump` dumps a fresh one.
pub fn write_dump<W: Write + ?Sized>(
    reader: &mut Reader<'_>,
    out: &mut W,
    on_warning: impl FnMut(&Warning),
    on_progress: impl FnMut(u64),
) -> io::Result<DumpOutcome> {
    write_header(out, reader.info())?;
    let mut dump = DumpLoop::new(out, on_warning, on_progress);
    dump.pass(&mut reader.events(true))?;
    dump.finish()
}

/// Why [`write_dump_stream`] stopped short of the summary line.
#[derive(Debug, thiserror::Error)]
pub enum StreamDumpError {
    /// Reading the trace failed (not a malformed trace: that is a
    /// [`DumpFailure`]). The dump written so far ends with an `error:` line.
    #[error("reading the trace")]
    Input(#[source] io::Error),
    /// Writing the dump failed.
    #[error("writing the dump")]
    Output(#[source] io::Error),
}

/// [`write_dump`] over a [`StreamReader`]: the same text, failure and
/// warnings for the same bytes, written as the packets arrive, so the first
/// lines come out before the input ends, in memory bounded by the largest
/// packet. `on_progress` gets offsets in the stream.
pub fn write_dump_stream<R: Read, W: Write + ?Sized>(
    stream: &mut StreamReader<R>,
    out: &mut W,
    on_warning: impl FnMut(&Warning),
    on_progress: impl FnMut(u64),
) -> Result<DumpOutcome, StreamDumpError> {
    write_header(out, stream.info()).map_err(StreamDumpError::Output)?;
    let mut dump = DumpLoop::new(out, on_warning, on_progress);
    loop {
        match stream.next_packet() {
            Ok(None) => break,
            Ok(Some(mut packet)) => {
                if !dump.pass(&mut packet).map_err(StreamDumpError::Output)? {
                    break;
                }
            }
            Err(e) => {
                // Like a decoding failure, the text says where it stopped.
                writeln!(dump.out, "error: reading the trace: {e}")
                    .map_err(StreamDumpError::Output)?;
                return Err(StreamDumpError::Input(e));
            }
        }
    }
    dump.finish().map_err(StreamDumpError::Output)
}

/// The event lines, warnings, failure and summary of a dump: one loop for
/// the single pass of a [`Reader`] and the per-packet passes of a
/// [`StreamReader`].
struct DumpLoop<'o, W: ?Sized, FW, FP> {
    out: &'o mut W,
    on_warning: FW,
    on_progress: FP,
    summary: Summary,
    failure: Option<DumpFailure>,
    line: Vec<u8>,
}

impl<'o, W, FW, FP> DumpLoop<'o, W, FW, FP>
where
    W: Write + ?Sized,
    FW: FnMut(&Warning),
    FP: FnMut(u64),
{
    fn new(out: &'o mut W, on_warning: FW, on_progress: FP) -> Self {
        DumpLoop {
            out,
            on_warning,
            on_progress,
            summary: Summary::default(),
            failure: None,
            line: Vec::with_capacity(256),
        }
    }

    /// Dumps the events of one pass; `Ok(false)` when the dump failed and
    /// must stop.
    fn pass(&mut self, events: &mut Events<'_>) -> io::Result<bool> {
        let line = &mut self.line;
        loop {
            let (dt, event, table) = match events.next_event_with_locations() {
                None => break,
                Some(Ok(x)) => x,
                Some(Err(e)) => {
                    self.failure = Some(DumpFailure::Read(e));
                    break;
                }
            };
            line.clear();
            write!(line, "{:010} ", dt.as_micros())?;
            match event.write_to(line, table) {
                Ok(()) => {}
                Err(DisplayError::Io(e)) => return Err(e),
                Err(DisplayError::UnknownLocationCode(c)) => {
                    self.failure = Some(DumpFailure::UnknownLocationCode(c));
                    break;
                }
            }
            line.push(b'\n');
            self.summary.add(&event);
            // Warnings about packets skipped before this event go out
            // before its line, whichever reader found them.
            for w in events.take_warnings() {
                (self.on_warning)(&w);
            }
            self.out.write_all(line)?;
            if self.summary.events.is_multiple_of(65536) {
                (self.on_progress)(events.position());
            }
        }
        for w in events.take_warnings() {
            (self.on_warning)(&w);
        }
        Ok(self.failure.is_none())
    }

    /// Writes the `error:` line, if the dump failed, and the summary.
    fn finish(self) -> io::Result<DumpOutcome> {
        if let Some(f) = &self.failure {
            writeln!(self.out, "error: {f}")?;
        }
        writeln!(self.out, "# summary: {}", self.summary)?;
        Ok(DumpOutcome {
            summary: self.summary,
            failure: self.failure,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::format_g17;

    #[test]
    fn g17_matches_c_printf() {
        assert_eq!(format_g17(1e-5), "1.0000000000000001e-05");
        assert_eq!(format_g17(0.001), "0.001");
        assert_eq!(format_g17(1e-6), "9.9999999999999995e-07");
        assert_eq!(format_g17(0.0001), "0.0001");
        assert_eq!(format_g17(1.0), "1");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g17(123456.0), "123456");
    }
}
