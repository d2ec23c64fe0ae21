//! perf.data read directly, without `perf script`: sampled call stacks with their
//! threads, symbolized here.
//!
//! A perf.data file is a header, the attributes of each recorded event (what a
//! sample record holds: `sample_type`; the sampling frequency or period) and a
//! stream of records, which `linux-perf-data` reads and puts in time order (perf
//! writes them per CPU, sorted only within a "round"). The records used here:
//!
//! | record | what it gives |
//! |---|---|
//! | `MMAP`, `MMAP2` | a file mapped into a process (pid; `-1` for the kernel): address range, file offset, path |
//! | `COMM` | a thread's command name (`exec` also drops the process's mappings) |
//! | `FORK` | a new thread or process; a new process inherits its parent's mappings and name |
//! | `SAMPLE` | pid, tid, time, and the stack: a call chain of addresses, and with `--call-graph dwarf` the user registers and a copy of the user stack |
//! | `LOST` | samples the kernel dropped (counted, and reported) |
//!
//! A call chain holds context markers (`PERF_CONTEXT_KERNEL`, `PERF_CONTEXT_USER`,
//! values at or above `PERF_CONTEXT_MAX`) before the addresses of each context; the
//! first address is where the sample hit, the others are return addresses. With
//! DWARF recordings the user part is not in the call chain: the copied stack is
//! unwound here with `framehop`, from each module's `.eh_frame` (and
//! `.eh_frame_hdr`, `.debug_frame`), falling back to frame pointers.
//!
//! Each address is mapped to its object through the process's mappings, to the
//! object's own address through its `PT_LOAD` headers, and named by
//! `tracekit-symbols` (DWARF with inlined frames, the symbol table, separate debug
//! files); a return address is looked up one byte back, on the call instruction.
//! Kernel addresses are named from `/proc/kallsyms` when the call chain has any and
//! the file is readable. What cannot be named keeps its object (`[unknown]` in it)
//! or is `[unknown]`, as `perf script` prints it.
//!
//! A damaged file is an [`Error::PerfData`] with the offset where it was found,
//! never a panic or an allocation the file does not justify: what `linux-perf-data`
//! would trust without checking (section offsets and sizes, counts of events and
//! IDs, an `AUXTRACE` record's length, a call chain's length, a build id's) is
//! checked here before it reads it. Files named by the recording are read only
//! when they are regular files.

use rustc_hash::FxHashMap as HashMap;
use std::cell::Cell;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use linux_perf_data::linux_perf_event_reader::{
    Endianness, EventRecord, PerfEventType, RawEventRecord, ReadFormat, RecordType, SampleFormat,
    SampleRecord, SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use object::{Object, ObjectSection};
use tracekit_callstack::event::{
    Address, Event, Location, Sample, SampleData, Symbol, Thread, Time,
};
use tracekit_symbols::{DebugDirs, Kallsyms, ObjectSymbols};

use crate::{Error, Result};

/// Call-chain values at or above this are context markers, not addresses.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// The marker before kernel addresses.
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// The marker before user addresses.
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// perf's register numbers on x86_64 (`arch/x86/include/uapi/asm/perf_regs.h`).
const PERF_REG_X86_BP: u64 = 6;
const PERF_REG_X86_SP: u64 = 7;
const PERF_REG_X86_IP: u64 = 8;
/// An `MMAP2` record with a build id where the device and inode would be.
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// How a recording is read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Where separate debug files are looked for.
    pub debug_dirs: DebugDirs,
    /// Name kernel addresses from `/proc/kallsyms`.
    pub kernel_symbols: bool,
}

/// What a read found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes of the file.
    pub bytes: u64,
    /// Records read.
    pub records: u64,
    /// Samples handed on.
    pub samples: u64,
    /// Samples the kernel reported lost (`LOST` records).
    pub lost: u64,
    /// Samples without a timestamp (recorded without `--timestamp`), skipped.
    pub untimed: u64,
    /// Samples whose user stack could not be unwound past its first frame.
    pub unwind_stopped: u64,
}

/// The recording's events, and its sampling period when it has one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordingInfo {
    /// Event names (`cpu-clock:u`, ...).
    pub events: Vec<String>,
    /// The period between samples of one running thread, in nanoseconds: from the
    /// frequency (`-F`), or the period of a clock event (`-c` with `cpu-clock`).
    pub period_ns: Option<u64>,
    /// Whether any event recorded user registers and stack (`--call-graph dwarf`).
    pub dwarf: bool,
    /// Whether any event is Intel PT (which this reader does not decode).
    pub intel_pt: bool,
}

/// A mapping of a process: `[start, end)` maps the object from `offset`.
#[derive(Clone, Copy, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    object: usize,
    /// Mapped executable: code whose unwinding information the unwinder needs.
    executable: bool,
}

/// The unwinding sections of an object, shared by every process that maps it.
type Sections = ExplicitModuleSectionInfo<Arc<[u8]>>;

struct ObjectEntry {
    path: Box<str>,
    /// Loaded on first use; `None` inside once that failed.
    symbols: Option<Option<ObjectSymbols>>,
    /// Read on first use for unwinding; `None` inside once that failed.
    sections: Option<Option<Sections>>,
}

#[derive(Default)]
struct Process {
    /// Sorted by start.
    mappings: Vec<Mapping>,
    unwinder: Option<UnwinderX86_64<Arc<[u8]>>>,
}

