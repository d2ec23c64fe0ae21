//! The sampled-block table: which live blocks were sampled, and as what.
//!
//! Every free must find out whether its block was sampled, so the lookup must
//! be cheap and lock-free. It has two stages:
//!
//! 1. A *counting filter*: [`FILTER_SLOTS`] one-byte counters indexed by a
//!    hash of the address, incremented when a sampled block is recorded and
//!    decremented when it is freed. A zero counter proves the block was not
//!    sampled, which is the answer for nearly every free (one load from a
//!    64 KiB array). Counters saturate at 255 and then stay there.
//! 2. On a non-zero counter, the *levels*: open-addressing tables of
//!    8-slot buckets (one cache line of keys, one of values). Level `i` has
//!    `2048 << i` buckets and its own hash; a block goes into the first level
//!    whose bucket has a free slot, new levels are allocated when all are
//!    full, and a lookup scans the block's bucket in each allocated level:
//!    at most [`MAX_LEVELS`] cache lines, so O(1).
//!
//! Keys are addresses; an address is in the table at most once because the
//! allocator never hands out a live address twice and a block is removed
//! before it is handed back to the inner allocator. Slots are claimed with a
//! compare-and-swap and freed by storing 0, so no lock is ever taken, except
//! a mutex around allocating a new level (sampled path only, rare).
//!
//! A value packs the event's sample key, its domain slot and the session
//! generation (see [`Entry`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use crate::slots::SlotId;

/// Number of counters in the filter.
pub(crate) const FILTER_SLOTS: usize = 1 << 16;
const FILTER_BITS: u32 = 16;

/// Most levels ever allocated: level 19 alone has a billion slots.
pub(crate) const MAX_LEVELS: usize = 20;

const LEVEL0_BUCKET_BITS: u32 = 11;
const BUCKET_SLOTS: usize = 8;

static FILTER: [AtomicU8; FILTER_SLOTS] = [const { AtomicU8::new(0) }; FILTER_SLOTS];

/// One bucket: eight keys in one cache line, their values in the next.
#[repr(C, align(64))]
struct Bucket {
    keys: [AtomicUsize; BUCKET_SLOTS],
    values: [AtomicU64; BUCKET_SLOTS],
}

struct Level {
    buckets: Box<[Bucket]>,
    bits: u32,
    multiplier: u64,
}

static LEVELS: [AtomicPtr<Level>; MAX_LEVELS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_LEVELS];

/// Serialises level creation.
static GROW: Mutex<()> = Mutex::new(());

/// What the table records for a sampled block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The sample key of the alloc record (40 bits are kept).
    pub(crate) key: u64,
    /// The domain slot whose queue holds the alloc record.
    pub(crate) slot: SlotId,
    /// Low 16 bits of the session generation.
    pub(crate) generation: u16,
}

impl Entry {
    fn pack(self) -> u64 {
        (self.key & 0xFF_FFFF_FFFF)
            | (self.slot.index() as u64) << 40
            | u64::from(self.generation) << 48
    }

    fn unpack(v: u64) -> Entry {
        Entry {
            key: v & 0xFF_FFFF_FFFF,
            slot: SlotId::new(((v >> 40) & 0xFF) as usize),
            generation: (v >> 48) as u16,
        }
    }
}

#[inline(always)]
fn mix(addr: usize) -> u64 {
    // Blocks are at least 8-byte aligned; drop the always-zero bits.
    ((addr as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[inline(always)]
fn filter_index(addr: usize) -> usize {
    (mix(addr) >> (64 - FILTER_BITS)) as usize
}

/// The free path's test: false proves that `addr` is not a sampled block.
#[inline(always)]
pub(crate) fn may_contain(addr: *mut u8) -> bool {
    FILTER[filter_index(addr as usize)].load(Ordering::Relaxed) != 0
}

fn filter_increment(addr: usize) {
    let c = &FILTER[filter_index(addr)];
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        (v < u8::MAX).then(|| v + 1)
    });
}

fn filter_decrement(addr: usize) {
    let c = &FILTER[filter_index(addr)];
    // A saturated counter no longer knows its count: it stays saturated.
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        (v > 0 && v < u8::MAX).then(|| v - 1)
    });
}

impl Level {
    fn new(index: usize) -> Level {
        let bits = LEVEL0_BUCKET_BITS + index as u32;
        let n = 1usize << bits;
        let buckets = (0..n)
            .map(|_| Bucket {
                keys: [const { AtomicUsize::new(0) }; BUCKET_SLOTS],
                values: [const { AtomicU64::new(0) }; BUCKET_SLOTS],
            })
            .collect();
        Level {
            buckets,
            bits,
            // A different odd multiplier per level, so that blocks crowding
            // one bucket spread out over the next level.
            multiplier: 0xD6E8_FEB8_6659_FD93u64.wrapping_add((index as u64) << 33) | 1,
        }
    }

