//! The writing side of [`Cursor`](crate::Cursor): little-endian values to any
//! `io::Write`, with the count of bytes written so that arrays meant to be
//! read in place can be aligned ([`LeWriter::pad`]), and lengths checked
//! against the width of their field rather than cut.
//!
//! | write | bytes |
//! | --- | --- |
//! | [`LeWriter::u32`], [`LeWriter::u64`], [`LeWriter::i64`] | 4, 8, 8, little-endian |
//! | [`LeWriter::len32`] | 4: a length, an error when it does not fit |
//! | [`LeWriter::str32`] | 4 bytes of length, then the bytes |
//! | [`LeWriter::opt_u32`], [`LeWriter::opt_u64`] | a tag byte (0 none, 1 some), then the value or zeros |
//! | [`LeWriter::values`] | each value's bytes, through a buffer |
//! | [`LeWriter::pad`] | zeros up to the next multiple of [`ALIGN`] |

use std::io::{self, Write};

use crate::ALIGN;

/// Bytes gathered before a write, for arrays of values.
const BUFFER: usize = 1 << 16;

/// A writer of little-endian values that counts what it writes.
pub struct LeWriter<'a> {
    out: &'a mut dyn Write,
    at: usize,
}

/// The error of a length too large for its field.
fn too_long() -> io::Error {
    io::Error::from(io::ErrorKind::InvalidInput)
}

impl<'a> LeWriter<'a> {
    /// A writer to `out`, at its byte 0.
    pub fn new(out: &'a mut dyn Write) -> LeWriter<'a> {
        LeWriter { out, at: 0 }
    }

    /// Bytes written so far.
    pub fn at(&self) -> usize {
        self.at
    }

    /// A byte.
    pub fn u8(&mut self, v: u8) -> io::Result<()> {
        self.write_all(&[v])
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    /// An `i64`.
    pub fn i64(&mut self, v: i64) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    /// A length or count in 4 bytes; `InvalidInput` when it does not fit.
    pub fn len32(&mut self, n: usize) -> io::Result<()> {
        self.u32(u32::try_from(n).map_err(|_| too_long())?)
    }

    /// A length or count in 1 byte; `InvalidInput` when it does not fit.
    pub fn len8(&mut self, n: usize) -> io::Result<()> {
        self.u8(u8::try_from(n).map_err(|_| too_long())?)
    }

    /// `b`'s length in 4 bytes, then `b`.
    pub fn str32(&mut self, b: &[u8]) -> io::Result<()> {
        self.len32(b.len())?;
        self.write_all(b)
    }

    /// An optional `u32`: a tag byte, then the value (zeros for none).
    pub fn opt_u32(&mut self, v: Option<u32>) -> io::Result<()> {
        match v {
            None => self.write_all(&[0; 5]),
            Some(v) => {
                self.u8(1)?;
                self.u32(v)
            }
        }
    }

    /// An optional `u64`: a tag byte, then the value (zeros for none).
    pub fn opt_u64(&mut self, v: Option<u64>) -> io::Result<()> {
        match v {
            None => self.write_all(&[0; 9]),
            Some(v) => {
                self.u8(1)?;
                self.u64(v)
            }
        }
    }

    /// Values as their little-endian bytes, gathered in a buffer of about
    /// 64 KiB between writes.
    pub fn values<const N: usize>(
        &mut self,
        v: impl IntoIterator<Item = [u8; N]>,
    ) -> io::Result<()> {
        let mut buf = Vec::with_capacity(BUFFER);
        for x in v {
            buf.extend_from_slice(&x);
            if buf.len() >= BUFFER {
                self.write_all(&buf)?;
                buf.clear();
            }
        }
        self.write_all(&buf)
    }

    /// Zeros up to the next multiple of [`ALIGN`] from the start.
    pub fn pad(&mut self) -> io::Result<()> {
        let n = self.at.next_multiple_of(ALIGN) - self.at;
        self.write_all(&[0; ALIGN][..n])
    }
}

impl Write for LeWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.at += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{Cursor, FileError};

    #[test]
    fn what_is_written_reads_back_and_lengths_are_checked() {
        let mut out = Vec::new();
        let mut w = LeWriter::new(&mut out);
        w.u8(9).unwrap();
        w.pad().unwrap();
        assert_eq!(w.at(), 8);
        w.values((0..3u64).map(u64::to_le_bytes)).unwrap();
        w.opt_u32(None).unwrap();
        w.opt_u64(Some(7)).unwrap();
        w.str32(b"abc").unwrap();
        w.i64(-2).unwrap();
        let e = w.len8(256).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            w.at(),
            8 + 24 + 5 + 9 + 7 + 8,
            "a refused length writes nothing"
        );
        let mut c = Cursor::new(&out);
        assert_eq!(c.u8(), Ok(9));
        c.pad().unwrap();
        assert_eq!(&*c.values::<u64>(3).unwrap(), &[0, 1, 2]);
        assert_eq!(c.opt_u32(), Ok(None));
        assert_eq!(c.opt_u64(), Ok(Some(7)));
        let n = c.count32(1).unwrap();
        assert_eq!(c.take(n), Ok(&b"abc"[..]));
        assert_eq!(c.i64(), Ok(-2));
        assert_eq!(c.finish(), Ok(()));
        assert_eq!(c.u8(), Err(FileError::Truncated(out.len())));
    }
}
