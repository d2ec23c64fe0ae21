//! Names for a sample's frames, in the reader's three steps. While the records
//! are read, each frame becomes a key (the object and the address looked up in
//! it, or a kernel address) and the address shown for it; keys are counted once
//! however many samples hold them. Once every record is read, [`super::symbolize`]
//! names each key (on both cores); here kernel addresses are named from
//! `/proc/kallsyms`, and the named keys become the call-stack decoder's locations.

use tracekit_callstack::event::{Address, Location, Symbol};
use tracekit_symbols::Kallsyms;

use super::process::{State, find};
use super::unwind::RawFrame;

/// A named frame: the interned name, and whether it is inlined into the next one out.
#[derive(Clone, Copy, Debug)]
pub(super) struct Named {
    pub(super) name: u32,
    pub(super) inlined: bool,
}

/// How one key was named.
#[derive(Clone, Copy, Debug)]
pub(super) enum Naming {
    /// `frames[range]` of the state, innermost first.
    Frames(u32, u32),
    /// In an object nothing names the address in.
    InObject(usize),
    Unknown,
}

/// The object of kernel keys.
pub(super) const KERNEL: usize = usize::MAX;

/// A frame with no key: in no mapping.
pub(super) const NO_KEY: u32 = u32::MAX;

/// Keys that fit in a packed frame (beside two bits).
const PACKED_KEYS: u32 = 1 << 30;

/// An address to name: in `object` ([`KERNEL`] for the kernel's), looked up at
/// `lookup` (a run-time address), which is `offset` into the object's file.
#[derive(Clone, Copy, Debug)]
pub(super) struct Key {
    pub(super) object: usize,
    pub(super) lookup: u64,
    pub(super) offset: Option<u64>,
}

impl State {
    /// Frame `f` of process `pid` packed in 32 bits: its key and how the address
    /// shown for it differs from its key's ([`State::unpack`]), or, for an address
    /// in no mapping, the address itself kept aside.
    ///
    /// The address shown is as `perf script` shows it: the offset in the object's
    /// file where the object is known (the object's own address for most code,
    /// which `objdump` and `addr2line -e OBJECT` use), else the address itself; a
    /// return address unwound here is shown one byte back, as perf shows the ones
    /// its DWARF unwinder finds. So it is the key's offset (or lookup address),
    /// plus one for a return address shown as it is: a bit beside the key. A
    /// sample's frames take 4 bytes each until they are named.
    pub(super) fn frame(&mut self, pid: i32, f: RawFrame) -> u32 {
        let lookup = if f.returns {
            f.address.wrapping_sub(1)
        } else {
            f.address
        };
        let (key, shown) = if f.kernel {
            (self.intern_key(KERNEL, lookup, None), f.address)
        } else {
            match self
                .processes
                .get(&pid)
                .and_then(|p| find(&p.mappings, lookup))
            {
                Some(m) => {
                    let offset = (lookup - m.start).checked_add(m.offset);
                    let at = offset.unwrap_or(lookup);
                    let shown = if f.unwound {
                        at
                    } else {
                        at.wrapping_add(f.address - lookup)
                    };
                    (self.intern_key(m.object, lookup, offset), shown)
                }
                None => (NO_KEY, f.address),
            }
        };
        let delta = match self.keys.get(key as usize) {
            Some(k) => shown.wrapping_sub(k.offset.unwrap_or(k.lookup)),
            None => u64::MAX,
        };
        match (key, delta) {
            (0..PACKED_KEYS, 0 | 1) => key << 2 | (delta as u32) << 1,
            _ => {
                // Aside: no key, or more keys than fit (the address is then shown
                // as it is and named in no object).
                let aside = (self.aside.len() as u32) << 1 | 1;
                self.aside.push(shown);
                aside
            }
        }
    }

    /// The key and the address shown of a frame packed by [`State::frame`].
    pub(super) fn unpack(&self, packed: u32) -> (u32, u64) {
        if packed & 1 == 1 {
            let shown = self.aside.get((packed >> 1) as usize).copied();
            return (NO_KEY, shown.unwrap_or(0));
        }
        let key = packed >> 2;
        let base = self
            .keys
            .get(key as usize)
            .map_or(0, |k| k.offset.unwrap_or(k.lookup));
        (key, base.wrapping_add(u64::from(packed >> 1 & 1)))
    }

    fn intern_key(&mut self, object: usize, lookup: u64, offset: Option<u64>) -> u32 {
        let next = self.keys.len() as u32;
        *self.key_index.entry((object, lookup)).or_insert_with(|| {
            self.keys.push(Key {
                object,
                lookup,
                offset,
            });
            next
        })
    }

    /// Sets the naming of key `key` to `names` (innermost first), interned.
    pub(super) fn set_names<'n>(
        &mut self,
        key: u32,
        object: usize,
        names: impl ExactSizeIterator<Item = &'n str>,
    ) {
        let naming = if names.len() == 0 {
            Naming::InObject(object)
        } else {
            let start = self.frames.len() as u32;
            let last = names.len() - 1;
            for (i, n) in names.enumerate() {
                let name = self.intern(n);
                self.frames.push(Named {
                    name,
                    inlined: i != last,
                });
            }
            Naming::Frames(start, self.frames.len() as u32)
        };
        if let Some(slot) = self.namings.get_mut(key as usize) {
            *slot = naming;
        }
    }

    /// Names the kernel's keys, from `/proc/kallsyms` when asked for.
    pub(super) fn name_kernel_keys(&mut self) {
        // Read only for a recording that has kernel addresses (a large file).
        let any = self.keys.iter().any(|k| k.object == KERNEL);
        let kallsyms = match self.options.kernel_symbols && any {
            true => Kallsyms::read(),
            false => None,
        };
        for i in 0..self.keys.len() {
            let Key { object, lookup, .. } = self.keys[i];
            if object != KERNEL {
                continue;
            }
            let naming = match kallsyms.as_ref().and_then(|k| k.lookup(lookup)) {
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
                None => match find(&self.kernel, lookup) {
                    Some(m) => Naming::InObject(m.object),
                    None => Naming::Unknown,
                },
            };
            self.namings[i] = naming;
        }
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

    /// The locations of a sample's packed frames (root first), inlined frames
    /// after the function they are inlined into.
    pub(super) fn locations(&self, packed: &[u32]) -> Vec<Location<'_>> {
        let mut out = Vec::with_capacity(packed.len() + 4);
        for &p in packed {
            let (key, shown) = self.unpack(p);
            let ip = Address(shown);
            let naming = self
                .namings
                .get(key as usize)
                .copied()
                .unwrap_or(Naming::Unknown);
            match naming {
                Naming::Frames(start, end) => {
                    let frames = self.frames.get(start as usize..end as usize).unwrap_or(&[]);
                    // Innermost first in the state: the outermost goes first here.
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
