//! Finding a tree node's child by key: a call tree's (parent, frame name), a
//! backtrace trie's (parent, location code).
//!
//! Open addressing with linear probing over node ids. A slot holds only an id; its key
//! is the node's own fields, which the caller compares. An edge therefore costs 4
//! bytes per slot rather than a hash map's copy of the key beside the value. The table
//! doubles when it is over 60% full, where linear probing looks at under two slots on
//! average to find an id. Its slots are a column of the byte kit
//! ([`tracekit_columns::Grow`]): on huge pages in memory, or, for a table of a tree
//! that may grow with its input, in a file of a folder the owner names
//! ([`IdTable::spilling`]).

use tracekit_columns::{Grow, Spill};

/// An empty slot.
const EMPTY: u32 = u32::MAX;

/// Slots of a new table: 2^10.
const MIN_BITS: u32 = 10;

/// The first slot of `key` in a table of 2^`bits` slots.
#[inline]
fn home(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// Node ids by key (see the module docs).
#[derive(Clone, Debug)]
pub struct IdTable {
    slots: Grow<u32>,
    bits: u32,
}

impl Default for IdTable {
    fn default() -> Self {
        IdTable::new()
    }
}

impl IdTable {
    /// An empty table, its slots in memory.
    pub fn new() -> IdTable {
        IdTable::spilling(&Spill::memory())
    }

    /// An empty table whose slots grow as `spill` says: in a file of its
    /// folder past a few MiB.
    pub fn spilling(spill: &Spill) -> IdTable {
        let mut slots = Grow::new(spill);
        slots.resize(1 << MIN_BITS, EMPTY);
        IdTable {
            slots,
            bits: MIN_BITS,
        }
    }

    /// The id of `key` that `is_key` accepts, or the slot where it would go
    /// ([`IdTable::insert`]).
    #[inline]
    pub fn find(&self, key: u64, is_key: impl Fn(u32) -> bool) -> Result<u32, usize> {
        let slots = self.slots.as_slice();
        let mask = slots.len() - 1;
        let mut i = home(key, self.bits);
        loop {
            match slots[i] {
                EMPTY => return Err(i),
                id if is_key(id) => return Ok(id),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Puts `id` in `slot` (from [`IdTable::find`]); the table then holds `len` ids. If
    /// that fills it past 60%, it doubles and puts back the ids `1..len`, the key of
    /// each given by `key_of`.
    pub fn insert(&mut self, slot: usize, id: u32, len: usize, key_of: impl Fn(u32) -> u64) {
        self.slots[slot] = id;
        if len * 5 > self.slots.len() * 3 {
            self.grow(len, key_of);
        }
    }

    #[cold]
    fn grow(&mut self, len: usize, key_of: impl Fn(u32) -> u64) {
        self.bits += 1;
        let spill = self.slots.spill().clone();
        // The old slots go first: their ids are put back from `key_of`.
        self.slots = Grow::new(&spill);
        self.slots.resize(1 << self.bits, EMPTY);
        let slots = self.slots.as_mut_slice();
        let mask = slots.len() - 1;
        for id in 1..len as u32 {
            let mut i = home(key_of(id), self.bits);
            while slots[i] != EMPTY {
                i = (i + 1) & mask;
            }
            slots[i] = id;
        }
    }

    /// Bytes of memory held (none for slots in a file).
    pub fn heap_bytes(&self) -> usize {
        self.slots.own_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_again_after_the_table_grows() {
        // Keys 1..n, of ids 1..n; every fourth key collides with the one before.
        let key_of = |id: u32| u64::from(id / 4 * 4) << 40 | u64::from(id % 4);
        let mut t = IdTable::new();
        for id in 1..20_000u32 {
            let slot = t.find(key_of(id), |c| key_of(c) == key_of(id)).unwrap_err();
            t.insert(slot, id, id as usize + 1, key_of);
        }
        assert!(t.slots.len() > 20_000);
        for id in 1..20_000u32 {
            assert_eq!(t.find(key_of(id), |c| key_of(c) == key_of(id)), Ok(id));
        }
        assert!(t.find(u64::MAX, |_| false).is_err());
    }
}
