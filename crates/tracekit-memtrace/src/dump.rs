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

use std::collections::BTreeMap;
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

/// The events of one domain, for [`InfoReport`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DomainCounts {
    /// The domain.
    pub domain: u16,
    /// Its events.
    pub events: u64,
    /// Its allocations.
    pub allocs: u64,
}

/// What `tracekit memtrace info` says of a trace: its trace info, and counts from
/// one pass over its events (with backtraces, for their depth).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InfoReport {
    /// The file's name, as given.
    pub file: String,
    /// Its size.
    pub file_size_bytes: u64,
    /// The trace-info packet's format version.
    pub format_version: u16,
    /// `info.executable_name`.
    pub executable_name: String,
    /// `info.host_name`.
    pub host_name: String,
    /// `info.pid`.
    pub pid: i64,
    /// `info.word_size`, in bits.
    pub word_size: u8,
    /// `info.sample_rate`.
    pub sample_rate: f64,
    /// `info.ocaml_runtime_params`.
    pub ocaml_runtime_params: String,
    /// `info.context`.
    pub context: Option<String>,
    /// `info.initial_domain`.
    pub initial_domain: u16,
    /// `info.start_time`, µs since the Unix epoch.
    pub start_time_us: i64,
    /// The start time as an RFC 3339 date in UTC.
    pub start_time: String,
    /// The last event's time since the start, µs.
    pub duration_us: i64,
    /// All events.
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
    /// Words of the sampled allocations, headers included (`length + 1` each).
    pub sampled_words: u64,
    /// Bytes allocated, estimated: each sample stands for `1 / sample_rate` words.
    pub estimated_allocated_bytes: f64,
    /// Events by domain.
    pub domains: Vec<DomainCounts>,
    /// Location codes defined.
    pub distinct_locations: usize,
    /// The longest backtrace.
    pub deepest_backtrace: u64,
    /// The mean backtrace length.
    pub mean_backtrace: f64,
    /// Packets skipped with a warning.
    pub skipped_packets: usize,
    /// Why the pass stopped early, if it did.
    pub error: Option<String>,
    /// Where it stopped, if it did (left out of the JSON of a whole trace).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub damage: Option<Damage>,
    /// The same, typed.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub failure: Option<ReadError>,
}

/// Where a trace is damaged: every figure of a report is of the events before.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Damage {
    /// The byte offset of what could not be decoded.
    pub offset: u64,
    /// The events read before it.
    pub events_before: u64,
    /// What is wrong there.
    pub message: String,
}

impl InfoReport {
    /// Reads every event of `reader` (whose file is `file`), calling `on_warning` for
    /// each skipped packet and `on_progress` with the byte offset reached every 65536
    /// events. A decoding failure ends the pass; it is in [`InfoReport::failure`].
    pub fn collect(
        reader: &mut Reader<'_>,
        file: &str,
        mut on_warning: impl FnMut(&Warning),
        mut on_progress: impl FnMut(u64),
    ) -> InfoReport {
        let mut counts = InfoCounts::default();
        {
            let mut events = reader.events(true);
            loop {
                let (dt, event) = match events.next_event() {
                    None => break,
                    Some(Ok(x)) => x,
                    Some(Err(e)) => {
                        counts.fail(e);
                        break;
                    }
                };
                counts.add(dt, &event);
                if counts.summary.events % 65536 == 0 {
                    on_progress(events.position());
                }
                for w in events.take_warnings() {
                    on_warning(&w);
                    counts.skipped(&w);
                }
            }
            for w in events.take_warnings() {
                on_warning(&w);
                counts.skipped(&w);
            }
        }
        let header = TraceHeader {
            info: reader.info(),
            format_version: reader.format_version().number(),
            size_bytes: reader.size_bytes(),
            distinct_locations: reader.locations().len(),
        };
        counts.report(file, &header)
    }
}

/// What an [`InfoReport`] says of a trace beside its events' counts.
#[derive(Clone, Copy, Debug)]
pub struct TraceHeader<'a> {
    /// The trace-info record.
    pub info: &'a Info,
    /// Its format version's number.
    pub format_version: u16,
    /// The trace's bytes.
    pub size_bytes: u64,
    /// Location codes defined.
    pub distinct_locations: usize,
}

