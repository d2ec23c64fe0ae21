//! Vocabulary shared by the [`read`](crate::read) and [`write`](crate::write) sides:
//! record and event type codes, string and thread refs, arguments, and the record
//! values both sides carry (initialization, provider events). The whole format is
//! described in `docs/fxt-format.md` at the repository root; this module holds §1
//! (records), §2 (refs) and the type codes of §3, §4, §5 and §8.
//!
//! Every record is a sequence of little-endian 64-bit words. The first word is the
//! record header:
//!
//! | bits  | field                                              |
//! |-------|----------------------------------------------------|
//! | 0–3   | record type ([`RecordType`])                       |
//! | 4–15  | size in words, header included (1..=4095)          |
//! | 16–63 | type specific                                      |
//!
//! Large records (type 15) use bits 4–35 for the size and 36–39 for the large type.
//!
//! A **string ref** is 16 bits: `0` is the empty string, `1..=0x7FFF` indexes the string
//! table, and bit 15 set means the string follows inline in the record, its length in
//! the low 15 bits. A **thread ref** is 8 bits: `0` means a process koid word and a
//! thread koid word follow inline, `1..=255` indexes the thread table.

use core::fmt;

/// The magic-number record, the first word of every trace (`10 00 04 46 78 54 16 00`).
pub const MAGIC: u64 = 0x0016_5478_4604_0010;

/// Largest record a normal (non-large) header can describe, in words.
pub const MAX_RECORD_WORDS: usize = 0xFFF;

/// Largest string length the writer accepts: a conservative limit below the 15-bit
/// length fields' 32767, which the format's own documentation recommends.
pub const MAX_STRING_LEN: usize = 32000;

/// Most arguments one record can carry (the count fields are 4 bits).
pub const MAX_ARGS: usize = 15;

/// Largest payload of a blob record (type 5), in bytes.
pub const MAX_BLOB_LEN: usize = 0x7FFF;

/// Largest provider name, in bytes.
pub const MAX_PROVIDER_NAME_LEN: usize = 0xFF;

/// The record type in header bits 0–3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum RecordType {
    /// Type 0: metadata (magic, provider info/section/event, trace info).
    Metadata = 0,
    /// Type 1: initialization (ticks per second).
    Initialization = 1,
    /// Type 2: string table entry.
    String = 2,
    /// Type 3: thread table entry.
    Thread = 3,
    /// Type 4: event.
    Event = 4,
    /// Type 5: blob.
    Blob = 5,
    /// Type 6: userspace object.
    UserspaceObject = 6,
    /// Type 7: kernel object.
    KernelObject = 7,
    /// Type 8: scheduling.
    Scheduling = 8,
    /// Type 9: log.
    Log = 9,
    /// Type 15: large record (32-bit size).
    Large = 15,
}

impl RecordType {
    /// The record type for a 4-bit code, `None` for the unassigned codes 10–14.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::Metadata,
            1 => Self::Initialization,
            2 => Self::String,
            3 => Self::Thread,
            4 => Self::Event,
            5 => Self::Blob,
            6 => Self::UserspaceObject,
            7 => Self::KernelObject,
            8 => Self::Scheduling,
            9 => Self::Log,
            15 => Self::Large,
            _ => return None,
        })
    }
}

/// Metadata record subtypes (header bits 16–19 of a type-0 record).
pub(crate) mod metadata_type {
    pub const PROVIDER_INFO: u64 = 1;
    pub const PROVIDER_SECTION: u64 = 2;
    pub const PROVIDER_EVENT: u64 = 3;
    // Read only: the writer emits no trace-info records.
    #[cfg(feature = "read")]
    pub const TRACE_INFO: u64 = 4;
}

/// Index into the string table, `1..=0x7FFF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringId(u16);

impl StringId {
    /// Largest string index.
    pub const MAX: u16 = 0x7FFF;
    /// Index 1, which the default header binds to `"process"` (the koid argument name
    /// of thread-name kernel objects).
    pub const PROCESS: StringId = StringId(1);

    /// The id for `index`, `None` unless `1 <= index <= 0x7FFF`.
    pub const fn new(index: u16) -> Option<Self> {
        if index >= 1 && index <= Self::MAX {
            Some(Self(index))
        } else {
            None
        }
    }

    /// The table index.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for StringId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A string as a record refers to it: empty, a string-table index, or inline bytes.
///
/// Inline strings are bytes rather than `str` because traces in the wild are not always
/// valid UTF-8, and a copy must reproduce them unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StringRef<'a> {
    /// Ref `0`: the empty string.
    #[default]
    Empty,
    /// A string-table index.
    Index(StringId),
    /// A string stored in the record itself.
    Inline(&'a [u8]),
}

impl<'a> StringRef<'a> {
    /// An inline string.
    pub const fn inline(s: &'a str) -> Self {
        Self::Inline(s.as_bytes())
    }

