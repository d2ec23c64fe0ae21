//! Reading records from any [`Read`]: the input is buffered one record at a time, so
//! memory stays at the largest record plus one chunk, however long the trace.
//!
//! An input that is still being written (a file a program appends to) says so by
//! failing a read with [`std::io::ErrorKind::WouldBlock`] where it has no more bytes
//! yet: the reader then stops before the record it cannot complete, keeps the part it
//! has, and reports the end of the records for now ([`StreamReader::is_waiting`]);
//! asked again, it goes on from there, so a record cut anywhere by the writer's
//! flushes is read whole once its last byte comes.

use std::io::Read;

use super::parse;
use super::{
    Decoder, Entry, Problem, Provider, RawRecord, ReadError, ReadOptions, Record, Records,
    TickRate, Warning,
};

const CHUNK: usize = 64 * 1024;

/// Reads records from a [`Read`]. Records borrow the reader, so this is a lending
/// iterator: `while let Some(rec) = reader.next_record()? { ... }`.
pub struct StreamReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    // Input offset of buf[0].
    base: u64,
    eof: bool,
    done: bool,
    /// The input had no more bytes yet ([`std::io::ErrorKind::WouldBlock`]).
    waiting: bool,
    record: (usize, usize),
    record_offset: u64,
    dec: Decoder,
}

impl<R: Read> StreamReader<R> {
    /// A lenient reader.
    pub fn new(inner: R) -> Self {
        Self::with_options(inner, ReadOptions::default())
    }

