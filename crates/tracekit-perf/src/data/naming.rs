//! Names for a sample's frames: each address mapped to its object through the
//! process's mappings and named by `tracekit-symbols` (inlined frames apart), kernel
//! addresses from `/proc/kallsyms`, cached per object and address; and the named
//! frames as the call-stack decoder's locations.

use std::path::Path;

use tracekit_callstack::event::{Address, Location, Symbol};
use tracekit_symbols::{DebugDirs, Kallsyms, ObjectSymbols};

use super::process::{Mapping, ObjectEntry, State, find, regular_file};
use super::unwind::RawFrame;

/// A named frame: the interned name, and whether it is inlined into the next one out.
#[derive(Clone, Copy, Debug)]
pub(super) struct Named {
    name: u32,
    inlined: bool,
}

/// How one raw frame was named.
#[derive(Clone, Copy, Debug)]
pub(super) enum Naming {
    /// `frames[range]` of the cache, innermost first.
    Frames(u32, u32),
    /// In an object nothing names the address in.
    InObject(usize),
    Unknown,
}

impl State {
    /// Names frame `f` of process `pid` (through the cache), and gives the address
    /// shown for it: as `perf script` shows it, the offset in the object's file
    /// where the object is known (the object's own address for most code, which
    /// `objdump` and `addr2line -e OBJECT` use), else the address itself; a return
    /// address unwound here is shown one byte back, as perf shows the ones its DWARF
    /// unwinder finds.
    pub(super) fn name(&mut self, pid: i32, f: RawFrame) -> (Naming, u64) {
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
    pub(super) fn locations(&self, resolved: &[(Naming, u64)]) -> Vec<Location<'_>> {
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

pub(super) fn object_symbols<'o>(
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
