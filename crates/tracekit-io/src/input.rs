//! Where inputs come from: files (memory-mapped when large) or `-` for standard
//! input, and what kind of file an input is, so that a command given the wrong
//! kind says so instead of reading it as data.
//!
//! | first bytes | kind |
//! |---|---|
//! | (none) | empty |
//! | `10 00 04 46 78 54 16 00` (the FXT magic record), or records that frame as FXT | FXT |
//! | `c1 1f fc c1` (a CTF packet's magic, little-endian) | memtrace |
//! | `PERFILE2` (or `2ELIFREP`, big-endian) | perf.data |
//! | `1f 8b` | gzip |
//! | `89 PNG 0d 0a 1a 0a` | PNG |
//! | `7f ELF` | ELF |
//! | no NUL byte, under 1% control characters | text |

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::{Error, Result};

/// What the first bytes of an input say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No bytes at all.
    Empty,
    /// A Fuchsia trace: starts with the magic number record (or with records that
    /// frame as FXT, from a writer that omits it).
    Fxt,
    /// A memtrace trace: starts with a CTF packet.
    Memtrace,
    /// A `perf record` output file.
    PerfData,
    /// gzip-compressed data.
    Gzip,
    /// A PNG image.
    Png,
    /// An ELF executable or library.
    Elf,
    /// Text (no NUL bytes and few control characters in what was looked at).
    Text,
    /// Anything else.
    Binary,
}

/// Bytes enough to tell the kinds apart.
pub const SNIFF_BYTES: usize = 4096;

/// The kind of an input whose first bytes are `head`.
pub fn sniff(head: &[u8]) -> Kind {
    if head.is_empty() {
        return Kind::Empty;
    }
    if head.starts_with(&tracekit_fxt::format::MAGIC.to_le_bytes()) {
        return Kind::Fxt;
    }
    if tracekit_memtrace::starts_like_a_trace(head) {
        return Kind::Memtrace;
    }
    if head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP") {
        return Kind::PerfData;
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Kind::Gzip;
    }
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Kind::Png;
    }
    if head.starts_with(b"\x7fELF") {
        return Kind::Elf;
    }
    if looks_like_text(head) {
        return Kind::Text;
    }
    // Some writers omit the magic number record; the reader then says so.
    if tracekit_fxt::read::looks_like_fxt(head) {
        return Kind::Fxt;
    }
    Kind::Binary
}

/// Text as `perf script` writes it: no NUL bytes and almost no control
/// characters. Invalid UTF-8 is allowed (symbol names are bytes).
fn looks_like_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    let control = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
        .count();
    control * 100 <= head.len()
}

/// Which command family is reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `tracekit memtrace`.
    Memtrace,
    /// `tracekit fxt`.
    Fxt,
    /// `tracekit perf decode`.
    Perf,
    /// `tracekit export` and `tracekit sql`: memtrace, FXT and perf.data.
    Export,
    /// `tracekit view`: memtrace, FXT, perf.data and `perf script` text.
    View,
}

/// What `kind` is, for an error message (`None` when it says nothing useful).
fn describe(kind: Kind) -> &'static str {
    match kind {
        Kind::Empty => "it is empty",
        Kind::Fxt => "it is an FXT trace: use `tracekit fxt`",
        Kind::Memtrace => "it is a memtrace trace: use `tracekit memtrace`",
        Kind::PerfData => "it is a perf.data file: use `tracekit perf decode`",
        Kind::Gzip => "it is gzip-compressed: decompress it first (`gunzip -k`)",
        Kind::Png => "it is a PNG image",
        Kind::Elf => "it is an executable or library",
        Kind::Text => "it is text",
        Kind::Binary => "its first bytes match no format tracekit knows",
    }
}

/// Fails unless `kind` is something `family` reads; the error names the file and
/// says what it is instead.
pub fn expect(family: Family, kind: Kind, name: &str) -> Result<()> {
    let ok = match family {
        Family::Memtrace => kind == Kind::Memtrace,
        Family::Fxt => kind == Kind::Fxt,
        Family::Perf => matches!(kind, Kind::PerfData | Kind::Text),
        Family::Export => matches!(kind, Kind::Memtrace | Kind::Fxt | Kind::PerfData),
        Family::View => matches!(
            kind,
            Kind::Memtrace | Kind::Fxt | Kind::PerfData | Kind::Text
        ),
    };
    if ok {
        return Ok(());
    }
    let expected = match family {
        Family::Memtrace => "not a memtrace trace (no CTF packet header)",
        Family::Fxt => "not an FXT file (no magic record)",
        Family::Perf => "not `perf script` text or a perf.data file",
        Family::Export => "not a memtrace trace, an FXT trace or a perf.data file",
        Family::View => {
            "not a memtrace trace, an FXT trace, a perf.data file or `perf script` text"
        }
    };
    Err(Error::WrongKind {
        name: name.to_string(),
        expected,
        found: describe(kind),
    })
}