    /// A reader with explicit options.
    pub fn with_options(inner: R, options: ReadOptions) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            done: false,
            waiting: false,
            record: (0, 0),
            record_offset: 0,
            dec: Decoder::new(options),
        }
    }

    /// Makes `needed` bytes available from `start`, or fewer at the end of the input
    /// or where it has no more yet (`waiting`).
    fn fill(&mut self, needed: usize) -> Result<(), ReadError> {
        while self.end - self.start < needed && !self.eof && !self.waiting {
            if self.start > 0 && self.buf.len() - self.start < needed {
                self.buf.copy_within(self.start..self.end, 0);
                self.base += self.start as u64;
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() == self.end {
                // Grow with the data actually arriving, not with the size a header
                // claims, so a lying header cannot make us allocate.
                let want = (self.start + needed).min(self.end + CHUNK.max(self.buf.len()));
                self.buf.resize(want.max(self.end + CHUNK), 0);
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.waiting = true,
                Err(e) => {
                    self.done = true;
                    return Err(ReadError {
                        offset: self.base + self.end as u64,
                        problem: Problem::Io(e.kind()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Frames and processes records until one is to be yielded; remembers where.
    fn advance(&mut self) -> Result<bool, ReadError> {
        loop {
            if self.done {
                return Ok(false);
            }
            self.waiting = false;
            self.fill(8)?;
            let offset = self.base + self.start as u64;
            let available = self.end - self.start;
            if available < 8 && self.waiting {
                return Ok(false);
            }
            if available == 0 {
                self.done = true;
                return Ok(false);
            }
            let fail = |this: &mut Self, problem| {
                this.done = true;
                Err(ReadError { offset, problem })
            };
            let Some(head) = self.buf[self.start..self.end].first_chunk::<8>() else {
                self.done = true;
                let problem = Problem::Truncated {
                    needed: 8,
                    available: available as u64,
                };
                return self.dec.end_truncated::<()>(offset, problem).map(|_| false);
            };
            let bytes = match parse::record_bytes(u64::from_le_bytes(*head)) {
                Ok(b) => b,
                Err(p) => return fail(self, p),
            };
            let limit = self.dec.options.max_record_bytes;
            // Buffer at most `limit` bytes (more only if the input has them): a
            // record the input cuts short is a truncation, as for the slice reader,
            // and only one that is really there and over the limit is refused.
            let len = usize::try_from(bytes.min(limit.saturating_add(1))).unwrap_or(usize::MAX);
            self.fill(len)?;
            if self.end - self.start < len && self.waiting {
                return Ok(false);
            }
            if bytes > limit && self.end - self.start >= len {
                return fail(self, Problem::RecordTooLarge { bytes, limit });
            }
            if self.end - self.start < len {
                self.done = true;
                let problem = Problem::Truncated {
                    needed: bytes,
                    available: (self.end - self.start) as u64,
                };
                return self.dec.end_truncated::<()>(offset, problem).map(|_| false);
            }
            let range = (self.start, self.start + len);
            self.start += len;
            self.record_offset = offset;
            let rec = &self.buf[range.0..range.1];
            if self.dec.process(rec, offset)?.is_some() {
                self.record = range;
                return Ok(true);
            }
        }
    }

    fn current_raw(&self) -> Option<RawRecord<'_>> {
        let rec = self.buf.get(self.record.0..self.record.1)?;
        // Already decoded once without error; decoding is deterministic.
        parse::parse_record(rec, |_| {})
    }

    /// The next record with its refs as written. `Ok(None)` at the end of the input
    /// and after a fatal error.
    pub fn next_raw(&mut self) -> Result<Option<RawRecord<'_>>, ReadError> {
        if !self.advance()? {
            return Ok(None);
        }
        Ok(self.current_raw())
    }

    /// The next record, resolved.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, ReadError> {
        if !self.advance()? {
            return Ok(None);
        }
        Ok(self.current_raw().map(|raw| self.dec.resolve(raw)))
    }

    /// The next record, resolved, with the tick rate of its timestamps.
    pub fn next_timed(&mut self) -> Result<Option<(Record<'_>, TickRate)>, ReadError> {
        if !self.advance()? {
            return Ok(None);
        }
        let tb = TickRate {
            ticks_per_second: self.dec.provider().ticks_per_second,
        };
        Ok(self.current_raw().map(|raw| (self.dec.resolve(raw), tb)))
    }

    /// The input, to wait on it for more where it had none ([`StreamReader::is_waiting`]).
    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Whether the records ended for now because the input had no more bytes
    /// yet, rather than at its end or at damage: asked again, the reader goes on.
    pub fn is_waiting(&self) -> bool {
        self.waiting && !self.done
    }

    /// Byte offset of the last record returned.
    pub fn record_offset(&self) -> u64 {
        self.record_offset
    }

    /// Warnings so far.
    pub fn warnings(&self) -> &[Warning] {
        &self.dec.warnings
    }

    /// Number of warnings so far, including those not kept.
    pub fn warning_count(&self) -> u64 {
        self.dec.warning_count
    }

    /// The current provider's state.
    pub fn provider(&self) -> &Provider {
        self.dec.provider()
    }

    /// Converts ticks of the current provider to nanoseconds.
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        super::ticks_to_ns(ticks, self.dec.provider().ticks_per_second)
    }
}

impl<R: Read> Records for StreamReader<R> {
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        if !self.advance()? {
            return Ok(None);
        }
        let tick_rate = TickRate {
            ticks_per_second: self.dec.provider().ticks_per_second,
        };
        let offset = self.record_offset;
        Ok(self.current_raw().map(|raw| Entry {
            offset,
            record: self.dec.resolve(raw),
            tick_rate,
        }))
    }

    fn position(&self) -> u64 {
        self.base + self.start as u64
    }

    fn warnings(&self) -> &[Warning] {
        &self.dec.warnings
    }

    fn warning_count(&self) -> u64 {
        self.dec.warning_count
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read::Reader;

    fn offsets(reader: &mut dyn Records) -> Vec<u64> {
        let mut at = Vec::new();
        while let Some(e) = reader.next_entry().unwrap() {
            at.push(e.offset);
        }
        at
    }

    #[test]
    fn an_input_still_written_is_read_whole_whatever_its_pieces() {
        let config = crate::synth::SynthConfig {
            slices: 40,
            threads: 2,
            seed: 7,
        };
        let (bytes, _) = crate::synth::write_synthetic(Vec::new(), &config).unwrap();
        let whole = offsets(&mut Reader::new(&bytes));
        // Pieces cut inside record headers and bodies alike.
        for piece in [1, 3, 8, 13, 100] {
            let mut input = tracekit_testutil::Growing::new(&bytes, 0);
            let mut reader = StreamReader::new(&mut input);
            let mut seen = Vec::new();
            loop {
                seen.extend(offsets(&mut reader));
                if !reader.is_waiting() {
                    break;
                }
                // Nothing read past the last whole record.
                assert!(reader.position() <= reader.inner.shown as u64);
                reader.inner.write(piece);
            }
            assert_eq!(seen, whole, "pieces of {piece} bytes");
            assert!(reader.warnings().is_empty());
        }
    }
}
