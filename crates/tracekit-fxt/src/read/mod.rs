//! The FXT reader: decodes records from a byte slice ([`Reader`], zero-copy) or from
//! any [`std::io::Read`] ([`StreamReader`]), keeping the string and thread tables of
//! each provider as they change.
//!
//! Submodules mirror [`crate::write`]: [`records`] (what is yielded), [`args`],
//! [`tables`] (strings, threads, providers); `parse` frames records and hands each
//! to the private module named like the writer's module for its type (`metadata`,
//! `strings`, `threads`, `events`, `blobs`, `objects`, `scheduling`, `log`). The
//! whole format is described in `docs/fxt-format.md` at the repository root; what
//! this reader does with damage is its §16.
//!
//! Records come in two layers. [`RawRecord`] keeps string and thread refs as written
//! (for copying, or checking); [`Record`] resolves them against the tables as they
//! were when the record was read, so slot reuse later in the trace cannot change an
//! earlier record's meaning.
//!
//! **Problems.** Framing problems (a record of size 0, a record too large for the
//! stream reader, a failing input) end reading with a [`ReadError`] carrying the byte
//! offset. A last record cut short by the end of the input (a trace whose writer was
//! killed) ends reading too: in lenient mode as a [`Warning`], every record before it
//! having been read, and in strict mode as an error. Anything else
//! (an unknown record, event or argument type, an unbound string or thread index, a
//! field that reaches past its record's end, ...) is a [`Problem`] with one record:
//! in lenient mode (the default) the reader records a [`Warning`] and skips the record
//! (or, for an unbound ref, resolves it to a placeholder); in strict mode it returns
//! the error, and reading can continue with the next record. No input makes the
//! reader panic or loop, and it allocates at most the tables of [`MAX_PROVIDERS`]
//! providers plus the strings it was given.

pub mod args;
mod blobs;
mod cursor;
mod events;
mod log;
mod metadata;
mod objects;
mod parse;
pub mod records;
mod scheduling;
mod stream;
mod strings;
pub mod tables;
mod threads;

pub use args::{Args, RawArgs};
pub use records::{
    Blob, ContextSwitch, Event, KernelObject, LargeBlob, LargeBlobMeta, LegacyContextSwitch, Log,
    RawRecord, Record, Str, Thread, ThreadWakeup, UserspaceObject,
};
pub use stream::StreamReader;
pub use tables::{MAX_PROVIDERS, Provider, StringTable, ThreadTable, TickRate, ticks_to_ns};

use thiserror::Error;

use crate::format::{MAGIC, RecordType, ThreadRef};

