//! The FXT writer: encodes records into buffers lent by a [`Destination`].
//!
//! One submodule per format section, mirroring [`crate::read`]:
//! [`metadata`] (magic, provider, initialization), [`strings`], [`threads`], [`args`],
//! [`events`] (with the precomputed-header fast path in [`fast`]), [`objects`] (kernel
//! and userspace objects), [`blobs`] (blob and large blob), [`scheduling`] and [`log`];
//! [`clock`] gives the ticks to timestamp records with.
//!
//! The whole format is described in `docs/fxt-format.md` at the repository root; each
//! submodule's docs give the bits of its records. This module frames records (§1) and
//! writes the default header (§15).
//!
//! Every method either writes one whole record or returns an error and writes nothing.
//! Limits the format cannot express (more than 15 arguments, strings over 32000 bytes,
//! records over 4095 words, a complete event ending before it starts) are errors, never
//! silently truncated output.

pub mod args;
pub mod blobs;
pub mod clock;
pub mod destination;
pub mod events;
pub mod fast;
pub mod log;
pub mod metadata;
pub mod objects;
pub mod scheduling;
pub mod strings;
pub mod threads;

pub use args::EncodedArgs;
pub use destination::{
    Destination, DestinationError, DiscardDestination, SliceDestination, VecDestination,
};
pub use fast::{EventHeader, FixedArgs};
pub use metadata::{ClockAnchor, Initialization};

use crate::format::{MAX_RECORD_WORDS, MAX_STRING_LEN, StringId};
use thiserror::Error;

/// Why a record was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum WriteError {
    /// A string is longer than [`MAX_STRING_LEN`] bytes.
    #[error("string of {len} bytes is over the {MAX_STRING_LEN}-byte limit")]
    StringTooLong {
        /// Its length.
        len: usize,
    },
    /// More than 15 arguments.
    #[error("{count} arguments is over the limit of 15")]
    TooManyArgs {
        /// How many were given.
        count: usize,
    },
    /// The record would exceed the size its header can describe.
    #[error("record of {words} words is over the limit of {max} words")]
    RecordTooLarge {
        /// Words the record needs.
        words: usize,
        /// The limit for this record type.
        max: usize,
    },
    /// A duration-complete event whose end precedes its start.
    #[error("duration complete event ends at {end} before it starts at {start}")]
    EndBeforeStart {
        /// Start ticks.
        start: u64,
        /// End ticks.
        end: u64,
    },
    /// All permanent string ids are in use.
    #[error("ran out of string ids (all of 1..=32767 are in use)")]
    OutOfStringIds,
    /// A temp or dyn string slot outside its range.
    #[error("string slot {slot} is outside 0..{count}")]
    SlotOutOfRange {
        /// The slot asked for.
        slot: u16,
        /// How many slots there are.
        count: u16,
    },
    /// An attempt to rebind string id 1, which the header reserved for `"process"`.
    #[error("string id 1 is reserved for \"process\"")]
    ProcessStringReserved,
    /// Too many temp string slots for the id space.
    #[error("{count} temp string slots do not fit in the string id space")]
    TooManyTempStrings {
        /// How many were asked for.
        count: u16,
    },
    /// A payload too long for its record type.
    #[error("payload of {len} bytes is over the {max}-byte limit")]
    PayloadTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A provider name over 255 bytes.
    #[error("provider name of {len} bytes is over the 255-byte limit")]
    ProviderNameTooLong {
        /// Its length.
        len: usize,
    },
    /// An initialization record with 0 ticks per second (readers reject it).
    #[error("ticks per second must not be zero")]
    ZeroTicksPerSecond,
    /// A field value that does not fit its bit field.
    #[error("{field} value {value} does not fit in its {bits}-bit field")]
    FieldOverflow {
        /// Which field.
        field: &'static str,
        /// The value.
        value: u64,
        /// Width of the field.
        bits: u32,
    },
    /// The destination failed.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// The writer was closed.
    #[error("writer is closed")]
    Closed,
}

