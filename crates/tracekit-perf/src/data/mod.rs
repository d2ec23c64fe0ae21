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
//! | `COMM` | a thread's command name (`exec` also drops the process's mappings); a thread is shown with its last one |
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
//!
//! Every record is read before any sample is handed on: each frame is kept as a
//! key (its object and address), each distinct key is named once (on a second
//! core while the records are read, or from the names kept by an earlier run:
//! [`ReadOptions::name_cache`]), then the samples go out in time order with their
//! names.
//!
//! The reader in parts: `header` checks the header and its sections before
//! `linux-perf-data` reads them, `records` follows and checks the records of the
//! data section, `process` keeps the processes' mappings and names, `unwind`
//! gives a sample's frames (its call chain, or its copied user stack unwound),
//! `naming` turns them into keys and the named keys into locations, and
//! `symbolize` names the keys.

mod header;
mod naming;
mod process;
mod records;
mod symbolize;
mod unwind;

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{
    EventRecord, PerfEventType, SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use tracekit_callstack::event::{Event, Sample, SampleData, Thread, Time};
use tracekit_columns::{Grow, Spill};
use tracekit_symbols::DebugDirs;

use crate::{Error, Result};
use header::{Fault, check_layout};
use naming::Naming;
use process::State;
use records::{Counting, RecordWatch, unparsable};
use symbolize::Symbolizer;

/// A sample read and not yet handed on: its frames are `frames[previous end..end]`.
/// The ids are kept as their bits, so that every pattern of the row is one.
#[derive(Clone, Copy)]
#[repr(C)]
struct Pending {
    pid: u32,
    tid: u32,
    time: u64,
    end: u64,
}

tracekit_columns::plain_struct!(Pending {
    pid: u32,
    tid: u32,
    time: u64,
    end: u64,
});

/// How a recording is read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Where separate debug files are looked for.
    pub debug_dirs: DebugDirs,
    /// Name kernel addresses from `/proc/kallsyms`.
    pub kernel_symbols: bool,
    /// Where objects' names are kept across runs, by build id (see
    /// [`tracekit_symbols::cache`]); `None`: not kept.
    pub name_cache: Option<std::path::PathBuf>,
    /// Where the samples read grow while they wait for their names: in
    /// memory, or in files of a folder past a few MiB, so that a long
    /// recording's samples are not held in memory.
    pub spill: Spill,
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
    /// Distinct addresses named (each once, however many samples hold it).
    pub named: u64,
    /// Of those, the ones named from the cache of names.
    pub named_from_cache: u64,
}

impl ReadStats {
    /// What a user should know about the recording from this read, a sentence
    /// each: samples the kernel lost, samples left out for want of a timestamp,
    /// user stacks not unwound to their end.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.lost > 0 {
            out.push(format!(
                "the kernel lost {} samples while recording (perf record -m or a lower -F helps)",
                self.lost
            ));
        }
        if self.untimed > 0 {
            out.push(format!(
                "skipped {} samples without a timestamp (record with --timestamp)",
                self.untimed
            ));
        }
        if self.unwind_stopped > 0 {
            out.push(format!(
                "{} of {} samples' user stacks could not be unwound to their end",
                self.unwind_stopped, self.samples
            ));
        }
        out
    }
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

/// A recording's bytes, already read by whoever has them (a mapped file),
/// shared with the reader that takes its records from them.
pub type RecordingBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Where a recording's records come from: its file, opened by the reader, or
/// its bytes, already read by the caller (so that a file is opened once).
pub enum Recording {
    /// The file, read as the records are.
    File(BufReader<File>),
    /// The bytes in memory.
    Bytes(io::Cursor<Held>),
}

/// [`RecordingBytes`] as a cursor reads them.
pub struct Held(RecordingBytes);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl Read for Recording {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Recording::File(f) => f.read(buf),
            Recording::Bytes(b) => b.read(buf),
        }
    }
}

impl Seek for Recording {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match self {
            Recording::File(f) => f.seek(to),
            Recording::Bytes(b) => b.seek(to),
        }
    }
}