    /// The 16-bit encoding of this ref (inline length in the low 15 bits with bit 15
    /// set). Inline lengths above 0x7FFF are masked; writers check lengths first.
    pub const fn encode(self) -> u16 {
        match self {
            Self::Empty => 0,
            Self::Index(id) => id.0,
            Self::Inline(bytes) => 0x8000 | (bytes.len() as u16 & 0x7FFF),
        }
    }

    /// Words the inline bytes take in a record (0 for indexed refs).
    pub const fn inline_words(self) -> usize {
        match self {
            Self::Inline(bytes) => bytes.len().div_ceil(8),
            _ => 0,
        }
    }
}

impl From<StringId> for StringRef<'_> {
    fn from(id: StringId) -> Self {
        Self::Index(id)
    }
}

impl<'a> From<&'a str> for StringRef<'a> {
    fn from(s: &'a str) -> Self {
        if s.is_empty() {
            Self::Empty
        } else {
            Self::Inline(s.as_bytes())
        }
    }
}

/// A kernel object id (process id, thread id, or other object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Koid(pub u64);

impl fmt::Display for Koid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Index into the thread table, `1..=255`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(u8);

impl ThreadId {
    /// The id for `index`, `None` for 0 (which means "inline" on the wire).
    pub const fn new(index: u8) -> Option<Self> {
        if index == 0 { None } else { Some(Self(index)) }
    }

    /// The id for a zero-based slot `0..=254` (slot `s` is index `s + 1`, the
    /// numbering of `set_thread_slot` in Jane Street's `tracing` writer).
    pub const fn from_slot(slot: u8) -> Option<Self> {
        if slot == u8::MAX {
            None
        } else {
            Some(Self(slot + 1))
        }
    }

    /// The table index.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A thread as a record refers to it: a thread-table index or an inline koid pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadRef {
    /// A thread-table index.
    Index(ThreadId),
    /// Process and thread koids stored in the record itself.
    Inline {
        /// The process koid.
        process: Koid,
        /// The thread koid.
        thread: Koid,
    },
}

impl ThreadRef {
    /// The 8-bit encoding (0 for inline).
    pub const fn encode(self) -> u8 {
        match self {
            Self::Index(id) => id.0,
            Self::Inline { .. } => 0,
        }
    }

    /// Words the inline koids take in an event record (0 for indexed refs).
    pub const fn inline_words(self) -> usize {
        match self {
            Self::Index(_) => 0,
            Self::Inline { .. } => 2,
        }
    }
}

impl From<ThreadId> for ThreadRef {
    fn from(id: ThreadId) -> Self {
        Self::Index(id)
    }
}

/// The event type in header bits 16–19 of an event record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventType {
    /// 0: instant.
    Instant = 0,
    /// 1: counter (trailer: counter id).
    Counter = 1,
    /// 2: duration begin.
    DurationBegin = 2,
    /// 3: duration end.
    DurationEnd = 3,
    /// 4: duration complete (trailer: end timestamp).
    DurationComplete = 4,
    /// 5: async begin (trailer: correlation id).
    AsyncBegin = 5,
    /// 6: async instant (trailer: correlation id).
    AsyncInstant = 6,
    /// 7: async end (trailer: correlation id).
    AsyncEnd = 7,
    /// 8: flow begin (trailer: flow id).
    FlowBegin = 8,
    /// 9: flow step (trailer: flow id).
    FlowStep = 9,
    /// 10: flow end (trailer: flow id).
    FlowEnd = 10,
}

impl EventType {
    /// The event type for a 4-bit code, `None` for 11–15.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::Instant,
            1 => Self::Counter,
            2 => Self::DurationBegin,
            3 => Self::DurationEnd,
            4 => Self::DurationComplete,
            5 => Self::AsyncBegin,
            6 => Self::AsyncInstant,
            7 => Self::AsyncEnd,
            8 => Self::FlowBegin,
            9 => Self::FlowStep,
            10 => Self::FlowEnd,
            _ => return None,
        })
    }

    /// Whether a trailer word follows the arguments.
    pub const fn has_trailer(self) -> bool {
        !matches!(
            self,
            Self::Instant | Self::DurationBegin | Self::DurationEnd
        )
    }

    /// A short lower-case name (`"instant"`, `"duration_begin"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Instant => "instant",
            Self::Counter => "counter",
            Self::DurationBegin => "duration_begin",
            Self::DurationEnd => "duration_end",
            Self::DurationComplete => "duration_complete",
            Self::AsyncBegin => "async_begin",
            Self::AsyncInstant => "async_instant",
            Self::AsyncEnd => "async_end",
            Self::FlowBegin => "flow_begin",
            Self::FlowStep => "flow_step",
            Self::FlowEnd => "flow_end",
        }
    }
}

