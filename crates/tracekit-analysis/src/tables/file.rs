//! Trace tables as bytes, to keep them in a file and read them back instead of
//! decoding the trace again. No I/O: [`Tables::write_to`] writes to any
//! `io::Write`; [`Tables::read_from`] reads a byte slice into memory, and
//! [`Tables::read_in_place`] reads shared bytes (a mapped file) leaving the
//! columns where they are, to be paged in as passes read them.
//!
//! All integers are little-endian. A column is a width byte (4 or 8), zeros up
//! to the next multiple of 8 bytes from the start, and its values at that
//! width; a domain column is a width byte of 2, the zeros and its values, or 0
//! alone when every value is 0. Each array of values starts at a multiple of 8
//! bytes from the start (zeros before it where needed), so that a mapped file
//! whose tables start at such an offset can be read in place.
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | magic `TKTABLE` and the format version (4) |
//! | 8 | the time of the last event (µs, signed) |
//! | 8 each | events, allocations, promotes and collects |
//! | 8 | allocations that reused the id of a live object |
//! | events | the kind of each event: 0 alloc, 1 promote, 2 collect |
//! | column | per allocation: time |
//! | column | object id |
//! | domains | domain |
//! | column | length (words) |
//! | column | samples |
//! | allocations | source: 0 minor, 1 major, 2 external |
//! | 4 × allocations | node in the backtrace trie |
//! | 4 × allocations | node in the trie of sites |
//! | column | end ([`NEVER`](super::NEVER) if never collected) |
//! | column | per promote or collect: time |
//! | column | 1 + the ordinal of the allocation whose object it is, 0 if none |
//! | domains | domain |
//! | trie | the backtrace trie: 4 bytes of node count, then per node after the root its parent (4) and location code (8), in node order |
//! | trie | the trie of sites, the same way |
//! | 4 | location codes, then per code: the code (8), its location count (1), per location its line, first and last column (4 each), file name and function name (4 bytes of length, then the bytes) |
//!
//! Tables of a damaged trace, or of one whose packets were skipped, are not
//! written: reading them back would lose the damage. Reading checks every
//! count, width and id against the rest, so a file that is not what it says
//! is an error with its offset, never tables that answer wrongly.

use std::io::{self, Write};

use tracekit_memtrace::{Info, Location, LocationCode, LocationTable, Name, Timedelta};

use super::store::{Plain, Shared, Store};
use super::{Column, Tables};
use crate::backtrace::{BacktraceId, Backtraces};

const MAGIC: &[u8; 8] = b"TKTABLE\x04";

/// The alignment of each array of values, from the start of the tables.
const ALIGN: usize = 8;

/// Why bytes are not trace tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// Not tables of this format version.
    #[error("not trace tables of this version")]
    Magic,
    /// The bytes end inside a section.
    #[error("cut short at byte {0}")]
    Truncated(usize),
    /// A value that contradicts the rest (a count, a width, an id) at this offset.
    #[error("inconsistent at byte {0}")]
    Inconsistent(usize),
    /// The tables are of a damaged trace, which are not written.
    #[error("the tables are of a damaged trace")]
    Damaged,
}

