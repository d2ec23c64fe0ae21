//! The I/O edge: a [`Destination`] over any [`std::io::Write`] (a file, a socket).
//! Reading from any [`std::io::Read`] is [`crate::read::StreamReader`].

use std::io::Write;

use crate::write::{Destination, DestinationError, WriteError, Writer};

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

/// Why a trace written through an [`IoDestination`] could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    /// The underlying writer failed; its error, with its own message (which, for
    /// a file, names it).
    #[error(transparent)]
    Io(std::io::Error),
    /// The writer refused a record.
    #[error(transparent)]
    Write(WriteError),
}

impl<W: Write> Writer<IoDestination<W>> {
    /// What to report for `e`, an error of this writer: the destination's I/O
    /// error when one caused it (the writer's own error only says which kind of
    /// I/O error it was).
    pub fn explain(&mut self, e: WriteError) -> FinishError {
        match self.destination_mut().take_error() {
            Some(io) => FinishError::Io(io),
            None => FinishError::Write(e),
        }
    }

    /// Closes the trace (flushing what is buffered) and returns the underlying
    /// writer; errors as [`Writer::explain`] reports them.
    pub fn finish_io(mut self) -> Result<W, FinishError> {
        if let Err(e) = self.close() {
            return Err(self.explain(e));
        }
        match self.finish() {
            Ok(dest) => Ok(dest.into_inner()),
            Err(e) => Err(FinishError::Write(e)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    struct Failing;
    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("writing out.fxt: disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_finished_trace_is_flushed_to_its_writer() {
        let w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        let bytes = w.finish_io().unwrap();
        assert_eq!(&bytes[..8], &crate::format::MAGIC.to_le_bytes());
    }

    #[test]
    fn a_failed_write_reports_the_io_error() {
        let w = Writer::new(IoDestination::new(Failing)).unwrap();
        let e = w.finish_io().err().unwrap();
        assert!(matches!(e, FinishError::Io(_)), "{e:?}");
        assert_eq!(e.to_string(), "writing out.fxt: disk full");
    }
}
