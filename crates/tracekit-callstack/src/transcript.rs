//! The transcript format of magic-trace's expect tests (corpus README §5): echoed input
//! records interleaved with `-> TIME BEGIN|END NAME` lines. It is the conformance
//! harness of this crate and `tracekit perf decode --transcript`.

use std::fmt::Write as _;

use crate::event::{Event, SampleData, Time};
use crate::events_output::EventsOutput;
use crate::filter::{RangeFilter, RegionTracker, pair_hits};
use crate::ocaml::OcamlExceptionInfo;
use crate::script::{ParseError, Parsed, RawRecord, Records, parse_record};
use crate::sink::{Arg, ProcessRef, Sink, TrackRef};
use crate::span;
use crate::writer::{Config, TraceScope, TraceWriter};

/// The end-of-input marker line.
pub const END_MARKER: &str = "INPUT TRACE STREAM ENDED, any lines printed below this were deferred";

/// A sink printing transcript lines into a string.
#[derive(Clone, Debug, Default)]
pub struct TranscriptSink {
    /// The lines printed so far, each ending in `\n`.
    pub out: String,
    next_process: u32,
    next_thread: u32,
}

fn hidden(name: &str) -> bool {
    name == "branch-misses" || name == "cache-misses"
}

impl TranscriptSink {
    fn line(&mut self, time: Time, what: &str, name: &str) {
        if hidden(name) {
            return;
        }
        let t = span::to_string_hum(time.0);
        let _ = writeln!(self.out, "-> {t:>8} {what} {name}");
    }
}

