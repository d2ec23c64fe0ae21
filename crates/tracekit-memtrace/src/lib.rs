//! Reader and writer for [memtrace] allocation traces, the `.ctf` files that
//! OCaml's memtrace library records: every format version (v1, v2, v3),
//! byte-compatible with the reference implementation.
//!
//! * [`Reader`] opens a trace (bytes it borrows, bytes in any container it
//!   owns, a memory map included, a file or any [`Read`](std::io::Read)) and
//!   decodes its [`Event`]s. Backtraces are lent
//!   from the decoder's state, so reading allocates nothing per event.
//! * [`StreamReader`] decodes a trace from any [`Read`](std::io::Read) one
//!   packet at a time, in memory bounded by the largest packet, with the
//!   same events, warnings and errors as a [`Reader`] over the same bytes.
//! * [`Writer`] encodes events into any [`Write`](std::io::Write) exactly as
//!   OCaml memtrace does, and [`MultiplexedDomains`] interleaves several
//!   domains.
//!
//! The API follows OCaml's `Memtrace.Trace` module: [`Timestamp`],
//! [`Timedelta`], [`Location`], [`ObjId`], [`DomainId`], [`LocationCode`],
//! [`AllocationSource`], [`Event`], [`Info`], [`Reader`], [`Writer`].
//!
//! # Example
//!
//! Write a trace, then read it back:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tracekit_memtrace::*;
//!
//! let info = Info {
//!     sample_rate: 1e-5,
//!     word_size: 64,
//!     executable_name: "example".into(),
//!     host_name: "localhost".into(),
//!     ocaml_runtime_params: "".into(),
//!     pid: 42,
//!     initial_domain: DomainId::MAIN,
//!     start_time: Timestamp::from_micros(1_700_000_000_000_000),
//!     context: Some("docs".into()),
//! };
//! let locations = |code: LocationCode| {
//!     vec![Location {
//!         filename: "example.ml".into(),
//!         line: code.get() as u32,
//!         start_char: 2,
//!         end_char: 20,
//!         defname: format!("Example.f{}", code.get()).into(),
//!     }]
//! };
//!
//! let mut trace = Vec::new();
//! let mut writer = Writer::new(&mut trace, &info)?;
//! // Innermost frame first, as OCaml backtraces are.
//! let stack = [LocationCode::new(30), LocationCode::new(20), LocationCode::new(10)];
//! let time = info.start_time.offset(Timedelta::from_micros(250));
//! let id = writer.put_alloc(time, 8, 1, AllocationSource::Minor, &stack, locations)?;
//! writer.put_promote(time, id)?;
//! writer.close()?;
//!
//! let mut reader = Reader::from_bytes(&trace)?;
//! assert_eq!(reader.info(), &info);
//! let mut events = reader.events(true);
//! let mut lines = Vec::new();
//! while let Some(item) = events.next_event_with_locations() {
//!     let (dt, event, table) = item?;
//!     lines.push(format!("{:010} {}", dt.as_micros(), event.display(table)));
//! }
//! assert_eq!(lines, [
//!     "0000000250 0000000000 alloc 1 len=8 dom=0    0: \
//!      Example.f10@example.ml:10:2-20 Example.f20@example.ml:20:2-20 Example.f30@example.ml:30:2-20",
//!     "0000000250 0000000000 promote",
//! ]);
//! # Ok(()) }
//! ```
//!
//! # Damaged traces
//!
//! As in the reference reader, a packet written by another process (a forked
//! child) and a truncated last packet are skipped, each with a [`Warning`]
//! ([`Events::warnings`]); decoding goes on after them. Everything else that
//! is inconsistent ends the pass with a [`ReadError`] carrying the byte
//! offset. No input makes the reader panic, loop, or allocate more than a
//! bounded multiple of its size.
//!
//! [memtrace]: https://github.com/janestreet/memtrace

// The reader and the writer are features (`read`, `write`, both by default), so
// that a program that only records a trace (tracekit-alloc, linked into users'
// programs) compiles no decoder; what needs both sides needs both features.
#[cfg(all(feature = "read", feature = "write"))]
mod copy;
mod error;
mod event;
mod format;
#[cfg(feature = "read")]
mod io;
#[cfg(feature = "read")]
mod read;
mod types;
#[cfg(feature = "write")]
mod write;

#[cfg(feature = "read")]
pub mod dump;
#[cfg(all(feature = "read", feature = "write"))]
pub mod synth;

#[cfg(all(feature = "read", feature = "write"))]
pub use copy::{CopyError, copy_trace, copy_trace_stream};
#[cfg(feature = "write")]
pub use error::WriteError;
#[cfg(feature = "read")]
pub use error::{OpenError, ReadError, ReadErrorKind, Warning};
pub use event::{Alloc, DisplayError, Event, EventDisplay, LocationLookup};
#[cfg(feature = "read")]
pub use read::{
    EventSink, Events, LocationTable, MAX_DOMAINS, OwnedEvents, PacketEvents, Reader, StreamReader,
};
pub use types::{
    AllocationSource, DomainId, FormatVersion, Info, Location, LocationCode, Name, ObjId,
    Timedelta, Timestamp,
};
#[cfg(feature = "write")]
pub use write::{GetPid, MultiplexedDomains, Writer, WriterOptions, location_list_fits};

/// Whether `head` starts like a memtrace trace (a CTF packet's magic number):
/// tells a trace from other files before reading it.
pub fn starts_like_a_trace(head: &[u8]) -> bool {
    head.first_chunk::<4>()
        .is_some_and(|m| u32::from_le_bytes(*m) == format::MAGIC)
}

/// A small trace for documentation examples.
#[cfg(feature = "write")]
#[doc(hidden)]
pub fn doc_example_trace() -> Vec<u8> {
    let info = Info {
        sample_rate: 1e-5,
        word_size: 64,
        executable_name: "example".into(),
        host_name: "localhost".into(),
        ocaml_runtime_params: "".into(),
        pid: 42,
        initial_domain: DomainId::MAIN,
        start_time: Timestamp::from_micros(1_700_000_000_000_000),
        context: None,
    };
    let mut out = Vec::new();
    if let Ok(mut w) = Writer::new(&mut out, &info) {
        let stack = [LocationCode::new(2), LocationCode::new(1)];
        let _ = w.put_alloc(
            info.start_time,
            3,
            1,
            AllocationSource::Minor,
            &stack,
            |_| vec![Location::unknown()],
        );
        let _ = w.close();
    }
    out
}