/// One frame of a sample before naming.
#[derive(Clone, Copy, Debug)]
struct RawFrame {
    address: u64,
    /// A return address (looked up one byte back).
    returns: bool,
    kernel: bool,
    /// Unwound here from the copied stack: shown at its lookup address, as perf
    /// shows what its own DWARF unwinder finds.
    unwound: bool,
}

/// A named frame: the interned name, and whether it is inlined into the next one out.
#[derive(Clone, Copy, Debug)]
struct Named {
    name: u32,
    inlined: bool,
}

/// How one raw frame was named.
#[derive(Clone, Copy, Debug)]
enum Naming {
    /// `frames[range]` of the cache, innermost first.
    Frames(u32, u32),
    /// In an object nothing names the address in.
    InObject(usize),
    Unknown,
}

/// The reader's state: processes, objects, names.
struct State {
    options: ReadOptions,
    processes: HashMap<i32, Process>,
    kernel: Vec<Mapping>,
    objects: Vec<ObjectEntry>,
    object_index: HashMap<Box<str>, usize>,
    comms: HashMap<i32, Box<str>>,
    kallsyms: Option<Option<Kallsyms>>,
    /// (object or `usize::MAX` for the kernel, lookup address) to its named frames
    /// and the file offset of the lookup address.
    cache: HashMap<(usize, u64), (Naming, u64)>,
    frames: Vec<Named>,
    names: Vec<Box<str>>,
    name_index: HashMap<Box<str>, u32>,
    unwind_cache: CacheX86_64,
    dwarf: bool,
}

/// A reader that counts what it has read, for error offsets, and once `watch` is
/// set follows the records it reads (see [`RecordWatch`]).
struct Counting<R> {
    inner: R,
    read: Rc<Cell<u64>>,
    watch: Rc<Cell<Option<RecordWatch>>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let at = self.read.get();
        let n = self.inner.read(buf)?;
        self.read.set(at.saturating_add(n as u64));
        if let Some(mut w) = self.watch.get() {
            let seen = w.see(at, buf.get(..n).unwrap_or(&[]));
            self.watch.set(Some(w));
            seen?;
        }
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let at = self.inner.seek(pos)?;
        self.read.set(at);
        Ok(at)
    }
}

/// `PERF_RECORD_AUXTRACE`.
const AUXTRACE: u32 = 71;

/// Follows the records of the data section as `linux-perf-data` reads them, one
/// after the other, to refuse an `AUXTRACE` record whose trace data would run past
/// the section: the reader sizes its buffer from that length before reading.
#[derive(Clone, Copy, Debug)]
struct RecordWatch {
    big_endian: bool,
    /// Where the next record starts.
    next: u64,
    /// Where the data section ends.
    end: u64,
    /// The next record's header, and an `AUXTRACE` record's data size after it.
    head: [u8; 16],
    have: usize,
    /// The `AUXTRACE` record refused: its offset and the data it claims.
    refused: Option<(u64, u64)>,
}

impl RecordWatch {
    /// Takes the `bytes` read at offset `at`; an error when they complete an
    /// `AUXTRACE` record that claims more data than the section holds.
    fn see(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        while self.next < self.end {
            // The header, then an AUXTRACE record's data size.
            let want = if self.have >= 8 && self.auxtrace() {
                16
            } else {
                8
            };
            while self.have < want {
                let Some(&b) = (self.next + self.have as u64)
                    .checked_sub(at)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| bytes.get(i))
                else {
                    return Ok(());
                };
                self.head[self.have] = b;
                self.have += 1;
            }
            if self.have == 8 && self.auxtrace() {
                continue;
            }
            let size = self.word(&self.head[6..8]);
            if size < 8 {
                // linux-perf-data refuses it: nothing more to follow.
                self.next = self.end;
                return Ok(());
            }
            let data = if self.have == 16 {
                self.word(&self.head[8..16])
            } else {
                0
            };
            let Some(next) = self
                .next
                .checked_add(size)
                .and_then(|n| n.checked_add(data))
                .filter(|&n| n <= self.end)
            else {
                self.refused = Some((self.next, data));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    self.refusal().unwrap_or_default(),
                ));
            };
            self.next = next;
            self.have = 0;
        }
        Ok(())
    }

    /// Why a record was refused, if one was.
    fn refusal(&self) -> Option<String> {
        let (at, data) = self.refused?;
        Some(format!(
            "the AUXTRACE record at byte {at} claims {data} bytes of trace data, past the data section's end at byte {}",
            self.end
        ))
    }

    /// Whether the header read is an `AUXTRACE` record's, long enough to hold the
    /// size of its data.
    fn auxtrace(&self) -> bool {
        self.word(&self.head[..4]) == u64::from(AUXTRACE) && self.word(&self.head[6..8]) >= 16
    }

    fn word(&self, b: &[u8]) -> u64 {
        int(b, self.big_endian)
    }
}

/// The unsigned integer in `b` (at most 8 bytes) of the file's byte order.
fn int(b: &[u8], big_endian: bool) -> u64 {
    let fold = |v: u64, &x: &u8| v << 8 | u64::from(x);
    if big_endian {
        b.iter().fold(0, fold)
    } else {
        b.iter().rev().fold(0, fold)
    }
}