impl Tables {
    /// Writes the tables in the format of the module docs. Tables of a damaged
    /// trace are refused ([`FileError::Damaged`] as `io::ErrorKind::InvalidInput`).
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.error.is_some() || !self.warnings.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                FileError::Damaged,
            ));
        }
        let out = &mut Counted { out, at: 0 };
        out.write_all(MAGIC)?;
        out.write_all(&self.end.as_micros().to_le_bytes())?;
        let promotes = self
            .kind
            .iter()
            .filter(|&&k| k == super::KIND_PROMOTE)
            .count();
        let others = self.kind.len().saturating_sub(self.source.len());
        for n in [
            self.kind.len(),
            self.source.len(),
            promotes,
            others - promotes.min(others),
        ] {
            out.write_all(&(n as u64).to_le_bytes())?;
        }
        out.write_all(&self.duplicates.to_le_bytes())?;
        out.pad()?;
        out.write_all(&self.kind)?;
        write_column(out, &self.time)?;
        write_column(out, &self.object)?;
        write_domains(out, &self.domain)?;
        write_column(out, &self.length)?;
        write_column(out, &self.samples)?;
        out.pad()?;
        out.write_all(&self.source)?;
        write_u32s(out, &self.backtrace)?;
        write_u32s(out, &self.site)?;
        write_column(out, &self.ended)?;
        write_column(out, &self.other_time)?;
        write_column(out, &self.other_target)?;
        write_domains(out, &self.other_domain)?;
        write_trie(out, &self.backtraces)?;
        write_trie(out, &self.sites)?;
        write_locations(out, &self.locations)
    }

    /// Reads tables written by [`Tables::write_to`] of the trace whose header
    /// is `info` and size `size_bytes`, into memory.
    pub fn read_from(bytes: &[u8], info: Info, size_bytes: u64) -> Result<Tables, FileError> {
        Tables::read(bytes, None, info, size_bytes, &mut |_| {})
    }

    /// Reads tables written by [`Tables::write_to`] at byte `offset` of `bytes`
    /// (a mapped cache file), as [`Tables::read_from`] does, but leaving the
    /// columns in place: the tables keep `bytes` and read their values there
    /// (on a little-endian host, when `offset` is a multiple of 8 from an
    /// aligned start; else they are copied). `done` hears, after each section,
    /// up to where the bytes are read and checked: the pages there can be let
    /// go, and are paged in again when a pass reads them.
    ///
    /// # Safety
    ///
    /// `bytes`' `as_ref` must return the same bytes at the same address, never
    /// changed, for as long as the tables or any clone of `bytes` live: true of
    /// bytes in a vector, and of a read-only mapping of a file that nothing
    /// changes while it is mapped (which reading a mapped file already needs).
    pub unsafe fn read_in_place(
        bytes: Shared,
        offset: usize,
        info: Info,
        size_bytes: u64,
        done: &mut dyn FnMut(usize),
    ) -> Result<Tables, FileError> {
        let all: &[u8] = (*bytes).as_ref();
        let body = all.get(offset..).ok_or(FileError::Truncated(0))?;
        Tables::read(body, Some((&bytes, offset)), info, size_bytes, done)
    }

    /// Reads `bytes`, which are `shared`'s from the offset given when that is
    /// `Some` (columns then read in place, under [`Tables::read_in_place`]'s
    /// contract).
    fn read(
        bytes: &[u8],
        shared: Option<(&Shared, usize)>,
        info: Info,
        size_bytes: u64,
        done: &mut dyn FnMut(usize),
    ) -> Result<Tables, FileError> {
        let mut r = Bytes {
            bytes,
            shared,
            at: 0,
            done,
        };
        if r.take(8)? != MAGIC {
            return Err(FileError::Magic);
        }
        let end = Timedelta::from_micros(r.i64()?);
        let events = r.count()?;
        let allocs = r.count()?;
        let promotes = r.count()?;
        let collects = r.count()?;
        let others = promotes.checked_add(collects).ok_or(r.bad())?;
        if allocs.checked_add(others) != Some(events) {
            return Err(r.bad());
        }
        let duplicates = u64::from_le_bytes(r.array()?);
        r.pad()?;
        let at = r.at;
        let kind: Store<u8> = r.values(events)?;
        let mut counted = [0usize; 3];
        for &k in kind.iter() {
            match counted.get_mut(usize::from(k)) {
                Some(c) => *c += 1,
                None => return Err(FileError::Inconsistent(at)),
            }
        }
        if counted != [allocs, promotes, collects] {
            return Err(FileError::Inconsistent(at));
        }
        let time = r.column(allocs)?;
        let times_sorted = time.sorted();
        let object = r.column(allocs)?;
        let domain = r.domains(allocs)?;
        let length = r.column(allocs)?;
        let samples = r.column(allocs)?;
        r.pad()?;
        let at = r.at;
        let source: Store<u8> = r.values(allocs)?;
        if source.iter().any(|&s| s > 2) {
            return Err(FileError::Inconsistent(at));
        }
        r.pad()?;
        let backtrace: Store<u32> = r.values(allocs)?;
        r.pad()?;
        let site: Store<u32> = r.values(allocs)?;
        let ended = r.column(allocs)?;
        let other_time = r.column(others)?;
        let at = r.at;
        let other_target = r.column(others)?;
        if (0..others).any(|i| other_target.get(i) > allocs as u64) {
            return Err(FileError::Inconsistent(at));
        }
        let other_domain = r.domains(others)?;
        let (at, backtraces) = (r.at, r.trie()?);
        if backtrace.iter().any(|&b| b as usize >= backtraces.len()) {
            return Err(FileError::Inconsistent(at));
        }
        let (at, sites) = (r.at, r.trie()?);
        if site.iter().any(|&b| b as usize >= sites.len()) {
            return Err(FileError::Inconsistent(at));
        }
        let locations = r.locations()?;
        if r.at != bytes.len() {
            return Err(r.bad());
        }
        Ok(Tables {
            info,
            locations,
            size_bytes,
            backtraces: std::sync::Arc::new(backtraces),
            kind,
            time,
            object,
            domain,
            length,
            samples,
            source,
            backtrace,
            sites: std::sync::Arc::new(sites),
            site,
            ended,
            other_time,
            times_sorted,
            skeletons: super::Skeletons::default(),
            other_target,
            duplicates,
            other_domain,
            end,
            warnings: Vec::new(),
            error: None,
        })
    }
}