/// The name of an input in messages.
pub fn display(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// Whether `path` means standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Opens a file for reading; the error names it, and a folder is refused.
pub fn open_file(path: &Path) -> Result<File> {
    let open = |source| Error::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(open)?;
    let meta = file.metadata().map_err(open)?;
    if meta.is_dir() {
        return Err(Error::Directory(path.to_path_buf()));
    }
    Ok(file)
}

/// An input stream with its first bytes already read (to tell its kind) and
/// still to be returned.
pub struct Peeked<R> {
    head: Vec<u8>,
    pos: usize,
    rest: R,
}

impl<R: Read> Peeked<R> {
    /// Reads up to [`SNIFF_BYTES`] of `rest` (fewer at its end).
    pub fn new(mut rest: R, name: &str) -> Result<Peeked<R>> {
        let mut head = vec![0; SNIFF_BYTES];
        let mut n = 0;
        while n < head.len() {
            match rest.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Read {
                        name: name.to_string(),
                        source,
                    });
                }
            }
        }
        head.truncate(n);
        Ok(Peeked { head, pos: 0, rest })
    }

    /// The input's kind.
    pub fn kind(&self) -> Kind {
        sniff(&self.head)
    }
}

impl<R: Read> Read for Peeked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.head.len() {
            let n = buf.len().min(self.head.len() - self.pos);
            buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.rest.read(buf)
    }
}

/// An input opened as a stream: standard input or a file, its kind checked
/// against `family`.
pub fn open_stream(path: &Path, family: Family) -> Result<Peeked<Box<dyn Read + Send>>> {
    let name = display(path);
    let inner: Box<dyn Read + Send> = if is_stdin(path) {
        Box::new(io::stdin())
    } else {
        Box::new(open_file(path)?)
    };
    let peeked = Peeked::new(inner, &name)?;
    expect(family, peeked.kind(), &name)?;
    Ok(peeked)
}