/// Whether `head`, the first bytes of an input, looks like FXT: it starts with the
/// magic number record or, for writers that omit that record, with a metadata,
/// initialization, string or thread record of a possible size, after which the
/// next records (up to 8, within `head`) are of known types.
///
/// For telling an FXT file from other files before reading it: the reader itself
/// decodes anything, reporting what it cannot make sense of.
pub fn looks_like_fxt(head: &[u8]) -> bool {
    let word = |pos: usize| {
        head.get(pos..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map(|w| u64::from_le_bytes(*w))
    };
    let Some(first) = word(0) else {
        return false;
    };
    if first == MAGIC {
        return true;
    }
    let Ok(bytes) = parse::record_bytes(first) else {
        return false;
    };
    let words = bytes / 8;
    let plausible_start = match RecordType::from_code((first & 0xF) as u8) {
        Some(RecordType::Metadata) => words <= 33,
        Some(RecordType::Initialization) => words == 2 || words == 4,
        Some(RecordType::String) => (2..=4001).contains(&words),
        Some(RecordType::Thread) => words == 3,
        _ => false,
    };
    if !plausible_start {
        return false;
    }
    let mut pos = bytes as usize;
    for _ in 0..8 {
        let Some(h) = word(pos) else { break };
        if RecordType::from_code((h & 0xF) as u8).is_none() {
            return false;
        }
        let Ok(b) = parse::record_bytes(h) else {
            return false;
        };
        pos = pos.saturating_add(usize::try_from(b).unwrap_or(usize::MAX));
    }
    true
}

/// Something wrong with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum Problem {
    /// A record header with size 0: the rest of the input cannot be framed.
    #[error("record of size 0")]
    ZeroSizeRecord,
    /// The input ends inside a record.
    #[error("record of {needed} bytes is cut short: {available} bytes left")]
    Truncated {
        /// Bytes the record declares.
        needed: u64,
        /// Bytes left in the input.
        available: u64,
    },
    /// A record larger than the stream reader's limit.
    #[error("record of {bytes} bytes is over the reader's limit of {limit} bytes")]
    RecordTooLarge {
        /// Bytes the record declares.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// Reading the input failed.
    #[error("I/O error: {0}")]
    Io(std::io::ErrorKind),
    /// A field reaches past its record's declared end.
    #[error("a field reaches past the end of its record")]
    FieldOutOfRecord,
    /// An argument reaches past its record's end.
    #[error("an argument reaches past the end of its record")]
    ArgOutOfRecord,
    /// An argument with size 0.
    #[error("argument of size 0")]
    ArgSizeZero,
    /// An argument whose size field is larger than its content.
    #[error("argument declares {declared} words but uses {used}")]
    ArgPadding {
        /// Words declared.
        declared: u16,
        /// Words used.
        used: u16,
    },
    /// The first record is not the magic number.
    #[error("the trace does not start with the magic number record")]
    MissingMagic,
    /// A trace-info record of type 0 with the wrong magic value.
    #[error("bad magic number record {word:#018x}")]
    BadMagic {
        /// The header word.
        word: u64,
    },
    /// Record type 10..=14.
    #[error("unknown record type {0}")]
    UnknownRecordType(u8),
    /// Metadata subtype other than 1..=4.
    #[error("unknown metadata type {0}")]
    UnknownMetadataType(u8),
    /// Event type 11..=15.
    #[error("unknown event type {0}")]
    UnknownEventType(u8),
    /// Argument type 11..=15.
    #[error("unknown argument type {0}")]
    UnknownArgType(u8),
    /// Scheduling subtype other than 0..=2.
    #[error("unknown scheduling record type {0}")]
    UnknownSchedulingType(u8),
    /// Large record type other than 0 (blob).
    #[error("unknown large record type {0}")]
    UnknownLargeRecordType(u8),
    /// Large blob format other than 0 and 1.
    #[error("unknown large blob format {0}")]
    UnknownLargeBlobFormat(u8),
    /// A string index with no string record before it.
    #[error("string ref {0} is not bound")]
    UnknownStringRef(u16),
    /// A thread index with no thread record before it.
    #[error("thread ref {0} is not bound")]
    UnknownThreadRef(u8),
    /// A string record for index 0 (ignored: index 0 is the empty string).
    #[error("string record for index 0")]
    StringIndexZero,
    /// A thread record for index 0 (ignored).
    #[error("thread record for index 0")]
    ThreadIndexZero,
    /// An initialization record with 0 ticks per second (ignored).
    #[error("initialization record with 0 ticks per second")]
    ZeroTicksPerSecond,
    /// More providers than [`MAX_PROVIDERS`] (the record switching to another one is
    /// ignored).
    #[error("more than {MAX_PROVIDERS} providers")]
    TooManyProviders,
}

impl Problem {
    /// Whether reading cannot go on after this problem.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::ZeroSizeRecord
                | Self::Truncated { .. }
                | Self::RecordTooLarge { .. }
                | Self::Io(_)
        )
    }
}

/// A read error: a [`Problem`] at a byte offset (of the record it concerns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("at byte {offset}: {problem}")]
pub struct ReadError {
    /// Byte offset of the record.
    pub offset: u64,
    /// What is wrong.
    pub problem: Problem,
}

/// A problem the lenient reader stepped over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Byte offset of the record.
    pub offset: u64,
    /// What is wrong.
    pub problem: Problem,
}

impl core::fmt::Display for Warning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.problem)
    }
}

/// Reader settings.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions {
    /// Return non-fatal problems as errors instead of warnings.
    pub strict: bool,
    /// Warnings kept for [`Reader::warnings`]; later ones are only counted.
    pub max_warnings: usize,
    /// Largest record the [`StreamReader`] buffers (large blobs), in bytes.
    pub max_record_bytes: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            strict: false,
            max_warnings: 1000,
            max_record_bytes: 1 << 30,
        }
    }
}

