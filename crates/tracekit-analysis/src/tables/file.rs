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
//! | 8 | magic `TKTABLE` and the format version (7) |
//! | 8 | the time of the last event (µs, signed) |
//! | 8 each | events, allocations, promotes and collects |
//! | 8 | allocations that reused the id of a live object |
//! | events | the kind of each event: 0 alloc, 1 promote, 2 collect |
//! | column | per allocation: time |
//! | column | object id; or, when each is the first's plus the allocation's ordinal, a width byte of 0, the zeros, and the first (8) |
//! | domains | domain |
//! | column | length (words) |
//! | column | samples |
//! | allocations | source: 0 minor, 1 major, 2 external |
//! | 4 × allocations | node in the backtrace trie |
//! | 4 × allocations | node in the trie of sites |
//! | column | end (if never collected: `u32::MAX` at a width of 4, [`NEVER`](super::NEVER) at 8) |
//! | column | per promote or collect: time |
//! | column | 1 + the ordinal of the allocation whose object it is, 0 if none |
//! | domains | domain |
//! | trie | the backtrace trie: 4 bytes of node count, then per node, the root first, its parent (4 each), its location code (8 each) and its depth (4 each), each array after zeros to a multiple of 8 |
//! | trie | the trie of sites, the same way |
//! | 4 | location codes, then per code: the code (8), its location count (1), per location its line, first and last column (4 each), file name and function name (4 bytes of length, then the bytes) |
//!
//! Tables of a damaged trace, or of one whose packets were skipped, are not
//! written: reading them back would lose the damage. Reading checks every
//! count, width and id against the rest, so a file that is not what it says
//! is an error with its offset, never tables that answer wrongly.

use std::io::{self, Write};

use tracekit_columns::{Cursor, LeWriter, Plain, Shared, Store};
use tracekit_memtrace::{Info, Location, LocationCode, LocationTable, Name, Timedelta};

use super::{Column, Objects, Tables};
use crate::backtrace::{BacktraceId, Backtraces};

pub use tracekit_columns::FileError;

const MAGIC: &[u8; 8] = &{
    let mut magic = *b"TKTABLE\0";
    magic[7] = Tables::FILE_VERSION;
    magic
};

/// The format's name in [`FileError::Magic`].
const FORMAT: &str = "trace tables";

impl Tables {
    /// The version of the format [`Tables::write_to`] writes, the last byte of
    /// its magic.
    pub const FILE_VERSION: u8 = 7;