/// How a new writer starts its output.
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions<'a> {
    /// Write the header (magic, provider info, provider section, initialization if set,
    /// string 1 = `"process"`). Turn off only to append to, or copy, an existing trace.
    pub header: bool,
    /// Provider id in the header.
    pub provider_id: u32,
    /// Provider name in the header (at most 255 bytes).
    pub provider_name: &'a str,
    /// Initialization record written by the header. `None` leaves it to the caller
    /// (PyPI `fxt` rejects timestamped records before one; Fuchsia's Rust reader
    /// then takes ticks as seconds).
    pub initialization: Option<Initialization>,
    /// Number of temp string slots (ids 19.., the layout of Jane Street's `tracing`
    /// writer).
    pub num_temp_strings: u16,
}

impl Default for WriterOptions<'_> {
    fn default() -> Self {
        Self {
            header: true,
            provider_id: 0,
            provider_name: "tracekit",
            initialization: Some(Initialization::new(1_000_000_000)),
            num_temp_strings: 100,
        }
    }
}

/// The FXT writer. See the [crate docs](crate) for an example.
///
/// Records reach the destination a buffer at a time; call [`flush`](Self::flush) to
/// hand over a partly filled buffer and [`close`](Self::close) or
/// [`finish`](Self::finish) at the end, which report errors. A writer dropped without
/// them still hands over and flushes what it holds, ignoring errors, so that a
/// forgotten `close` does not cut the trace short (as `std::io::BufWriter` does).
///
/// String ids follow the layout of Jane Street's `tracing` writer: 0 is the empty
/// string, 1 is `"process"`, 2..=18
/// are 17 "dyn" slots, then `num_temp_strings` temp slots, then permanent ids handed
/// out by [`intern`](Self::intern) up to 32767.
pub struct Writer<D: Destination> {
    // Its only field: `finish` moves it out whole (see there).
    parts: Parts<D>,
}

/// The writer's state, in a struct without a `Drop` impl so that
/// [`Writer::finish`] can move the destination out of it and let the compiler drop
/// the rest.
struct Parts<D: Destination> {
    dest: D,
    pos: usize,
    strings: strings::StringSlots,
    closed: bool,
}

impl<D: Destination> Writer<D> {
    /// A writer whose output starts with what every known reader needs: the magic
    /// word, provider info and section (provider 0, `tracekit`), a 2-word
    /// initialization record (1e9 ticks per second, i.e. ticks are nanoseconds) and
    /// string 1 = `"process"`.
    pub fn new(dest: D) -> Result<Self, WriteError> {
        Self::with_options(dest, &WriterOptions::default())
    }

    /// A writer with explicit options.
    pub fn with_options(dest: D, options: &WriterOptions<'_>) -> Result<Self, WriteError> {
        let mut w = Self {
            parts: Parts {
                dest,
                pos: 0,
                strings: strings::StringSlots::new(options.num_temp_strings, options.header)?,
                closed: false,
            },
        };
        if options.header {
            w.write_magic()?;
            w.write_provider_info(options.provider_id, options.provider_name.as_bytes())?;
            w.write_provider_section(options.provider_id)?;
            if let Some(init) = &options.initialization {
                w.write_initialization(init)?;
            }
            w.write_string_record(StringId::PROCESS, b"process")?;
        }
        Ok(w)
    }

    /// A writer that writes nothing until told to: no magic, no provider, no
    /// initialization, and string id 1 is free. For copying records verbatim.
    pub fn without_header(dest: D) -> Result<Self, WriteError> {
        Self::with_options(
            dest,
            &WriterOptions {
                header: false,
                ..WriterOptions::default()
            },
        )
    }

