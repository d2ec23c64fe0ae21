//! Errors and warnings of the reader and the writer.

#[cfg(feature = "read")]
use std::fmt;

#[cfg(feature = "read")]
use crate::types::LocationCode;

/// A malformed trace: what is wrong, and the byte offset in the input where
/// decoding stopped.
#[cfg(feature = "read")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed trace at byte {offset}: {kind}")]
pub struct ReadError {
    /// Byte offset in the input (from the start of the trace) of the field
    /// that could not be decoded.
    pub offset: u64,
    /// What is wrong.
    pub kind: ReadErrorKind,
}

/// The kinds of malformed trace. Each names the check of the reference reader
/// it corresponds to where there is one.
#[cfg(feature = "read")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The data ends inside a packet header or the trace-info packet.
    #[error("unexpected end of data")]
    UnexpectedEof,
    /// A packet does not start with the magic number `0xc1fc1fc1`.
    #[error("not a CTF packet (magic {0:#010x})")]
    BadMagic(u32),
    /// A packet's format version is newer than this reader knows.
    #[error("trace format v{0:03}, but expected at most v003")]
    UnsupportedVersion(u16),
    /// A packet size is negative or smaller than the packet header.
    #[error("bad packet size")]
    BadPacketSize,
    /// A packet header's `time_begin` is after its `time_end`.
    #[error("packet timestamps are not monotone")]
    PacketTimestampsNotMonotone,
    /// A packet header's `alloc_id_begin` is after its `alloc_id_end`.
    #[error("packet alloc ids are not monotone")]
    PacketAllocIdsNotMonotone,
    /// The first packet does not hold exactly one trace-info event at its start time.
    #[error("bad trace-info packet")]
    BadTraceInfo,
    /// A trace-info event after the first packet.
    #[error("multiple trace-info events present")]
    MultipleTraceInfo,
    /// An event's timestamp lies outside its packet's time range.
    #[error("event time outside its packet's bounds")]
    TimeOutOfPacketBounds,
    /// An event is earlier than the previous event of the same domain.
    #[error("timestamps are not monotone")]
    TimestampsNotMonotone,
    /// An event code that no format version defines.
    #[error("unknown event code {0}")]
    UnknownEventCode(u8),
    /// A long alloc event's source byte is not 0, 1 or 2.
    #[error("bad allocation source {0}")]
    BadAllocationSource(u8),
    /// A packet's cache verifier disagrees with the decoder's backtrace cache.
    #[error("cache verification failed")]
    CacheVerificationFailed,
    /// A location code was sent again with different locations.
    #[error("inconsistent location info for code {0}")]
    InconsistentLocation(LocationCode),
    /// A move-to-front index names an empty slot of the file or definition table.
    #[error("location refers to an empty move-to-front slot")]
    EmptyMtfSlot,
    /// A packet's `alloc_id_end` is not `alloc_id_begin` plus its number of allocations.
    #[error("alloc id sync")]
    AllocIdMismatch,
    /// A promote event refers to an object not yet allocated.
    #[error("promote id sync")]
    PromoteIdSync,
    /// An object id, length or sample count outside the range of OCaml integers
    /// a writer can produce (negative, say).
    #[error("value out of range")]
    ValueOutOfRange,
    /// More distinct domains than the reader keeps state for.
    #[error("too many domains (at most {0})")]
    TooManyDomains(usize),
    /// Backtraces larger than the reader's memory bound.
    #[error("backtrace too long")]
    BacktraceTooLong,
}

#[cfg(feature = "read")]
impl ReadError {
    pub(crate) const fn new(kind: ReadErrorKind, offset: u64) -> ReadError {
        ReadError { offset, kind }
    }
}

/// A damaged packet that the reader skipped, as the reference reader does;
/// decoding goes on after it.
#[cfg(feature = "read")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A packet written by another process (a forked child).
    WrongPid {
        /// Byte offset of the packet header.
        offset: u64,
        /// The pid in the packet header.
        pid: i64,
        /// The pid of the traced process.
        expected: i64,
    },
    /// A packet cut short by the end of the data.
    TruncatedPacket {
        /// Byte offset of the packet header.
        offset: u64,
        /// The content size the header announces.
        content_size: u64,
        /// The bytes that are there.
        available: u64,
    },
}

#[cfg(feature = "read")]
impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Warning::WrongPid {
                offset,
                pid,
                expected,
            } => write!(
                f,
                "skipping bad packet at byte {offset} (wrong pid: {pid}, but tracing {expected})"
            ),
            Warning::TruncatedPacket {
                offset,
                content_size,
                available,
            } => write!(
                f,
                "skipping truncated packet at byte {offset} ({available} of {content_size} content bytes present)"
            ),
        }
    }
}

/// An error opening a trace: the input could not be read, or its first packet
/// is not a memtrace trace-info packet.
#[cfg(feature = "read")]
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Reading the input failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The input is not a memtrace trace.
    #[error(transparent)]
    Malformed(#[from] ReadError),
}

/// An error from the writer.
#[cfg(feature = "write")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing to the sink failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The process id changed (the process forked): nothing was written, and
    /// this writer should stop tracing (OCaml `Pid_changed`).
    #[error("process id changed (forked child); nothing written")]
    PidChanged,
    /// The sink was closed by [`Writer::close`](crate::Writer::close) on a
    /// writer sharing it.
    #[error("trace writer already closed")]
    Closed,
    /// An event's domain is not the writer's domain.
    #[error("event domain does not match the writer's domain")]
    DomainMismatch,
    /// An event is earlier than the previous event of this writer.
    #[error("out-of-order timestamps")]
    TimestampOutOfOrder,
    /// An allocation's id is not the one the writer assigned.
    #[error("incorrect allocation id: expected {expected}, event has {actual}")]
    IncorrectAllocationId {
        /// The id the writer assigned.
        expected: u64,
        /// The id in the event.
        actual: u64,
    },
    /// A length, sample count or object id above OCaml's `max_int` (2^62 - 1).
    #[error("value out of range for a memtrace trace")]
    ValueOutOfRange,
    /// The requested format version cannot express this (several domains,
    /// a non-main initial domain, or format v1).
    #[error("not supported by format {0}")]
    UnsupportedByFormat(crate::FormatVersion),
    /// The sink is still shared with other domain writers.
    #[error("the sink is still shared with other domain writers")]
    SinkShared,
    /// An event that [`copy_trace`](crate::copy_trace) cannot write so that
    /// it reads back the same; no trace a reader accepts is known to have one.
    #[error("cannot write an event so that it reads back the same: {0}")]
    NotReproducible(&'static str),
    /// A promote of an object this writer has not allocated yet (an id at or
    /// above its next id). Its delta would be negative, which every reader
    /// rejects (`promote id sync`), so nothing is written; memtrace 0.2.3's
    /// writer refuses it too.
    #[error("promote of object {id}, not yet allocated by this writer (next id {next})")]
    PromoteOfUnallocated {
        /// The object id.
        id: u64,
        /// The writer's next allocation id.
        next: u64,
    },
}
