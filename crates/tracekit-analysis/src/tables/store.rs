//! The values of one column of the trace tables, held either in memory or in
//! place in the bytes of the file they were read from (a mapped cache file), so
//! that tables read back from a cache take no memory of their own for their
//! columns: the system pages them in as passes read them, and can drop them
//! again, as it does a mapped trace.
//!
//! A column is stored in the file little-endian at an offset aligned to 8 bytes
//! (the `file` module pads each), which is what lets a little-endian host read
//! it in place. Anything else (a big-endian host, an offset that is not aligned
//! after all) gets a copy: the answer never depends on where the values are.

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes shared with their owner, which keeps them, unchanged, for as long as a
/// clone of the `Arc` lives (see [`Store::in_place`]).
pub(crate) type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A value type every bit pattern of whose size is a value, stored
/// little-endian in `WIDTH` bytes.
pub(crate) trait Plain: Copy + Send + Sync + 'static {
    const WIDTH: usize;
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            #[inline]
            fn from_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}

plain!(u8, u16, u32, u64);

/// Immutable values of a column: `len` values at `ptr`, inside what `owner`
/// holds. Reading them is reading a slice, wherever they are.
pub(crate) struct Store<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner<T>,
}

enum Owner<T> {
    /// Values in memory: `ptr` is the vector's buffer, which nothing mutates or
    /// reallocates while the store holds it.
    Memory(Vec<T>),
    /// Values in place in shared bytes.
    Bytes(Shared),
}

// SAFETY: a store is a shared borrow of values it keeps alive (a vector it owns,
// or bytes whose owner is `Send + Sync`), never written through; `T: Plain` is
// `Send + Sync`. Sending or sharing it is sending or sharing a `&[T]` with its
// owner.
unsafe impl<T: Plain> Send for Store<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Plain> Sync for Store<T> {}

impl<T: Plain> Store<T> {
    /// The values of `v`.
    pub(crate) fn from_vec(mut v: Vec<T>) -> Store<T> {
        let ptr = NonNull::from(v.as_mut_slice()).cast::<T>();
        Store {
            ptr,
            len: v.len(),
            owner: Owner::Memory(v),
        }
    }

    /// A copy of the `n` little-endian values `bytes` starts with (`None` when
    /// it is shorter).
    pub(crate) fn copied(bytes: &[u8], n: usize) -> Option<Store<T>> {
        let raw = bytes.get(..n.checked_mul(T::WIDTH)?)?;
        Some(Store::from_vec(
            raw.chunks_exact(T::WIDTH).map(T::from_le).collect(),
        ))
    }

    /// The `n` little-endian values at byte `offset` of `bytes`: read in place
    /// when the host is little-endian and the offset aligned for `T`, else
    /// copied. `None` when the bytes end before them.
    ///
    /// # Safety
    ///
    /// `bytes`' `as_ref` must return the same bytes at the same address, never
    /// changed, for as long as any clone of the `Arc` lives: the store reads
    /// them through a pointer taken once. True of a vector's bytes and of a
    /// read-only mapping of a file that nothing changes while it is mapped.
    pub(crate) unsafe fn in_place(bytes: &Shared, offset: usize, n: usize) -> Option<Store<T>> {
        let all: &[u8] = (**bytes).as_ref();
        let end = offset.checked_add(n.checked_mul(T::WIDTH)?)?;
        let raw = all.get(offset..end)?;
        let aligned = (raw.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>());
        if cfg!(target_endian = "little") && aligned {
            return Some(Store {
                ptr: NonNull::from(raw).cast::<T>(),
                len: n,
                owner: Owner::Bytes(Arc::clone(bytes)),
            });
        }
        Store::copied(raw, n)
    }

    /// Bytes of memory the store holds of its own (0 for values in place).
    pub(crate) fn own_bytes(&self) -> usize {
        match &self.owner {
            Owner::Memory(v) => v.capacity() * T::WIDTH,
            Owner::Bytes(_) => 0,
        }
    }

    /// Whether the values are read in place.
    pub(crate) fn in_place_now(&self) -> bool {
        matches!(self.owner, Owner::Bytes(_))
    }
}

impl<T: Plain> Deref for Store<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is valid for `len` reads of `T` for as long as `owner`
        // lives, which is as long as `self`: it is a vector's buffer
        // (`from_vec`, the vector never touched again), or bytes of an owner
        // that keeps them unchanged at one address (`in_place`'s contract),
        // checked there to hold `len` values at an address aligned for `T`.
        // Any bit pattern is a `T` (`Plain`), and the values are never
        // written while borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Plain> Default for Store<T> {
    fn default() -> Self {
        Store::from_vec(Vec::new())
    }
}

impl<T: Plain> Clone for Store<T> {
    fn clone(&self) -> Self {
        match &self.owner {
            Owner::Memory(v) => Store::from_vec(v.clone()),
            Owner::Bytes(b) => Store {
                ptr: self.ptr,
                len: self.len,
                owner: Owner::Bytes(Arc::clone(b)),
            },
        }
    }
}

impl<T: Plain> fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Store({} values", self.len)?;
        if self.in_place_now() {
            f.write_str(", in place")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_read_in_place_or_copied_are_the_same() {
        let values: Vec<u32> = (0..1000).map(|i| i * 7919).collect();
        let mut bytes = vec![0u8; 8];
        values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
        let shared: Shared = Arc::new(bytes);
        // SAFETY: a vector's bytes, never changed.
        let aligned = unsafe { Store::<u32>::in_place(&shared, 8, 1000) }.unwrap();
        assert_eq!(&*aligned, &values[..]);
        assert_eq!(aligned.in_place_now(), cfg!(target_endian = "little"));
        assert_eq!(
            aligned.own_bytes(),
            if aligned.in_place_now() { 0 } else { 4000 }
        );
        // Misaligned: copied.
        // SAFETY: as above.
        let odd = unsafe { Store::<u32>::in_place(&shared, 9, 10) }.unwrap();
        assert!(!odd.in_place_now());
        let all: &[u8] = (*shared).as_ref();
        let expected: Vec<u32> = all[9..49]
            .chunks(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(&*odd, &expected[..]);
        // Past the end: none.
        // SAFETY: as above.
        assert!(unsafe { Store::<u32>::in_place(&shared, 8, 1001) }.is_none());
        let clone = aligned.clone();
        drop(aligned);
        drop(shared);
        assert_eq!(&*clone, &values[..]);
        assert_eq!(
            &*Store::<u64>::copied(&[1, 0, 0, 0, 0, 0, 0, 0], 1).unwrap(),
            &[1]
        );
        assert!(Store::<u64>::copied(&[1, 0, 0], 1).is_none());
    }
}
