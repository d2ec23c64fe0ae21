//! Driving the trace writer from `perf script` text fed in chunks: time base, filter
//! regions, counts of what was read and skipped. Used by `tracekit perf decode` and the
//! benchmarks; the caller does the reading (file, pipe, `perf script` child).

use crate::event::{Event, Time};
use crate::filter::{RangeFilter, RegionTracker, SymbolHit, pair_hits};
use crate::script::{ParseError, Parsed, Records, parse_record};
use crate::sink::Sink;
use crate::writer::{Config, TraceWriter, Warning};

/// What was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Input bytes fed.
    pub bytes: u64,
    /// Records (a header line plus its call-chain lines).
    pub records: u64,
    /// Lines, call-chain lines included.
    pub lines: u64,
    /// Events handed to the trace writer.
    pub events: u64,
    /// Decode errors among them.
    pub decode_errors: u64,
    /// Records deliberately ignored (`psb` and other power events).
    pub ignored: u64,
    /// Records that did not parse (skipped).
    pub unparsed: u64,
    /// The first few records that did not parse.
    pub first_unparsed: Vec<ParseError>,
}

/// How many unparsed records are kept for the report.
const KEEP_UNPARSED: usize = 5;

/// Feeds `perf script` text into a [`TraceWriter`].
pub struct Decoder<S: Sink> {
    writer: TraceWriter<S>,
    region: Option<RegionTracker>,
    base_known: bool,
    stats: DecodeStats,
}

impl<S: Sink> Decoder<S> {
    /// A decoder whose time base is the first timestamped event. `filter_hits` are the
    /// first-pass hits of a `-filter` (see [`HitCollector`]), if any.
    pub fn new(sink: S, config: Config, filter_hits: Option<Vec<SymbolHit>>) -> Self {
        Decoder {
            writer: TraceWriter::new(sink, config, Time::ZERO),
            region: filter_hits.map(|h| RegionTracker::new(pair_hits(h))),
            base_known: false,
            stats: DecodeStats::default(),
        }
    }

    /// The trace writer (e.g. to add hits before feeding).
    pub fn writer_mut(&mut self) -> &mut TraceWriter<S> {
        &mut self.writer
    }

    /// Counts so far.
    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Feeds text holding only complete records (see [`crate::script::complete_prefix`]).
    /// `offset` is the text's position in the whole input, for error reports.
    pub fn feed(&mut self, text: &str, offset: u64) {
        self.stats.bytes += text.len() as u64;
        for rec in Records::new(text) {
            self.stats.records += 1;
            self.stats.lines += rec.line_count() as u64;
            match parse_record(&rec, offset) {
                Ok(Parsed::Event(event)) => self.event(&event),
                Ok(Parsed::Ignored(_)) => self.stats.ignored += 1,
                Err(e) => {
                    self.stats.unparsed += 1;
                    if self.stats.first_unparsed.len() < KEEP_UNPARSED {
                        self.stats.first_unparsed.push(e);
                    }
                }
            }
        }
    }

    /// Hands one event to the writer.
    pub fn event(&mut self, event: &Event<'_>) {
        if !self.base_known {
            if let Some(t) = event.time() {
                self.writer.set_base_time(t);
                self.base_known = true;
            }
        }
        self.stats.events += 1;
        if matches!(event, Event::DecodeError(_)) {
            self.stats.decode_errors += 1;
        }
        let should_write = self.region.as_mut().is_none_or(|r| r.should_write(event));
        self.writer.write_event(event, should_write);
    }

    /// Warnings since the last call.
    pub fn drain_warnings(&mut self) -> std::vec::Drain<'_, Warning> {
        self.writer.drain_warnings()
    }

    /// Ends the trace; returns the sink, the counts and the last warnings.
    pub fn finish(mut self) -> (S, DecodeStats, Vec<Warning>) {
        self.writer.end_of_trace(None);
        let warnings = self.writer.drain_warnings().collect();
        let stats = self.stats;
        (self.writer.finish(), stats, warnings)
    }
}

/// The first pass of a `-filter`: collects the hits of chunks of text.
#[derive(Clone, Debug)]
pub struct HitCollector {
    filter: RangeFilter,
    hits: Vec<SymbolHit>,
}

impl HitCollector {
    /// A collector for `filter`.
    pub fn new(filter: RangeFilter) -> Self {
        HitCollector {
            filter,
            hits: Vec::new(),
        }
    }

    /// Feeds text holding only complete records.
    pub fn feed(&mut self, text: &str) {
        for rec in Records::new(text) {
            if let Ok(Parsed::Event(e)) = parse_record(&rec, 0) {
                if let Some(h) = self.filter.hit(&e) {
                    self.hits.push(h);
                }
            }
        }
    }

    /// The hits found.
    pub fn finish(self) -> Vec<SymbolHit> {
        self.hits
    }
}