/// The smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
const PERF_ATTR_SIZE_VER0: u64 = 64;
/// `HEADER_EVENT_DESC`, `HEADER_SIMPLEPERF_META_INFO`: feature sections that decide
/// where the event attributes are read from.
const FEATURE_EVENT_DESC: usize = 12;
const FEATURE_SIMPLEPERF_META_INFO: usize = 129;

/// Where a file's records are, as its header says.
#[derive(Clone, Copy, Debug)]
struct Layout {
    big_endian: bool,
    /// The data section: `[start, end)`.
    data: (u64, u64),
}

/// A fault found in a file's layout: the offset of the field at fault, and what
/// is wrong.
type Fault = (u64, String);

/// Checks what `linux-perf-data` would trust in the header of a perf.data file of
/// `len` bytes, before it reads it: it sizes buffers from the header's lengths and
/// counts before reading what they count (a damaged header would have it allocate
/// without bound), and adds and divides them unchecked (which panics). Every
/// section it reads must lie in the file, every count fit the bytes that hold it.
/// `None`: not a whole header with a perf.data magic, which it refuses by itself.
fn check_layout<R: Read + Seek>(
    reader: &mut R,
    len: u64,
) -> std::result::Result<Option<Layout>, Fault> {
    let mut header = [0u8; 104];
    if reader.seek(SeekFrom::Start(0)).is_err() || reader.read_exact(&mut header).is_err() {
        return Ok(None);
    }
    let big_endian = match &header[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Ok(None),
    };
    let field = |at: usize| int(&header[at..at + 8], big_endian);
    let section = |at: usize, what: &str| -> std::result::Result<(u64, u64), Fault> {
        let (offset, size) = (field(at), field(at + 8));
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok((offset, end)),
            _ => Err((
                at as u64,
                format!(
                    "the {what} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"
                ),
            )),
        }
    };
    let attrs = section(24, "attribute section")?;
    let data = section(40, "data section")?;
    let event_types = section(56, "event type section")?;
    let attr_size = field(16);
    if !(PERF_ATTR_SIZE_VER0..=len).contains(&attr_size) {
        return Err((
            16,
            format!(
                "an event attribute size of {attr_size} bytes (at least {PERF_ATTR_SIZE_VER0}, at most the file's {len})"
            ),
        ));
    }

    // The feature sections, listed after the data: one for each bit set.
    let features: Vec<usize> = (0..256)
        .filter(|&bit| field(72 + 8 * (bit / 64)) >> (bit % 64) & 1 == 1)
        .collect();
    let table = read_at(
        reader,
        data.1,
        16 * features.len() as u64,
        len,
        "the feature table",
    )?;
    let mut total = 0u64;
    let mut event_desc = None;
    let mut simpleperf = false;
    for (i, &feature) in features.iter().enumerate() {
        let at = data.1 + 16 * i as u64;
        let entry = &table[16 * i..16 * i + 16];
        let (offset, size) = (int(&entry[..8], big_endian), int(&entry[8..], big_endian));
        // The sections are read whole: together they fit the file.
        total = total.saturating_add(size);
        if offset.checked_add(size).is_none_or(|end| end > len) || total > len {
            return Err((
                at,
                format!(
                    "feature section {feature} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"
                ),
            ));
        }
        match feature {
            FEATURE_EVENT_DESC => event_desc = Some((offset, size)),
            FEATURE_SIMPLEPERF_META_INFO => simpleperf = true,
            _ => {}
        }
    }
    // Where the event attributes are read from, in linux-perf-data's order.
    let (at, events) = if let Some((offset, size)) = event_desc {
        let bytes = read_at(reader, offset, size, len, "the event descriptions")?;
        let events = check_event_desc(&bytes, big_endian).map_err(|(at, m)| (offset + at, m))?;
        (offset, events)
    } else if event_types.1 > event_types.0 {
        let events = (event_types.1 - event_types.0) / (attr_size + 16);
        check_events(events, 56)?;
        check_id_sections(reader, event_types, attr_size, len, big_endian)?;
        (56, events)
    } else if simpleperf {
        // Simpleperf's attribute size includes the section of IDs after each.
        let events = (attrs.1 - attrs.0) / attr_size;
        check_events(events, 24)?;
        check_id_sections(reader, attrs, attr_size - 16, len, big_endian)?;
        (24, events)
    } else {
        (24, (attrs.1 - attrs.0) / attr_size)
    };
    check_events(events, at)?;
    Ok(Some(Layout { big_endian, data }))
}

/// At most this many events (attributes) in a recording: linux-perf-data keeps
/// each (a few hundred bytes) and reads each with a seek of its own, which costs
/// a buffered file reader a refill. `perf record -e 'syscalls:*'` has about 700.
const MAX_EVENTS: u64 = 1 << 13;

/// `events` described by the field at `at`: within [`MAX_EVENTS`].
fn check_events(events: u64, at: u64) -> std::result::Result<(), Fault> {
    if events > MAX_EVENTS {
        return Err((
            at,
            format!("{events} events (at most {MAX_EVENTS} are read)"),
        ));
    }
    Ok(())
}

