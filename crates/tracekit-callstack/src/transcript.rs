//! The transcript format of magic-trace's expect tests (corpus README §5): echoed input
//! records interleaved with `-> TIME BEGIN|END NAME` lines. It is the conformance
//! harness of this crate and `tracekit perf decode --transcript`.

use std::fmt::Write as _;

use crate::event::{Event, SampleData, Time};
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
    let mut unparsed = Vec::new();
    // The time origin: the first event that has a time.
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
    fn shift(mut e: Event<'_>, origin: Option<Time>) -> Event<'_> {
        if let Some(o) = origin {
            e.shift_time(o);
        }
        e
    }
    let shifted = |e| shift(e, origin);
    let mut region = opts.filter.as_ref().map(|f| {
        let hits = Records::new(input)
            .filter_map(|r| match parse_record(&r, 0) {
                Ok(Parsed::Event(e)) => f.hit(&shifted(e)),
                _ => None,
            })
            .collect();
        RegionTracker::new(pair_hits(hits))
    });
    let config = Config {
        scope: opts.scope,
        annotate_inferred_start_times: opts.annotate_inferred_start_times,
        ocaml_exception_info: opts.ocaml_exception_info.clone(),
        transactions: true,
    };
    let mut writer = TraceWriter::new(TranscriptSink::default(), config, Time::ZERO);
    if opts.events_output {
        writer.enable_events_output();
    }
    let mut stderr = Vec::new();
    for rec in Records::new(input) {
        let event = match parse_record(&rec, 0) {
            Ok(Parsed::Event(e)) => shifted(e),
            Ok(Parsed::Ignored(_)) => continue,
            Err(e) => {
                stderr.push(format!("Warning: skipping unrecognized perf output: {e}"));
                unparsed.push(e);
                continue;
            }
        };
        let should_write = region.as_mut().is_none_or(|r| r.should_write(&event));
        if opts.echo && should_echo(&event) {
            echo_record(&mut writer.sink_mut().out, &rec);
        }
        writer.write_event(&event, should_write);
        stderr.extend(writer.drain_warnings().map(|w| w.to_string()));
    }
    if opts.echo {
        writer.sink_mut().out.push_str(END_MARKER);
        writer.sink_mut().out.push('\n');
    }
    writer.end_of_trace(None);
    stderr.extend(writer.drain_warnings().map(|w| w.to_string()));
    let dump = writer.take_events_output();
    let mut stdout = std::mem::take(&mut writer.sink_mut().out);
    stdout.push_str(&dump);
    Transcript {
        stderr,
        stdout,
        unparsed,
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