/// An event type together with its trailer value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A point in time on a thread.
    Instant,
    /// Counter samples; each numeric argument is one series.
    Counter {
        /// The counter id (part of Perfetto's track name).
        id: u64,
    },
    /// Opens a slice on the thread; must nest.
    DurationBegin,
    /// Closes the innermost open slice on the thread.
    DurationEnd,
    /// A whole slice in one record.
    DurationComplete {
        /// End timestamp in ticks (not a duration).
        end_ticks: u64,
    },
    /// Opens an async slice matched by id.
    AsyncBegin {
        /// Correlation id.
        id: u64,
    },
    /// A point inside an async slice.
    AsyncInstant {
        /// Correlation id.
        id: u64,
    },
    /// Closes an async slice.
    AsyncEnd {
        /// Correlation id.
        id: u64,
    },
    /// Starts a flow from the enclosing slice.
    FlowBegin {
        /// Flow id.
        id: u64,
    },
    /// Continues a flow through the enclosing slice.
    FlowStep {
        /// Flow id.
        id: u64,
    },
    /// Ends a flow in the enclosing slice.
    FlowEnd {
        /// Flow id.
        id: u64,
    },
}

impl EventKind {
    /// The on-wire event type.
    pub const fn event_type(self) -> EventType {
        match self {
            Self::Instant => EventType::Instant,
            Self::Counter { .. } => EventType::Counter,
            Self::DurationBegin => EventType::DurationBegin,
            Self::DurationEnd => EventType::DurationEnd,
            Self::DurationComplete { .. } => EventType::DurationComplete,
            Self::AsyncBegin { .. } => EventType::AsyncBegin,
            Self::AsyncInstant { .. } => EventType::AsyncInstant,
            Self::AsyncEnd { .. } => EventType::AsyncEnd,
            Self::FlowBegin { .. } => EventType::FlowBegin,
            Self::FlowStep { .. } => EventType::FlowStep,
            Self::FlowEnd { .. } => EventType::FlowEnd,
        }
    }

    /// The trailer word, if this event type has one.
    pub const fn trailer(self) -> Option<u64> {
        match self {
            Self::Instant | Self::DurationBegin | Self::DurationEnd => None,
            Self::DurationComplete { end_ticks } => Some(end_ticks),
            Self::Counter { id }
            | Self::AsyncBegin { id }
            | Self::AsyncInstant { id }
            | Self::AsyncEnd { id }
            | Self::FlowBegin { id }
            | Self::FlowStep { id }
            | Self::FlowEnd { id } => Some(id),
        }
    }

    /// Rebuilds a kind from its type and trailer word (ignored for types without one).
    pub const fn from_parts(event_type: EventType, trailer: u64) -> Self {
        match event_type {
            EventType::Instant => Self::Instant,
            EventType::Counter => Self::Counter { id: trailer },
            EventType::DurationBegin => Self::DurationBegin,
            EventType::DurationEnd => Self::DurationEnd,
            EventType::DurationComplete => Self::DurationComplete { end_ticks: trailer },
            EventType::AsyncBegin => Self::AsyncBegin { id: trailer },
            EventType::AsyncInstant => Self::AsyncInstant { id: trailer },
            EventType::AsyncEnd => Self::AsyncEnd { id: trailer },
            EventType::FlowBegin => Self::FlowBegin { id: trailer },
            EventType::FlowStep => Self::FlowStep { id: trailer },
            EventType::FlowEnd => Self::FlowEnd { id: trailer },
        }
    }
}

/// The argument type in bits 0–3 of an argument header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ArgType {
    /// 0: no value.
    Null = 0,
    /// 1: signed 32-bit, in the header.
    Int32 = 1,
    /// 2: unsigned 32-bit, in the header.
    UInt32 = 2,
    /// 3: signed 64-bit, next word.
    Int64 = 3,
    /// 4: unsigned 64-bit, next word.
    UInt64 = 4,
    /// 5: IEEE-754 double, next word.
    Double = 5,
    /// 6: string ref in header bits 32–47.
    String = 6,
    /// 7: pointer, next word.
    Pointer = 7,
    /// 8: kernel object id, next word.
    Koid = 8,
    /// 9: boolean in header bit 32.
    Bool = 9,
    /// 10: blob (a late addition to the format; PyPI `fxt` rejects it).
    Blob = 10,
}