/// `size` bytes at `offset`, which lie in the file of `len` bytes.
fn read_at<R: Read + Seek>(
    reader: &mut R,
    offset: u64,
    size: u64,
    len: u64,
    what: &str,
) -> std::result::Result<Vec<u8>, Fault> {
    if offset.checked_add(size).is_none_or(|end| end > len) {
        return Err((
            offset,
            format!("{what} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"),
        ));
    }
    let mut bytes = vec![0; usize::try_from(size).map_err(|e| (offset, e.to_string()))?];
    reader
        .seek(SeekFrom::Start(offset))
        .and_then(|_| reader.read_exact(&mut bytes))
        .map_err(|e| (offset, format!("{what}: {e}")))?;
    Ok(bytes)
}

/// The `HEADER_EVENT_DESC` section: a count of events and an attribute size, then
/// for each event its attribute, a count of IDs, a name (length and bytes) and the
/// IDs. The counts and lengths must fit the section; a fault's offset is within it.
/// The count of events.
fn check_event_desc(bytes: &[u8], big_endian: bool) -> std::result::Result<u64, Fault> {
    // The offset `n` bytes after `at`, if the section goes that far.
    let skip = |at: usize, n: u64| {
        usize::try_from(n)
            .ok()
            .and_then(|n| at.checked_add(n))
            .filter(|&end| end <= bytes.len())
    };
    // The 4-byte count at `at`, and the offset after it.
    let count = |at: usize| Some((int(bytes.get(at..skip(at, 4)?)?, big_endian), at + 4));
    let fault = |at: usize, what: String| {
        (
            at as u64,
            format!(
                "{what} runs past the event descriptions' {} bytes",
                bytes.len()
            ),
        )
    };
    let (nr, at) = count(0).ok_or_else(|| fault(0, "the count of events".into()))?;
    let (attr_size, mut at) = count(at).ok_or_else(|| fault(at, "the attribute size".into()))?;
    for i in 0..nr {
        let entry = || {
            let (ids, next) = count(skip(at, attr_size)?)?;
            let (name, next) = count(next)?;
            skip(skip(next, name)?, ids * 8)
        };
        at = entry().ok_or_else(|| fault(at, format!("event description {i} of {nr}")))?;
    }
    Ok(nr)
}

/// The event attributes of `section` (`[start, end)`), each of `attr_size` bytes
/// and followed by the offset and size of its event IDs, which must lie in the
/// file of `len` bytes.
fn check_id_sections<R: Read + Seek>(
    reader: &mut R,
    section: (u64, u64),
    attr_size: u64,
    len: u64,
    big_endian: bool,
) -> std::result::Result<(), Fault> {
    let size = section.1 - section.0;
    let bytes = read_at(reader, section.0, size, len, "the event attributes")?;
    let entry = usize::try_from(attr_size + 16).map_err(|e| (16, e.to_string()))?;
    for (i, e) in bytes.chunks_exact(entry).enumerate() {
        let ids = &e[entry - 16..];
        let (offset, size) = (int(&ids[..8], big_endian), int(&ids[8..], big_endian));
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err((
                section.0 + (i * entry + entry - 16) as u64,
                format!(
                    "an event's IDs (at byte {offset}, {size} bytes) end past the file's {len} bytes"
                ),
            ));
        }
    }
    Ok(())
}

/// Whether the file at `path` starts like a perf.data file (`PERFILE2`, either
/// byte order).
pub fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && (&magic == b"PERFILE2" || &magic == b"2ELIFREP")
}

/// An open recording: its header and events read, its records not yet.
pub struct PerfData<R: Read = BufReader<File>> {
    name: String,
    size: u64,
    /// The reader's length: error offsets stay within it.
    len: u64,
    position: Rc<Cell<u64>>,
    watch: Rc<Cell<Option<RecordWatch>>>,
    file: linux_perf_data::PerfFile,
    records: linux_perf_data::PerfRecordIter<Counting<R>>,
    info: RecordingInfo,
}

impl PerfData {
    /// Opens the recording at `path` and reads its header: fails on a file that is
    /// not perf.data, on Intel PT recordings (which `perf script` decodes) and on
    /// DWARF recordings of an architecture other than x86_64.
    pub fn open(path: &Path) -> Result<PerfData> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|source| Error::Read {
            name: name.clone(),
            source,
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        PerfData::from_reader(BufReader::with_capacity(1 << 20, file), name, size)
    }
}

impl<R: Read + Seek> PerfData<R> {
    /// [`PerfData::open`] over any seekable reader (a file's bytes in memory, say),
    /// named `name` in errors, of `size` bytes.
    ///
    /// The header is checked against the reader's length before `linux-perf-data`
    /// reads it (see the module documentation): a damaged file is an [`Error::PerfData`]
    /// with an offset within it, never a panic or an allocation the file does not
    /// justify.
    pub fn from_reader(mut reader: R, name: String, size: u64) -> Result<PerfData<R>> {
        let fault = |(offset, message): Fault| Error::PerfData {
            name: name.clone(),
            offset,
            message,
        };
        let len = reader
            .seek(SeekFrom::End(0))
            .map_err(|e| fault((0, e.to_string())))?;
        let layout = check_layout(&mut reader, len).map_err(fault)?;
        reader
            .seek(SeekFrom::Start(0))
            .map_err(|e| fault((0, e.to_string())))?;
        let position = Rc::new(Cell::new(0u64));
        let watch = Rc::new(Cell::new(None));
        let reader = Counting {
            inner: reader,
            read: position.clone(),
            watch: watch.clone(),
        };
        let PerfFileReader {
            perf_file,
            record_iter,
        } = PerfFileReader::parse_file(reader)
            .map_err(|e| fault((position.get().min(len), e.to_string())))?;
        // From here on the reader reads the records, from the data section's start.
        watch.set(layout.map(|l| RecordWatch {
            big_endian: l.big_endian,
            next: l.data.0,
            end: l.data.1,
            head: [0; 16],
            have: 0,
            refused: None,
        }));
        let info = recording_info(&perf_file);
        if info.intel_pt {
            return Err(Error::PerfDataIntelPt { name });
        }
        let arch = perf_file.arch().ok().flatten().unwrap_or("x86_64");
        if info.dwarf && arch != "x86_64" {
            return Err(Error::PerfDataArch {
                name,
                arch: arch.to_string(),
            });
        }
        Ok(PerfData {
            name,
            size,
            len,
            position,
            watch,
            file: perf_file,
            records: record_iter,
            info,
        })
    }