/// A whole input in memory: mapped when it is a large file, read otherwise.
pub enum Bytes {
    /// A memory-mapped file.
    Mapped(memmap2::Mmap),
    /// Bytes read.
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Bytes {
    /// Tells the system that the bytes in `range` will not be read again soon,
    /// so that a mapped file's pages there stop counting in the process's
    /// memory: a pass over a trace larger than memory otherwise ends with the
    /// whole file resident. The bytes stay readable (a later read maps them
    /// again, from the page cache). Only whole pages inside `range` are
    /// released; bytes read into memory are kept.
    pub fn release(&self, range: std::ops::Range<usize>) {
        let Bytes::Mapped(map) = self else { return };
        const PAGE: usize = 4096;
        let start = range.start.next_multiple_of(PAGE);
        let end = range.end.min(map.len()) / PAGE * PAGE;
        if start >= end {
            return;
        }
        // SAFETY: the map is a read-only shared mapping of a file (`Mmap::map`),
        // for which MADV_DONTNEED only drops the process's page-table entries:
        // a later access maps the file's bytes again, the same bytes as long as
        // the file does not change, which mapping it already requires (see
        // `file_bytes`). So the borrows of the mapping stay valid. The range is
        // within the map. A failure only means the pages stay resident.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// The bytes of an open file `name`: mapped when it is a large regular file, read
/// otherwise.
pub fn file_bytes(file: &File, name: &str) -> Result<Bytes> {
    let read = |source| Error::Read {
        name: name.to_string(),
        source,
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    if len < (1 << 20) || !regular {
        let mut v = Vec::with_capacity(len as usize);
        (&mut &*file).read_to_end(&mut v).map_err(read)?;
        return Ok(Bytes::Owned(v));
    }
    // SAFETY: `Mmap::map` requires that the file not change while it is
    // mapped, which nothing can enforce: tracekit never writes its inputs,
    // and takes it that nothing else does while it reads them (as any
    // mmap-based tool does). Broken, this is not a decoding error: a file
    // truncated meanwhile kills the process with SIGBUS at the first page
    // read past its new end, and bytes changed under the `&[u8]` the
    // readers hold are undefined behaviour. Files under 1 MiB and what is
    // not a regular file (pipes, standard input) are read instead.
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(read)?;
    Ok(Bytes::Mapped(map))
}

/// Reads a whole input (a file, or `-`), its kind checked against `family`.
pub fn read_all(path: &Path, family: Family) -> Result<Bytes> {
    read_all_sniffed(path, family).map(|(bytes, _)| bytes)
}

/// [`read_all`], with the kind the input was sniffed as, for a family of several.
pub fn read_all_sniffed(path: &Path, family: Family) -> Result<(Bytes, Kind)> {
    let name = display(path);
    let read = |source| Error::Read {
        name: name.clone(),
        source,
    };
    let bytes = if is_stdin(path) {
        let mut v = Vec::new();
        io::stdin().lock().read_to_end(&mut v).map_err(read)?;
        Bytes::Owned(v)
    } else {
        file_bytes(&open_file(path)?, &name)?
    };
    let kind = sniff(&bytes[..bytes.len().min(SNIFF_BYTES)]);
    expect(family, kind, &name)?;
    Ok((bytes, kind))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Resident KiB of the mapping that starts at `addr`, from /proc/self/smaps.
    #[cfg(target_os = "linux")]
    fn resident_kib(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let start = line.split('-').next().unwrap_or("");
            if usize::from_str_radix(start, 16) == Ok(addr) {
                for l in lines.by_ref() {
                    if let Some(kb) = l.strip_prefix("Rss:") {
                        return kb.trim().trim_end_matches(" kB").parse().unwrap();
                    }
                }
            }
        }
        panic!("no mapping at {addr:#x}")
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn released_pages_leave_the_process_and_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let bytes = file_bytes(&File::open(&path).unwrap(), "t.bin").unwrap();
        assert!(matches!(bytes, Bytes::Mapped(_)));
        let addr = bytes.as_ptr() as usize;
        assert_eq!(&bytes[..], &data[..]);
        assert!(resident_kib(addr) >= 8 << 10, "{} KiB", resident_kib(addr));
        // Not page-aligned ends: only the whole pages inside go.
        bytes.release(100..(6 << 20) + 100);
        let left = resident_kib(addr);
        assert!(left <= (2 << 10) + 8, "{left} KiB still resident");
        assert_eq!(&bytes[..], &data[..]);
        bytes.release(0..usize::MAX);
        // Bytes read into memory are kept as they are.
        let owned = Bytes::Owned(data.clone());
        owned.release(0..data.len());
        assert_eq!(&owned[..], &data[..]);
    }

    #[test]
    fn kinds() {
        assert_eq!(sniff(b""), Kind::Empty);
        assert_eq!(sniff(&0x0016_5478_4604_0010u64.to_le_bytes()), Kind::Fxt);
        assert_eq!(sniff(&[0xc1, 0x1f, 0xfc, 0xc1, 0, 0]), Kind::Memtrace);
        assert_eq!(sniff(b"PERFILE2\x68\0\0\0"), Kind::PerfData);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Kind::Png);
        assert_eq!(sniff(b"\x1f\x8b\x08"), Kind::Gzip);
        assert_eq!(sniff(b"\x7fELF\x02"), Kind::Elf);
        assert_eq!(sniff("prog 123/456 1.5: ... é".as_bytes()), Kind::Text);
        // Bytes that are not UTF-8 (a symbol name) in text are still text.
        assert_eq!(sniff(b"hello\n\xff\xfe\n"), Kind::Text);
        assert_eq!(sniff(b"a\0b"), Kind::Binary);
        assert_eq!(sniff(&[0x01, 0x02, 0x03, 0x41]), Kind::Binary);
    }

    #[test]
    fn messages_name_the_file_and_the_kind() {
        let e = expect(Family::Fxt, Kind::Memtrace, "x.ctf").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.ctf: not an FXT file (no magic record); it is a memtrace trace: use `tracekit memtrace`"
        );
        assert!(expect(Family::Perf, Kind::Text, "p").is_ok());
        assert!(expect(Family::Perf, Kind::Png, "p").is_err());
        assert!(expect(Family::Memtrace, Kind::Empty, "e").is_err());
    }

    /// A large regular file is mapped, not read into memory (a multi-GB
    /// trace would not fit); a small one is read.
    #[test]
    fn large_files_are_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let mut trace_like = vec![0xc1, 0x1f, 0xfc, 0xc1, 0, 0];
        let small = dir.path().join("small.ctf");
        std::fs::write(&small, &trace_like).unwrap();
        trace_like.resize(1 << 20, 0);
        let large = dir.path().join("large.ctf");
        std::fs::write(&large, &trace_like).unwrap();
        let bytes = read_all(&large, Family::Memtrace).unwrap();
        assert!(matches!(bytes, Bytes::Mapped(_)));
        assert_eq!(bytes.as_ref(), &trace_like[..]);
        let bytes = read_all(&small, Family::Memtrace).unwrap();
        assert!(matches!(bytes, Bytes::Owned(_)));
        assert_eq!(bytes.as_ref(), &trace_like[..6]);
    }

    #[test]
    fn peeked_returns_every_byte() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut p = Peeked::new(&data[..], "t").unwrap();
        assert_eq!(p.head.len(), SNIFF_BYTES);
        let mut all = Vec::new();
        p.read_to_end(&mut all).unwrap();
        assert_eq!(all, data);
    }
}
