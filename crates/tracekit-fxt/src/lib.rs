//! Fuchsia trace format (FXT) reader and writer.
//!
//! The format core does no I/O: [`write`](mod@write) encodes records into buffers lent by a
//! [`Destination`](write::Destination), [`read`](mod@read) decodes records from byte slices.
//! Files live at the edge, in [`io`]. [`format`](mod@format) holds the vocabulary both sides share
//! (record and event types, string and thread refs, arguments).
//!
//! # Writing
//!
//! ```
//! use tracekit_fxt::format::{Arg, ArgValue, Koid, StringRef};
//! use tracekit_fxt::write::{VecDestination, Writer};
//!
//! // Magic, provider info and section, init (1 tick = 1 ns), string 1 = "process".
//! let mut w = Writer::new(VecDestination::new())?;
//! let proc_name = w.intern("myproc")?;
//! w.set_process_name(Koid(1), proc_name)?;
//! w.set_thread_name(Koid(1), Koid(2), StringRef::inline("main"))?;
//! let thread = w.set_thread_slot(0, Koid(1), Koid(2))?;
//! let (cat, name) = (w.intern("app")?, w.intern("step")?);
//! let size = w.intern("size")?;
//! w.duration_begin(thread, cat, name, 1_000, &[Arg::new(size, ArgValue::Int32(7))])?;
//! w.instant(thread, cat, "inline name", 1_500, &[])?;
//! w.duration_end(thread, cat, name, 2_000, &[])?;
//! let bytes = w.finish()?.into_vec();
//!
//! // Reading it back.
//! let mut r = tracekit_fxt::read::Reader::new(&bytes);
//! let mut events = 0;
//! while let Some(record) = r.next_record()? {
//!     if let tracekit_fxt::read::Record::Event(e) = record {
//!         assert_eq!(e.thread.thread, Koid(2));
//!         events += 1;
//!     }
//! }
//! assert_eq!(events, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! For the hot path, [`write::fast`] precomputes an event header per call site; an
//! event then costs one capacity check and a few stores (tracekit-tracing writes its
//! spans' begin and end records this way, their arguments encoded once per span).

// The reader and the writer are features (`read`, `write`, both by default), so
// that a program that only records a trace (tracekit-tracing's users) compiles no
// reader, checker or converters; `copy` needs both.
#[cfg(feature = "read")]
pub mod check;
#[cfg(feature = "read")]
pub mod chrome;
#[cfg(all(feature = "read", feature = "write"))]
pub mod copy;
#[cfg(feature = "read")]
pub mod dump;
pub mod format;
#[cfg(feature = "write")]
pub mod io;
#[cfg(feature = "read")]
pub mod read;
#[cfg(feature = "read")]
pub mod stats;
#[cfg(feature = "write")]
pub mod synth;
#[cfg(feature = "write")]
pub mod write;

#[cfg(feature = "read")]
/// Why a conversion of a trace to text ([`dump`]) or JSON ([`chrome`]) stopped.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The input could not be read further (a fatal framing problem).
    #[error(transparent)]
    Read(#[from] read::ReadError),
    /// Writing the output failed.
    #[error(transparent)]
    Write(#[from] std::io::Error),
}
