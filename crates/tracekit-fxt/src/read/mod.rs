//! The FXT reader: decodes records from a byte slice ([`Reader`], zero-copy) or from
//! any [`std::io::Read`] ([`StreamReader`]), keeping the string and thread tables of
//! each provider as they change.
//!
//! Submodules mirror [`crate::write`]: [`records`] (what is yielded), [`args`],
//! [`tables`] (strings, threads, providers); `parse` decodes each record type.
//!
//! Records come in two layers. [`RawRecord`] keeps string and thread refs as written
//! (for copying, or checking); [`Record`] resolves them against the tables as they
//! were when the record was read, so slot reuse later in the trace cannot change an
//! earlier record's meaning.
//!
//! **Problems.** Framing problems (a record of size 0, a record cut short by the end of
//! the input) end reading with a [`ReadError`] carrying the byte offset. Anything else
//! (an unknown record, event or argument type, an unbound string or thread index, a
//! field that reaches past its record's end, ...) is a [`Problem`] with one record:
//! in lenient mode (the default) the reader records a [`Warning`] and skips the record
//! (or, for an unbound ref, resolves it to a placeholder); in strict mode it returns
//! the error, and reading can continue with the next record. No input makes the
//! reader panic or loop, and it allocates at most the tables of [`MAX_PROVIDERS`]
//! providers plus the strings it was given.

pub mod args;
mod cursor;
mod parse;
pub mod records;
mod stream;
pub mod tables;

pub use args::{Args, RawArgs};
pub use records::{
    Blob, ContextSwitch, Event, KernelObject, LargeBlob, LargeBlobMeta, LegacyContextSwitch, Log,
    RawRecord, Record, Str, Thread, ThreadWakeup, UserspaceObject,
};
pub use stream::StreamReader;
pub use tables::{MAX_PROVIDERS, Provider, StringTable, ThreadTable, Timebase, ticks_to_ns};

use thiserror::Error;

use crate::format::ThreadRef;

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
    /// A string record for index 0 (ignored, as the spec says).
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
                return fail(
                    self,
                    Problem::Truncated {
                        needed: 8,
                        available: rest.len() as u64,
                    },
                );
            };
            let bytes = match parse::record_bytes(u64::from_le_bytes(*head)) {
                Ok(b) => b,
                Err(p) => return fail(self, p),
            };
            let Some(rec) = usize::try_from(bytes).ok().and_then(|b| rest.get(..b)) else {
                return fail(
                    self,
                    Problem::Truncated {
                        needed: bytes,
                        available: rest.len() as u64,
                    },
                );
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
    pub fn next_timed(&mut self) -> Result<Option<(Record<'_>, Timebase)>, ReadError> {
        match self.next_raw()? {
            Some(raw) => {
                let tb = self.timebase();
                Ok(Some((self.dec.resolve(raw), tb)))
            }
            None => Ok(None),
        }
    }

    /// The current provider's tick rate.
    pub fn timebase(&self) -> Timebase {
        Timebase {
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
