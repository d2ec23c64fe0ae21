//! The I/O edge: a [`Destination`] over any [`std::io::Write`] (a file, a socket).
//! Reading from any [`std::io::Read`] is [`crate::read::StreamReader`].

use std::io::Write;

use crate::write::{Destination, DestinationError};

/// Buffers records and writes each full buffer to `W`, so a killed process loses at
/// most one buffer (64 KiB by default).
pub struct IoDestination<W: Write> {
    inner: W,
    buf: Box<[u8]>,
    error: Option<std::io::Error>,
}

impl<W: Write> IoDestination<W> {
    /// A destination with a 64 KiB buffer.
    pub fn new(inner: W) -> Self {
        Self::with_buffer_size(inner, 64 * 1024)
    }

    /// A destination with a `size`-byte buffer.
    pub fn with_buffer_size(inner: W, size: usize) -> Self {
        Self {
            inner,
            buf: vec![0; size.max(64)].into_boxed_slice(),
            error: None,
        }
    }

    /// The last I/O error, with its message.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The underlying writer (call after the writer flushed or closed).
    pub fn into_inner(self) -> W {
        self.inner
    }

    fn fail(&mut self, e: std::io::Error) -> DestinationError {
        let kind = e.kind();
        self.error = Some(e);
        DestinationError::Io(kind)
    }
}

impl<W: Write> Destination for IoDestination<W> {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        let filled = filled.min(self.buf.len());
        if let Err(e) = self.inner.write_all(&self.buf[..filled]) {
            return Err(self.fail(e));
        }
        if min_capacity > self.buf.len() {
            self.buf = vec![0; min_capacity].into_boxed_slice();
        }
        Ok(0)
    }

    fn flush(&mut self) -> Result<(), DestinationError> {
        self.inner.flush().map_err(|e| self.fail(e))
    }
}