    /// What the recording is.
    pub fn info(&self) -> &RecordingInfo {
        &self.info
    }

    /// The file's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Reads the records, handing each sample to `each` in time order as a
    /// call-stack event (frames root first, inlined frames after the function they
    /// are inlined into). `progress` hears the bytes read so far, now and then.
    pub fn samples(
        mut self,
        options: &ReadOptions,
        mut progress: impl FnMut(u64),
        mut each: impl FnMut(&Event<'_>),
    ) -> Result<ReadStats> {
        let mut state = State::new(options.clone(), self.info.dwarf);
        let mut stats = ReadStats {
            bytes: self.size,
            ..ReadStats::default()
        };
        let mut raw = Vec::new();
        let mut resolved = Vec::new();
        loop {
            let record = match self.records.next_record(&mut self.file) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    let refused = self
                        .watch
                        .get()
                        .and_then(|w| Some((w.refused?.0, w.refusal()?)));
                    let (offset, message) =
                        refused.unwrap_or_else(|| (self.position.get(), e.to_string()));
                    return Err(Error::PerfData {
                        name: self.name,
                        offset: offset.min(self.len),
                        message,
                    });
                }
            };
            stats.records += 1;
            if stats.records.is_multiple_of(4096) {
                progress(self.position.get());
            }
            let PerfFileRecord::EventRecord { record, .. } = record else {
                continue;
            };
            if let Some(message) = unparsable(&record) {
                return Err(Error::PerfData {
                    name: self.name,
                    offset: self.position.get().min(self.len),
                    message,
                });
            }
            let parsed = match record.parse() {
                Ok(p) => p,
                Err(e) => {
                    return Err(Error::PerfData {
                        name: self.name,
                        offset: self.position.get().min(self.len),
                        message: format!("a {:?} record does not parse: {e}", record.record_type),
                    });
                }
            };
            match parsed {
                EventRecord::Mmap(m) => {
                    let path = m.path.as_slice();
                    let range = (m.address, m.length, m.page_offset);
                    state.map(m.pid, range, m.is_executable, &path);
                }
                EventRecord::Mmap2(m) => {
                    let path = m.path.as_slice();
                    // PROT_EXEC
                    let executable = m.protection & 4 != 0;
                    let range = (m.address, m.length, m.page_offset);
                    state.map(m.pid, range, executable, &path);
                }
                EventRecord::Comm(c) => {
                    if c.is_execve {
                        state.processes.remove(&c.pid);
                    }
                    let comm = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                    state.comms.insert(c.tid, comm.into());
                }
                EventRecord::Fork(f) => state.fork(f.pid, f.ppid, f.tid, f.ptid),
                EventRecord::Lost(l) => stats.lost += l.count,
                EventRecord::Sample(s) => {
                    let Some(time) = s.timestamp else {
                        stats.untimed += 1;
                        continue;
                    };
                    raw.clear();
                    if !state.stack(&s, &mut raw) {
                        stats.unwind_stopped += 1;
                    }
                    let pid = s.pid.unwrap_or(0);
                    let tid = s.tid.unwrap_or(pid);
                    resolved.clear();
                    for f in raw.iter().rev() {
                        resolved.push(state.name(pid, *f));
                    }
                    let frames = state.locations(&resolved);
                    let comm = state.comms.get(&tid).or_else(|| state.comms.get(&pid));
                    let known = |id: i32| u32::try_from(id).ok().filter(|&v| v != 0);
                    let event = Event::Sample(Sample {
                        thread: Thread {
                            pid: known(pid),
                            tid: known(tid),
                        },
                        comm: comm.map(|c| &**c),
                        time: Time(i64::try_from(time).unwrap_or(i64::MAX)),
                        in_transaction: false,
                        data: SampleData::Callstack(frames),
                    });
                    stats.samples += 1;
                    each(&event);
                }
                _ => {}
            }
        }
        progress(self.size);
        Ok(stats)
    }
}

/// The sampling period of the recording at `path` (see [`RecordingInfo::period_ns`]),
/// from its header; `None` when it has none or cannot be read.
pub fn recording_period(path: &Path) -> Option<Time> {
    let data = PerfData::open(path).ok()?;
    let ns = data.info().period_ns?;
    Some(Time(i64::try_from(ns).ok()?))
}