    /// Hands every complete record to the destination and flushes it.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        if self.parts.closed {
            return Err(WriteError::Closed);
        }
        self.hand_over()?;
        self.parts.dest.flush()?;
        Ok(())
    }

    /// Flushes and closes the destination. Later writes fail with
    /// [`WriteError::Closed`].
    pub fn close(&mut self) -> Result<(), WriteError> {
        if self.parts.closed {
            return Ok(());
        }
        self.hand_over()?;
        self.parts.dest.flush()?;
        self.parts.closed = true;
        // Makes every reserve take the slow path, which reports the writer closed.
        self.parts.pos = usize::MAX;
        self.parts.dest.close()?;
        Ok(())
    }

    /// Closes the writer and returns the destination.
    pub fn finish(mut self) -> Result<D, WriteError> {
        self.close()?;
        // Nothing can move out of a type with a `Drop` impl, so the writer's own
        // drop (which has nothing left to do on a closed writer) is skipped and its
        // `Parts`, which has no `Drop` impl, is moved out whole.
        let this = std::mem::ManuallyDrop::new(self);
        // Lists every field of `Writer` (a new one fails to compile here).
        let Writer { parts } = &*this;
        // SAFETY: `parts` is valid and initialised, and `this` is neither used again
        // nor dropped, so the `Parts` read here is its only owner: nothing is
        // dropped twice, and nothing else in `Writer` is left undropped (the
        // pattern above is exhaustive).
        let parts = unsafe { std::ptr::read(parts) };
        // Moving `dest` out of `Parts` drops its other fields.
        Ok(parts.dest)
    }

    /// The destination (e.g. to look at a [`VecDestination`] after a flush).
    pub fn destination(&self) -> &D {
        &self.parts.dest
    }

    /// The destination, mutably. Writing to its buffer behind the writer's back
    /// corrupts the output.
    pub fn destination_mut(&mut self) -> &mut D {
        &mut self.parts.dest
    }

    /// Bytes written into the current buffer and not yet handed to the destination.
    pub fn pending_bytes(&self) -> usize {
        if self.parts.closed { 0 } else { self.parts.pos }
    }

    fn hand_over(&mut self) -> Result<(), WriteError> {
        let start = self.parts.dest.next_buffer(self.parts.pos, 0)?;
        self.parts.pos = start.min(self.parts.dest.buffer().len());
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn switch_buffers(&mut self, bytes: usize) -> Result<(), WriteError> {
        if self.parts.closed {
            return Err(WriteError::Closed);
        }
        let start = self.parts.dest.next_buffer(self.parts.pos, bytes)?;
        let cap = self.parts.dest.buffer().len();
        let available = cap.saturating_sub(start);
        if available < bytes {
            // Keep the writer consistent with what the destination now holds.
            self.parts.pos = start.min(cap);
            return Err(DestinationError::TooSmall {
                needed: bytes,
                available,
            }
            .into());
        }
        self.parts.pos = start;
        Ok(())
    }

    /// Reserves exactly `bytes` (a whole record) at the cursor.
    #[inline(always)]
    pub(crate) fn reserve(&mut self, bytes: usize) -> Result<Words<'_>, WriteError> {
        // One bounds check per record, on the slice the destination hands out. (Safe
        // slicing after a check of a separately kept capacity cost two more compares
        // and branches per record; see docs/performance.md.) Both
        // paths yield a start pointer, so the record's length stays a constant the
        // compiler folds into the writes. A closed writer has `pos == usize::MAX`,
        // so it always takes the slow path, which fails.
        let start = self.parts.pos;
        let buf: *mut [u8] = self.parts.dest.buffer();
        let at = if fits(start, buf.len(), bytes) {
            self.parts.pos = start + bytes;
            // SAFETY: `start < buf.len()` or `bytes == 0`, checked just above, so the
            // offset stays within (or one past) the slice.
            unsafe { buf.cast::<u8>().add(start) }
        } else {
            self.reserve_slow(bytes)?
        };
        // SAFETY: `at` points at `bytes` bytes inside the slice the destination's
        // `buffer()` returned from a `&mut` borrow (checked on both paths), and
        // nothing touches `self.parts.dest` before the returned `Words`, which borrows
        // `self` mutably, is dropped: the bytes stay valid and exclusively ours.
        let buf = unsafe { core::slice::from_raw_parts_mut(at, bytes) };
        Ok(Words { buf })
    }

    /// Switches buffers and reserves `bytes` at the start of the new one, returning
    /// a pointer to them.
    #[cold]
    #[inline(never)]
    fn reserve_slow(&mut self, bytes: usize) -> Result<*mut u8, WriteError> {
        self.switch_buffers(bytes)?;
        let start = self.parts.pos;
        let buf = self.parts.dest.buffer();
        if !fits(start, buf.len(), bytes) {
            return Err(DestinationError::TooSmall {
                needed: bytes,
                available: buf.len().saturating_sub(start),
            }
            .into());
        }
        self.parts.pos = start + bytes;
        Ok(buf[start..].as_mut_ptr())
    }

    /// Reserves a record of `words` words after checking the normal-record limit.
    #[inline(always)]
    pub(crate) fn reserve_words(&mut self, words: usize) -> Result<Words<'_>, WriteError> {
        if words > MAX_RECORD_WORDS {
            return Err(WriteError::RecordTooLarge {
                words,
                max: MAX_RECORD_WORDS,
            });
        }
        self.reserve(words * 8)
    }
}