impl Sink for TranscriptSink {
    fn add_process(&mut self, _name: &str) -> ProcessRef {
        self.next_process += 1;
        ProcessRef(self.next_process)
    }
    fn add_thread(&mut self, _process: ProcessRef, _name: &str) -> TrackRef {
        self.next_thread += 1;
        TrackRef(self.next_thread)
    }
    fn begin(&mut self, _: TrackRef, time: Time, name: &str, _: &[Arg<'_>]) {
        self.line(time, "BEGIN", name);
    }
    fn end(&mut self, _: TrackRef, time: Time, name: &str) {
        self.line(time, "END  ", name);
    }
    fn complete(&mut self, _: TrackRef, start: Time, end: Time, name: &str, _: &[Arg<'_>]) {
        self.line(start, "BEGIN", name);
        self.line(end, "END  ", name);
    }
    fn instant(&mut self, _: TrackRef, time: Time, name: &str, _: &[Arg<'_>]) {
        self.line(time, "BEGIN", name);
        let _ = writeln!(self.out, "->          END   {name}");
    }
    fn counter(&mut self, _: TrackRef, _: Time, _: &str, _: &[Arg<'_>]) {}
}

/// Settings of a transcript run (the corpus `.args`).
#[derive(Clone, Debug)]
pub struct TranscriptOptions {
    /// Trace scope.
    pub scope: TraceScope,
    /// Annotate inferred frames.
    pub annotate_inferred_start_times: bool,
    /// Echo input records and print the end marker.
    pub echo: bool,
    /// Subtract the first timestamp from all times.
    pub time_origin_first_event: bool,
    /// OCaml trap tables.
    pub ocaml_exception_info: Option<OcamlExceptionInfo>,
    /// `-filter START..STOP`.
    pub filter: Option<RangeFilter>,
    /// Append magic-trace's event + call-stack dump.
    pub events_output: bool,
}

impl Default for TranscriptOptions {
    fn default() -> Self {
        TranscriptOptions {
            scope: TraceScope::User,
            annotate_inferred_start_times: true,
            echo: true,
            time_origin_first_event: true,
            ocaml_exception_info: None,
            filter: None,
            events_output: false,
        }
    }
}

/// A finished transcript.
#[derive(Clone, Debug, Default)]
pub struct Transcript {
    /// What magic-trace writes to stderr (warnings), one line each.
    pub stderr: Vec<String>,
    /// What it writes to stdout.
    pub stdout: String,
    /// Records that did not parse (skipped).
    pub unparsed: Vec<ParseError>,
    /// Records read (a header line and its continuation lines).
    pub records: u64,
    /// Records that were events (and went to the trace writer).
    pub events: u64,
}

impl Transcript {
    /// The combined text as the corpus expects it: stderr lines first (upstream wrote
    /// them unbuffered while stdout was buffered to the end).
    pub fn render(&self) -> String {
        let mut s = String::new();
        for l in &self.stderr {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str(&self.stdout);
        s
    }
}

/// Echoes a record: one line verbatim, several as `(lines ("..." ...))`.
pub fn echo_record(out: &mut String, rec: &RawRecord<'_>) {
    if rec.continuation.is_empty() {
        out.push_str(rec.header);
        out.push('\n');
        return;
    }
    out.push_str("(lines\n (");
    for (i, line) in rec.lines().enumerate() {
        if i > 0 {
            out.push_str("\n  ");
        }
        out.push('"');
        crate::sexp::escape_into(out, line);
        out.push('"');
    }
    out.push_str("))\n");
}

fn should_echo(event: &Event<'_>) -> bool {
    match event {
        Event::Sample(s) => match &s.data {
            SampleData::Branch(b) => !b.src.same_symbol(&b.dst),
            _ => true,
        },
        Event::DecodeError(_) => true,
    }
}

/// Runs the transcript harness over `perf script` text.
pub fn run(input: &str, opts: &TranscriptOptions) -> Transcript {
    // The time origin: the first event that has a time. The filter's hits are
    // found in a first pass over the shifted events.
    let origin = if opts.time_origin_first_event {
        Records::new(input)
            .filter_map(|r| match parse_record(&r, 0) {
                Ok(Parsed::Event(e)) => e.time(),
                _ => None,
            })
            .next()
    } else {
        None
    };
    let region = opts.filter.as_ref().map(|f| {
        let hits = Records::new(input)
            .filter_map(|r| match parse_record(&r, 0) {
                Ok(Parsed::Event(e)) => f.hit(&shift(e, origin)),
                _ => None,
            })
            .collect();
        RegionTracker::new(pair_hits(hits))
    });
    let mut t = Transcriber::with_region(opts, region);
    t.origin = Some(origin);
    t.feed(input);
    t.finish()
}

fn shift(mut e: Event<'_>, origin: Option<Time>) -> Event<'_> {
    if let Some(o) = origin {
        e.shift_time(o);
    }
    e
}

/// The transcript harness fed piece by piece: each piece holds whole records,
/// and its output can be taken as it is produced, so a long input is transcribed
/// with bounded memory and the first lines appear at once.
///
/// The `--filter` option needs the whole input first (its hits are paired in a
/// first pass), so it is [`run`]'s alone; a `Transcriber` ignores it.
pub struct Transcriber {
    writer: TraceWriter<TranscriptSink>,
    /// magic-trace's events dump, when asked for.
    dump: Option<EventsOutput>,
    region: Option<RegionTracker>,
    echo: bool,
    time_origin_first_event: bool,
    /// `None` until the first timed event fixes it (with the option off: `Some(None)`).
    origin: Option<Option<Time>>,
    stderr: Vec<String>,
    unparsed: Vec<ParseError>,
    records: u64,
    events: u64,
}

impl Transcriber {
    /// A transcriber with `opts` (its filter aside).
    pub fn new(opts: &TranscriptOptions) -> Transcriber {
        Transcriber::with_region(opts, None)
    }

    fn with_region(opts: &TranscriptOptions, region: Option<RegionTracker>) -> Transcriber {
        let config = Config {
            scope: opts.scope,
            annotate_inferred_start_times: opts.annotate_inferred_start_times,
            ocaml_exception_info: opts.ocaml_exception_info.clone(),
            transactions: true,
        };
        let writer = TraceWriter::new(TranscriptSink::default(), config, Time::ZERO);
        Transcriber {
            writer,
            dump: opts.events_output.then(EventsOutput::default),
            region,
            echo: opts.echo,
            time_origin_first_event: opts.time_origin_first_event,
            origin: (!opts.time_origin_first_event).then_some(None),
            stderr: Vec::new(),
            unparsed: Vec::new(),
            records: 0,
            events: 0,
        }
    }

    /// Transcribes the records of `text` (whole records only).
    pub fn feed(&mut self, text: &str) {
        for rec in Records::new(text) {
            self.records += 1;
            let event = match parse_record(&rec, 0) {
                Ok(Parsed::Event(e)) => e,
                Ok(Parsed::Ignored(_)) => continue,
                Err(e) => {
                    self.stderr
                        .push(format!("Warning: skipping unrecognized perf output: {e}"));
                    self.unparsed.push(e);
                    continue;
                }
            };
            if self.origin.is_none() && self.time_origin_first_event {
                // Events before the first timed one have no time to shift.
                if let Some(t) = event.time() {
                    self.origin = Some(Some(t));
                }
            }
            self.events += 1;
            let event = shift(event, self.origin.flatten());
            let should_write = self.region.as_mut().is_none_or(|r| r.should_write(&event));
            if self.echo && should_echo(&event) {
                echo_record(&mut self.writer.sink_mut().out, &rec);
            }
            self.writer
                .write_event_observed(&event, should_write, &mut self.dump);
            self.stderr
                .extend(self.writer.drain_warnings().map(|w| w.to_string()));
        }
    }

    /// The transcript lines (stdout) produced so far and not yet taken.
    pub fn take_stdout(&mut self) -> String {
        std::mem::take(&mut self.writer.sink_mut().out)
    }

    /// The warning lines (stderr) produced so far and not yet taken.
    pub fn take_stderr(&mut self) -> Vec<String> {
        std::mem::take(&mut self.stderr)
    }

    /// Records that did not parse so far.
    pub fn unparsed(&self) -> &[ParseError] {
        &self.unparsed
    }

    /// Ends the input: the end marker and what the writer deferred.
    pub fn finish(mut self) -> Transcript {
        if self.echo {
            self.writer.sink_mut().out.push_str(END_MARKER);
            self.writer.sink_mut().out.push('\n');
        }
        self.writer.end_of_trace(None);
        self.stderr
            .extend(self.writer.drain_warnings().map(|w| w.to_string()));
        let mut stdout = std::mem::take(&mut self.writer.sink_mut().out);
        if let Some(dump) = &self.dump {
            stdout.push_str(&dump.text);
        }
        Transcript {
            stderr: self.stderr,
            stdout,
            unparsed: self.unparsed,
            records: self.records,
            events: self.events,
        }
    }
}

/// The corpus comparison's normalisation (ppx_expect): strip trailing white space,
/// drop blank lines at both ends, remove the common indentation.
pub fn normalize(text: &str) -> String {
    let is_ws = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r');
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let mut lines: Vec<&str> = lines
        .into_iter()
        .map(|l| l.trim_end_matches(is_ws))
        .collect();
    while lines.first() == Some(&"") {
        lines.remove(0);
    }
    while lines.last() == Some(&"") {
        lines.pop();
    }
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let m = lines
        .iter()
        .filter(|l| !l.trim_matches(is_ws).is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for l in lines {
        let content = l.trim_matches(is_ws);
        if !content.is_empty() {
            for _ in 0..indent(l) - m {
                out.push(' ');
            }
            out.push_str(content);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize("\n  a  \n    b\n\n"), "a\n  b\n");
        assert_eq!(normalize(""), "");
        assert_eq!(normalize(" x\r\n"), "x\n");
    }

    #[test]
    fn echoes_blocks() {
        let r = Records::new("h\n\tx \"q\"\n\ty").next().unwrap();
        let mut s = String::new();
        echo_record(&mut s, &r);
        assert_eq!(s, "(lines\n (\"h\"\n  \"\\tx \\\"q\\\"\"\n  \"\\ty\"))\n");
    }
}
