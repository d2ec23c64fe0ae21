//! Validation against other readers: every [`Problem`] the strict reader would stop
//! at, plus what is legal FXT but breaks or is ignored by a particular reader
//! (Perfetto, the Fuchsia readers, PyPI `fxt` 0.3.0, Jane Street's `tracing_parser`).
//! What each reader does is recorded, with a matrix of every [`Issue`], in
//! `docs/fxt-readers.md` at the repository root; `tests/integration/check_matrix.rs` holds this
//! module to it.

use core::fmt;
use std::collections::HashMap;

use crate::format::{
    ArgType, ArgValue, EventKind, MAX_RECORD_WORDS, ObjectType, RawArg, StringRef, ThreadRef,
};
use crate::read::{Problem, ReadOptions, Reader, Record};

/// A set of readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Readers(u8);

impl Readers {
    /// No reader.
    pub const NONE: Self = Self(0);
    /// Perfetto's trace processor (and so the Perfetto UI).
    pub const PERFETTO: Self = Self(1);
    /// Fuchsia's readers (the C++ `trace-reader` behind trace2json, the Rust `fxt`
    /// crate).
    pub const FUCHSIA: Self = Self(2);
    /// PyPI `fxt` 0.3.0.
    pub const PYFXT: Self = Self(4);
    /// Jane Street's `tracing_parser`.
    pub const JANE_STREET: Self = Self(8);
    /// Every reader.
    pub const ALL: Self = Self(15);

    /// The union.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `other` is in the set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Names of the readers in the set.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        [
            (Self::PERFETTO, "Perfetto"),
            (Self::FUCHSIA, "Fuchsia"),
            (Self::PYFXT, "PyPI fxt"),
            (Self::JANE_STREET, "Jane Street"),
        ]
        .into_iter()
        .filter(move |(r, _)| self.contains(*r))
        .map(|(_, n)| n)
    }
}

impl fmt::Display for Readers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.names().collect();
        f.write_str(&names.join(", "))
    }
}

/// A compatibility issue that is not a decoding problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Issue {
    /// A reader problem (the strict reader stops here).
    Problem(Problem),
    /// A non-metadata record before any provider info.
    NoProviderInfo,
    /// A timestamped record before an initialization record in its provider.
    NoInitialization,
    /// Jane Street's 4-word initialization record.
    ExtendedInitialization,
    /// A second provider info record for one provider id.
    DuplicateProviderInfo(u32),
    /// A provider section or event for a provider without provider info.
    UnannouncedProvider(u32),
    /// A provider event id other than 0.
    UnknownProviderEvent(u8),
    /// A trace info record other than the magic number.
    TraceInfo(u8),
    /// An inline thread ref.
    InlineThread,
    /// A kernel object with an inline name.
    InlineKernelObjectName,
    /// A large record over 4095 words (mis-framed by 12-bit readers).
    HugeLargeRecord(u64),
    /// A large blob without metadata (format 1).
    LargeBlobWithoutMetadata,
    /// A large record at all.
    LargeRecord,
    /// A log record.
    Log,
    /// A userspace object record.
    UserspaceObject,
    /// A blob record that is not an embedded Perfetto trace.
    Blob,
    /// Scheduling records.
    Scheduling,
    /// A legacy context switch.
    LegacyContextSwitch,
    /// A blob argument (type 10).
    BlobArg,
    /// A kernel object type other than process and thread.
    KernelObjectType(u8),
    /// A thread kernel object without a koid argument `process`.
    ThreadWithoutProcess,
    /// A counter event with a non-numeric argument.
    NonNumericCounter,
    /// Two arguments of one record with the same name.
    DuplicateArgName,
    /// A process or thread koid over 32 bits.
    WideKoid,
    /// A duration complete event that ends before it starts.
    EndBeforeStart,
    /// A string that is not UTF-8.
    NotUtf8,
    /// uint32, uint64, koid or null arguments.
    UnparsedArgType(ArgType),
    /// No bytes at all: not a trace.
    Empty,
}