impl ReadOptions {
    /// Strict options.
    pub fn strict() -> Self {
        Self {
            strict: true,
            ..Self::default()
        }
    }
}

/// The state shared by both readers: providers, tables, warnings.
#[derive(Clone, Debug)]
pub(crate) struct Decoder {
    options: ReadOptions,
    providers: Vec<Provider>,
    current: usize,
    records: u64,
    warnings: Vec<Warning>,
    warning_count: u64,
}

impl Decoder {
    fn new(options: ReadOptions) -> Self {
        Self {
            options,
            // Provider 0 exists implicitly, as in Perfetto and the Fuchsia readers.
            providers: vec![Provider::new(0)],
            current: 0,
            records: 0,
            warnings: Vec::new(),
            warning_count: 0,
        }
    }

    #[cold]
    fn warn(&mut self, offset: u64, problem: Problem) {
        self.warning_count += 1;
        if self.warnings.len() < self.options.max_warnings {
            self.warnings.push(Warning { offset, problem });
        }
    }

    /// The end of the input inside the record at `offset`: a warning and the end of
    /// reading in lenient mode, an error in strict mode.
    #[cold]
    fn end_truncated<T>(&mut self, offset: u64, problem: Problem) -> Result<Option<T>, ReadError> {
        self.report(offset, problem)?;
        Ok(None)
    }

    /// Reports `problem`: an error in strict mode, a warning otherwise.
    #[cold]
    fn report(&mut self, offset: u64, problem: Problem) -> Result<(), ReadError> {
        if self.options.strict {
            Err(ReadError { offset, problem })
        } else {
            self.warn(offset, problem);
            Ok(())
        }
    }

    fn provider(&self) -> &Provider {
        // `current` always indexes `providers`, which is never empty.
        &self.providers[self.current]
    }

