//! The transcript format of magic-trace's expect tests (`test/perf_script.ml` in
//! janestreet/magic-trace prints it): echoed input
//! records interleaved with `-> TIME BEGIN|END NAME` lines. It is the conformance
//! harness of this crate and `tracekit perf decode --transcript`.

use std::fmt::Write as _;

use crate::decode::{Decoder, HitCollector, RecordObserver};
use crate::event::{Event, SampleData, Time};
use crate::events_output::EventsOutput;
use crate::filter::{RangeFilter, SymbolHit};
use crate::ocaml::OcamlExceptionInfo;
use crate::resolved::{Frame, Observer, Resolved};
use crate::script::{ParseError, Parsed, RawRecord, RecordParser, Records};
use crate::sink::{Arg, ProcessRef, Sink, TrackRef};
use crate::span;
use crate::symbol::SymbolTable;
use crate::writer::{Config, SampleTiming, TraceScope, TraceWriter};

/// The end-of-input marker line.
pub const END_MARKER: &str = "INPUT TRACE STREAM ENDED, any lines printed below this were deferred";

/// A sink printing transcript lines into a string.
#[derive(Clone, Debug, Default)]
pub(crate) struct TranscriptSink {
    /// The lines printed so far, each ending in `\n`.
    pub(crate) out: String,
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
    fn add_process(&mut self, _name: &str, _pid: Option<u32>) -> ProcessRef {
        self.next_process += 1;
        ProcessRef(self.next_process)
    }
    fn add_thread(&mut self, _process: ProcessRef, _name: &str, _tid: Option<u32>) -> TrackRef {
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
    /// How sampled call stacks become slices ([`SampleTiming::MagicTrace`] for
    /// magic-trace's own transcripts).
    pub sample_timing: SampleTiming,
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
            sample_timing: SampleTiming::default(),
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
fn echo_record(out: &mut String, rec: &RawRecord<'_>) {
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
    let mut t = match &opts.filter {
        Some(filter) => {
            // The filter's hits are paired over the whole input first, with times from
            // the origin the events will be shifted to.
            let origin = if opts.time_origin_first_event {
                first_time(input)
            } else {
                None
            };
            let mut collector = HitCollector::new(filter.clone());
            collector.feed(input);
            let mut hits = collector.finish();
            if let Some(o) = origin {
                for h in &mut hits {
                    h.time = Time(h.time.0.wrapping_sub(o.0));
                }
            }
            let mut t = Transcriber::with_hits(opts, Some(hits));
            t.observed.origin = Some(origin);
            t
        }
        None => Transcriber::new(opts),
    };
    t.feed(input);
    t.finish()
}

/// The time of the first event that has one.
fn first_time(input: &str) -> Option<Time> {
    let mut parser = RecordParser::new();
    Records::new(input).find_map(|r| match parser.parse(&r, 0) {
        Ok(Parsed::Event(e)) => e.time(),
        _ => None,
    })
}

/// The transcript harness fed piece by piece: each piece holds whole records,
/// and its output can be taken as it is produced, so a long input is transcribed
/// with bounded memory and the first lines appear at once.
///
/// It runs the [`Decoder`] that `tracekit perf decode` runs (record splitting,
/// parsing, filter, trace writer), watching the records go by to echo them, shift
/// their times and collect warnings.
///
/// The `--filter` option needs the whole input first (its hits are paired in a
/// first pass), so it is [`run`]'s alone; a `Transcriber` ignores it.
pub struct Transcriber {
    decoder: Decoder<TranscriptSink>,
    observed: Observed,
}

/// What the transcript adds to the decode, record by record.
struct Observed {
    echo: bool,
    time_origin_first_event: bool,
    /// `None` until the first timed event fixes it (with the option off: `Some(None)`).
    origin: Option<Option<Time>>,
    stderr: Vec<String>,
    unparsed: Vec<ParseError>,
    /// magic-trace's events dump, when asked for.
    dump: Option<EventsOutput>,
}

impl Observer for Observed {
    fn event(&mut self, event: &Resolved, stack: &[Frame], symbols: &SymbolTable) {
        self.dump.event(event, stack, symbols);
    }
}

impl RecordObserver<TranscriptSink> for Observed {
    fn parsed(&mut self, rec: &RawRecord<'_>, event: &mut Event<'_>, sink: &mut TranscriptSink) {
        if self.origin.is_none() && self.time_origin_first_event {
            // Events before the first timed one have no time to shift.
            if let Some(t) = event.time() {
                self.origin = Some(Some(t));
            }
        }
        if let Some(o) = self.origin.flatten() {
            event.shift_time(o);
        }
        if self.echo && should_echo(event) {
            echo_record(&mut sink.out, rec);
        }
    }

    fn unparsed(&mut self, error: &ParseError, writer: &mut TraceWriter<TranscriptSink>) {
        // The warnings of the events before it go first, to keep stderr in input order.
        self.take_warnings(writer);
        self.stderr.push(format!(
            "Warning: skipping unrecognized perf output: {error}"
        ));
        self.unparsed.push(*error);
    }
}

impl Observed {
    fn take_warnings(&mut self, writer: &mut TraceWriter<TranscriptSink>) {
        self.stderr
            .extend(writer.drain_warnings().map(|w| w.to_string()));
    }
}

impl Transcriber {
    /// A transcriber with `opts` (its filter aside).
    pub fn new(opts: &TranscriptOptions) -> Transcriber {
        Transcriber::with_hits(opts, None)
    }

    fn with_hits(opts: &TranscriptOptions, filter_hits: Option<Vec<SymbolHit>>) -> Transcriber {
        let config = Config {
            scope: opts.scope,
            annotate_inferred_start_times: opts.annotate_inferred_start_times,
            ocaml_exception_info: opts.ocaml_exception_info.clone(),
            transactions: true,
            sample_timing: opts.sample_timing,
        };
        let mut decoder = Decoder::new(TranscriptSink::default(), config, filter_hits);
        // Times are shifted to the origin as the events go by, not by the writer, so that
        // the events dump and the warnings print them shifted too.
        decoder.keep_time_base();
        Transcriber {
            decoder,
            observed: Observed {
                echo: opts.echo,
                time_origin_first_event: opts.time_origin_first_event,
                origin: (!opts.time_origin_first_event).then_some(None),
                stderr: Vec::new(),
                unparsed: Vec::new(),
                dump: opts.events_output.then(EventsOutput::default),
            },
        }
    }

    /// Transcribes the records of `text` (whole records only).
    pub fn feed(&mut self, text: &str) {
        // Offsets in unparsed-record warnings count from the start of `text`.
        self.decoder.feed_observed(text, 0, &mut self.observed);
        self.observed.take_warnings(self.decoder.writer_mut());
    }

    /// The transcript lines (stdout) produced so far and not yet taken.
    pub fn take_stdout(&mut self) -> String {
        std::mem::take(&mut self.decoder.writer_mut().sink_mut().out)
    }

    /// The warning lines (stderr) produced so far and not yet taken.
    pub fn take_stderr(&mut self) -> Vec<String> {
        std::mem::take(&mut self.observed.stderr)
    }

    /// Records that did not parse so far.
    pub fn unparsed(&self) -> &[ParseError] {
        &self.observed.unparsed
    }

    /// Ends the input: the end marker and what the writer deferred.
    pub fn finish(mut self) -> Transcript {
        if self.observed.echo {
            let out = &mut self.decoder.writer_mut().sink_mut().out;
            out.push_str(END_MARKER);
            out.push('\n');
        }
        let (sink, stats, warnings) = self.decoder.finish();
        let mut observed = self.observed;
        observed
            .stderr
            .extend(warnings.iter().map(|w| w.to_string()));
        let mut stdout = sink.out;
        if let Some(dump) = &observed.dump {
            stdout.push_str(&dump.text);
        }
        Transcript {
            stderr: observed.stderr,
            stdout,
            unparsed: observed.unparsed,
            records: stats.records,
            events: stats.events,
        }
    }
}

/// The corpus comparison's normalisation (ppx_expect): strip trailing white space,
/// drop blank lines at both ends, remove the common indentation.
// Public only for the corpus tests here and in the CLI crate, which compare with it.
#[doc(hidden)]
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