/// The counts of an [`InfoReport`] as the events are read: in one pass
/// ([`InfoReport::collect`]), or in as many as a trace followed while it is
/// written comes in.
#[derive(Clone, Debug, Default)]
pub struct InfoCounts {
    summary: Summary,
    domains: BTreeMap<u16, DomainCounts>,
    // Events come in runs of one domain: the map is looked up only on a change.
    run: Option<DomainCounts>,
    duration: i64,
    sampled_words: u64,
    nsamples: f64,
    skipped: usize,
    failure: Option<ReadError>,
}

impl InfoCounts {
    /// Counts `event`, at `dt` from the trace's start.
    pub fn add(&mut self, dt: crate::Timedelta, event: &Event<'_>) {
        self.summary.add(event);
        self.duration = self.duration.max(dt.as_micros());
        let domain = event.domain().get();
        let d = match &mut self.run {
            Some(d) if d.domain == domain => d,
            _ => {
                add_run(&mut self.domains, self.run.take());
                self.run.insert(DomainCounts {
                    domain,
                    ..DomainCounts::default()
                })
            }
        };
        d.events += 1;
        if let Event::Alloc(a) = event {
            d.allocs += 1;
            self.sampled_words = self
                .sampled_words
                .saturating_add(a.length.saturating_add(1));
            self.nsamples += a.nsamples as f64;
        }
    }

    /// Counts a packet skipped with `warning`.
    pub fn skipped(&mut self, _warning: &Warning) {
        self.skipped += 1;
    }

    /// The pass ended with `error`.
    pub fn fail(&mut self, error: ReadError) {
        self.failure = Some(error);
    }

    /// The report of the events counted, of the trace `header` tells, whose
    /// file is `file`.
    pub fn report(&self, file: &str, header: &TraceHeader<'_>) -> InfoReport {
        let mut domains = self.domains.clone();
        add_run(&mut domains, self.run);
        let (i, summary, failure) = (header.info, &self.summary, self.failure);
        let word_bytes = f64::from(i.word_size) / 8.0;
        InfoReport {
            file: file.to_string(),
            file_size_bytes: header.size_bytes,
            format_version: header.format_version,
            executable_name: i.executable_name.to_string(),
            host_name: i.host_name.to_string(),
            pid: i.pid,
            word_size: i.word_size,
            sample_rate: i.sample_rate,
            ocaml_runtime_params: i.ocaml_runtime_params.to_string(),
            context: i.context.as_ref().map(|c| c.to_string()),
            initial_domain: i.initial_domain.get(),
            start_time_us: i.start_time.as_micros(),
            start_time: i.start_time.to_rfc3339(),
            duration_us: self.duration,
            events: summary.events,
            allocs: summary.allocs,
            minor: summary.minor,
            major: summary.major,
            external: summary.external,
            promotes: summary.promotes,
            collects: summary.collects,
            sampled_words: self.sampled_words,
            estimated_allocated_bytes: if i.sample_rate > 0.0 {
                self.nsamples / i.sample_rate * word_bytes
            } else {
                0.0
            },
            domains: domains.into_values().collect(),
            distinct_locations: header.distinct_locations,
            deepest_backtrace: summary.max_bt,
            mean_backtrace: if summary.allocs > 0 {
                summary.bt_entries as f64 / summary.allocs as f64
            } else {
                0.0
            },
            skipped_packets: self.skipped,
            error: failure.map(|e| e.to_string()),
            damage: failure.map(|e| Damage {
                offset: e.offset,
                events_before: summary.events,
                message: e.kind.to_string(),
            }),
            failure,
        }
    }
}

/// Adds the counts of a run of one domain's events to `domains`.
fn add_run(domains: &mut BTreeMap<u16, DomainCounts>, run: Option<DomainCounts>) {
    if let Some(r) = run {
        let d = domains.entry(r.domain).or_insert(DomainCounts {
            domain: r.domain,
            ..DomainCounts::default()
        });
        d.events += r.events;
        d.allocs += r.allocs;
    }
}

