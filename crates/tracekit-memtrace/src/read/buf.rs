//! Little-endian primitive decoding over a byte slice (the `Buf.Read` half of
//! the OCaml reference, janestreet/memtrace): fixed-width integers,
//! NUL-terminated strings and vints. The encoder is [`crate::write`]'s `buf`
//! module. Described in `docs/memtrace-format.md` at the repository root (the
//! conventions, and the vint table in §7).
//!
//! A vint is one tag byte `c`:
//!
//! | tag `c` | followed by | value |
//! | --- | --- | --- |
//! | 0–252 | – | `c` |
//! | 253 | u16 | the u16 |
//! | 254 | i32 | the i32, sign-extended |
//! | 255 | i64 | the i64, its low 63 bits sign-extended (an OCaml int) |

use crate::format::ocaml_int;

/// The data ended before the value did. The caller turns this into a
/// [`ReadError`](crate::ReadError) with the offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Eof;

/// A read position in a byte slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data, pos: 0 }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    #[inline(always)]
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Eof> {
        let end = self.pos.checked_add(N).ok_or(Eof)?;
        match self.data.get(self.pos..end) {
            Some(s) => {
                self.pos = end;
                let mut a = [0u8; N];
                a.copy_from_slice(s);
                Ok(a)
            }
            None => Err(Eof),
        }
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self) -> Result<u8, Eof> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(Eof),
        }
    }

    #[inline(always)]
    pub(crate) fn u16(&mut self) -> Result<u16, Eof> {
        self.take::<2>().map(u16::from_le_bytes)
    }

    #[inline(always)]
    pub(crate) fn u32(&mut self) -> Result<u32, Eof> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    #[inline(always)]
    pub(crate) fn i64(&mut self) -> Result<i64, Eof> {
        self.take::<8>().map(i64::from_le_bytes)
    }

    #[inline(always)]
    pub(crate) fn f64(&mut self) -> Result<f64, Eof> {
        self.take::<8>().map(f64::from_le_bytes)
    }

    /// A NUL-terminated string, without its NUL.
    pub(crate) fn string(&mut self) -> Result<&'a [u8], Eof> {
        let rest = self.data.get(self.pos..).ok_or(Eof)?;
        let len = rest.iter().position(|&b| b == 0).ok_or(Eof)?;
        self.pos += len + 1;
        Ok(&rest[..len])
    }

    /// A vint, as an OCaml integer (63-bit).
    #[inline(always)]
    pub(crate) fn vint(&mut self) -> Result<i64, Eof> {
        match self.u8()? {
            c @ 0..=252 => Ok(i64::from(c)),
            253 => Ok(i64::from(self.u16()?)),
            254 => Ok(i64::from(self.u32()? as i32)),
            _ => Ok(ocaml_int(self.i64()?)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn vint_widths() {
        let data = [
            7u8, 253, 0x34, 0x12, 254, 0xff, 0xff, 0xff, 0xff, 255, 0, 0, 0, 0x80, 0, 0, 0, 0,
        ];
        let mut c = Cursor::new(&data);
        assert_eq!(c.vint(), Ok(7));
        assert_eq!(c.vint(), Ok(0x1234));
        assert_eq!(c.vint(), Ok(-1));
        assert_eq!(c.vint(), Ok(1 << 31));
        assert_eq!(c.vint(), Err(Eof));
    }

    #[test]
    fn string_needs_nul() {
        let mut c = Cursor::new(b"ab\0cd");
        assert_eq!(c.string(), Ok(&b"ab"[..]));
        assert_eq!(c.string(), Err(Eof));
    }
}
