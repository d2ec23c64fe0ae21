//! What the reader knows of the recorded system, from `MMAP`, `MMAP2`, `COMM` and
//! `FORK` records: each process's mappings (the kernel's apart), the objects they
//! map, and each thread's command name.

use rustc_hash::FxHashMap as HashMap;
use std::path::Path;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use tracekit_symbols::elf::LoadSegment;

use super::ReadOptions;
use super::naming::{Key, Named, Naming};
use super::unwind::Sections;

/// A mapping of a process: `[start, end)` maps the object from `offset`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) offset: u64,
    pub(super) object: usize,
    /// Mapped executable: code whose unwinding information the unwinder needs.
    pub(super) executable: bool,
}

pub(super) struct ObjectEntry {
    pub(super) path: Box<str>,
    /// Read on first use for unwinding; `None` inside once that failed.
    pub(super) sections: Option<Option<Sections>>,
    /// Its `PT_LOAD` segments, read on first use for unwinding.
    pub(super) segments: Option<Option<Vec<LoadSegment>>>,
    /// Handed to the symbolizer (a sample has an address in it).
    pub(super) queued: bool,
}

#[derive(Default)]
pub(super) struct Process {
    /// Sorted by start.
    pub(super) mappings: Vec<Mapping>,
    pub(super) unwinder: Option<UnwinderX86_64<Arc<[u8]>>>,
}

/// The reader's state: processes, objects, names.
pub(super) struct State {
    pub(super) options: ReadOptions,
    pub(super) processes: HashMap<i32, Process>,
    pub(super) kernel: Vec<Mapping>,
    pub(super) objects: Vec<ObjectEntry>,
    pub(super) object_index: HashMap<Box<str>, usize>,
    pub(super) comms: HashMap<i32, Box<str>>,
    /// The addresses to name, each once, by (object or [`KERNEL`](super::naming::KERNEL),
    /// lookup address), and how each was named (in `keys` order).
    pub(super) keys: Vec<Key>,
    pub(super) key_index: HashMap<(usize, u64), u32>,
    pub(super) namings: Vec<Naming>,
    /// The addresses of frames packed without a key (see `State::frame`).
    pub(super) aside: Vec<u64>,
    pub(super) frames: Vec<Named>,
    pub(super) names: Vec<Box<str>>,
    pub(super) name_index: HashMap<Box<str>, u32>,
    pub(super) unwind_cache: CacheX86_64,
    pub(super) dwarf: bool,
}

impl State {
    pub(super) fn new(options: ReadOptions, dwarf: bool) -> State {
        State {
            options,
            processes: HashMap::default(),
            kernel: Vec::new(),
            objects: Vec::new(),
            object_index: HashMap::default(),
            comms: HashMap::default(),
            keys: Vec::new(),
            key_index: HashMap::default(),
            namings: Vec::new(),
            aside: Vec::new(),
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
            sections: None,
            segments: None,
            queued: false,
        });
        self.object_index
            .insert(path.into(), self.objects.len() - 1);
        self.objects.len() - 1
    }

    /// A file mapped into process `pid` (`-1`: the kernel).
    pub(super) fn map(
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

    pub(super) fn fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32) {
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
}

/// The mapping containing `address`.
pub(super) fn find(mappings: &[Mapping], address: u64) -> Option<Mapping> {
    let i = mappings.partition_point(|m| m.start <= address);
    let m = *mappings.get(i.checked_sub(1)?)?;
    (address < m.end).then_some(m)
}

/// Whether `path` is a regular file: the recording names the files read for
/// symbols and unwinding, and a device (`/dev/zero`) would be read without end, a
/// FIFO would block the open.
pub(super) fn regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}