/// An open recording: its header and events read, its records not yet.
pub struct PerfData<R: Read = Recording> {
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
        let file = Recording::File(BufReader::with_capacity(1 << 20, file));
        PerfData::from_reader(file, name, size)
    }

    /// [`PerfData::open`] over the recording's `bytes`, already read by the
    /// caller, named `name` in errors.
    pub fn from_bytes(bytes: RecordingBytes, name: String) -> Result<PerfData> {
        let size = (*bytes).as_ref().len() as u64;
        PerfData::from_reader(Recording::Bytes(io::Cursor::new(Held(bytes))), name, size)
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

    /// Reads every record, names each distinct address once, then hands each
    /// sample to `each` in time order as a call-stack event (frames root first,
    /// inlined frames after the function they are inlined into). `progress` hears
    /// the bytes read so far, now and then.
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
        let mut symbolizer =
            Symbolizer::new(options.debug_dirs.clone(), options.name_cache.clone());
        // Every sample, its frames as keys (root first), before any is named.
        let mut pending: Grow<Pending> = Grow::new(&options.spill);
        let mut frames: Grow<u32> = Grow::new(&options.spill);
        let mut raw = Vec::new();
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
                    let known_keys = state.keys.len();
                    for f in raw.iter().rev() {
                        frames.push(state.frame(pid, *f));
                    }
                    // New addresses go to the helper at once, to be named while
                    // the records are read.
                    for (i, k) in state.keys.iter().enumerate().skip(known_keys) {
                        let Some(entry) = state.objects.get_mut(k.object) else {
                            continue;
                        };
                        if !entry.queued {
                            entry.queued = true;
                            symbolizer.object(k.object, &entry.path);
                        }
                        symbolizer.key(i as u32, k.object, k.offset);
                    }
                    pending.push(Pending {
                        pid: pid as u32,
                        tid: tid as u32,
                        time,
                        end: frames.len() as u64,
                    });
                }
                _ => {}
            }
        }
        // Every address known: each named once, then the samples handed on.
        let named = symbolizer.finish();
        state.namings = vec![Naming::Unknown; state.keys.len()];
        for (key, object, names) in &named.keys {
            state.set_names(*key, *object, names.iter().map(|n| &**n));
        }
        state.name_kernel_keys();
        stats.named = state.keys.len() as u64;
        stats.named_from_cache = named.from_cache;
        let mut start = 0;
        for p in pending.iter() {
            let (pid, tid, end) = (p.pid as i32, p.tid as i32, p.end as usize);
            let locations = state.locations(frames.get(start..end).unwrap_or_default());
            start = end;
            // A thread is named by its last command name, known now that every
            // record is read: a thread that names itself as it starts is often
            // sampled before (a frequency-driven event samples a new thread at
            // once), and would otherwise keep its creator's name.
            let comm = state.comms.get(&tid).or_else(|| state.comms.get(&pid));
            let known = |id: i32| u32::try_from(id).ok().filter(|&v| v != 0);
            let event = Event::Sample(Sample {
                thread: Thread {
                    pid: known(pid),
                    tid: known(tid),
                },
                comm: comm.map(|c| &**c),
                time: Time(i64::try_from(p.time).unwrap_or(i64::MAX)),
                in_transaction: false,
                data: SampleData::Callstack(locations),
            });
            stats.samples += 1;
            each(&event);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_read_warns_of_nothing_and_a_lossy_one_says_what_was_lost() {
        assert!(ReadStats::default().warnings().is_empty());
        let read = ReadStats {
            samples: 10,
            lost: 2,
            untimed: 1,
            unwind_stopped: 3,
            ..ReadStats::default()
        };
        assert_eq!(
            read.warnings(),
            [
                "the kernel lost 2 samples while recording (perf record -m or a lower -F helps)",
                "skipped 1 samples without a timestamp (record with --timestamp)",
                "3 of 10 samples' user stacks could not be unwound to their end",
            ]
        );
    }
}
