//! Columns grown on disk rather than in memory, so that building the columns
//! of a trace larger than memory costs the process no memory of its own: the
//! values live in the pages of a file mapped into the process, which the
//! system writes back and drops as it needs, as it does a mapped trace.
//!
//! A [`Grow`] starts as a vector; past [`SPILL_BYTES`] of values, and when it
//! was given a folder to spill into ([`Spill`]), it moves them to a file there
//! that nothing names (removed by the system once the column is let go) and
//! grows the file instead. The file's blocks are reserved before a page of
//! them is written, so that a disk that fills up is an error of the
//! reservation, which the column meets by moving back to memory, and never a
//! write to a mapped page that has nowhere to go (which the system answers
//! with SIGBUS). Finished ([`Grow::finish`]), the column is a [`Store`] read
//! in place from the file's mapping. Columns whose lengths are known before
//! they are written share one file, a [`Slab`]: many columns, one file.
//!
//! | bytes | what |
//! | --- | --- |
//! | n × [`Plain::WIDTH`] | the values, each in the host's order (only a little-endian host spills) |
//!
//! This is, with [`rename`](crate::rename), the file system's side of the byte
//! kit: the formats themselves never touch a file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::store::{Plain, Shared, Store};

/// Bytes of values a column holds in memory before it moves them to a file.
pub const SPILL_BYTES: usize = 4 << 20;

/// Where columns spill: a folder (the caller's own, a private cache folder),
/// or nowhere, every column kept in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spill {
    dir: Option<Arc<PathBuf>>,
    /// Bytes a column's file may take at most, as if the disk were full past
    /// them (tests of a disk filling up).
    room: Option<usize>,
}

impl Spill {
    /// Columns spill into files in `dir`.
    pub fn to(dir: &Path) -> Spill {
        Spill {
            dir: Some(Arc::new(dir.to_path_buf())),
            room: None,
        }
    }

    /// Every column kept in memory.
    pub fn memory() -> Spill {
        Spill::default()
    }

    /// The folder columns spill into, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref().map(PathBuf::as_path)
    }
}

/// A column as it grows: in memory, or in a file (see the module docs).
///
/// Either way the values are read and written at one pointer, so that a
/// push or a read costs what a vector's does, whichever holds them.
pub struct Grow<T: Plain> {
    /// The values: `memory`'s buffer, or the file's mapping.
    ptr: NonNull<T>,
    /// Values pushed, each written at `ptr`.
    len: usize,
    /// Values there is room for at `ptr`.
    cap: usize,
    /// The buffer in memory while there is no file. Its own length is set
    /// only where a vector's method needs it: `len` is the column's.
    memory: Vec<T>,
    file: Option<Spilled>,
    spill: Spill,
}

/// A file mapped for writing, its room reserved (the column's `cap`).
struct Spilled {
    file: File,
    map: memmap2::MmapMut,
}

// SAFETY: a column owns its values (a vector, or a mapping of a file that
// nothing else names) and reaches them only through its pointer, as a
// vector does; `T: Plain` is `Send + Sync`.
unsafe impl<T: Plain> Send for Grow<T> {}
// SAFETY: as for `Send`: shared, the values are only read.
unsafe impl<T: Plain> Sync for Grow<T> {}

impl<T: Plain> Grow<T> {
    /// An empty column, spilling as `spill` says.
    pub fn new(spill: &Spill) -> Grow<T> {
        Grow {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
            memory: Vec::new(),
            file: None,
            spill: spill.clone(),
        }
    }

    /// Values pushed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the column spills.
    pub fn spill(&self) -> &Spill {
        &self.spill
    }

    /// Bytes of memory the column holds of its own (none once in a file).
    pub fn own_bytes(&self) -> usize {
        self.memory.capacity() * T::WIDTH
    }

    /// Whether the values are in a file.
    pub fn is_spilled(&self) -> bool {
        self.file.is_some()
    }

