//! The byte kit of tracekit's on-disk formats: what the trace tables and the
//! timeline file both need to be written as bytes and read back, with no I/O.
//!
//! - [`Cursor`]: reads a format's bytes; every error is a [`FileError`] that
//!   says at which byte the bytes stopped being what they claim.
//! - [`LeWriter`]: writes little-endian values to any `io::Write`, counting
//!   bytes to align arrays, and refusing lengths that do not fit their field.
//! - [`Store`]: the values of one column, read in place from shared bytes (a
//!   mapped cache file) or held in memory, the same slice either way.
//! - [`fnv`]: FNV-1a, a hash stable across builds and platforms for keys and
//!   file names.
//! - [`TraceBytes`]: a trace's bytes shared between passes, with the hook
//!   their owner uses to release the pages a pass has read.
//! - [`rename`]: files written whole or not at all, and [`spill`]: columns
//!   grown in a file rather than in memory ([`Grow`]); the two places tracekit
//!   touches a file system for this: the formats above never do.
//!
//! All integers are little-endian. Arrays of values that a reader may take in
//! place start at a multiple of [`ALIGN`] bytes from the start of their format,
//! which a writer ensures with [`LeWriter::pad`] and a reader skips with
//! [`Cursor::pad`]:
//!
//! | bytes | what |
//! | --- | --- |
//! | 1 to 7 | zeros, up to the next multiple of 8 from the start |
//! | n × width | the values, each little-endian |

pub mod cursor;
pub mod fnv;
pub mod huge;
pub mod rename;
pub mod spill;
pub mod store;
pub mod trace_bytes;
pub mod write;

pub use cursor::Cursor;
pub use spill::{Grow, Slab, Spill};
pub use store::{Plain, Shared, Store};
pub use trace_bytes::{PassRelease, RELEASE_STEP, TraceBytes};
pub use write::LeWriter;

/// The alignment of arrays that are read in place, from the start of a format.
pub const ALIGN: usize = 8;

/// Why bytes are not what a format says they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// Not this format, or not of this version of it; the format's name
    /// (`trace tables`, `a timeline`).
    #[error("not {0} of this version")]
    Magic(&'static str),
    /// The bytes end inside a section that starts at this offset.
    #[error("cut short at byte {0}")]
    Truncated(usize),
    /// A value that contradicts the rest (a count, a width, an id, an order)
    /// at this offset.
    #[error("inconsistent at byte {0}")]
    Inconsistent(usize),
    /// What was to be written is of a damaged trace, which is not written:
    /// reading it back would lose the damage. The subject, as in `the tables
    /// are` or `the timeline is`.
    #[error("{0} of a damaged trace")]
    Damaged(&'static str),
}
