//! A memtrace trace's tables and `info` counts as a program writes the
//! trace: each packet decoded once, as it comes, and the tables of what is
//! decoded had at any point without decoding again.
//!
//! The input is any [`Read`] that fails with [`std::io::ErrorKind::WouldBlock`]
//! where the writer has not written more yet (a followed file): the stream
//! keeps a packet cut by the writer's flush and decodes it once its rest comes.

use std::io::Read;

use tracekit_memtrace::dump::{InfoCounts, InfoReport, TraceHeader};
use tracekit_memtrace::{OpenError, StreamReader};

use super::{Tables, TablesBuilder};

/// A memtrace trace followed as it is written.
pub struct Follow<R> {
    stream: StreamReader<R>,
    tables: TablesBuilder,
    counts: InfoCounts,
    /// Why reading the input failed, if it did: the stream ends there.
    failed: Option<String>,
}

impl<R: Read> Follow<R> {
    /// Follows the trace `input` gives, once its trace-info packet is whole:
    /// an input that would block before then is an error of kind
    /// [`std::io::ErrorKind::WouldBlock`], to try again later.
    pub fn new(input: R) -> Result<Follow<R>, OpenError> {
        Ok(Follow {
            stream: StreamReader::new(input, true)?,
            tables: TablesBuilder::default(),
            counts: InfoCounts::default(),
            failed: None,
        })
    }

    /// Decodes the packets the input has whole now; says whether there were
    /// events in them.
    pub fn read(&mut self) -> bool {
        let before = self.tables.events();
        loop {
            let mut packet = match self.stream.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    self.failed = Some(e.to_string());
                    break;
                }
            };
            let warned = self.tables.warnings().len();
            let counts = &mut self.counts;
            self.tables
                .read_seeing(&mut packet, &mut |_| {}, |t, e| counts.add(t, e));
            for w in &self.tables.warnings()[warned..] {
                counts.skipped(w);
            }
            if let Some(e) = self.tables.error() {
                counts.fail(e);
                break;
            }
        }
        self.tables.events() != before
    }

    /// Whether the input may have more: the stream waits for the writer, and
    /// neither ended nor met damage.
    pub fn is_waiting(&self) -> bool {
        self.stream.is_waiting() && self.tables.error().is_none() && self.failed.is_none()
    }

    /// Why reading the input failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Bytes of the trace decoded: up to the end of the last whole packet.
    pub fn position(&self) -> u64 {
        self.stream.position()
    }

    /// The input, to wait on it for more.
    pub fn input(&mut self) -> &mut R {
        self.stream.inner_mut()
    }

    /// The tables of the events decoded so far.
    pub fn tables(&self) -> Tables {
        let s = &self.stream;
        self.tables.tables(s.info(), s.locations(), s.position())
    }

    /// The `info` report of the events decoded so far, the trace's file named
    /// `file`, as `memtrace info` gives it.
    pub fn info(&self, file: &str) -> InfoReport {
        let s = &self.stream;
        let header = TraceHeader {
            info: s.info(),
            format_version: s.format_version().number(),
            size_bytes: s.position(),
            distinct_locations: s.locations().len(),
        };
        self.counts.report(file, &header)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_memtrace::Reader;

    /// Every column of `tables`, as its file holds them.
    fn columns(tables: &Tables) -> Vec<u8> {
        let mut out = Vec::new();
        tables.write_to(&mut out).unwrap();
        out
    }

    #[test]
    fn a_followed_trace_ends_as_the_whole_trace_reads() {
        let config = tracekit_memtrace::synth::SynthConfig {
            allocs: 20_000,
            ..Default::default()
        };
        let bytes = tracekit_memtrace::synth::write_synthetic(Vec::new(), &config).unwrap();
        let whole = Tables::build(&mut Reader::from_bytes(&bytes).unwrap(), &mut |_| {});
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let info = InfoReport::collect(&mut reader, "t.ctf", |_| {}, |_| {});
        // Not even the trace-info packet yet.
        let early = tracekit_testutil::Growing::new(bytes.clone(), 10);
        assert!(matches!(
            Follow::new(early),
            Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock
        ));
        let mut follow = Follow::new(tracekit_testutil::Growing::new(bytes, 4_000)).unwrap();
        let mut earlier = 0;
        loop {
            follow.read();
            let now = follow.tables();
            assert!(now.events() >= earlier);
            earlier = now.events();
            if !follow.is_waiting() {
                break;
            }
            follow.input().write(1_999);
        }
        assert_eq!(follow.info("t.ctf"), info);
        assert_eq!(follow.tables().events(), whole.events());
        assert!(columns(&follow.tables()) == columns(&whole));
    }
}