    #[inline(always)]
    fn bucket(&self, addr: usize) -> &Bucket {
        let h = ((addr as u64) >> 3).wrapping_mul(self.multiplier) >> (64 - self.bits);
        &self.buckets[h as usize]
    }
}

fn level(i: usize) -> Option<&'static Level> {
    let p = LEVELS[i].load(Ordering::Acquire);
    // SAFETY: a non-null pointer in LEVELS comes from `Box::into_raw` in
    // `grow` and is never freed, so it is valid for 'static; the Acquire load
    // pairs with the Release store that published the initialised level.
    unsafe { p.as_ref() }
}

/// Allocates level `i` if no other thread has. Returns it.
fn grow(i: usize) -> &'static Level {
    let _lock = GROW.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = level(i) {
        return l;
    }
    let p = Box::into_raw(Box::new(Level::new(i)));
    LEVELS[i].store(p, Ordering::Release);
    // SAFETY: `p` was just created from a Box and is never freed.
    unsafe { &*p }
}

/// Records a sampled block. Must be called before `addr` is returned to the
/// program. Returns false only when every level is full.
pub(crate) fn insert(addr: *mut u8, entry: Entry) -> bool {
    let addr = addr as usize;
    let value = entry.pack();
    for i in 0..MAX_LEVELS {
        let l = match level(i) {
            Some(l) => l,
            None => grow(i),
        };
        let b = l.bucket(addr);
        for (k, v) in b.keys.iter().zip(&b.values) {
            if k.load(Ordering::Relaxed) == 0
                && k.compare_exchange(0, addr, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                v.store(value, Ordering::Relaxed);
                filter_increment(addr);
                return true;
            }
        }
    }
    false
}

/// Removes `addr` if it is a sampled block, returning what was recorded.
/// Called on free and realloc before the block goes back to the inner
/// allocator.
pub(crate) fn remove(addr: *mut u8) -> Option<Entry> {
    let addr = addr as usize;
    for i in 0..MAX_LEVELS {
        let l = level(i)?;
        let b = l.bucket(addr);
        for (k, v) in b.keys.iter().zip(&b.values) {
            if k.load(Ordering::Relaxed) == addr {
                let value = v.load(Ordering::Relaxed);
                // Release: the value is read before the slot can be reused.
                k.store(0, Ordering::Release);
                filter_decrement(addr);
                return Some(Entry::unpack(value));
            }
        }
    }
    None
}

/// Forgets every entry (at a session start; entries of earlier sessions are
/// also recognised by their generation, so a racing free is harmless).
pub(crate) fn clear() {
    for i in 0..MAX_LEVELS {
        let Some(l) = level(i) else { break };
        for b in l.buckets.iter() {
            for k in &b.keys {
                k.store(0, Ordering::Relaxed);
            }
        }
    }
    for c in &FILTER {
        c.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table is global; these tests use addresses no other test uses.

    #[test]
    fn insert_find_remove() {
        let base = 0x7100_0000_0000usize;
        let e = |k| Entry {
            key: k,
            slot: SlotId::new(3),
            generation: 9,
        };
        for i in 0..1000 {
            assert!(insert((base + i * 16) as *mut u8, e(i as u64)));
        }
        for i in 0..1000 {
            assert!(may_contain((base + i * 16) as *mut u8));
        }
        for i in (0..1000).rev() {
            assert_eq!(remove((base + i * 16) as *mut u8), Some(e(i as u64)));
            assert_eq!(remove((base + i * 16) as *mut u8), None);
        }
    }

    #[test]
    fn full_buckets_spill_into_new_levels() {
        // 100k entries overflow level 0 (16k slots) and need several levels.
        let base = 0x7200_0000_0000usize;
        let e = Entry {
            key: 5,
            slot: SlotId::new(1),
            generation: 2,
        };
        let n = 100_000;
        for i in 0..n {
            assert!(insert((base + i * 32) as *mut u8, e));
        }
        assert!(level(2).is_some());
        for i in 0..n {
            assert_eq!(remove((base + i * 32) as *mut u8), Some(e), "entry {i}");
        }
    }

    #[test]
    fn entries_pack_and_unpack() {
        let e = Entry {
            key: 0xAB_CDEF_0123,
            slot: SlotId::new(63),
            generation: 0xFFFF,
        };
        assert_eq!(Entry::unpack(e.pack()), e);
    }

    #[test]
    fn filter_counters_saturate() {
        let addr = 0x7300_0000_0000usize;
        for _ in 0..300 {
            filter_increment(addr);
        }
        for _ in 0..300 {
            filter_decrement(addr);
        }
        assert!(may_contain(addr as *mut u8), "a saturated counter sticks");
    }
}