    /// Decodes one record's bytes, applies it to the tables, and checks its refs.
    /// `Ok(None)`: skipped (lenient).
    #[inline(always)]
    fn process<'a>(
        &mut self,
        rec: &'a [u8],
        offset: u64,
    ) -> Result<Option<RawRecord<'a>>, ReadError> {
        let first = self.records == 0;
        self.records += 1;
        let strict = self.options.strict;
        let max = self.options.max_warnings;
        let mut first_problem: Option<Problem> = None;
        let (warnings, count) = (&mut self.warnings, &mut self.warning_count);
        let raw = parse::parse_record(rec, |problem| {
            if strict {
                first_problem.get_or_insert(problem);
            } else {
                *count += 1;
                if warnings.len() < max {
                    warnings.push(Warning { offset, problem });
                }
            }
        });
        if let Some(problem) = first_problem {
            return Err(ReadError { offset, problem });
        }
        if first && !matches!(raw, Some(Record::Magic)) {
            self.report(offset, Problem::MissingMagic)?;
        }
        let Some(raw) = raw else { return Ok(None) };
        match raw {
            Record::ProviderInfo { id, name } => match self.switch_provider(id) {
                Some(p) => p.name = name.into(),
                None => {
                    self.report(offset, Problem::TooManyProviders)?;
                    return Ok(None);
                }
            },
            Record::ProviderSection { id } => {
                if self.switch_provider(id).is_none() {
                    self.report(offset, Problem::TooManyProviders)?;
                    return Ok(None);
                }
            }
            Record::Initialization(init) => {
                self.providers[self.current].ticks_per_second = Some(init.ticks_per_second);
            }
            Record::String { id, value } => self.providers[self.current].strings.set(id, value),
            Record::Thread {
                id,
                process,
                thread,
            } => self.providers[self.current]
                .threads
                .set(id, Thread { process, thread }),
            _ => self.check_refs(&raw, offset)?,
        }
        Ok(Some(raw))
    }

    #[cold]
    fn switch_provider(&mut self, id: u32) -> Option<&mut Provider> {
        let index = match self.providers.iter().position(|p| p.id == id) {
            Some(i) => i,
            None if self.providers.len() < MAX_PROVIDERS => {
                self.providers.push(Provider::new(id));
                self.providers.len() - 1
            }
            None => return None,
        };
        self.current = index;
        self.providers.get_mut(index)
    }

    #[inline(always)]
    fn check_refs(&mut self, raw: &RawRecord<'_>, offset: u64) -> Result<(), ReadError> {
        let p = &self.providers[self.current];
        let mut first_bad: Option<Problem> = None;
        let mut bad = 0u32;
        let mut string = |encoded: u16| {
            // Only indexed refs can be unbound; inline and empty ones resolve.
            if encoded != 0
                && encoded & 0x8000 == 0
                && let Some(id) = crate::format::StringId::new(encoded)
                && p.strings.get(id).is_none()
            {
                bad += 1;
                first_bad.get_or_insert(Problem::UnknownStringRef(encoded));
            }
        };
        let mut threads: [Option<ThreadRef>; 2] = [None; 2];
        match raw {
            Record::Event(e) => {
                string(e.category.encode());
                string(e.name.encode());
                args::walk_refs(e.args, &mut string);
                threads[0] = Some(e.thread);
            }
            Record::Blob(b) => string(b.name.encode()),
            Record::UserspaceObject(o) => {
                string(o.name.encode());
                args::walk_refs(o.args, &mut string);
                threads[0] = Some(o.process);
            }
            Record::KernelObject(o) => {
                string(o.name.encode());
                args::walk_refs(o.args, &mut string);
            }
            Record::ContextSwitch(c) => args::walk_refs(c.args, &mut string),
            Record::ThreadWakeup(c) => args::walk_refs(c.args, &mut string),
            Record::LegacyContextSwitch(c) => threads = [Some(c.outgoing), Some(c.incoming)],
            Record::Log(l) => threads[0] = Some(l.thread),
            Record::LargeBlob(b) => {
                string(b.category.encode());
                string(b.name.encode());
                if let Some(m) = &b.meta {
                    args::walk_refs(m.args, &mut string);
                    threads[0] = Some(m.thread);
                }
            }
            _ => {}
        }
        for t in threads.into_iter().flatten() {
            if let ThreadRef::Index(id) = t
                && p.threads.get(id).is_none()
            {
                bad += 1;
                first_bad.get_or_insert(Problem::UnknownThreadRef(id.get()));
            }
        }
        if let Some(problem) = first_bad {
            self.report(offset, problem)?;
            // One warning per record is enough to locate it; count the rest.
            self.warning_count += u64::from(bad.saturating_sub(1));
        }
        Ok(())
    }

    #[inline]
    fn resolve<'r>(&'r self, raw: RawRecord<'r>) -> Record<'r> {
        let p = self.provider();
        let s = |r| p.strings.resolve(r);
        let t = |r| p.threads.resolve(r);
        let a = |r| Args::new(r, &p.strings);
        match raw {
            Record::Magic => Record::Magic,
            Record::ProviderInfo { id, name } => Record::ProviderInfo { id, name },
            Record::ProviderSection { id } => Record::ProviderSection { id },
            Record::ProviderEvent { id, event } => Record::ProviderEvent { id, event },
            Record::TraceInfo { info_type, word } => Record::TraceInfo { info_type, word },
            Record::Initialization(i) => Record::Initialization(i),
            Record::String { id, value } => Record::String { id, value },
            Record::Thread {
                id,
                process,
                thread,
            } => Record::Thread {
                id,
                process,
                thread,
            },
            Record::Event(e) => Record::Event(Event {
                kind: e.kind,
                ticks: e.ticks,
                thread: t(e.thread),
                category: s(e.category),
                name: s(e.name),
                args: a(e.args),
            }),
            Record::Blob(b) => Record::Blob(Blob {
                name: s(b.name),
                blob_type: b.blob_type,
                payload: b.payload,
            }),
            Record::UserspaceObject(o) => Record::UserspaceObject(UserspaceObject {
                process: t(o.process),
                pointer: o.pointer,
                name: s(o.name),
                args: a(o.args),
            }),
            Record::KernelObject(o) => Record::KernelObject(KernelObject {
                object_type: o.object_type,
                koid: o.koid,
                name: s(o.name),
                args: a(o.args),
            }),
            Record::ContextSwitch(c) => Record::ContextSwitch(ContextSwitch {
                ticks: c.ticks,
                cpu: c.cpu,
                outgoing_state: c.outgoing_state,
                outgoing_tid: c.outgoing_tid,
                incoming_tid: c.incoming_tid,
                args: a(c.args),
            }),
            Record::ThreadWakeup(c) => Record::ThreadWakeup(ThreadWakeup {
                ticks: c.ticks,
                cpu: c.cpu,
                waking_tid: c.waking_tid,
                args: a(c.args),
            }),
            Record::LegacyContextSwitch(c) => Record::LegacyContextSwitch(LegacyContextSwitch {
                ticks: c.ticks,
                cpu: c.cpu,
                outgoing_state: c.outgoing_state,
                outgoing: t(c.outgoing),
                incoming: t(c.incoming),
                outgoing_priority: c.outgoing_priority,
                incoming_priority: c.incoming_priority,
            }),
            Record::Log(l) => Record::Log(Log {
                ticks: l.ticks,
                thread: t(l.thread),
                message: l.message,
            }),
            Record::LargeBlob(b) => Record::LargeBlob(LargeBlob {
                category: s(b.category),
                name: s(b.name),
                meta: b.meta.map(|m| LargeBlobMeta {
                    ticks: m.ticks,
                    thread: t(m.thread),
                    args: a(m.args),
                }),
                payload: b.payload,
            }),
        }
    }
}