impl Issue {
    /// The readers this breaks (empty: only ignored somewhere, see [`Self::ignored_by`]).
    pub fn breaks(&self) -> Readers {
        use Readers as R;
        match self {
            Issue::Problem(p) => match p {
                Problem::ZeroSizeRecord
                | Problem::Truncated { .. }
                | Problem::FieldOutOfRecord
                | Problem::ArgOutOfRecord
                | Problem::ArgSizeZero
                | Problem::BadMagic { .. }
                | Problem::ZeroTicksPerSecond
                | Problem::Io(_)
                | Problem::RecordTooLarge { .. } => R::ALL,
                Problem::ArgPadding { .. } => R::PYFXT.with(R::FUCHSIA),
                Problem::MissingMagic => R::PERFETTO.with(R::FUCHSIA),
                Problem::UnknownRecordType(_)
                | Problem::UnknownMetadataType(_)
                | Problem::UnknownEventType(_)
                | Problem::UnknownArgType(_)
                | Problem::UnknownSchedulingType(_)
                | Problem::UnknownLargeRecordType(_)
                | Problem::UnknownLargeBlobFormat(_) => R::PYFXT,
                Problem::UnknownStringRef(_) => R::PYFXT.with(R::PERFETTO).with(R::JANE_STREET),
                Problem::UnknownThreadRef(_) => R::PYFXT.with(R::PERFETTO).with(R::JANE_STREET),
                Problem::StringIndexZero | Problem::ThreadIndexZero | Problem::TooManyProviders => {
                    R::NONE
                }
            },
            Issue::NoProviderInfo
            | Issue::DuplicateProviderInfo(_)
            | Issue::UnannouncedProvider(_)
            | Issue::UnknownProviderEvent(_)
            | Issue::TraceInfo(_)
            | Issue::LegacyContextSwitch
            | Issue::BlobArg
            | Issue::KernelObjectType(_)
            | Issue::NotUtf8 => R::PYFXT,
            Issue::Empty => R::ALL,
            Issue::NoInitialization => R::PYFXT.with(R::FUCHSIA),
            Issue::ExtendedInitialization | Issue::LargeBlobWithoutMetadata => R::FUCHSIA,
            Issue::InlineThread | Issue::InlineKernelObjectName => R::JANE_STREET,
            Issue::HugeLargeRecord(_) => R::PERFETTO,
            Issue::ThreadWithoutProcess => R::PERFETTO.with(R::JANE_STREET),
            Issue::NonNumericCounter | Issue::WideKoid | Issue::EndBeforeStart => R::PERFETTO,
            Issue::DuplicateArgName => R::PYFXT,
            Issue::LargeRecord
            | Issue::Log
            | Issue::UserspaceObject
            | Issue::Blob
            | Issue::Scheduling
            | Issue::UnparsedArgType(_) => R::NONE,
        }
    }