    /// The values.
    #[inline(always)]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `cap >= len` values' room, aligned for `T` (a
        // vector's buffer, or a page-aligned mapping), the first `len`
        // written; only this column writes them (through `&mut self`, so not
        // while this borrow lives); any bytes are values of `T` (`Plain`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The values, to change them.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, borrowed mutably through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Adds `value` after the others.
    #[inline(always)]
    pub fn push(&mut self, value: T) {
        if self.len < self.cap {
            // SAFETY: `len < cap`: inside the room at `ptr`, aligned as in
            // `as_slice`; nothing borrows the values (`&mut self`).
            unsafe { self.ptr.as_ptr().add(self.len).write(value) };
            self.len += 1;
        } else {
            self.push_slow(value);
        }
    }

    /// Adds `values` after the others, in one copy while there is room.
    #[inline]
    pub fn extend_from_slice(&mut self, values: &[T]) {
        if self.cap - self.len >= values.len() {
            // SAFETY: `cap - len >= values.len()`: the room at `ptr` past the
            // values holds them, aligned as in `as_slice`; `values` cannot be
            // the column's own (they are borrowed apart from `&mut self`).
            unsafe {
                let at = self.ptr.as_ptr().add(self.len);
                std::ptr::copy_nonoverlapping(values.as_ptr(), at, values.len());
            }
            self.len += values.len();
        } else {
            // The first push to find no room grows the column (doubling it).
            for &v in values {
                self.push(v);
            }
        }
    }

    /// `ptr` and `cap` of the vector in memory, its values `0..len`.
    fn at_memory(&mut self) {
        self.ptr = NonNull::new(self.memory.as_mut_ptr()).unwrap_or(NonNull::dangling());
        self.cap = self.memory.capacity();
    }

    /// The vector in memory with its length set to the column's.
    fn memory_whole(&mut self) -> &mut Vec<T> {
        // SAFETY: in memory, `len <= cap`, the vector's capacity, and the
        // first `len` values are written; `T` has no drop (it is `Copy`).
        unsafe { self.memory.set_len(self.len.min(self.memory.capacity())) };
        &mut self.memory
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, value: T) {
        if self.file.is_some() {
            self.grow_file();
            if self.file.is_some() {
                return self.push(value);
            }
        } else if self.len * T::WIDTH >= SPILL_BYTES {
            self.move_to_file();
            if self.file.is_some() {
                return self.push(value);
            }
        }
        let memory = self.memory_whole();
        crate::huge::push(memory, value);
        self.len = memory.len();
        self.at_memory();
    }

    /// Removes the last value and returns it.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let last = *self.as_slice().last()?;
        self.len -= 1;
        Some(last)
    }

    /// Keeps the first `n` values (all of them when there are fewer). A file
    /// keeps its room, to grow into again.
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Adds copies of `value` until there are `n` values.
    pub fn resize(&mut self, n: usize, value: T) {
        let in_memory = self.file.is_none()
            && (self.spill.dir.is_none() || n.saturating_mul(T::WIDTH) < SPILL_BYTES);
        if in_memory && n > self.len {
            let more = n - self.len;
            let memory = self.memory_whole();
            crate::huge::reserve(memory, more);
            memory.resize(n, value);
            self.len = n;
            self.at_memory();
        }
        while self.len < n {
            self.push(value);
        }
        self.truncate(n);
    }

    /// Removes the first `n` values (all of them when there are fewer), the
    /// others moved to the front.
    pub fn drain_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.as_mut_slice().copy_within(n.., 0);
        self.truncate(self.len - n);
    }

    /// The values as a vector: the column's own in memory, a copy of those
    /// in its file.
    pub fn into_vec(mut self) -> Vec<T> {
        match self.file {
            None => std::mem::take(self.memory_whole()),
            Some(_) => self.as_slice().to_vec(),
        }
    }

    /// Moves the values in memory to a new file, when there is a folder to
    /// spill into and the file can be made; else leaves them.
    fn move_to_file(&mut self) {
        let cap = (self.len * 2).max(1);
        let Some((file, mut map)) = cap
            .checked_mul(T::WIDTH)
            .and_then(|bytes| new_file(&self.spill, bytes))
        else {
            return;
        };
        let bytes = values_bytes(self.as_slice());
        if let Some(dst) = map.get_mut(..bytes.len()) {
            dst.copy_from_slice(bytes);
            self.ptr = NonNull::new(map.as_mut_ptr().cast::<T>()).unwrap_or(NonNull::dangling());
            self.cap = cap;
            self.file = Some(Spilled { file, map });
            self.memory = Vec::new();
        }
    }

    /// Doubles the file's room; when it cannot, moves the values back to
    /// memory, where the column goes on growing.
    fn grow_file(&mut self) {
        let Some(s) = &mut self.file else {
            return;
        };
        let cap = self.cap * 2;
        // The values stay where they are in the file: mapped again, its pages
        // are not copied.
        if let Some(mut map) = map_reserved(&s.file, cap * T::WIDTH, &self.spill) {
            self.ptr = NonNull::new(map.as_mut_ptr().cast::<T>()).unwrap_or(NonNull::dangling());
            self.cap = cap;
            s.map = map;
            return;
        }
        let mut memory = Vec::with_capacity(self.len * 2);
        memory.extend_from_slice(self.as_slice());
        self.memory = memory;
        self.file = None;
        self.at_memory();
    }

    /// The column, read in place from its file when it spilled, else in
    /// memory, its spare room let go.
    pub fn finish(mut self) -> Store<T> {
        let Some(s) = self.file.take() else {
            let mut v = std::mem::take(self.memory_whole());
            v.shrink_to_fit();
            return Store::from_vec(v);
        };
        // The room reserved past the values is let go (the mapping's pages
        // past them are never read); a file that keeps it only holds unused
        // room.
        let _ = s.file.set_len((self.len * T::WIDTH) as u64);
        let shared: Shared = Arc::new(s.map);
        // SAFETY: the mapping gives the same bytes at one address for as long
        // as it lives (the `Arc`), and nothing changes them: the file is this
        // column's alone (nothing names it), and the mapping, shared, is
        // never written again. `in_place`'s contract.
        match unsafe { Store::in_place(&shared, 0, self.len) } {
            Some(store) => store,
            None => Store::copied((*shared).as_ref(), self.len).unwrap_or_default(),
        }
    }
}