/// A record with where it starts and the tick rate of its timestamps.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'r> {
    /// Byte offset of the record.
    pub offset: u64,
    /// The record, resolved.
    pub record: Record<'r>,
    /// The tick rate of the record's timestamps.
    pub tick_rate: TickRate,
}

/// What both readers ([`Reader`] over a slice, [`StreamReader`] over a
/// [`std::io::Read`]) offer, so that a consumer is written once for both.
pub trait Records {
    /// The next record, resolved, with its offset. `Ok(None)` at the end of the
    /// input and after a fatal error.
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError>;
    /// Input bytes consumed so far (for progress).
    fn position(&self) -> u64;
    /// Warnings so far (at most [`ReadOptions::max_warnings`]).
    fn warnings(&self) -> &[Warning];
    /// Number of warnings so far, including those not kept.
    fn warning_count(&self) -> u64;
}

impl Records for Reader<'_> {
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        Ok(Some(Entry {
            offset: self.record_offset,
            tick_rate: self.tick_rate(),
            record: self.dec.resolve(raw),
        }))
    }

    fn position(&self) -> u64 {
        self.pos as u64
    }

    fn warnings(&self) -> &[Warning] {
        &self.dec.warnings
    }

    fn warning_count(&self) -> u64 {
        self.dec.warning_count
    }
}

/// Reads records from a byte slice without copying them.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    record_offset: u64,
    done: bool,
    dec: Decoder,
}