/// What `linux-perf-event-reader` would panic on in a record, checked before it
/// parses it: an `MMAP2` record's build id longer than 20 bytes (an `assert!`),
/// and a `SAMPLE` record's call chain of more addresses than the record holds (it
/// multiplies the count by 8 unchecked, a panic where overflow is checked).
fn unparsable(record: &RawEventRecord<'_>) -> Option<String> {
    match record.record_type {
        RecordType::SAMPLE => callchain_overrun(record),
        RecordType::MMAP2 if record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 => {
            // pid, tid, address, length and offset, then the build id's length.
            let len = *record.data.as_slice().get(32)?;
            (len > 20).then(|| format!("an MMAP2 record's build id of {len} bytes (at most 20)"))
        }
        _ => None,
    }
}

/// Whether the call chain of a `SAMPLE` record claims more addresses than the
/// record holds. The fields before the chain are counted as the reader reads them.
fn callchain_overrun(record: &RawEventRecord<'_>) -> Option<String> {
    let info = &record.parse_info;
    let format = info.sample_format;
    if !format.contains(SampleFormat::CALLCHAIN) {
        return None;
    }
    let body = record.data.as_slice();
    let big_endian = info.endian == Endianness::BigEndian;
    let word = |i: u64| {
        let at = usize::try_from(i.checked_mul(8)?).ok()?;
        Some(int(body.get(at..at.checked_add(8)?)?, big_endian))
    };
    let before = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut words = before.iter().filter(|&&f| format.contains(f)).count() as u64;
    if format.contains(SampleFormat::READ) {
        let read = info.read_format;
        let has = |f: ReadFormat| u64::from(read.contains(f));
        let times = has(ReadFormat::TOTAL_TIME_ENABLED) + has(ReadFormat::TOTAL_TIME_RUNNING);
        if read.contains(ReadFormat::GROUP) {
            words += 1 + times + has(ReadFormat::ID);
        } else {
            // A count of values (with their IDs) after the times; the reader
            // fails by itself on a count the record does not hold.
            let values = word(words)?.checked_mul(1 + has(ReadFormat::ID))?;
            words = words.checked_add(1 + times)?.checked_add(values)?;
        }
    }
    let count = word(words)?;
    let room = (body.len() as u64 / 8).saturating_sub(words + 1);
    (count > room).then(|| {
        format!(
            "a SAMPLE record's call chain of {count} addresses runs past its {} bytes",
            body.len()
        )
    })
}

/// The events of a recording and its period.
fn recording_info(file: &linux_perf_data::PerfFile) -> RecordingInfo {
    let mut info = RecordingInfo::default();
    for attr in file.event_attributes() {
        let a = attr.attributes();
        info.events.push(
            attr.name()
                .map_or_else(|| format!("{:?}", a.type_), str::to_string),
        );
        if attr.name().is_some_and(|n| n.starts_with("intel_pt")) {
            info.intel_pt = true;
        }
        if a.sample_regs_user != 0 && a.sample_stack_user > 0 {
            info.dwarf = true;
        }
        let period = match a.sampling_policy {
            SamplingPolicy::Frequency(f) if f > 0 => Some(1_000_000_000 / f),
            // A clock event counts nanoseconds.
            SamplingPolicy::Period(p)
                if matches!(
                    a.type_,
                    PerfEventType::Software(
                        SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock
                    )
                ) =>
            {
                Some(p.get())
            }
            _ => None,
        };
        info.period_ns = info.period_ns.or(period);
    }
    info
}

impl State {
    fn new(options: ReadOptions, dwarf: bool) -> State {
        State {
            options,
            processes: HashMap::default(),
            kernel: Vec::new(),
            objects: Vec::new(),
            object_index: HashMap::default(),
            comms: HashMap::default(),
            kallsyms: None,
            cache: HashMap::default(),
            frames: Vec::new(),
            names: Vec::new(),
            name_index: HashMap::default(),
            unwind_cache: CacheX86_64::new(),
            dwarf,
        }
    }

    fn object(&mut self, path: &str) -> usize {
        if let Some(&i) = self.object_index.get(path) {
            return i;
        }
        self.objects.push(ObjectEntry {
            path: path.into(),
            symbols: None,
            sections: None,
        });
        self.object_index
            .insert(path.into(), self.objects.len() - 1);
        self.objects.len() - 1
    }

    /// A file mapped into process `pid` (`-1`: the kernel).
    fn map(
        &mut self,
        pid: i32,
        (start, length, offset): (u64, u64, u64),
        executable: bool,
        path: &[u8],
    ) {
        let path = String::from_utf8_lossy(path);
        let Some(end) = start.checked_add(length) else {
            return;
        };
        let object = self.object(&path);
        let m = Mapping {
            start,
            end,
            offset,
            object,
            executable,
        };
        let mappings = if pid == -1 {
            &mut self.kernel
        } else {
            &mut self.processes.entry(pid).or_default().mappings
        };
        // A new mapping replaces what it overlaps.
        mappings.retain(|o| o.end <= start || o.start >= end);
        let i = mappings.partition_point(|o| o.start < start);
        mappings.insert(i, m);
        if self.dwarf && pid != -1 && path.starts_with('/') && executable {
            self.add_unwind_module(pid, m);
        }
    }