    /// Readers that skip the record (or value) without failing (`docs/fxt-readers.md`:
    /// an unknown record, argument or subtype is skipped by size; index 0 of a table
    /// is ignored; Jane Street's parser counts what it does not parse and goes on).
    pub fn ignored_by(&self) -> Readers {
        use Readers as R;
        let (p, f, j) = (R::PERFETTO, R::FUCHSIA, R::JANE_STREET);
        match self {
            Issue::LargeRecord => p.with(j),
            Issue::Log | Issue::UserspaceObject => p.with(j),
            Issue::Blob => p.with(j),
            Issue::Scheduling => j,
            Issue::UnparsedArgType(_) => j,
            Issue::Problem(Problem::UnknownRecordType(_)) => p.with(f).with(j),
            Issue::Problem(Problem::UnknownMetadataType(_)) => f.with(j),
            Issue::Problem(Problem::UnknownArgType(_)) => p.with(f).with(j),
            Issue::Problem(Problem::UnknownSchedulingType(_)) => f.with(j),
            Issue::Problem(
                Problem::UnknownLargeRecordType(_) | Problem::UnknownLargeBlobFormat(_),
            ) => p.with(j),
            Issue::Problem(Problem::StringIndexZero | Problem::ThreadIndexZero) => p.with(j),
            Issue::UnknownProviderEvent(_) => p.with(j),
            Issue::TraceInfo(_) | Issue::LegacyContextSwitch => j,
            Issue::BlobArg => p.with(f).with(j),
            Issue::KernelObjectType(_) => p,
            _ => R::NONE,
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Issue::Problem(p) => write!(f, "{p}"),
            Issue::NoProviderInfo => f.write_str("record before any provider info record"),
            Issue::NoInitialization => {
                f.write_str("timestamped record before any initialization record")
            }
            Issue::ExtendedInitialization => {
                f.write_str("4-word (Jane Street) initialization record")
            }
            Issue::DuplicateProviderInfo(id) => write!(f, "second provider info for provider {id}"),
            Issue::UnannouncedProvider(id) => {
                write!(f, "provider {id} used before its provider info record")
            }
            Issue::UnknownProviderEvent(e) => write!(f, "provider event {e}"),
            Issue::TraceInfo(t) => write!(f, "trace info record of type {t}"),
            Issue::InlineThread => f.write_str("inline thread ref"),
            Issue::InlineKernelObjectName => f.write_str("kernel object with an inline name"),
            Issue::HugeLargeRecord(words) => {
                write!(
                    f,
                    "large record of {words} words (over 4095: mis-framed by 12-bit readers)"
                )
            }
            Issue::LargeBlobWithoutMetadata => {
                f.write_str("large blob without metadata (format 1)")
            }
            Issue::LargeRecord => f.write_str("large record"),
            Issue::Log => f.write_str("log record"),
            Issue::UserspaceObject => f.write_str("userspace object record"),
            Issue::Blob => f.write_str("blob record (not an embedded Perfetto trace)"),
            Issue::Scheduling => f.write_str("scheduling record"),
            Issue::LegacyContextSwitch => f.write_str("legacy context switch record"),
            Issue::BlobArg => f.write_str("blob argument (type 10)"),
            Issue::KernelObjectType(t) => write!(f, "kernel object of type {t}"),
            Issue::ThreadWithoutProcess => {
                f.write_str("thread kernel object without a koid argument `process`")
            }
            Issue::NonNumericCounter => f.write_str("counter event with a non-numeric argument"),
            Issue::DuplicateArgName => {
                f.write_str("two arguments with the same name (PyPI fxt keeps only the last)")
            }
            Issue::WideKoid => f.write_str("process or thread koid over 32 bits"),
            Issue::EndBeforeStart => f.write_str("duration complete event ends before it starts"),
            Issue::NotUtf8 => f.write_str("string that is not UTF-8"),
            Issue::UnparsedArgType(t) => write!(f, "{} argument", t.name()),
            Issue::Empty => f.write_str("empty file: no records, not even the magic number"),
        }
    }
}

/// One finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Byte offset of the record.
    pub offset: u64,
    /// What.
    pub issue: Issue,
}

/// The result of [`check`].
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Findings in file order, at most [`Report::MAX_PER_ISSUE`] of each issue
    /// (every one from [`check_keeping_all`]).
    pub findings: Vec<Finding>,
    /// How often each issue occurred.
    pub counts: Vec<(Issue, u64)>,
    /// Records read.
    pub records: u64,
    /// A fatal error that stopped reading.
    pub fatal: Option<Finding>,
}

impl Report {
    /// Findings kept per issue.
    pub const MAX_PER_ISSUE: u64 = 20;

    /// Whether no reader breaks on the file.
    pub fn is_clean(&self) -> bool {
        self.fatal.is_none() && self.counts.iter().all(|(i, _)| i.breaks().is_empty())
    }

    /// Readers the file breaks.
    pub fn broken_readers(&self) -> Readers {
        let mut r = self.fatal.map(|f| f.issue.breaks()).unwrap_or_default();
        for (i, _) in &self.counts {
            r = r.with(i.breaks());
        }
        r
    }
}