impl<'a> Reader<'a> {
    /// A lenient reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self::with_options(data, ReadOptions::default())
    }

    /// A reader with explicit options.
    pub fn with_options(data: &'a [u8], options: ReadOptions) -> Self {
        Self {
            data,
            pos: 0,
            record_offset: 0,
            done: false,
            dec: Decoder::new(options),
        }
    }

    /// The next record with its refs as written; tables are updated by it.
    /// `Ok(None)` at the end of the input, and after a fatal error.
    #[inline]
    pub fn next_raw(&mut self) -> Result<Option<RawRecord<'a>>, ReadError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let data = self.data;
            let rest = data.get(self.pos..).unwrap_or_default();
            if rest.is_empty() {
                self.done = true;
                return Ok(None);
            }
            let offset = self.pos as u64;
            let fail = |this: &mut Self, problem| {
                this.done = true;
                Err(ReadError { offset, problem })
            };
            let Some(head) = rest.first_chunk::<8>() else {
                let problem = Problem::Truncated {
                    needed: 8,
                    available: rest.len() as u64,
                };
                self.done = true;
                return self.dec.end_truncated(offset, problem);
            };
            let bytes = match parse::record_bytes(u64::from_le_bytes(*head)) {
                Ok(b) => b,
                Err(p) => return fail(self, p),
            };
            let Some(rec) = usize::try_from(bytes).ok().and_then(|b| rest.get(..b)) else {
                let problem = Problem::Truncated {
                    needed: bytes,
                    available: rest.len() as u64,
                };
                self.done = true;
                return self.dec.end_truncated(offset, problem);
            };
            self.pos += rec.len();
            self.record_offset = offset;
            if let Some(raw) = self.dec.process(rec, offset)? {
                return Ok(Some(raw));
            }
        }
    }

    /// The next record, resolved.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, ReadError> {
        match self.next_raw()? {
            Some(raw) => Ok(Some(self.dec.resolve(raw))),
            None => Ok(None),
        }
    }

    /// The next record, resolved, with the tick rate its timestamps are in (the
    /// record borrows the reader, so [`ticks_to_ns`](Self::ticks_to_ns) cannot be
    /// called while it is alive).
    pub fn next_timed(&mut self) -> Result<Option<(Record<'_>, TickRate)>, ReadError> {
        match self.next_raw()? {
            Some(raw) => {
                let tb = self.tick_rate();
                Ok(Some((self.dec.resolve(raw), tb)))
            }
            None => Ok(None),
        }
    }

    /// The current provider's tick rate.
    pub fn tick_rate(&self) -> TickRate {
        TickRate {
            ticks_per_second: self.dec.provider().ticks_per_second,
        }
    }

    /// Resolves a raw record against the current tables (use right after
    /// [`next_raw`](Self::next_raw)).
    pub fn resolve<'r>(&'r self, raw: RawRecord<'r>) -> Record<'r> {
        self.dec.resolve(raw)
    }

    /// Byte offset of the last record returned.
    pub fn record_offset(&self) -> u64 {
        self.record_offset
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// The bytes of the input not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    /// Warnings so far (at most [`ReadOptions::max_warnings`]).
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
        ticks_to_ns(ticks, self.dec.provider().ticks_per_second)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::write::{VecDestination, Writer};

    #[test]
    fn tells_fxt_from_other_files() {
        let with_header = Writer::new(VecDestination::new())
            .unwrap()
            .finish()
            .unwrap()
            .into_vec();
        assert!(looks_like_fxt(&with_header));
        // A writer that omits the magic number: starts with provider info.
        let without_magic = &with_header[8..];
        assert!(looks_like_fxt(without_magic));
        // A memtrace trace's first packet, a PNG, text, nothing.
        assert!(!looks_like_fxt(&[
            0xc1, 0x1f, 0xfc, 0xc1, 0x68, 0x07, 0, 0, 0, 0, 0, 0
        ]));
        assert!(!looks_like_fxt(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
        assert!(!looks_like_fxt(b"prog 1234/1234 100.0: cycles:"));
        assert!(!looks_like_fxt(b""));
        // A record of a known type that cannot start a trace (an event).
        assert!(!looks_like_fxt(&0x0000_0000_0000_0024u64.to_le_bytes()));
    }

    #[test]
    fn a_cut_last_record_is_a_warning_when_lenient_and_an_error_when_strict() {
        let whole = Writer::new(VecDestination::new())
            .unwrap()
            .finish()
            .unwrap()
            .into_vec();
        let records = |data: &[u8]| {
            let mut r = Reader::new(data);
            let mut n = 0;
            while r.next_raw().unwrap().is_some() {
                n += 1;
            }
            (n, r.warnings().to_vec())
        };
        let (all, none) = records(&whole);
        assert!(none.is_empty() && all > 2);
        // Cut 3 bytes into the last record, and inside a record header.
        for cut in [whole.len() - 5, whole.len() - 8 - 5] {
            let (n, warnings) = records(&whole[..cut]);
            assert!(n >= all - 2 && n < all, "{n} of {all}");
            assert_eq!(warnings.len(), 1);
            assert!(matches!(warnings[0].problem, Problem::Truncated { .. }));
            let mut strict = Reader::with_options(&whole[..cut], ReadOptions::strict());
            let err = loop {
                match strict.next_raw() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("no error"),
                    Err(e) => break e,
                }
            };
            assert_eq!(err.problem, warnings[0].problem);
        }
    }
}