    fn fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32) {
        if let Some(c) = self.comms.get(&ptid).cloned() {
            self.comms.entry(tid).or_insert(c);
        }
        if pid != ppid && !self.processes.contains_key(&pid) {
            let mappings = self
                .processes
                .get(&ppid)
                .map(|p| p.mappings.clone())
                .unwrap_or_default();
            self.processes.insert(pid, Process::default());
            for m in mappings {
                if let Some(p) = self.processes.get_mut(&pid) {
                    p.mappings.push(m);
                }
                if self.dwarf && m.executable {
                    self.add_unwind_module(pid, m);
                }
            }
        }
    }

    /// Adds the object of mapping `m` to process `pid`'s unwinder.
    fn add_unwind_module(&mut self, pid: i32, m: Mapping) {
        let entry = &mut self.objects[m.object];
        let sections = entry
            .sections
            .get_or_insert_with(|| unwind_sections(Path::new(&*entry.path)))
            .clone();
        let Some(sections) = sections else { return };
        let Some(symbols) = object_symbols(entry, &self.options.debug_dirs) else {
            return;
        };
        // The bias between the process's addresses and the object's, from the
        // middle of the mapping: its first page may hold the end of the segment
        // before (linkers share pages between segments), which has another bias.
        let half = (m.end - m.start) / 2;
        let Some(svma) = m
            .offset
            .checked_add(half)
            .and_then(|o| symbols.file_offset_to_svma(o))
        else {
            return;
        };
        let base = (m.start + half).wrapping_sub(svma);
        let name = entry.path.to_string();
        let process = self.processes.entry(pid).or_default();
        let unwinder = process.unwinder.get_or_insert_with(UnwinderX86_64::new);
        unwinder.add_module(Module::new(name, m.start..m.end, base, sections));
    }

    /// The raw frames of sample `s`, leaf first; false when a DWARF unwind stopped
    /// before the stack's end.
    fn stack(&mut self, s: &SampleRecord<'_>, out: &mut Vec<RawFrame>) -> bool {
        let mut kernel = false;
        let mut first_user = true;
        let mut complete = true;
        if let Some(chain) = &s.callchain {
            let mut first = true;
            for i in 0..chain.len() {
                let Some(a) = chain.get(i) else { break };
                if a >= PERF_CONTEXT_MAX {
                    kernel = a == PERF_CONTEXT_KERNEL;
                    if a == PERF_CONTEXT_USER {
                        kernel = false;
                    }
                    continue;
                }
                if !kernel {
                    first_user = false;
                }
                out.push(RawFrame {
                    address: a,
                    returns: !first,
                    kernel,
                    unwound: false,
                });
                first = false;
            }
        } else if let Some(ip) = s.ip {
            out.push(RawFrame {
                address: ip,
                returns: false,
                kernel: s.cpu_mode == linux_perf_data::linux_perf_event_reader::CpuMode::Kernel,
                unwound: false,
            });
            first_user = false;
        }
        // DWARF recordings: the user part comes from unwinding the copied stack.
        if first_user
            && let (Some(regs), Some((stack, _))) = (&s.user_regs, &s.user_stack)
            && let (Some(ip), Some(sp), Some(bp)) = (
                regs.get(PERF_REG_X86_IP),
                regs.get(PERF_REG_X86_SP),
                regs.get(PERF_REG_X86_BP),
            )
        {
            let pid = s.pid.unwrap_or(0);
            let bytes = stack.as_slice();
            let mut read_stack = |addr: u64| {
                let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
                let word = bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
                let mut b = [0u8; 8];
                b.copy_from_slice(word);
                Ok(u64::from_le_bytes(b))
            };
            match self.processes.get(&pid).and_then(|p| p.unwinder.as_ref()) {
                Some(unwinder) => {
                    let regs = UnwindRegsX86_64::new(ip, sp, bp);
                    let mut frames =
                        unwinder.iter_frames(ip, regs, &mut self.unwind_cache, &mut read_stack);
                    loop {
                        match frames.next() {
                            Ok(Some(f)) => out.push(RawFrame {
                                address: f.address(),
                                returns: matches!(f, FrameAddress::ReturnAddress(_)),
                                kernel: false,
                                unwound: true,
                            }),
                            Ok(None) => break,
                            Err(_) => {
                                complete = false;
                                break;
                            }
                        }
                    }
                }
                None => out.push(RawFrame {
                    address: ip,
                    returns: false,
                    kernel: false,
                    unwound: true,
                }),
            }
        }
        complete
    }

    /// Names frame `f` of process `pid` (through the cache), and gives the address
    /// shown for it: as `perf script` shows it, the offset in the object's file
    /// where the object is known (the object's own address for most code, which
    /// `objdump` and `addr2line -e OBJECT` use), else the address itself; a return
    /// address unwound here is shown one byte back, as perf shows the ones its DWARF
    /// unwinder finds.
    fn name(&mut self, pid: i32, f: RawFrame) -> (Naming, u64) {
        let lookup = if f.returns {
            f.address.wrapping_sub(1)
        } else {
            f.address
        };
        if f.kernel {
            return (self.kernel_name(lookup), f.address);
        }
        let mapping = self
            .processes
            .get(&pid)
            .and_then(|p| find(&p.mappings, lookup));
        let Some(m) = mapping else {
            return (Naming::Unknown, f.address);
        };
        let key = (m.object, lookup);
        let (naming, at) = match self.cache.get(&key) {
            Some(&cached) => cached,
            None => {
                let named = self.name_in_object(m, lookup);
                self.cache.insert(key, named);
                named
            }
        };
        let shown = if f.unwound {
            at
        } else {
            at.wrapping_add(f.address - lookup)
        };
        (naming, shown)
    }

    /// Names the address `lookup` of mapping `m`, and gives its file offset.
    fn name_in_object(&mut self, m: Mapping, lookup: u64) -> (Naming, u64) {
        let file_offset = (lookup - m.start).checked_add(m.offset);
        let entry = &mut self.objects[m.object];
        let symbols = object_symbols(entry, &self.options.debug_dirs);
        let svma = symbols
            .as_ref()
            .zip(file_offset)
            .and_then(|(s, o)| s.file_offset_to_svma(o));
        let frames = match (symbols, svma) {
            (Some(symbols), Some(svma)) => symbols.frames(svma),
            _ => Vec::new(),
        };
        let at = file_offset.unwrap_or(lookup);
        let naming = if frames.is_empty() {
            Naming::InObject(m.object)
        } else {
            let start = self.frames.len() as u32;
            let last = frames.len() - 1;
            for (i, fr) in frames.into_iter().enumerate() {
                let name = self.intern(&fr.function);
                self.frames.push(Named {
                    name,
                    inlined: i != last,
                });
            }
            Naming::Frames(start, self.frames.len() as u32)
        };
        (naming, at)
    }

    fn kernel_name(&mut self, address: u64) -> Naming {
        let key = (usize::MAX, address);
        if let Some(&(n, _)) = self.cache.get(&key) {
            return n;
        }
        let want = self.options.kernel_symbols;
        let kallsyms = self
            .kallsyms
            .get_or_insert_with(|| want.then(Kallsyms::read).flatten());
        let naming = match kallsyms.as_ref().and_then(|k| k.lookup(address)) {
            Some((name, _)) => {
                let name = name.to_string();
                let id = self.intern(&name);
                let start = self.frames.len() as u32;
                self.frames.push(Named {
                    name: id,
                    inlined: false,
                });
                Naming::Frames(start, start + 1)
            }
            None => match find(&self.kernel, address) {
                Some(m) => Naming::InObject(m.object),
                None => Naming::Unknown,
            },
        };
        self.cache.insert(key, (naming, address));
        naming
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.name_index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.into());
        self.name_index.insert(name.into(), i);
        i
    }

    /// The locations of named frames (`resolved` root first), inlined frames after
    /// the function they are inlined into.
    fn locations(&self, resolved: &[(Naming, u64)]) -> Vec<Location<'_>> {
        let mut out = Vec::with_capacity(resolved.len() + 4);
        for &(naming, shown) in resolved {
            let ip = Address(shown);
            match naming {
                Naming::Frames(start, end) => {
                    let frames = self.frames.get(start as usize..end as usize).unwrap_or(&[]);
                    // Innermost first in the cache: the outermost goes first here.
                    for n in frames.iter().rev() {
                        out.push(Location {
                            ip,
                            symbol: Symbol::Perf(&self.names[n.name as usize]),
                            offset: 0,
                            inlined: n.inlined,
                        });
                    }
                }
                Naming::InObject(o) => out.push(Location {
                    ip,
                    symbol: Symbol::UnknownInDso(&self.objects[o].path),
                    offset: 0,
                    inlined: false,
                }),
                Naming::Unknown => out.push(Location {
                    ip,
                    symbol: Symbol::Unknown,
                    offset: 0,
                    inlined: false,
                }),
            }
        }
        out
    }
}