impl ArgType {
    /// The argument type for a 4-bit code, `None` for 11–15.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::Null,
            1 => Self::Int32,
            2 => Self::UInt32,
            3 => Self::Int64,
            4 => Self::UInt64,
            5 => Self::Double,
            6 => Self::String,
            7 => Self::Pointer,
            8 => Self::Koid,
            9 => Self::Bool,
            10 => Self::Blob,
            _ => return None,
        })
    }

    /// A short lower-case name (`"int32"`, `"string"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Int32 => "int32",
            Self::UInt32 => "uint32",
            Self::Int64 => "int64",
            Self::UInt64 => "uint64",
            Self::Double => "double",
            Self::String => "string",
            Self::Pointer => "pointer",
            Self::Koid => "koid",
            Self::Bool => "bool",
            Self::Blob => "blob",
        }
    }
}

/// An argument value. `S` is how strings are held: [`StringRef`] on the write side and
/// in raw records, resolved bytes ([`Str`](crate::read::Str)) on the read side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue<'a, S> {
    /// Type 0.
    Null,
    /// Type 1.
    Int32(i32),
    /// Type 2.
    UInt32(u32),
    /// Type 3.
    Int64(i64),
    /// Type 4.
    UInt64(u64),
    /// Type 5.
    Double(f64),
    /// Type 6.
    String(S),
    /// Type 7.
    Pointer(u64),
    /// Type 8.
    Koid(Koid),
    /// Type 9.
    Bool(bool),
    /// Type 10 (readers other than Fuchsia's skip or reject it).
    Blob(&'a [u8]),
}

impl<S> ArgValue<'_, S> {
    /// The on-wire argument type.
    pub const fn arg_type(&self) -> ArgType {
        match self {
            Self::Null => ArgType::Null,
            Self::Int32(_) => ArgType::Int32,
            Self::UInt32(_) => ArgType::UInt32,
            Self::Int64(_) => ArgType::Int64,
            Self::UInt64(_) => ArgType::UInt64,
            Self::Double(_) => ArgType::Double,
            Self::String(_) => ArgType::String,
            Self::Pointer(_) => ArgType::Pointer,
            Self::Koid(_) => ArgType::Koid,
            Self::Bool(_) => ArgType::Bool,
            Self::Blob(_) => ArgType::Blob,
        }
    }

    /// Whether Perfetto can use this value as a counter sample.
    pub const fn is_numeric(&self) -> bool {
        matches!(
            self,
            Self::Int32(_) | Self::UInt32(_) | Self::Int64(_) | Self::UInt64(_) | Self::Double(_)
        )
    }

    /// A numeric value as a counter sample (64-bit integers past 2^53 rounded);
    /// `None` for the others.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Int32(v) => Some(f64::from(v)),
            Self::UInt32(v) => Some(f64::from(v)),
            Self::Int64(v) => Some(v as f64),
            Self::UInt64(v) => Some(v as f64),
            Self::Double(v) => Some(v),
            _ => None,
        }
    }
}

/// A named argument. `S` as in [`ArgValue`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg<'a, S> {
    /// The argument name.
    pub name: S,
    /// The value.
    pub value: ArgValue<'a, S>,
}

/// An argument as the writer takes it and raw records hold it.
pub type RawArg<'a> = Arg<'a, StringRef<'a>>;

impl<'a> Arg<'a, StringRef<'a>> {
    /// An argument named by `name`.
    pub fn new(name: impl Into<StringRef<'a>>, value: ArgValue<'a, StringRef<'a>>) -> Self {
        Self {
            name: name.into(),
            value,
        }
    }
}

/// Thread states of scheduling records (header bits 36–39 of a context switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThreadState(pub u8);

impl ThreadState {
    /// 0: new.
    pub const NEW: Self = Self(0);
    /// 1: running.
    pub const RUNNING: Self = Self(1);
    /// 2: suspended.
    pub const SUSPENDED: Self = Self(2);
    /// 3: blocked.
    pub const BLOCKED: Self = Self(3);
    /// 4: dying.
    pub const DYING: Self = Self(4);
    /// 5: dead.
    pub const DEAD: Self = Self(5);
}

/// Kernel object types (ZX object types) used by trace writers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectType(pub u8);

impl ObjectType {
    /// 1: a process; its name names the process track.
    pub const PROCESS: Self = Self(1);
    /// 2: a thread; carries a koid argument `process`.
    pub const THREAD: Self = Self(2);
}

