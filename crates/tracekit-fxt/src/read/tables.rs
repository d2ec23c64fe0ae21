//! Per-provider reader state: the string table, the thread table and the tick rate
//! (`docs/fxt-format.md` at the repository root, §2, §4 and §5). Tables change as
//! records arrive; a record's refs resolve against the tables as they were when it
//! was read.

use super::records::{Str, Thread};
use crate::format::{StringId, StringRef, ThreadId, ThreadRef};

/// What an unknown string ref resolves to (after a warning).
pub const UNKNOWN_STRING: &[u8] = b"<unknown>";

/// Most providers a reader tracks; their tables are the reader's largest allocation.
pub const MAX_PROVIDERS: usize = 64;

/// A provider's string table (indexes 1..=0x7FFF).
#[derive(Clone, Debug, Default)]
pub struct StringTable {
    slots: Vec<Option<Box<[u8]>>>,
}

impl StringTable {
    /// The string bound to `id`.
    #[inline]
    pub fn get(&self, id: StringId) -> Option<&[u8]> {
        self.slots.get(usize::from(id.get()))?.as_deref()
    }

    pub(crate) fn set(&mut self, id: StringId, value: &[u8]) {
        let index = usize::from(id.get());
        // Grown to the largest index used, not to the whole id space: most traces
        // use a few hundred ids.
        if self.slots.len() <= index {
            self.slots.resize(index + 1, None);
        }
        if let Some(slot) = self.slots.get_mut(index) {
            match slot {
                Some(old) if old.len() == value.len() => old.copy_from_slice(value),
                _ => *slot = Some(value.into()),
            }
        }
    }

    /// Whether `r` can be resolved (inline, empty, or a bound index).
    #[inline]
    pub fn knows(&self, r: StringRef<'_>) -> bool {
        match r {
            StringRef::Index(id) => self.get(id).is_some(),
            _ => true,
        }
    }

    /// The bytes `r` stands for; [`UNKNOWN_STRING`] for an unbound index.
    #[inline]
    pub fn resolve<'a>(&'a self, r: StringRef<'a>) -> Str<'a> {
        Str(match r {
            StringRef::Empty => b"",
            StringRef::Inline(b) => b,
            StringRef::Index(id) => self.get(id).unwrap_or(UNKNOWN_STRING),
        })
    }
}

/// A provider's thread table (indexes 1..=255).
#[derive(Clone, Debug)]
pub struct ThreadTable {
    slots: [Option<Thread>; 256],
}

impl Default for ThreadTable {
    fn default() -> Self {
        Self { slots: [None; 256] }
    }
}

impl ThreadTable {
    /// The thread bound to `id`.
    #[inline]
    pub fn get(&self, id: ThreadId) -> Option<Thread> {
        self.slots[usize::from(id.get())]
    }

    pub(crate) fn set(&mut self, id: ThreadId, thread: Thread) {
        self.slots[usize::from(id.get())] = Some(thread);
    }

    /// Whether `r` can be resolved.
    #[inline]
    pub fn knows(&self, r: ThreadRef) -> bool {
        match r {
            ThreadRef::Index(id) => self.get(id).is_some(),
            ThreadRef::Inline { .. } => true,
        }
    }

    /// The thread `r` stands for; koids 0/0 for an unbound index (as Perfetto does).
    #[inline]
    pub fn resolve(&self, r: ThreadRef) -> Thread {
        match r {
            ThreadRef::Index(id) => self.get(id).unwrap_or_default(),
            ThreadRef::Inline { process, thread } => Thread { process, thread },
        }
    }
}

/// One provider's state.
#[derive(Clone, Debug)]
pub struct Provider {
    /// Provider id.
    pub id: u32,
    /// Name from its provider info record (empty for the implicit provider 0).
    pub name: Box<[u8]>,
    /// String table.
    pub strings: StringTable,
    /// Thread table.
    pub threads: ThreadTable,
    /// Ticks per second from its last initialization record.
    pub ticks_per_second: Option<u64>,
}

impl Provider {
    pub(crate) fn new(id: u32) -> Self {
        Self {
            id,
            name: Box::default(),
            strings: StringTable::default(),
            threads: ThreadTable::default(),
            ticks_per_second: None,
        }
    }
}

/// A provider's tick rate, to convert the timestamps of its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TickRate {
    /// Ticks per second from the provider's last initialization record.
    pub ticks_per_second: Option<u64>,
}

impl TickRate {
    /// Nanoseconds for `ticks` (see [`ticks_to_ns`]).
    #[inline]
    pub fn ns(self, ticks: u64) -> u64 {
        ticks_to_ns(ticks, self.ticks_per_second)
    }
}

/// Converts ticks to nanoseconds: `ticks * 1e9 / tps` without overflow (u128), clamped
/// to `u64::MAX`. A missing rate counts as 1e9 (the default the format's documentation
/// gives, which Perfetto and Jane Street's parser apply too).
pub fn ticks_to_ns(ticks: u64, ticks_per_second: Option<u64>) -> u64 {
    match ticks_per_second {
        None | Some(1_000_000_000) => ticks,
        Some(0) => ticks,
        Some(tps) => {
            let ns = u128::from(ticks) * 1_000_000_000 / u128::from(tps);
            u64::try_from(ns).unwrap_or(u64::MAX)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tick_conversion() {
        assert_eq!(ticks_to_ns(5, None), 5);
        assert_eq!(ticks_to_ns(3_000, Some(3_000_000_000)), 1_000);
        assert_eq!(ticks_to_ns(u64::MAX, Some(1)), u64::MAX);
        assert_eq!(ticks_to_ns(1 << 62, Some(2_000_000_000)), 1 << 61);
    }

    #[test]
    fn slots_are_replaced() {
        let mut t = StringTable::default();
        let id = StringId::new(5).unwrap();
        assert!(t.get(id).is_none());
        t.set(id, b"abc");
        assert_eq!(t.get(id), Some(&b"abc"[..]));
        t.set(id, b"xyz");
        assert_eq!(t.get(id), Some(&b"xyz"[..]));
        t.set(id, b"longer");
        assert_eq!(t.resolve(StringRef::Index(id)), Str(b"longer"));
        assert_eq!(
            t.resolve(StringRef::Index(StringId::new(6).unwrap())),
            Str(UNKNOWN_STRING)
        );
    }
}