    /// Writes the tables in the format of the module docs. Tables of a damaged
    /// trace are refused ([`FileError::Damaged`] as `io::ErrorKind::InvalidInput`).
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.error.is_some() || !self.warnings.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                FileError::Damaged("the tables are"),
            ));
        }
        let out = &mut LeWriter::new(out);
        out.write_all(MAGIC)?;
        out.i64(self.end.as_micros())?;
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
            out.u64(n as u64)?;
        }
        out.u64(self.duplicates)?;
        out.pad()?;
        out.write_all(&self.kind)?;
        write_column(out, &self.time)?;
        write_objects(out, &self.object)?;
        write_domains(out, &self.domain)?;
        write_column(out, &self.length)?;
        write_column(out, &self.samples)?;
        out.pad()?;
        out.write_all(&self.source)?;
        write_u32s(out, &self.backtrace)?;
        write_u32s(out, &self.site)?;
        write_column(out, &self.ended.0)?;
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
        Tables::read(Cursor::new(bytes), info, size_bytes, &mut |_| {})
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
        // SAFETY: this function's contract is `Cursor::in_place`'s.
        let r = unsafe { Cursor::in_place(&bytes, offset) }?;
        Tables::read(r, info, size_bytes, done)
    }

    /// Reads the tables at `r`.
    fn read(
        r: Cursor<'_>,
        info: Info,
        size_bytes: u64,
        done: &mut dyn FnMut(usize),
    ) -> Result<Tables, FileError> {
        let mut r = Reading { r, done };
        if r.r.take(8)? != MAGIC {
            return Err(FileError::Magic(FORMAT));
        }
        let end = Timedelta::from_micros(r.r.i64()?);
        let events = r.r.count64(1)?;
        let allocs = r.r.count64(1)?;
        let promotes = r.r.count64(1)?;
        let collects = r.r.count64(1)?;
        let others = promotes.checked_add(collects).ok_or(r.r.bad())?;
        if allocs.checked_add(others) != Some(events) {
            return Err(r.r.bad());
        }
        let duplicates = r.r.u64()?;
        r.r.pad()?;
        let at = r.r.at();
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
        let object = r.objects(allocs)?;
        let domain = r.domains(allocs)?;
        let length = r.column(allocs)?;
        let samples = r.column(allocs)?;
        r.r.pad()?;
        let at = r.r.at();
        let source: Store<u8> = r.values(allocs)?;
        if source.iter().any(|&s| s > 2) {
            return Err(FileError::Inconsistent(at));
        }
        r.r.pad()?;
        let backtrace: Store<u32> = r.values(allocs)?;
        r.r.pad()?;
        let site: Store<u32> = r.values(allocs)?;
        let ended = super::Ends(r.column(allocs)?);
        let other_time = r.column(others)?;
        let at = r.r.at();
        let other_target = r.column(others)?;
        if (0..others).any(|i| other_target.get(i) > allocs as u64) {
            return Err(FileError::Inconsistent(at));
        }
        let other_domain = r.domains(others)?;
        let (at, backtraces) = (r.r.at(), trie(&mut r)?);
        if backtrace.iter().any(|&b| b as usize >= backtraces.len()) {
            return Err(FileError::Inconsistent(at));
        }
        let (at, sites) = (r.r.at(), trie(&mut r)?);
        if site.iter().any(|&b| b as usize >= sites.len()) {
            return Err(FileError::Inconsistent(at));
        }
        let locations = locations(&mut r.r)?;
        r.r.finish()?;
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
            scan: super::scan::Scan::default(),
            other_target,
            duplicates,
            other_domain,
            end,
            warnings: Vec::new(),
            error: None,
        })
    }
}

fn write_column(out: &mut LeWriter<'_>, c: &Column) -> io::Result<()> {
    match c {
        Column::Narrow(v) => {
            out.u8(4)?;
            out.pad()?;
            out.values(v.iter().map(|x| x.to_le_bytes()))
        }
        Column::Wide(v) => {
            out.u8(8)?;
            out.pad()?;
            out.values(v.iter().map(|x| x.to_le_bytes()))
        }
    }
}

/// Object ids: a column, or, when each is the first's plus its ordinal, a
/// width byte of 0 and (after the zeros) the first.
fn write_objects(out: &mut LeWriter<'_>, o: &Objects) -> io::Result<()> {
    match o {
        Objects::Ids(ids) => write_column(out, ids),
        Objects::Ordinals { first, .. } => {
            out.u8(0)?;
            out.pad()?;
            out.u64(*first)
        }
    }
}

fn write_u32s(out: &mut LeWriter<'_>, v: &[u32]) -> io::Result<()> {
    out.pad()?;
    out.values(v.iter().map(|x| x.to_le_bytes()))
}

/// A domain column: none when every value is 0.
fn write_domains(out: &mut LeWriter<'_>, v: &[u16]) -> io::Result<()> {
    if v.is_empty() {
        return out.u8(0);
    }
    out.u8(2)?;
    out.pad()?;
    out.values(v.iter().map(|x| x.to_le_bytes()))
}

/// A trie as columns, so that it is read back where it is
/// ([`Backtraces::from_columns`]).
fn write_trie(out: &mut LeWriter<'_>, t: &Backtraces) -> io::Result<()> {
    let ids = || (0..t.len()).map(|i| BacktraceId(i as u32));
    out.u32(t.len() as u32)?;
    out.pad()?;
    out.values(ids().map(|id| t.parent(id).0.to_le_bytes()))?;
    out.pad()?;
    out.values(ids().map(|id| t.leaf(id).map_or(0, |c| c.get() as u64).to_le_bytes()))?;
    out.pad()?;
    out.values(ids().map(|id| (t.depth(id) as u32).to_le_bytes()))
}

