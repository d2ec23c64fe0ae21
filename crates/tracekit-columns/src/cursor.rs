//! A cursor over the bytes of a format being read: each read either returns
//! what the bytes hold or a [`FileError`] with the offset where they stopped
//! making sense, so that a damaged or foreign file is an error that says
//! where, never a panic or a wrong answer.
//!
//! Offsets are counted from the start of the format (the cursor's first
//! byte), not from the start of a file that holds it after a key.
//!
//! | read | bytes | what |
//! | --- | --- | --- |
//! | [`Cursor::u8`], [`Cursor::u32`], [`Cursor::u64`], [`Cursor::i64`] | 1, 4, 8, 8 | a little-endian integer |
//! | [`Cursor::opt_u32`], [`Cursor::opt_u64`] | 5, 9 | a tag byte (0 none, 1 some), then the value (zeros for none) |
//! | [`Cursor::count32`], [`Cursor::count64`] | 4, 8 | a count of items, each at least a given size, checked against what is left |
//! | [`Cursor::pad`] | 0 to 7 | skipped up to the next multiple of [`ALIGN`] |
//! | [`Cursor::values`] | n × width | a column, in place when it can be |

use crate::store::{Plain, Shared, Store};
use crate::{ALIGN, FileError};

/// A cursor over the bytes being read (see the module docs).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    /// The shared bytes `bytes` are of, from this offset, when columns are
    /// read in place.
    shared: Option<(&'a Shared, usize)>,
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`; its columns are copied.
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor {
            bytes,
            shared: None,
            at: 0,
        }
    }

    /// A cursor at byte `offset` of `shared`, whose columns ([`Cursor::values`])
    /// are read in place where the host and their alignment allow.
    /// [`FileError::Truncated`] at 0 when `shared` ends before `offset`.
    ///
    /// # Safety
    ///
    /// `shared`'s `as_ref` must return the same bytes at the same address,
    /// never changed, for as long as any clone of the `Arc` lives
    /// ([`Store::in_place`]'s contract): the columns read keep a clone.
    pub unsafe fn in_place(shared: &'a Shared, offset: usize) -> Result<Cursor<'a>, FileError> {
        let all: &'a [u8] = (**shared).as_ref();
        let bytes = all.get(offset..).ok_or(FileError::Truncated(0))?;
        Ok(Cursor {
            bytes,
            shared: Some((shared, offset)),
            at: 0,
        })
    }

    /// The offset of the next byte to read.
    pub fn at(&self) -> usize {
        self.at
    }

    /// Bytes left to read.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The error of a value at the cursor that contradicts the rest.
    pub fn bad(&self) -> FileError {
        FileError::Inconsistent(self.at)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], FileError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(FileError::Truncated(self.at))?;
        let b = self
            .bytes
            .get(self.at..end)
            .ok_or(FileError::Truncated(self.at))?;
        self.at = end;
        Ok(b)
    }

    /// The next `N` bytes, as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], FileError> {
        let at = self.at;
        self.take(N)?
            .try_into()
            .map_err(|_| FileError::Truncated(at))
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, FileError> {
        let [b] = self.array()?;
        Ok(b)
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, FileError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, FileError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self) -> Result<i64, FileError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// An optional `u32`: a tag byte (0 none, 1 some), then 4 bytes.
    pub fn opt_u32(&mut self) -> Result<Option<u32>, FileError> {
        let at = self.at;
        match self.u8()? {
            0 => self.u32().map(|_| None),
            1 => self.u32().map(Some),
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    /// An optional `u64`: a tag byte (0 none, 1 some), then 8 bytes.
    pub fn opt_u64(&mut self) -> Result<Option<u64>, FileError> {
        let at = self.at;
        match self.u8()? {
            0 => self.u64().map(|_| None),
            1 => self.u64().map(Some),
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    /// A 4-byte count of items that each take at least `each` bytes of what
    /// is left: more is a file cut short.
    pub fn count32(&mut self, each: usize) -> Result<usize, FileError> {
        let at = self.at;
        let n = self.u32()? as usize;
        self.fits(at, n, each)
    }

    /// An 8-byte count of items that each take at least `each` bytes of what
    /// is left: more is a file cut short.
    pub fn count64(&mut self, each: usize) -> Result<usize, FileError> {
        let at = self.at;
        let n = usize::try_from(self.u64()?).map_err(|_| FileError::Truncated(at))?;
        self.fits(at, n, each)
    }

    fn fits(&self, at: usize, n: usize, each: usize) -> Result<usize, FileError> {
        match n.checked_mul(each.max(1)) {
            Some(b) if b <= self.left() => Ok(n),
            _ => Err(FileError::Truncated(at)),
        }
    }

    /// Skips the zeros up to the next multiple of [`ALIGN`] from the start.
    pub fn pad(&mut self) -> Result<(), FileError> {
        let n = self.at.next_multiple_of(ALIGN) - self.at;
        self.take(n).map(drop)
    }

    /// `n` little-endian values: in place in the shared bytes when the cursor
    /// has some (and the host and the values' address allow), else copied.
    pub fn values<T: Plain>(&mut self, n: usize) -> Result<Store<T>, FileError> {
        let at = self.at;
        let len = n.checked_mul(T::WIDTH).ok_or(FileError::Truncated(at))?;
        let raw = self.take(len)?;
        let store = match self.shared {
            // SAFETY: `shared` is only set by `Cursor::in_place`, whose caller
            // promises what `Store::in_place` needs of the bytes.
            Some((bytes, offset)) => unsafe { Store::in_place(bytes, offset + at, n) },
            None => Store::copied(raw, n),
        };
        store.ok_or(FileError::Truncated(at))
    }

    /// Succeeds when every byte has been read: a format ends where its
    /// bytes do.
    pub fn finish(&self) -> Result<(), FileError> {
        match self.at == self.bytes.len() {
            true => Ok(()),
            false => Err(self.bad()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn errors_say_where_the_bytes_went_wrong() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&5u32.to_le_bytes());
        bytes.push(2);
        bytes.extend_from_slice(&[0; 4]);
        let mut c = Cursor::new(&bytes);
        assert_eq!(c.u8(), Ok(7));
        assert_eq!(c.at(), 1);
        assert_eq!(c.u32(), Ok(5));
        // A tag that is neither 0 nor 1: inconsistent where the tag is.
        assert_eq!(c.opt_u32(), Err(FileError::Inconsistent(5)));
        // Four bytes left: a u64 is cut short where it starts.
        let mut c = Cursor::new(&bytes[..9]);
        c.take(5).unwrap();
        assert_eq!(c.u64(), Err(FileError::Truncated(5)));
        assert_eq!(c.at(), 5, "a failed read moves nothing");
        // A count larger than what is left could hold.
        let mut c = Cursor::new(&bytes);
        c.take(1).unwrap();
        assert_eq!(c.count32(1), Ok(5));
        let mut c = Cursor::new(&bytes);
        c.take(1).unwrap();
        assert_eq!(c.count32(2), Err(FileError::Truncated(1)));
        let huge = u64::MAX.to_le_bytes();
        assert_eq!(Cursor::new(&huge).count64(1), Err(FileError::Truncated(0)));
        // Bytes left over, and padding past the end.
        let mut c = Cursor::new(&bytes[..6]);
        c.take(3).unwrap();
        assert_eq!(c.finish(), Err(FileError::Inconsistent(3)));
        assert_eq!(c.pad(), Err(FileError::Truncated(3)));
        assert_eq!(Cursor::new(b"").take(1), Err(FileError::Truncated(0)));
    }

    #[test]
    fn columns_read_in_place_or_copied_hold_the_same_values() {
        let mut bytes = vec![0xeeu8; 16];
        bytes.push(3);
        bytes.extend_from_slice(&[0; 7]);
        for v in [1u64, 2, u64::MAX] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let shared: Shared = Arc::new(bytes.clone());
        // SAFETY: a vector's bytes, never changed.
        let mut placed = unsafe { Cursor::in_place(&shared, 16) }.unwrap();
        let mut copied = Cursor::new(&bytes[16..]);
        for c in [&mut placed, &mut copied] {
            assert_eq!(c.u8(), Ok(3));
            c.pad().unwrap();
            assert_eq!(c.at(), 8);
        }
        let a: Store<u64> = placed.values(3).unwrap();
        let b: Store<u64> = copied.values(3).unwrap();
        assert_eq!(&*a, &[1, 2, u64::MAX]);
        assert_eq!(&*a, &*b);
        assert_eq!(a.is_in_place(), cfg!(target_endian = "little"));
        assert!(!b.is_in_place());
        assert_eq!(placed.finish(), Ok(()));
        assert_eq!(
            placed.values::<u64>(1).map(|s| s.len()),
            Err(FileError::Truncated(32))
        );
        // SAFETY: as above.
        let past = unsafe { Cursor::in_place(&shared, 49) };
        assert!(matches!(past, Err(FileError::Truncated(0))));
    }
}