/// The report as `tracekit fxt check` prints it: each issue once, at its first
/// offset, with the readers it breaks (or that ignore it) and how often it occurred
/// when more than once; then a verdict line. [`Report::verbose`] lists every
/// offset instead.
impl fmt::Display for Report {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown: Vec<Issue> = Vec::new();
        for f in &self.findings {
            if shown.contains(&f.issue) {
                continue;
            }
            shown.push(f.issue);
            let n = self.count(f.issue);
            write!(out, "{:#010x}: {}{}", f.offset, f.issue, describe(f.issue))?;
            match n {
                0 | 1 => writeln!(out)?,
                n => writeln!(out, " ({n} times, first here)")?,
            }
        }
        self.fmt_end(out)
    }
}

/// [`Report`] with every finding on a line of its own; see [`Report::verbose`].
pub struct Verbose<'a>(&'a Report);

impl fmt::Display for Verbose<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = self.0;
        for f in &report.findings {
            writeln!(out, "{:#010x}: {}{}", f.offset, f.issue, describe(f.issue))?;
        }
        for (issue, n) in &report.counts {
            let kept = report.findings.iter().filter(|f| f.issue == *issue).count();
            if *n > kept as u64 {
                writeln!(out, "... {issue}: {n} in total")?;
            }
        }
        report.fmt_end(out)
    }
}

impl Report {
    /// How often `issue` occurred.
    pub fn count(&self, issue: Issue) -> u64 {
        self.counts
            .iter()
            .find(|(i, _)| *i == issue)
            .map_or(0, |(_, n)| *n)
    }

    /// Whether some issue occurred more than once (and [`Report`]'s `Display`
    /// shows it once).
    pub fn has_repeats(&self) -> bool {
        self.counts.iter().any(|(_, n)| *n > 1)
    }

    /// The report with every finding it kept on a line of its own (the counts of
    /// those over the kept ones after them).
    pub fn verbose(&self) -> Verbose<'_> {
        Verbose(self)
    }

    /// The fatal finding, if any, and the verdict line.
    fn fmt_end(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(f) = &self.fatal {
            writeln!(
                out,
                "{:#010x}: fatal: {}{}",
                f.offset,
                f.issue,
                describe(f.issue)
            )?;
        }
        let broken = self.broken_readers();
        if self.is_clean() {
            writeln!(
                out,
                "clean: {} records; every known reader accepts this trace",
                self.records
            )
        } else if broken == Readers::NONE {
            writeln!(out, "{} records; reading stopped early", self.records)
        } else {
            writeln!(out, "{} records; breaks: {broken}", self.records)
        }
    }
}

/// What an issue does to the readers, as a report shows it.
fn describe(issue: Issue) -> String {
    let (breaks, ignored) = (issue.breaks(), issue.ignored_by());
    if !breaks.is_empty() {
        format!(" [breaks: {breaks}]")
    } else if !ignored.is_empty() {
        format!(" [ignored by: {ignored}]")
    } else {
        " [note]".to_string()
    }
}

struct Collector {
    report: Report,
    keep: u64,
    counts: HashMap<Issue, u64>,
    order: Vec<Issue>,
}

impl Collector {
    fn add(&mut self, offset: u64, issue: Issue) {
        let n = self.counts.entry(issue).or_insert(0);
        if *n == 0 {
            self.order.push(issue);
        }
        *n += 1;
        if *n <= self.keep {
            self.report.findings.push(Finding { offset, issue });
        }
    }
}

#[derive(Default)]
struct ProviderSeen {
    announced: bool,
    initialized: bool,
}

/// Checks `input` against every reader of the compatibility matrix.
pub fn check(input: &[u8]) -> Report {
    check_with_progress(input, |_| {})
}