/// The report as `tracekit memtrace info` prints it, one field a line.
impl fmt::Display for InfoReport {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self;
        writeln!(
            out,
            "file:            {} ({}, {} bytes)",
            t.file,
            human_bytes(t.file_size_bytes as f64),
            t.file_size_bytes
        )?;
        writeln!(out, "format:          memtrace v{:03}", t.format_version)?;
        writeln!(out, "executable:      {}", t.executable_name)?;
        writeln!(out, "host, pid:       {}, {}", t.host_name, t.pid)?;
        writeln!(
            out,
            "context:         {}",
            t.context.as_deref().unwrap_or("-")
        )?;
        writeln!(out, "runtime params:  {}", t.ocaml_runtime_params)?;
        writeln!(
            out,
            "sample rate:     {} (1 sample per {:.0} words), word size {}",
            t.sample_rate,
            1.0 / t.sample_rate,
            t.word_size
        )?;
        writeln!(out, "start time:      {}", t.start_time)?;
        writeln!(out, "duration:        {:.6} s", t.duration_us as f64 / 1e6)?;
        writeln!(
            out,
            "events:          {} ({} allocs, {} promotes, {} collects)",
            t.events, t.allocs, t.promotes, t.collects
        )?;
        writeln!(
            out,
            "allocs by kind:  {} minor, {} major, {} external",
            t.minor, t.major, t.external
        )?;
        writeln!(
            out,
            "est. allocated:  {}",
            human_bytes(t.estimated_allocated_bytes)
        )?;
        let doms: Vec<String> = t
            .domains
            .iter()
            .map(|d| format!("{} ({} events)", d.domain, d.events))
            .collect();
        writeln!(
            out,
            "domains:         {}",
            if doms.is_empty() {
                "-".into()
            } else {
                doms.join(", ")
            }
        )?;
        writeln!(
            out,
            "locations:       {} distinct location codes",
            t.distinct_locations
        )?;
        writeln!(
            out,
            "backtraces:      deepest {} frames, mean {:.1}",
            t.deepest_backtrace, t.mean_backtrace
        )?;
        if t.skipped_packets > 0 {
            writeln!(out, "skipped packets: {}", t.skipped_packets)?;
        }
        if let Some(e) = &t.error {
            writeln!(out, "error:           {e}")?;
        }
        Ok(())
    }
}

/// Bytes with a binary prefix and three significant digits: `512 B`, `1.50 KiB`,
/// `12.3 MiB`, `256 GiB`.
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", v.round() as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if v.abs() >= 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{format_g17, human_bytes};

    #[test]
    fn human() {
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(1023.0), "1023 B");
        assert_eq!(human_bytes(1536.0), "1.50 KiB");
        assert_eq!(human_bytes(12.34 * 1024.0 * 1024.0), "12.3 MiB");
        assert_eq!(human_bytes(300.0 * 1024.0 * 1024.0 * 1024.0), "300 GiB");
    }

    #[test]
    fn info_report_counts_what_the_dump_counts() {
        use crate::Reader;
        use crate::synth::{SynthConfig, write_synthetic};
        let config = SynthConfig {
            allocs: 3000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let dumped = super::write_dump(&mut reader, &mut Vec::new(), |_| {}, |_| {}).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let r = super::InfoReport::collect(&mut reader, "s.ctf", |_| {}, |_| {});
        let s = dumped.summary;
        assert_eq!(
            (r.events, r.allocs, r.promotes, r.collects),
            (s.events, s.allocs, s.promotes, s.collects)
        );
        assert_eq!(r.deepest_backtrace, s.max_bt);
        assert_eq!(r.domains.iter().map(|d| d.events).sum::<u64>(), r.events);
        assert_eq!(r.file_size_bytes, bytes.len() as u64);
        assert!(r.failure.is_none() && r.error.is_none());
        assert!(r.estimated_allocated_bytes > 0.0);
        let text = r.to_string();
        assert!(text.starts_with("file:            s.ctf ("), "{text}");
        assert!(text.contains(&format!("{} allocs", s.allocs)), "{text}");
        assert!(
            text.contains("start time:      2023-11-14T22:13:20"),
            "{text}"
        );
        // A cut trace: what was read before the cut, and the failure.
        let mut cut = bytes.clone();
        cut.extend_from_slice(&[0xC1, 0x1F, 0xFC, 0xC1, 0, 0]);
        let mut reader = Reader::from_bytes(&cut).unwrap();
        let r = super::InfoReport::collect(&mut reader, "c.ctf", |_| {}, |_| {});
        assert_eq!(r.allocs, s.allocs);
        assert!(r.failure.is_some());
        let damage = r.damage.clone().unwrap();
        // In the cut header, where the failure says.
        assert_eq!(Some(damage.offset), r.failure.map(|f| f.offset));
        assert!((bytes.len()..cut.len()).contains(&(damage.offset as usize)));
        assert_eq!(damage.events_before, s.events);
        assert_eq!(damage.message, "unexpected end of data");
        assert!(
            super::InfoReport::collect(
                &mut Reader::from_bytes(&bytes).unwrap(),
                "s",
                |_| {},
                |_| {}
            )
            .damage
            .is_none()
        );
        assert!(
            r.to_string()
                .contains("error:           malformed trace at byte")
        );
    }

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
