//! The records a reader yields. Each type is generic over how strings (`S`), threads
//! (`T`) and arguments (`A`) are held: raw records ([`RawRecord`]) keep the refs as
//! written, resolved records ([`Record`]) carry the strings and koids the refs stood
//! for when the record was read.

use core::fmt;

use super::args::{Args, RawArgs};
use crate::format::{
    BlobType, EventKind, Initialization, Koid, ObjectType, ProviderEvent, StringId, StringRef,
    ThreadId, ThreadRef, ThreadState,
};

/// A resolved string: bytes, usually UTF-8. Displays lossily.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Str<'a>(pub &'a [u8]);

impl<'a> Str<'a> {
    /// The bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The string, if it is UTF-8.
    pub fn to_str(&self) -> Option<&'a str> {
        core::str::from_utf8(self.0).ok()
    }

    /// Whether it is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{FFFD}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl PartialEq<str> for Str<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Str<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

/// A resolved thread: its process and thread koids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Thread {
    /// Process koid.
    pub process: Koid,
    /// Thread koid.
    pub thread: Koid,
}

impl fmt::Display for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.process, self.thread)
    }
}

/// An event record (type 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event<S, T, A> {
    /// Event type and trailer.
    pub kind: EventKind,
    /// Timestamp in ticks.
    pub ticks: u64,
    /// The thread.
    pub thread: T,
    /// Category.
    pub category: S,
    /// Name.
    pub name: S,
    /// Arguments.
    pub args: A,
}

/// A blob record (type 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Blob<'a, S> {
    /// Name (blobs with one name form one logical blob).
    pub name: S,
    /// Blob type.
    pub blob_type: BlobType,
    /// Payload.
    pub payload: &'a [u8],
}

/// A userspace object record (type 6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UserspaceObject<S, T, A> {
    /// The owning process (for an inline ref only the process koid is on the wire; the
    /// thread koid reads as 0).
    pub process: T,
    /// The object's address.
    pub pointer: u64,
    /// Name.
    pub name: S,
    /// Arguments.
    pub args: A,
}

/// A kernel object record (type 7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelObject<S, A> {
    /// Object type (1 process, 2 thread, ...).
    pub object_type: ObjectType,
    /// The object's koid.
    pub koid: Koid,
    /// Name.
    pub name: S,
    /// Arguments (a thread carries a koid `process`).
    pub args: A,
}

impl KernelObject<Str<'_>, Args<'_>> {
    /// The process of a thread object: its koid argument `process`, if it has one.
    pub fn process(&self) -> Option<Koid> {
        self.args.iter().find_map(|a| match a.value {
            crate::format::ArgValue::Koid(k) if a.name == "process" => Some(k),
            _ => None,
        })
    }
}

/// A context switch record (type 8, subtype 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContextSwitch<A> {
    /// Timestamp in ticks.
    pub ticks: u64,
    /// CPU number.
    pub cpu: u16,
    /// State the outgoing thread is left in.
    pub outgoing_state: ThreadState,
    /// Outgoing thread koid.
    pub outgoing_tid: Koid,
    /// Incoming thread koid.
    pub incoming_tid: Koid,
    /// Arguments.
    pub args: A,
}

/// A thread wakeup record (type 8, subtype 2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreadWakeup<A> {
    /// Timestamp in ticks.
    pub ticks: u64,
    /// CPU number.
    pub cpu: u16,
    /// The woken thread.
    pub waking_tid: Koid,
    /// Arguments.
    pub args: A,
}

/// A legacy context switch record (type 8, subtype 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LegacyContextSwitch<T> {
    /// Timestamp in ticks.
    pub ticks: u64,
    /// CPU number.
    pub cpu: u8,
    /// State the outgoing thread is left in.
    pub outgoing_state: ThreadState,
    /// Outgoing thread.
    pub outgoing: T,
    /// Incoming thread.
    pub incoming: T,
    /// Outgoing thread priority.
    pub outgoing_priority: u8,
    /// Incoming thread priority.
    pub incoming_priority: u8,
}

/// A log record (type 9).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Log<'a, T> {
    /// Timestamp in ticks.
    pub ticks: u64,
    /// The thread.
    pub thread: T,
    /// The message.
    pub message: &'a [u8],
}