impl<T: Plain> std::ops::Deref for Grow<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Plain> std::ops::DerefMut for Grow<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Plain> Default for Grow<T> {
    /// An empty column kept in memory.
    fn default() -> Grow<T> {
        Grow::new(&Spill::memory())
    }
}

impl<T: Plain> Clone for Grow<T> {
    /// A copy in memory: a spilled column's file is its own.
    fn clone(&self) -> Self {
        let mut copy = Grow {
            memory: self.as_slice().to_vec(),
            ..Grow::new(&self.spill)
        };
        copy.len = self.len;
        copy.at_memory();
        copy
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Grow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Grow({} values", self.len)?;
        if self.is_spilled() {
            f.write_str(", spilled")?;
        }
        f.write_str(")")
    }
}

/// A new file of `spill`'s folder that nothing names, its first `bytes`
/// reserved and mapped for writing; `None` with nowhere to spill, on a
/// big-endian host (whose values would not read in place), or when the file
/// cannot be made or reserved.
fn new_file(spill: &Spill, bytes: usize) -> Option<(File, memmap2::MmapMut)> {
    if !cfg!(target_endian = "little") {
        return None;
    }
    let file = tempfile::tempfile_in(spill.dir()?).ok()?;
    let map = map_reserved(&file, bytes, spill)?;
    Some((file, map))
}

/// The first `bytes` of `file`, its blocks allocated (not only its length
/// set), mapped for writing.
fn map_reserved(file: &File, bytes: usize, spill: &Spill) -> Option<memmap2::MmapMut> {
    if spill.room.is_some_and(|room| bytes > room) {
        return None;
    }
    allocate(file, bytes).ok()?;
    // SAFETY: the file is its column's alone (nothing names it), and changed
    // only through its mappings while they live.
    unsafe { memmap2::MmapOptions::new().len(bytes).map_mut(file) }.ok()
}

/// Columns of sizes known before they are written, laid one after another in
/// one file (or, below [`SPILL_BYTES`] or with nowhere to spill, in memory),
/// each at a multiple of [`ALIGN`](crate::ALIGN) bytes: filled through
/// [`Slab::values_mut`], then shared ([`Slab::freeze`]) and read in place as
/// [`Store`]s ([`Store::in_place`]). Many columns cost one file.
pub struct Slab {
    /// In memory: 8-byte words, so that every column is aligned.
    memory: Vec<u64>,
    map: Option<memmap2::MmapMut>,
}

impl Slab {
    /// Room for `bytes` (each column's offset and length the caller's, within
    /// them), zeroed.
    pub fn new(spill: &Spill, bytes: usize) -> Slab {
        let file = (bytes >= SPILL_BYTES)
            .then(|| new_file(spill, bytes))
            .flatten();
        match file {
            // The descriptor is let go: the mapping keeps the file.
            Some((_, map)) => Slab {
                memory: Vec::new(),
                map: Some(map),
            },
            None => Slab {
                memory: vec![0; bytes.div_ceil(8)],
                map: None,
            },
        }
    }