/// A writer that knows how many bytes it has written, to align arrays.
struct Counted<'a> {
    out: &'a mut dyn Write,
    at: usize,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.at += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Counted<'_> {
    /// Zeros up to the next multiple of [`ALIGN`].
    fn pad(&mut self) -> io::Result<()> {
        let n = self.at.next_multiple_of(ALIGN) - self.at;
        self.write_all(&[0; ALIGN][..n])
    }
}

fn write_column(out: &mut Counted<'_>, c: &Column) -> io::Result<()> {
    match c {
        Column::Narrow(v) => {
            out.write_all(&[4])?;
            out.pad()?;
            write_values(out, v, |x| x.to_le_bytes())
        }
        Column::Wide(v) => {
            out.write_all(&[8])?;
            out.pad()?;
            write_values(out, v, |x| x.to_le_bytes())
        }
    }
}

fn write_u32s(out: &mut Counted<'_>, v: &[u32]) -> io::Result<()> {
    out.pad()?;
    write_values(out, v, |x| x.to_le_bytes())
}

/// A domain column: none when every value is 0.
fn write_domains(out: &mut Counted<'_>, v: &[u16]) -> io::Result<()> {
    if v.is_empty() {
        return out.write_all(&[0]);
    }
    out.write_all(&[2])?;
    out.pad()?;
    write_values(out, v, |x| x.to_le_bytes())
}

/// `values` as `bytes` gives each, through a buffer of about 64 KiB.
fn write_values<T: Copy, const N: usize>(
    out: &mut Counted<'_>,
    values: &[T],
    bytes: impl Fn(T) -> [u8; N],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    for chunk in values.chunks((1 << 16) / N.max(1)) {
        buf.clear();
        chunk.iter().for_each(|&x| buf.extend_from_slice(&bytes(x)));
        out.write_all(&buf)?;
    }
    Ok(())
}