/// The metadata part of a large blob in format 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LargeBlobMeta<T, A> {
    /// Timestamp in ticks.
    pub ticks: u64,
    /// The thread.
    pub thread: T,
    /// Arguments.
    pub args: A,
}

/// A large blob record (type 15, large type 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LargeBlob<'a, S, T, A> {
    /// Category.
    pub category: S,
    /// Name.
    pub name: S,
    /// Timestamp, thread and arguments (format 0), or `None` (format 1).
    pub meta: Option<LargeBlobMeta<T, A>>,
    /// Payload.
    pub payload: &'a [u8],
}

/// One record. `Record<'a>` is resolved; [`RawRecord`] keeps refs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Record<'a, S = Str<'a>, T = Thread, A = Args<'a>> {
    /// The magic number record.
    Magic,
    /// Provider info: registers a provider and switches to it.
    ProviderInfo {
        /// Provider id.
        id: u32,
        /// Provider name.
        name: &'a [u8],
    },
    /// Provider section: switches to a provider.
    ProviderSection {
        /// Provider id.
        id: u32,
    },
    /// Provider event (e.g. buffer overflow).
    ProviderEvent {
        /// Provider id.
        id: u32,
        /// Event id.
        event: ProviderEvent,
    },
    /// A trace info record other than the magic number.
    TraceInfo {
        /// Trace info type (bits 20–23).
        info_type: u8,
        /// The whole header word.
        word: u64,
    },
    /// Initialization: ticks per second (and Jane Street's optional clock anchor).
    Initialization(Initialization),
    /// String table entry.
    String {
        /// Index.
        id: StringId,
        /// Value.
        value: &'a [u8],
    },
    /// Thread table entry.
    Thread {
        /// Index.
        id: ThreadId,
        /// Process koid.
        process: Koid,
        /// Thread koid.
        thread: Koid,
    },
    /// Event.
    Event(Event<S, T, A>),
    /// Blob.
    Blob(Blob<'a, S>),
    /// Userspace object.
    UserspaceObject(UserspaceObject<S, T, A>),
    /// Kernel object.
    KernelObject(KernelObject<S, A>),
    /// Context switch.
    ContextSwitch(ContextSwitch<A>),
    /// Thread wakeup.
    ThreadWakeup(ThreadWakeup<A>),
    /// Legacy context switch.
    LegacyContextSwitch(LegacyContextSwitch<T>),
    /// Log message.
    Log(Log<'a, T>),
    /// Large blob.
    LargeBlob(LargeBlob<'a, S, T, A>),
}

/// A record with its refs as written.
pub type RawRecord<'a> = Record<'a, StringRef<'a>, ThreadRef, RawArgs<'a>>;

impl<S, T, A> Record<'_, S, T, A> {
    /// A short lower-case name for the record type (`"event"`, `"string"`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Record::Magic => "magic",
            Record::ProviderInfo { .. } => "provider_info",
            Record::ProviderSection { .. } => "provider_section",
            Record::ProviderEvent { .. } => "provider_event",
            Record::TraceInfo { .. } => "trace_info",
            Record::Initialization(_) => "initialization",
            Record::String { .. } => "string",
            Record::Thread { .. } => "thread",
            Record::Event(_) => "event",
            Record::Blob(_) => "blob",
            Record::UserspaceObject(_) => "userspace_object",
            Record::KernelObject(_) => "kernel_object",
            Record::ContextSwitch(_) => "context_switch",
            Record::ThreadWakeup(_) => "thread_wakeup",
            Record::LegacyContextSwitch(_) => "legacy_context_switch",
            Record::Log(_) => "log",
            Record::LargeBlob(_) => "large_blob",
        }
    }

    /// The record's timestamp in ticks, if it has one.
    pub fn ticks(&self) -> Option<u64> {
        match self {
            Record::Event(e) => Some(e.ticks),
            Record::ContextSwitch(c) => Some(c.ticks),
            Record::ThreadWakeup(c) => Some(c.ticks),
            Record::LegacyContextSwitch(c) => Some(c.ticks),
            Record::Log(l) => Some(l.ticks),
            Record::LargeBlob(b) => b.meta.as_ref().map(|m| m.ticks),
            _ => None,
        }
    }
}