    /// Whether the columns are in a file.
    pub fn is_spilled(&self) -> bool {
        self.map.is_some()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.map {
            Some(m) => m,
            None => {
                let words = &mut self.memory[..];
                // SAFETY: any bytes are a `u64`'s and any `u64`'s are bytes;
                // the slice covers exactly the words' bytes, borrowed
                // mutably from them.
                unsafe {
                    std::slice::from_raw_parts_mut(
                        words.as_mut_ptr().cast::<u8>(),
                        std::mem::size_of_val(words),
                    )
                }
            }
        }
    }

    /// The `n` values at byte `offset` (a multiple of 8), to fill; `None`
    /// when they are not within the slab or not aligned for `T`.
    pub fn values_mut<T: Plain>(&mut self, offset: usize, n: usize) -> Option<&mut [T]> {
        let bytes = self
            .bytes_mut()
            .get_mut(offset..offset.checked_add(n.checked_mul(T::WIDTH)?)?)?;
        if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        // SAFETY: `n * WIDTH` bytes, aligned for `T` (checked), borrowed
        // mutably for the slice's life; every pattern of them is `n` values
        // of `T` and every value's bytes are bytes (`Plain`).
        Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), n) })
    }

    /// The columns, to be read in place ([`Store::in_place`]) and never
    /// changed again.
    pub fn freeze(self) -> Shared {
        match self.map {
            Some(map) => Arc::new(map),
            None => Arc::new(Words(self.memory)),
        }
    }
}

/// Words in memory, read as their bytes.
struct Words(Vec<u64>);

impl AsRef<[u8]> for Words {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the bytes of the words, borrowed from them.
        unsafe {
            std::slice::from_raw_parts(
                self.0.as_ptr().cast::<u8>(),
                std::mem::size_of_val(&self.0[..]),
            )
        }
    }
}

