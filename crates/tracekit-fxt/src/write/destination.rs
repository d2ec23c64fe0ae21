//! Where the writer's bytes go: the [`Destination`] trait and the in-memory
//! destinations. The file destination lives in [`crate::io`], at the I/O edge.
//!
//! A destination lends the writer one buffer at a time. The writer fills it from its
//! cursor forwards, whole records only, and calls [`Destination::next_buffer`] when the
//! next record does not fit. A record is therefore never split across buffers, which is
//! what lets a ring or shared-memory transport drop a whole buffer without leaving a
//! torn record behind.

use thiserror::Error;

/// Why a destination could not provide space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum DestinationError {
    /// A fixed buffer has no room for the next record.
    #[error("destination full: {needed} bytes needed, {available} available")]
    Full {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes left in the buffer.
        available: usize,
    },
    /// The underlying writer failed (the destination keeps the full error).
    #[error("I/O error: {0}")]
    Io(std::io::ErrorKind),
    /// The destination was closed.
    #[error("destination closed")]
    Closed,
    /// The destination broke its contract (returned a buffer shorter than promised).
    #[error("destination returned a buffer of {available} bytes, {needed} needed")]
    TooSmall {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes the destination provided.
        available: usize,
    },
}

/// A source of buffers for the [`Writer`](super::Writer).
///
/// The protocol: the writer writes into [`buffer`](Self::buffer) starting at its cursor.
/// When a record does not fit, or on flush, it calls
/// [`next_buffer`](Self::next_buffer) with the number of bytes filled so far; the
/// destination takes those bytes (or keeps them in place), and returns the offset at
/// which the writer continues in the (possibly new) buffer.
pub trait Destination {
    /// The buffer being filled. It must not change between calls to `next_buffer`.
    fn buffer(&mut self) -> &mut [u8];

    /// Takes `buffer()[..filled]` as complete records and makes at least `min_capacity`
    /// bytes available from the returned offset on.
    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError>;

    /// Pushes taken bytes to their final place (e.g. `fsync`-free `flush` of a file).
    /// Called after `next_buffer(filled, 0)`.
    fn flush(&mut self) -> Result<(), DestinationError> {
        Ok(())
    }

    /// No more writes will come. Called after a final flush.
    fn close(&mut self) -> Result<(), DestinationError> {
        Ok(())
    }
}

impl<D: Destination + ?Sized> Destination for &mut D {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        (**self).buffer()
    }
    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        (**self).next_buffer(filled, min_capacity)
    }
    fn flush(&mut self) -> Result<(), DestinationError> {
        (**self).flush()
    }
    fn close(&mut self) -> Result<(), DestinationError> {
        (**self).close()
    }
}

/// Collects the trace in a growable `Vec<u8>`.
#[derive(Debug, Default)]
pub struct VecDestination {
    // Zero-filled room beyond `committed`; the writer fills it in place.
    bytes: Vec<u8>,
    committed: usize,
}

impl VecDestination {
    /// An empty destination.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty destination with room for `capacity` bytes before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity],
            committed: 0,
        }
    }

    /// The bytes handed over so far (everything, after the writer flushed or closed).
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.committed).unwrap_or_default()
    }

    /// The trace bytes.
    pub fn into_vec(mut self) -> Vec<u8> {
        self.bytes.truncate(self.committed);
        self.bytes
    }
}

impl Destination for VecDestination {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        self.committed = filled.min(self.bytes.len());
        let needed = self.committed.saturating_add(min_capacity);
        if needed > self.bytes.len() {
            let grown = needed.max(self.bytes.len().saturating_mul(2)).max(4096);
            self.bytes.resize(grown, 0);
        }
        Ok(self.committed)
    }
}

/// Fills a caller-provided slice and fails with [`DestinationError::Full`] when it is
/// full (the record that did not fit is not written).
#[derive(Debug)]
pub struct SliceDestination<'a> {
    buf: &'a mut [u8],
    committed: usize,
}

impl<'a> SliceDestination<'a> {
    /// Writes into `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, committed: 0 }
    }

    /// Bytes handed over so far (all of them after a flush or close).
    pub fn len(&self) -> usize {
        self.committed
    }

    /// Whether nothing was handed over yet.
    pub fn is_empty(&self) -> bool {
        self.committed == 0
    }

    /// The filled part of the slice.
    pub fn filled(&self) -> &[u8] {
        self.buf.get(..self.committed).unwrap_or_default()
    }
}

impl Destination for SliceDestination<'_> {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        self.buf
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        self.committed = filled.min(self.buf.len());
        let available = self.buf.len() - self.committed;
        if available < min_capacity {
            return Err(DestinationError::Full {
                needed: min_capacity,
                available,
            });
        }
        Ok(self.committed)
    }
}

/// Reuses one in-memory buffer and drops what was written each time it fills, like
/// `black_hole_destination` in Jane Street's `tracing` (janestreet/tracing). For benchmarks and for tracing that is switched off.
#[derive(Debug)]
pub struct DiscardDestination {
    buf: Box<[u8]>,
    discarded: u64,
}

impl DiscardDestination {
    /// A destination cycling through a zero-filled buffer of `len` bytes (so the pages
    /// are touched before any measurement).
    pub fn new(len: usize) -> Self {
        Self {
            buf: vec![0; len].into_boxed_slice(),
            discarded: 0,
        }
    }

    /// Bytes written and dropped so far.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }
}

impl Destination for DiscardDestination {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        self.discarded = self.discarded.saturating_add(filled as u64);
        if min_capacity > self.buf.len() {
            self.buf = vec![0; min_capacity].into_boxed_slice();
        }
        Ok(0)
    }
}
