//! The values of one column of an on-disk format, held either in memory or
//! in place in the bytes of the file they were read from (a mapped cache
//! file), so that what is read back from a cache takes no memory of its own
//! for its columns: the system pages them in as they are read, and can drop
//! them again, as it does a mapped trace.
//!
//! A column is stored little-endian at an offset aligned for its values (a
//! writer pads to [`ALIGN`](crate::ALIGN)), which is what lets a
//! little-endian host read it in place. Anything else (a big-endian host, an
//! offset that is not aligned after all) gets a copy: the answer never
//! depends on where the values are.
//!
//! | bytes | what |
//! | --- | --- |
//! | n × [`Plain::WIDTH`] | the values, each little-endian |

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes shared with their owner, which keeps them, unchanged, for as long as a
/// clone of the `Arc` lives (see [`Store::in_place`]).
pub type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A value type stored little-endian in `WIDTH` bytes, that a [`Store`] may
/// read in place by taking the bytes for values.
///
/// # Safety
///
/// `WIDTH` is `size_of::<Self>()`, the type has no padding bytes, and every
/// pattern of `WIDTH` bytes is a valid value of it: a store reads values in
/// place from whatever bytes a file holds, so a pattern that is not a value
/// (a `bool`'s 2, a `char` past `char::MAX`, a reference's null) would be
/// undefined behaviour, not a decoding error.
pub unsafe trait Plain: Copy + Send + Sync + 'static {
    /// Bytes of one value.
    const WIDTH: usize;
    /// The value whose little-endian bytes `bytes` starts with (at least
    /// `WIDTH` of them).
    fn from_le(bytes: &[u8]) -> Self;
}

/// The value whose little-endian bytes are at byte `at` of `bytes`, the
/// default (0) when they end before it: for a [`Plain`] type of fields
/// reading each.
pub fn le_at<T: Plain + Default>(bytes: &[u8], at: usize) -> T {
    at.checked_add(T::WIDTH)
        .and_then(|end| bytes.get(at..end))
        .map_or_else(T::default, T::from_le)
}

/// The value of type `$t` whose little-endian bytes `bytes` starts with.
macro_rules! from_le {
    ($t:ty, $bytes:expr) => {{
        let mut b = [0u8; std::mem::size_of::<$t>()];
        b.copy_from_slice(&$bytes[..std::mem::size_of::<$t>()]);
        <$t>::from_le_bytes(b)
    }};
}

// SAFETY: `u8` is one byte with no padding, and each of the 256 patterns of
// it is a `u8`.
unsafe impl Plain for u8 {
    const WIDTH: usize = 1;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        from_le!(u8, bytes)
    }
}

// SAFETY: `u16` is two bytes with no padding, and every pattern of them is a
// `u16` (an integer has no invalid values).
unsafe impl Plain for u16 {
    const WIDTH: usize = 2;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        from_le!(u16, bytes)
    }
}

// SAFETY: `u32` is four bytes with no padding, and every pattern of them is a
// `u32`.
unsafe impl Plain for u32 {
    const WIDTH: usize = 4;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        from_le!(u32, bytes)
    }
}

// SAFETY: `u64` is eight bytes with no padding, and every pattern of them is
// a `u64`.
unsafe impl Plain for u64 {
    const WIDTH: usize = 8;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        from_le!(u64, bytes)
    }
}

// SAFETY: `i64` is eight bytes with no padding, and every pattern of them is
// an `i64`.
unsafe impl Plain for i64 {
    const WIDTH: usize = 8;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        from_le!(i64, bytes)
    }
}

/// Implements [`Plain`] for a struct whose fields are all [`Plain`] and fill
/// it with no padding (a `repr(C)` row of integers, widest first): each field
/// read at its offset (`offset_of!`), 0 where the bytes end before it. A
/// struct its fields do not fill is a build error, since its padding bytes
/// would be read as values.
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Row {
///     time: u64,
///     id: u32,
///     count: u32,
/// }
/// tracekit_columns::plain_struct!(Row { time: u64, id: u32, count: u32 });
/// ```
///
/// A struct with padding (4 bytes after `id` here) is refused:
///
/// ```compile_fail
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Padded {
///     time: u64,
///     id: u32,
/// }
/// tracekit_columns::plain_struct!(Padded { time: u64, id: u32 });
/// ```
#[macro_export]
macro_rules! plain_struct {
    ($t:ident { $($field:ident: $ty:ty),+ $(,)? }) => {
        const _: () = assert!(
            ::std::mem::size_of::<$t>() == 0 $(+ <$ty as $crate::Plain>::WIDTH)+,
            "a plain struct's fields fill it, with no padding"
        );
        // SAFETY: every field is `Plain`, so its width is its size and each
        // pattern of its bytes is a value; the fields fill the struct (its
        // size is the sum of their widths, asserted above), so it has no
        // padding and every pattern of its bytes is a value of it.
        unsafe impl $crate::Plain for $t {
            const WIDTH: usize = ::std::mem::size_of::<$t>();

            #[inline]
            fn from_le(b: &[u8]) -> Self {
                $t {
                    $($field: $crate::store::le_at::<$ty>(b, ::std::mem::offset_of!($t, $field)),)+
                }
            }
        }
    };
}

// SAFETY: the values of an array follow one another with no bytes between
// them (an array's size is its length times its element's, which has no
// padding of its own), and every pattern of them is an array of values.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {
    const WIDTH: usize = T::WIDTH * N;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        std::array::from_fn(|i| T::from_le(&bytes[i * T::WIDTH..]))
    }
}