/// [`check`], calling `progress` with the byte offset reached every 8192 records.
pub fn check_with_progress(input: &[u8], progress: impl FnMut(u64)) -> Report {
    check_keeping(input, Report::MAX_PER_ISSUE, progress)
}

/// [`check_with_progress`], keeping every finding (not [`Report::MAX_PER_ISSUE`] of
/// each issue): for a report that lists every offset ([`Report::verbose`]).
pub fn check_keeping_all(input: &[u8], progress: impl FnMut(u64)) -> Report {
    check_keeping(input, u64::MAX, progress)
}

fn check_keeping(input: &[u8], keep: u64, mut progress: impl FnMut(u64)) -> Report {
    let mut c = Collector {
        report: Report::default(),
        keep,
        counts: HashMap::new(),
        order: Vec::new(),
    };
    let options = ReadOptions {
        max_warnings: usize::MAX,
        ..ReadOptions::default()
    };
    let mut reader = Reader::with_options(input, options);
    let mut providers: HashMap<u32, ProviderSeen> = HashMap::new();
    let mut current = 0u32;
    let mut seen_warnings = 0usize;
    loop {
        let raw = match reader.next_raw() {
            Ok(Some(raw)) => raw,
            Ok(None) => break,
            Err(e) => {
                c.report.fatal = Some(Finding {
                    offset: e.offset,
                    issue: Issue::Problem(e.problem),
                });
                break;
            }
        };
        // The reader's own warnings for the records it read (or skipped) so far.
        for w in reader.warnings().get(seen_warnings..).unwrap_or_default() {
            c.add(w.offset, Issue::Problem(w.problem));
        }
        seen_warnings = reader.warnings().len();
        let offset = reader.record_offset();
        c.report.records += 1;
        if c.report.records.is_multiple_of(8192) {
            progress(reader.offset());
        }
        let large_words = input
            .get(offset as usize..)
            .and_then(|b| b.first_chunk::<8>())
            .map(|h| u64::from_le_bytes(*h))
            .filter(|h| h & 0xF == 15)
            .map(|h| (h >> 4) & 0xFFFF_FFFF);

        match &raw {
            Record::ProviderInfo { id, name } => {
                let p = providers.entry(*id).or_default();
                if p.announced {
                    c.add(offset, Issue::DuplicateProviderInfo(*id));
                }
                p.announced = true;
                current = *id;
                if core::str::from_utf8(name).is_err() {
                    c.add(offset, Issue::NotUtf8);
                }
                continue;
            }
            Record::ProviderSection { id } => {
                if !providers.get(id).is_some_and(|p| p.announced) {
                    c.add(offset, Issue::UnannouncedProvider(*id));
                }
                current = *id;
                continue;
            }
            Record::ProviderEvent { id, event } => {
                if !providers.get(id).is_some_and(|p| p.announced) {
                    c.add(offset, Issue::UnannouncedProvider(*id));
                }
                if event.0 != 0 {
                    c.add(offset, Issue::UnknownProviderEvent(event.0));
                }
                continue;
            }
            Record::TraceInfo { info_type, .. } => {
                c.add(offset, Issue::TraceInfo(*info_type));
                continue;
            }
            Record::Magic => continue,
            _ => {}
        }
        let p = providers.entry(current).or_default();
        if !p.announced {
            c.add(offset, Issue::NoProviderInfo);
            // Report once per provider.
            p.announced = true;
        }
        if raw.ticks().is_some() && !p.initialized {
            c.add(offset, Issue::NoInitialization);
            p.initialized = true;
        }
        let mut strs: Vec<StringRef<'_>> = Vec::new();
        let mut args: Vec<RawArg<'_>> = Vec::new();
        let mut thread_refs: Vec<ThreadRef> = Vec::new();
        match &raw {
            Record::Initialization(init) => {
                p.initialized = true;
                if init.base.is_some() {
                    c.add(offset, Issue::ExtendedInitialization);
                }
            }
            Record::String { value, .. } if core::str::from_utf8(value).is_err() => {
                c.add(offset, Issue::NotUtf8);
            }
            Record::Thread {
                process, thread, ..
            } if process.0 > u64::from(u32::MAX) || thread.0 > u64::from(u32::MAX) => {
                c.add(offset, Issue::WideKoid);
            }
            Record::Event(e) => {
                strs.extend([e.category, e.name]);
                args.extend(e.args.iter());
                thread_refs.push(e.thread);
                if let EventKind::DurationComplete { end_ticks } = e.kind
                    && end_ticks < e.ticks
                {
                    c.add(offset, Issue::EndBeforeStart);
                }
                if matches!(e.kind, EventKind::Counter { .. })
                    && e.args.iter().any(|a| !a.value.is_numeric())
                {
                    c.add(offset, Issue::NonNumericCounter);
                }
            }
            Record::Blob(b) => {
                strs.push(b.name);
                if b.blob_type != crate::format::BlobType::PERFETTO {
                    c.add(offset, Issue::Blob);
                }
            }
            Record::UserspaceObject(o) => {
                c.add(offset, Issue::UserspaceObject);
                strs.push(o.name);
                args.extend(o.args.iter());
            }
            Record::KernelObject(o) => {
                strs.push(o.name);
                args.extend(o.args.iter());
                if matches!(o.name, StringRef::Inline(_)) {
                    c.add(offset, Issue::InlineKernelObjectName);
                }
                if o.object_type != ObjectType::PROCESS && o.object_type != ObjectType::THREAD {
                    c.add(offset, Issue::KernelObjectType(o.object_type.0));
                }
                if o.koid.0 > u64::from(u32::MAX)
                    && (o.object_type == ObjectType::PROCESS || o.object_type == ObjectType::THREAD)
                {
                    c.add(offset, Issue::WideKoid);
                }
                if o.object_type == ObjectType::THREAD {
                    let resolved = reader.resolve(raw);
                    let has_process = match resolved {
                        Record::KernelObject(k) => k.args.iter().next().is_some_and(|a| {
                            a.name == "process" && matches!(a.value, ArgValue::Koid(_))
                        }),
                        _ => false,
                    };
                    if !has_process {
                        c.add(offset, Issue::ThreadWithoutProcess);
                    }
                }
            }
            Record::ContextSwitch(s) => {
                c.add(offset, Issue::Scheduling);
                args.extend(s.args.iter());
            }
            Record::ThreadWakeup(s) => {
                c.add(offset, Issue::Scheduling);
                args.extend(s.args.iter());
            }
            Record::LegacyContextSwitch(s) => {
                c.add(offset, Issue::LegacyContextSwitch);
                thread_refs.extend([s.outgoing, s.incoming]);
            }
            Record::Log(l) => {
                c.add(offset, Issue::Log);
                thread_refs.push(l.thread);
                if core::str::from_utf8(l.message).is_err() {
                    c.add(offset, Issue::NotUtf8);
                }
            }
            Record::LargeBlob(b) => {
                c.add(offset, Issue::LargeRecord);
                strs.extend([b.category, b.name]);
                match &b.meta {
                    Some(m) => {
                        args.extend(m.args.iter());
                        thread_refs.push(m.thread);
                    }
                    None => c.add(offset, Issue::LargeBlobWithoutMetadata),
                }
            }
            _ => {}
        }
        if let Some(words) = large_words
            && words > MAX_RECORD_WORDS as u64
        {
            c.add(offset, Issue::HugeLargeRecord(words));
        }
        for t in &thread_refs {
            if let ThreadRef::Inline { process, thread } = t {
                c.add(offset, Issue::InlineThread);
                if process.0 > u64::from(u32::MAX) || thread.0 > u64::from(u32::MAX) {
                    c.add(offset, Issue::WideKoid);
                }
            }
        }
        let event_args = matches!(raw, Record::Event(_));
        for a in &args {
            strs.push(a.name);
            match a.value {
                ArgValue::String(s) => strs.push(s),
                ArgValue::Blob(_) => c.add(offset, Issue::BlobArg),
                // Jane Street's parser decodes these only where it expects them (the
                // `process` koid of a thread object).
                ArgValue::UInt32(_) | ArgValue::UInt64(_) | ArgValue::Koid(_) | ArgValue::Null
                    if event_args =>
                {
                    c.add(offset, Issue::UnparsedArgType(a.value.arg_type()))
                }
                _ => {}
            }
        }
        for s in &strs {
            if let StringRef::Inline(b) = s
                && core::str::from_utf8(b).is_err()
            {
                c.add(offset, Issue::NotUtf8);
            }
        }
        if args.len() > 1 {
            let resolved = reader.resolve(raw);
            let names: Vec<Vec<u8>> = match resolved {
                Record::Event(e) => e.args.iter().map(|a| a.name.0.to_vec()).collect(),
                Record::KernelObject(o) => o.args.iter().map(|a| a.name.0.to_vec()).collect(),
                Record::UserspaceObject(o) => o.args.iter().map(|a| a.name.0.to_vec()).collect(),
                Record::ContextSwitch(s) => s.args.iter().map(|a| a.name.0.to_vec()).collect(),
                Record::ThreadWakeup(s) => s.args.iter().map(|a| a.name.0.to_vec()).collect(),
                Record::LargeBlob(b) => b
                    .meta
                    .map(|m| m.args.iter().map(|a| a.name.0.to_vec()).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            if sorted.len() != names.len() {
                c.add(offset, Issue::DuplicateArgName);
            }
        }
    }
    for w in reader.warnings().get(seen_warnings..).unwrap_or_default() {
        c.add(w.offset, Issue::Problem(w.problem));
    }
    if input.is_empty() {
        c.add(0, Issue::Empty);
    }
    c.report.findings.sort_by_key(|f| f.offset);
    c.report.counts = c
        .order
        .iter()
        .map(|i| (*i, c.counts.get(i).copied().unwrap_or(0)))
        .collect();
    c.report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Koid;
    use crate::write::{VecDestination, Writer};

    /// A trace with `n` log records (a note) after one thread record.
    fn logs(n: u64) -> Vec<u8> {
        let mut w = Writer::new(VecDestination::new()).unwrap_or_else(|_| unreachable!());
        let thread = (w.set_thread_slot(0, Koid(1), Koid(2))).unwrap_or_else(|_| unreachable!());
        for t in 0..n {
            w.log(thread, t, b"hello")
                .unwrap_or_else(|_| unreachable!());
        }
        w.finish().unwrap_or_else(|_| unreachable!()).into_vec()
    }

    #[test]
    fn repeated_issues_are_shown_once_with_their_count() {
        let report = check(&logs(40));
        assert_eq!(report.count(Issue::Log), 40);
        assert!(report.has_repeats());
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with(
                ": log record [ignored by: Perfetto, Jane Street] (40 times, first here)"
            ),
            "{text}"
        );
        assert!(lines[1].starts_with("clean: "), "{text}");
        // Once is shown as before, without a count.
        let once = check(&logs(1)).to_string();
        assert!(
            once.lines()
                .next()
                .is_some_and(|l| l.ends_with("Jane Street]")),
            "{once}"
        );
    }

    #[test]
    fn verbose_lists_every_offset_when_every_finding_is_kept() {
        let bytes = logs(40);
        let capped = check(&bytes);
        let text = capped.verbose().to_string();
        assert_eq!(
            text.lines().filter(|l| l.contains(": log record")).count(),
            20
        );
        assert!(text.contains("... log record: 40 in total"), "{text}");
        let all = check_keeping_all(&bytes, |_| {});
        assert_eq!(all.findings.len(), 40);
        let text = all.verbose().to_string();
        assert_eq!(
            text.lines().filter(|l| l.contains(": log record")).count(),
            40
        );
        assert!(!text.contains("in total"), "{text}");
        // Grouping does not depend on how many findings were kept.
        assert_eq!(all.to_string(), capped.to_string());
    }
}