/// Blob types of blob records (header bits 48–55).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobType(pub u8);

impl BlobType {
    /// 1: raw data.
    pub const DATA: Self = Self(1);
    /// 2: Intel last-branch records.
    pub const LAST_BRANCH: Self = Self(2);
    /// 3: an embedded Perfetto protobuf trace (the only type Perfetto reads).
    pub const PERFETTO: Self = Self(3);
}

/// Provider event ids (bits 52–55 of a provider event record, a metadata record of
/// subtype 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderEvent(pub u8);

impl ProviderEvent {
    /// 0: the provider's buffer filled up and records were dropped.
    pub const BUFFER_OVERFLOW: Self = Self(0);
}

/// A tick value and the wall-clock time it corresponds to, which Jane Street's 4-word
/// initialization record adds (a tick rate alone says nothing of the date).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockAnchor {
    /// A tick value...
    pub ticks: u64,
    /// ...and the wall-clock time it corresponds to, in ns since the Unix epoch.
    pub unix_ns: u64,
}

/// The initialization record (type 1): the tick rate, and optionally a time base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Initialization {
    /// Ticks per second; 1e9 makes ticks nanoseconds.
    pub ticks_per_second: u64,
    /// Jane Street's extension (2 extra words). Fuchsia's Rust reader rejects a record
    /// carrying it; everyone else ignores the extra words.
    pub base: Option<ClockAnchor>,
}

impl Initialization {
    /// The standard 2-word record.
    pub const fn new(ticks_per_second: u64) -> Self {
        Self {
            ticks_per_second,
            base: None,
        }
    }

    /// The 4-word record with a clock anchor (opt-in; see [`Initialization::base`]).
    pub const fn extended(ticks_per_second: u64, base_ticks: u64, base_unix_ns: u64) -> Self {
        Self {
            ticks_per_second,
            base: Some(ClockAnchor {
                ticks: base_ticks,
                unix_ns: base_unix_ns,
            }),
        }
    }
}

/// Extracts header bits `lo..=hi` (the reader's; the writer only sets them).
#[cfg(feature = "read")]
#[inline(always)]
pub(crate) const fn bits(word: u64, lo: u32, hi: u32) -> u64 {
    (word >> lo) & (u64::MAX >> (63 - (hi - lo)))
}

/// Words needed for `len` bytes of padded stream.
#[inline(always)]
pub(crate) const fn words_for(len: usize) -> usize {
    len.div_ceil(8)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn numeric_values_are_counter_samples_and_only_they() {
        let v = |a: ArgValue<'_, StringRef<'_>>| (a.as_f64(), a.is_numeric());
        assert_eq!(v(ArgValue::Int32(-3)), (Some(-3.0), true));
        assert_eq!(v(ArgValue::UInt32(u32::MAX)), (Some(4_294_967_295.0), true));
        assert_eq!(
            v(ArgValue::Int64(-1 << 40)),
            (Some(-1_099_511_627_776.0), true)
        );
        assert_eq!(v(ArgValue::UInt64(7)), (Some(7.0), true));
        assert_eq!(v(ArgValue::Double(0.5)), (Some(0.5), true));
        assert_eq!(v(ArgValue::Bool(true)), (None, false));
        assert_eq!(v(ArgValue::Pointer(8)), (None, false));
        assert_eq!(v(ArgValue::Null), (None, false));
    }

    #[test]
    fn bit_fields() {
        assert_eq!(bits(MAGIC, 0, 3), 0);
        assert_eq!(bits(MAGIC, 4, 15), 1);
        assert_eq!(bits(MAGIC, 16, 19), 4);
        assert_eq!(bits(MAGIC, 24, 55), 0x1654_7846);
        assert_eq!(bits(u64::MAX, 0, 63), u64::MAX);
    }

    #[test]
    fn ids_reject_reserved_values() {
        assert!(StringId::new(0).is_none());
        assert!(StringId::new(0x8000).is_none());
        assert_eq!(StringId::new(0x7FFF).map(StringId::get), Some(0x7FFF));
        assert!(ThreadId::new(0).is_none());
        assert_eq!(ThreadId::from_slot(0), ThreadId::new(1));
        assert!(ThreadId::from_slot(255).is_none());
    }

    #[test]
    fn string_ref_encoding() {
        assert_eq!(StringRef::Empty.encode(), 0);
        assert_eq!(StringRef::inline("hello").encode(), 0x8005);
        assert_eq!(StringRef::inline("hello").inline_words(), 1);
        assert_eq!(StringRef::inline("12345678x").inline_words(), 2);
    }
}