/// Immutable values of a column: `len` values at `ptr`, inside what `owner`
/// holds. Reading them is reading a slice, wherever they are.
pub struct Store<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner<T>,
}

enum Owner<T> {
    /// Values in memory: `ptr` is the vector's buffer, which only
    /// [`Store::edit`] changes (through `&mut self`, so with no slice of it
    /// borrowed), taking `ptr` again after.
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
    pub fn from_vec(mut v: Vec<T>) -> Store<T> {
        let ptr = NonNull::from(v.as_mut_slice()).cast::<T>();
        Store {
            ptr,
            len: v.len(),
            owner: Owner::Memory(v),
        }
    }

    /// A copy of the `n` little-endian values `bytes` starts with (`None` when
    /// it is shorter).
    pub fn copied(bytes: &[u8], n: usize) -> Option<Store<T>> {
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
    pub unsafe fn in_place(bytes: &Shared, offset: usize, n: usize) -> Option<Store<T>> {
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

    /// Changes the values with `f`, in memory: values in place are copied
    /// first. The pointer is taken again after, since `f` may move them.
    fn edit(&mut self, f: impl FnOnce(&mut Vec<T>)) {
        if let Owner::Bytes(_) = self.owner {
            *self = Store::from_vec(self.to_vec());
        }
        if let Owner::Memory(v) = &mut self.owner {
            f(v);
            self.ptr = NonNull::from(v.as_mut_slice()).cast::<T>();
            self.len = v.len();
        }
    }

    /// Adds `value` after the others (in memory: a column being built).
    pub fn push(&mut self, value: T) {
        self.edit(|v| v.push(value));
    }

    /// Lets go of memory held for values not added (none for values in place).
    pub fn shrink_to_fit(&mut self) {
        if let Owner::Memory(_) = self.owner {
            self.edit(Vec::shrink_to_fit);
        }
    }

    /// Bytes of memory the store holds of its own (0 for values in place).
    pub fn own_bytes(&self) -> usize {
        match &self.owner {
            Owner::Memory(v) => v.capacity() * T::WIDTH,
            Owner::Bytes(_) => 0,
        }
    }

    /// Whether the values are read in place.
    pub fn is_in_place(&self) -> bool {
        matches!(self.owner, Owner::Bytes(_))
    }
}

impl<T: Plain> Deref for Store<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is valid for `len` reads of `T` for as long as `owner`
        // lives, which is as long as `self`: it is a vector's buffer
        // (`from_vec`, and `edit`, which takes it again after each change of
        // the vector, and whose `&mut self` means no slice from here is
        // alive while it does), or bytes of an owner
        // that keeps them unchanged at one address (`in_place`'s contract),
        // checked there to hold `len` values at an address aligned for `T`.
        // Any pattern of `len * T::WIDTH` bytes is `len` values of `T`
        // (`Plain`'s contract), and the values are never written while
        // borrowed.
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
        if self.is_in_place() {
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
        assert_eq!(aligned.is_in_place(), cfg!(target_endian = "little"));
        assert_eq!(
            aligned.own_bytes(),
            if aligned.is_in_place() { 0 } else { 4000 }
        );
        // Misaligned: copied.
        // SAFETY: as above.
        let odd = unsafe { Store::<u32>::in_place(&shared, 9, 10) }.unwrap();
        assert!(!odd.is_in_place());
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

    #[test]
    fn a_column_grows_in_memory_and_values_in_place_are_copied_to_grow() {
        let mut built = Store::<u32>::default();
        for v in 0..1000 {
            built.push(v);
        }
        built.shrink_to_fit();
        assert_eq!(built.len(), 1000);
        assert!(built.iter().copied().eq(0..1000));
        assert_eq!(built.own_bytes(), 4000);
        let mut bytes = Vec::new();
        built
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
        let shared: Shared = Arc::new(bytes);
        // SAFETY: a vector's bytes, never changed.
        let mut placed = unsafe { Store::<u32>::in_place(&shared, 0, 1000) }.unwrap();
        let before = placed.clone();
        placed.push(1000);
        assert!(!placed.is_in_place());
        assert!(placed.iter().copied().eq(0..1001));
        assert_eq!(&*before, &built[..], "the clone is left as it was");
        let all: &[u8] = (*shared).as_ref();
        assert_eq!(all.len(), 4000, "the shared bytes are never written");
    }
}
