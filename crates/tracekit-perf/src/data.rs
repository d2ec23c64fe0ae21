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

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, PerfEventType, SampleRecord, SamplingPolicy, SoftwareCounterType,
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

/// A reader that counts what it has read, for error offsets.
struct Counting<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl<R: std::io::Seek> std::io::Seek for Counting<R> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = self.inner.seek(pos)?;
        self.read.set(at);
        Ok(at)
    }
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
    position: Rc<Cell<u64>>,
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

impl<R: Read + std::io::Seek> PerfData<R> {
    /// [`PerfData::open`] over any seekable reader (a file's bytes in memory, say),
    /// named `name` in errors, of `size` bytes.
    pub fn from_reader(reader: R, name: String, size: u64) -> Result<PerfData<R>> {
        let position = Rc::new(Cell::new(0u64));
        let reader = Counting {
            inner: reader,
            read: position.clone(),
        };
        let PerfFileReader {
            perf_file,
            record_iter,
        } = PerfFileReader::parse_file(reader).map_err(|e| Error::PerfData {
            name: name.clone(),
            offset: position.get(),
            message: e.to_string(),
        })?;
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
            position,
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
                    return Err(Error::PerfData {
                        name: self.name,
                        offset: self.position.get(),
                        message: e.to_string(),
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
            let parsed = match record.parse() {
                Ok(p) => p,
                Err(e) => {
                    return Err(Error::PerfData {
                        name: self.name,
                        offset: self.position.get(),
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
            processes: HashMap::new(),
            kernel: Vec::new(),
            objects: Vec::new(),
            object_index: HashMap::new(),
            comms: HashMap::new(),
            kallsyms: None,
            cache: HashMap::new(),
            frames: Vec::new(),
            names: Vec::new(),
            name_index: HashMap::new(),
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
        if let Some(&(n, shown)) = self.cache.get(&key) {
            return (
                n,
                if f.unwound {
                    shown
                } else {
                    shown.wrapping_add(f.address - lookup)
                },
            );
        }
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
        self.cache.insert(key, (naming, at));
        let shown = if f.unwound {
            at
        } else {
            at.wrapping_add(f.address - lookup)
        };
        (naming, shown)
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
            path.starts_with('/')
                .then(|| ObjectSymbols::load(Path::new(&**path), debug))
                .flatten()
        })
        .as_mut()
}

/// The sections framehop unwinds with, read from the object at `path`.
fn unwind_sections(path: &Path) -> Option<Sections> {
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