fn write_trie(out: &mut dyn Write, t: &Backtraces) -> io::Result<()> {
    out.write_all(&(t.len() as u32).to_le_bytes())?;
    let mut buf = Vec::with_capacity(12 << 12);
    for i in 1..t.len() {
        let id = BacktraceId(i as u32);
        buf.extend_from_slice(&t.parent(id).0.to_le_bytes());
        buf.extend_from_slice(&t.leaf(id).map_or(0, |c| c.get()).to_le_bytes());
        if buf.len() >= 12 << 12 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

fn write_name(out: &mut dyn Write, n: &Name) -> io::Result<()> {
    let b = n.as_bytes();
    let len = u32::try_from(b.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(b)
}

fn write_locations(out: &mut dyn Write, t: &LocationTable) -> io::Result<()> {
    let mut codes: Vec<(LocationCode, &[Location])> = t.iter().collect();
    codes.sort_unstable_by_key(|(c, _)| c.get());
    out.write_all(&(codes.len() as u32).to_le_bytes())?;
    for (code, locs) in codes {
        let n =
            u8::try_from(locs.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        out.write_all(&code.get().to_le_bytes())?;
        out.write_all(&[n])?;
        for l in locs {
            for v in [l.line, l.start_char, l.end_char] {
                out.write_all(&v.to_le_bytes())?;
            }
            write_name(out, &l.filename)?;
            write_name(out, &l.defname)?;
        }
    }
    Ok(())
}

/// A cursor over the bytes being read.
struct Bytes<'a, 'd> {
    bytes: &'a [u8],
    /// The shared bytes `bytes` are of, from this offset, when columns are read
    /// in place.
    shared: Option<(&'a Shared, usize)>,
    at: usize,
    /// Told how far the reading has come after each section.
    done: &'d mut dyn FnMut(usize),
}

impl<'a> Bytes<'a, '_> {
    fn bad(&self) -> FileError {
        FileError::Inconsistent(self.at)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FileError> {
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

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FileError> {
        let at = self.at;
        self.take(N)?
            .try_into()
            .map_err(|_| FileError::Truncated(at))
    }

    fn i64(&mut self) -> Result<i64, FileError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, FileError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A count of items that must each take at least a byte of what is left:
    /// more is a file cut short.
    fn count(&mut self) -> Result<usize, FileError> {
        let at = self.at;
        let n = u64::from_le_bytes(self.array()?);
        match usize::try_from(n) {
            Ok(n) if n <= self.bytes.len() - self.at => Ok(n),
            _ => Err(FileError::Truncated(at)),
        }
    }

    /// Skips the zeros up to the next multiple of [`ALIGN`].
    fn pad(&mut self) -> Result<(), FileError> {
        let n = self.at.next_multiple_of(ALIGN) - self.at;
        self.take(n).map(drop)
    }

    fn column(&mut self, n: usize) -> Result<Column, FileError> {
        let at = self.at;
        match self.take(1)? {
            [4] => {
                self.pad()?;
                Ok(Column::Narrow(self.values(n)?))
            }
            [8] => {
                self.pad()?;
                Ok(Column::Wide(self.values(n)?))
            }
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    /// `n` values: in place in the shared bytes when there are some, else copied.
    fn values<T: Plain>(&mut self, n: usize) -> Result<Store<T>, FileError> {
        let at = self.at;
        let len = n.checked_mul(T::WIDTH).ok_or(FileError::Truncated(at))?;
        let raw = self.take(len)?;
        let store = match self.shared {
            // SAFETY: `shared` is only set by `Tables::read_in_place`, whose
            // caller promises what `Store::in_place` needs of the bytes.
            Some((bytes, offset)) => unsafe { Store::in_place(bytes, offset + at, n) },
            None => Store::copied(raw, n),
        };
        let store = store.ok_or(FileError::Truncated(at))?;
        (self.done)(self.at);
        Ok(store)
    }

    fn domains(&mut self, n: usize) -> Result<Store<u16>, FileError> {
        let at = self.at;
        match self.take(1)? {
            [0] => Ok(Store::default()),
            [2] => {
                self.pad()?;
                self.values(n)
            }
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    fn trie(&mut self) -> Result<Backtraces, FileError> {
        let at = self.at;
        let n = self.u32()? as usize;
        if n == 0 || n.saturating_mul(12) > self.bytes.len() {
            return Err(FileError::Inconsistent(at));
        }
        let mut t = Backtraces::new();
        for _ in 1..n {
            let at = self.at;
            let parent = BacktraceId(self.u32()?);
            let code = LocationCode::new(self.i64()?);
            t.push_child(parent, code)
                .ok_or(FileError::Inconsistent(at))?;
        }
        Ok(t)
    }

    fn name(&mut self) -> Result<Name, FileError> {
        let n = self.u32()? as usize;
        Ok(Name::new(self.take(n)?))
    }

    fn locations(&mut self) -> Result<LocationTable, FileError> {
        let n = self.u32()? as usize;
        let mut codes = Vec::with_capacity(n.min(self.bytes.len() / 9));
        for _ in 0..n {
            let code = LocationCode::new(self.i64()?);
            let count = self.take(1)?[0];
            let mut locs = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let (line, start_char, end_char) = (self.u32()?, self.u32()?, self.u32()?);
                let filename = self.name()?;
                let defname = self.name()?;
                locs.push(Location {
                    filename,
                    line,
                    start_char,
                    end_char,
                    defname,
                });
            }
            codes.push((code, locs));
        }
        Ok(codes.into_iter().collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Filter;
    use crate::query::{FlameQuery, SiteSpec, TopQuery};
    use crate::render::TraceFile;
    use crate::report::GroupBy;
    use crate::symbols::FrameLabel;
    use tracekit_memtrace::Reader;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    fn tables(bytes: &[u8]) -> Tables {
        let mut reader = Reader::from_bytes(bytes).unwrap();
        Tables::build(&mut reader, &mut |_| {})
    }

    /// What the tables answer: the top sites by backtrace and the flame graph's stacks.
    fn answers(t: &Tables) -> (serde_json::Value, serde_json::Value) {
        let top = TopQuery {
            by: GroupBy::Backtrace,
            limit: 0,
            at: None,
            peak: true,
            sites: SiteSpec::default(),
            filter: Filter::default(),
        };
        let file = TraceFile::new("t", t.info());
        let top = top.run(&mut &*t, &mut |_, _| {}).unwrap().json(&file);
        let flame = FlameQuery {
            at: None,
            peak: false,
            live_end: true,
            frames: FrameLabel::Location,
            samples: false,
            collapse_recursion: false,
            no_collapse_recursion: false,
            naming: Default::default(),
            hide: Vec::new(),
            hide_function: Vec::new(),
            count_objects: false,
            filter: Filter::default(),
        };
        let flame = flame.run(&mut &*t, &mut |_, _| {}).unwrap();
        (
            serde_json::to_value(top).unwrap(),
            serde_json::to_value(flame.json()).unwrap(),
        )
    }

    #[test]
    fn tables_read_back_answer_as_the_tables_written() {
        let config = SynthConfig {
            allocs: 5_000,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let t = tables(&bytes);
        let mut file = Vec::new();
        t.write_to(&mut file).unwrap();
        let back = Tables::read_from(&file, t.info().clone(), t.size_bytes).unwrap();
        assert_eq!(answers(&back), answers(&t));
        assert_eq!(back.column_bytes(), t.column_bytes());
        let mut again = Vec::new();
        back.write_to(&mut again).unwrap();
        assert_eq!(again, file, "written again, byte for byte");

        // In place, after a key of 16 bytes as a cache file has.
        let mut keyed = vec![b'k'; 16];
        keyed.extend_from_slice(&file);
        let shared: Shared = std::sync::Arc::new(keyed);
        let mut done = Vec::new();
        // SAFETY: a vector's bytes, never changed.
        let placed = unsafe {
            Tables::read_in_place(shared, 16, t.info().clone(), t.size_bytes, &mut |at| {
                done.push(at)
            })
        }
        .unwrap();
        // Each section read is said once, in order, within the file.
        assert!(done.len() >= 8, "{done:?}");
        assert!(done.windows(2).all(|w| w[0] <= w[1]) && done.iter().all(|&at| at <= file.len()));
        assert_eq!(answers(&placed), answers(&t));
        if cfg!(target_endian = "little") {
            assert_eq!(placed.column_bytes(), 0, "every column in place");
        }
        let copy = placed.clone();
        drop(placed);
        let mut again = Vec::new();
        copy.write_to(&mut again).unwrap();
        assert_eq!(again, file, "written again from the bytes in place");
    }

    fn small_trace() -> Vec<u8> {
        let config = SynthConfig {
            allocs: 300,
            ..SynthConfig::default()
        };
        write_synthetic(Vec::new(), &config).unwrap()
    }

    #[test]
    fn bad_bytes_are_an_error_with_an_offset_never_a_panic() {
        let bytes = small_trace();
        let t = tables(&bytes);
        let mut file = Vec::new();
        t.write_to(&mut file).unwrap();
        let info = t.info().clone();
        assert_eq!(
            Tables::read_from(b"nope", info.clone(), 0).err(),
            Some(FileError::Truncated(0))
        );
        assert_eq!(
            Tables::read_from(&file[..100], info.clone(), 0)
                .err()
                .map(|e| matches!(e, FileError::Truncated(_))),
            Some(true)
        );
        // Every byte changed in turn: an error or tables, never a panic.
        for i in 0..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x5a;
            let _ = Tables::read_from(&bad, info.clone(), 0);
        }
        let mut longer = file.clone();
        longer.push(0);
        assert!(matches!(
            Tables::read_from(&longer, info, 0),
            Err(FileError::Inconsistent(_))
        ));
    }

    #[test]
    fn the_tables_of_a_damaged_trace_are_not_written() {
        let bytes = small_trace();
        let cut = [&bytes[..], &[0xc1, 0x1f, 0xfc, 0xc1, 0, 0]].concat();
        let t = tables(&cut);
        assert!(t.error().is_some());
        let e = t.write_to(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