/// The mapping containing `address`.
fn find(mappings: &[Mapping], address: u64) -> Option<Mapping> {
    let i = mappings.partition_point(|m| m.start <= address);
    let m = *mappings.get(i.checked_sub(1)?)?;
    (address < m.end).then_some(m)
}

fn object_symbols<'o>(
    entry: &'o mut ObjectEntry,
    debug: &DebugDirs,
) -> Option<&'o mut ObjectSymbols> {
    let path = &entry.path;
    entry
        .symbols
        .get_or_insert_with(|| {
            (path.starts_with('/') && regular_file(Path::new(&**path)))
                .then(|| ObjectSymbols::load(Path::new(&**path), debug))
                .flatten()
        })
        .as_mut()
}

/// Whether `path` is a regular file: the recording names the files read for
/// symbols and unwinding, and a device (`/dev/zero`) would be read without end, a
/// FIFO would block the open.
fn regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The sections framehop unwinds with, read from the object at `path`.
fn unwind_sections(path: &Path) -> Option<Sections> {
    if !regular_file(path) {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    let section = |name: &str| -> Option<(Range<u64>, Arc<[u8]>)> {
        let s = file.section_by_name(name)?;
        let data = s.uncompressed_data().ok()?;
        let start = s.address();
        Some((start..start.checked_add(s.size())?, Arc::from(&*data)))
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
    let debug_frame = section(".debug_frame");
    let got = file
        .section_by_name(".got")
        .and_then(|s| Some(s.address()..s.address().checked_add(s.size())?));
    Some(ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: text.as_ref().map(|t| t.0.clone()),
        text: text.map(|t| t.1),
        got_svma: got,
        eh_frame_svma: eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: eh_frame.map(|t| t.1),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|t| t.1),
        debug_frame: debug_frame.map(|t| t.1),
        ..ExplicitModuleSectionInfo::default()
    })
}