fn write_locations(out: &mut LeWriter<'_>, t: &LocationTable) -> io::Result<()> {
    let mut codes: Vec<(LocationCode, &[Location])> = t.iter().collect();
    codes.sort_unstable_by_key(|(c, _)| c.get());
    out.u32(codes.len() as u32)?;
    for (code, locs) in codes {
        // Checked before any byte of the code is written.
        let n =
            u8::try_from(locs.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        out.i64(code.get())?;
        out.u8(n)?;
        for l in locs {
            for v in [l.line, l.start_char, l.end_char] {
                out.u32(v)?;
            }
            out.str32(l.filename.as_bytes())?;
            out.str32(l.defname.as_bytes())?;
        }
    }
    Ok(())
}

/// The cursor over the tables being read, and who hears how far it has come.
struct Reading<'a, 'd> {
    r: Cursor<'a>,
    /// Told how far the reading has come after each column.
    done: &'d mut dyn FnMut(usize),
}

impl Reading<'_, '_> {
    /// `n` values, in place when the cursor reads shared bytes.
    fn values<T: Plain>(&mut self, n: usize) -> Result<Store<T>, FileError> {
        let store = self.r.values(n)?;
        (self.done)(self.r.at());
        Ok(store)
    }

    fn column(&mut self, n: usize) -> Result<Column, FileError> {
        let at = self.r.at();
        let width = self.r.u8()?;
        self.column_of(width, at, n)
    }

    /// The rest of a column whose width byte, at `at`, was `width`.
    fn column_of(&mut self, width: u8, at: usize, n: usize) -> Result<Column, FileError> {
        match width {
            4 => {
                self.r.pad()?;
                Ok(Column::Narrow(self.values(n)?))
            }
            8 => {
                self.r.pad()?;
                Ok(Column::Wide(self.values(n)?))
            }
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    /// The object ids of `n` allocations (`write_objects`).
    fn objects(&mut self, n: usize) -> Result<Objects, FileError> {
        let at = self.r.at();
        match self.r.u8()? {
            0 => {
                self.r.pad()?;
                Ok(Objects::Ordinals {
                    first: self.r.u64()?,
                    count: n,
                })
            }
            width => Ok(Objects::Ids(self.column_of(width, at, n)?)),
        }
    }

    fn domains(&mut self, n: usize) -> Result<Store<u16>, FileError> {
        let at = self.r.at();
        match self.r.u8()? {
            0 => Ok(Store::default()),
            2 => {
                self.r.pad()?;
                self.values(n)
            }
            _ => Err(FileError::Inconsistent(at)),
        }
    }
}

/// A trie written by `write_trie`, its columns in place when `r` reads shared
/// bytes.
fn trie(r: &mut Reading<'_, '_>) -> Result<Backtraces, FileError> {
    let at = r.r.at();
    let n = r.r.u32()? as usize;
    r.r.pad()?;
    let parent = r.values(n)?;
    r.r.pad()?;
    let code = r.values(n)?;
    r.r.pad()?;
    let depth = r.values(n)?;
    Backtraces::from_columns(parent, code, depth).ok_or(FileError::Inconsistent(at))
}

fn name(r: &mut Cursor<'_>) -> Result<Name, FileError> {
    let n = r.u32()? as usize;
    Ok(Name::new(r.take(n)?))
}

fn locations(r: &mut Cursor<'_>) -> Result<LocationTable, FileError> {
    let n = r.u32()? as usize;
    let mut codes = Vec::with_capacity(n.min((r.left() + r.at()) / 9));
    for _ in 0..n {
        let code = LocationCode::new(r.i64()?);
        let count = r.u8()?;
        let mut locs = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let (line, start_char, end_char) = (r.u32()?, r.u32()?, r.u32()?);
            let filename = name(r)?;
            let defname = name(r)?;
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
            growing: false,
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