/// Allocates the first `bytes` of `file` on disk, so that writing them
/// cannot fail for want of room.
#[cfg(target_os = "linux")]
fn allocate(file: &File, bytes: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(bytes).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: a valid open descriptor, a range from 0; the call only
    // allocates blocks of the file.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// Where no call reserves blocks, no column spills: a full disk would be a
/// SIGBUS at a write.
#[cfg(not(target_os = "linux"))]
fn allocate(_: &File, _: usize) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The bytes of `values` (in the host's order).
fn values_bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding: their bytes are initialised, and
    // `len * WIDTH` of them are the slice's.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Values past the spill size move to a file in the folder given, grow
    /// there, can be changed in place, and read back in place once finished,
    /// every one as pushed.
    #[test]
    fn a_column_past_the_spill_size_grows_in_a_file_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::to(dir.path());
        let mut g = Grow::<u64>::new(&spill);
        let n = 3 * SPILL_BYTES / 8 + 12_345;
        for i in 0..n as u64 {
            g.push(i * 3);
            if i == 1000 {
                assert!(!g.is_spilled(), "small columns stay in memory");
            }
        }
        assert_eq!(
            g.is_spilled(),
            cfg!(all(target_os = "linux", target_endian = "little"))
        );
        g.as_mut_slice()[7] = 1;
        let copy = g.clone();
        assert!(!copy.is_spilled());
        let store = g.finish();
        assert_eq!(store.len(), n);
        assert_eq!(store[7], 1);
        assert!((0..n).filter(|&i| i != 7).all(|i| store[i] == i as u64 * 3));
        assert_eq!(
            store.is_in_place(),
            copy.len() == n && cfg!(target_os = "linux")
        );
        assert_eq!(&*store, copy.as_slice());
        // The file has no name: the folder stays empty.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A column used as a stack and a queue (popped, cut, padded, drained
    /// at the front) holds what a vector so used holds, in memory and in a
    /// file, across the move to the file.
    #[test]
    fn a_column_pops_pads_and_drains_as_a_vector_does() {
        let dir = tempfile::tempdir().unwrap();
        for spill in [Spill::memory(), Spill::to(dir.path())] {
            let mut g = Grow::<u32>::new(&spill);
            let mut v: Vec<u32> = Vec::new();
            let n = 3 * SPILL_BYTES / 4;
            for i in 0..n as u32 {
                g.push(i);
                v.push(i);
                if i % 5 == 0 {
                    assert_eq!(g.pop(), v.pop());
                }
            }
            g.drain_front(1000);
            v.drain(..1000);
            g.resize(v.len() + 70_000, 9);
            v.resize(v.len() + 70_000, 9);
            g.truncate(v.len() - 3);
            v.truncate(v.len() - 3);
            assert_eq!(g.as_slice(), &v[..]);
            assert_eq!(
                g.is_spilled(),
                spill.dir().is_some() && cfg!(all(target_os = "linux", target_endian = "little"))
            );
            g.drain_front(usize::MAX);
            assert_eq!(g.pop(), None);
            g.push(4);
            assert_eq!(g.as_slice(), &[4]);
        }
    }

    /// Columns laid in one slab read back in place as filled, from its file
    /// past the spill size, else from memory.
    #[test]
    fn a_slab_s_columns_read_in_place_as_filled() {
        let dir = tempfile::tempdir().unwrap();
        for n in [10usize, SPILL_BYTES / 8] {
            let mut slab = Slab::new(&Spill::to(dir.path()), 16 * n);
            assert_eq!(slab.is_spilled(), n > 10 && cfg!(target_os = "linux"));
            let wide: &mut [u64] = slab.values_mut(0, n).unwrap();
            wide.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = i as u64 * 3);
            let narrow: &mut [u32] = slab.values_mut(8 * n, n).unwrap();
            narrow
                .iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = i as u32 + 7);
            assert!(slab.values_mut::<u64>(8 * n + 4, 1).is_none(), "misaligned");
            assert!(
                slab.values_mut::<u64>(16 * n - 4, 1).is_none(),
                "past the end"
            );
            let shared = slab.freeze();
            // SAFETY: the slab's bytes, never changed once frozen.
            let wide = unsafe { Store::<u64>::in_place(&shared, 0, n) }.unwrap();
            // SAFETY: as above.
            let narrow = unsafe { Store::<u32>::in_place(&shared, 8 * n, n) }.unwrap();
            assert!(wide.is_in_place() && narrow.is_in_place());
            assert!(wide.iter().enumerate().all(|(i, &v)| v == i as u64 * 3));
            assert!(narrow.iter().enumerate().all(|(i, &v)| v == i as u32 + 7));
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Without a folder, or with one that cannot hold a file, the column
    /// stays in memory.
    #[test]
    fn a_column_with_nowhere_to_spill_stays_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        for spill in [Spill::memory(), Spill::to(&dir.path().join("absent"))] {
            let mut g = Grow::<u32>::new(&spill);
            let n = 2 * SPILL_BYTES / 4 + 1;
            (0..n as u32).for_each(|v| g.push(v));
            assert!(!g.is_spilled());
            let store = g.finish();
            assert!(!store.is_in_place());
            assert!(store.iter().copied().eq(0..n as u32));
        }
    }

    /// A disk that fills up while a column grows in its file: the column
    /// moves back to memory with every value, and goes on growing there.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_disk_full_moves_the_column_back_to_memory_with_every_value() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill {
            room: Some(2 * SPILL_BYTES),
            ..Spill::to(dir.path())
        };
        let mut g = Grow::<u32>::new(&spill);
        let n = SPILL_BYTES / 4 + 10;
        (0..n as u32).for_each(|v| g.push(v));
        assert!(g.is_spilled());
        let m = 3 * SPILL_BYTES / 4;
        (n as u32..m as u32).for_each(|v| g.push(v));
        assert!(!g.is_spilled(), "past the room, back in memory");
        let store = g.finish();
        assert!(store.iter().copied().eq(0..m as u32));
    }
}