/// A cursor over reserved record space. Sizes are computed before reserving, so every
/// put fits; the checks only guard against a miscount and compile away for constant
/// sizes.
pub(crate) struct Words<'b> {
    pub(crate) buf: &'b mut [u8],
}

impl<'b> Words<'b> {
    #[inline(always)]
    pub(crate) fn word(&mut self, w: u64) {
        let buf = core::mem::take(&mut self.buf);
        if let Some((head, tail)) = buf.split_first_chunk_mut::<8>() {
            *head = w.to_le_bytes();
            self.buf = tail;
        } else {
            debug_assert!(false, "record size miscounted");
        }
    }

    /// Writes `bytes` zero-padded to a word boundary.
    #[inline]
    pub(crate) fn stream(&mut self, bytes: &[u8]) {
        let padded = bytes.len().div_ceil(8) * 8;
        let buf = core::mem::take(&mut self.buf);
        let Some((dst, tail)) = buf.split_at_mut_checked(padded) else {
            debug_assert!(false, "record size miscounted");
            return;
        };
        let (data, pad) = dst.split_at_mut(bytes.len());
        data.copy_from_slice(bytes);
        pad.fill(0);
        self.buf = tail;
    }

    #[inline(always)]
    pub(crate) fn into_slice(self) -> &'b mut [u8] {
        self.buf
    }
}

/// Whether `bytes` more fit in a buffer of `len` bytes filled up to `pos`.
#[inline(always)]
fn fits(pos: usize, len: usize, bytes: usize) -> bool {
    pos <= len && len - pos >= bytes
}

/// Checks a string length against [`MAX_STRING_LEN`].
#[inline]
pub(crate) fn check_len(len: usize) -> Result<(), WriteError> {
    if len > MAX_STRING_LEN {
        Err(WriteError::StringTooLong { len })
    } else {
        Ok(())
    }
}

/// Checks a value fits a `bits`-wide field.
#[inline]
pub(crate) fn check_field(field: &'static str, value: u64, bits: u32) -> Result<u64, WriteError> {
    if bits < 64 && value >> bits != 0 {
        Err(WriteError::FieldOverflow { field, value, bits })
    } else {
        Ok(value)
    }
}

/// Longest prefix of `s` that is at most [`MAX_STRING_LEN`] bytes and ends on a
/// character boundary: the recommended way to keep long symbol names (C++ and Rust
/// symbols past the limit, which magic-trace also meets) instead of failing.
pub fn truncate_to_limit(s: &str) -> &str {
    if s.len() <= MAX_STRING_LEN {
        return s;
    }
    let mut end = MAX_STRING_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

impl<D: Destination> Drop for Writer<D> {
    fn drop(&mut self) {
        if self.pending_bytes() > 0 {
            // Errors cannot be reported from here; `close` reports them.
            if self.hand_over().is_ok() {
                let _ = self.parts.dest.flush();
            }
        }
    }
}
