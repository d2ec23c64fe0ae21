//! The table of live sampled objects, keyed by object id.
//!
//! Object ids are handed out in allocation order (per domain chunk in v3), and most
//! objects die young, so the live set is mostly a dense window of recent ids. The
//! table keeps that window as a vector indexed by `id - base` (an allocation appends, a
//! collection clears a slot) and moves objects that outlive the window into a hash map,
//! the "old generation". A window slot is a 4-byte index into a slab of values whose
//! freed entries are reused, so a sparse window (objects that die in random order)
//! costs 4 bytes per slot, not a whole value. The window is compacted when under a
//! quarter of it is live (beyond a fixed slack), so memory stays proportional to the
//! number of live objects: at most four slots and one slab entry per live object.

use rustc_hash::FxHashMap;
use tracekit_columns::{Grow, Plain, Spill};
use tracekit_memtrace::{DomainId, Timedelta};

/// Ids further than this past the window's end go to the hash map rather than
/// stretching the window over a gap.
const MAX_GAP: u64 = 1 << 16;
/// Slack before a sparse window is compacted: objects that live up to a few hundred
/// thousand allocations (a medium-lived cache) stay in the window (1 MiB of slots).
const MIN_WINDOW: usize = 1 << 18;
/// A window slot with no value.
const EMPTY: u32 = u32::MAX;

/// A table from object id to `T`, for ids that mostly arrive in increasing order: the
/// live objects of a memtrace trace, as the analyses and the Parquet export keep them.
#[derive(Debug)]
pub struct LiveTable<T: Plain> {
    /// Id of `window[0]`.
    base: u64,
    /// Per id from `base`, the index of its value in `slab`, or [`EMPTY`].
    window: Grow<u32>,
    /// First possibly occupied index of `window`.
    head: usize,
    /// Occupied slots of `window`.
    in_window: usize,
    /// Values of the window's ids; the entries listed in `free` are unused.
    slab: Grow<T>,
    free: Grow<u32>,
    old: FxHashMap<u64, T>,
    /// Largest id put in `old` ahead of the window (ids spilled from the window are all
    /// below `base`), so appends need not probe `old` in the common case.
    far_max: Option<u64>,
    /// Most entries the slab may hold: indices must stay below [`EMPTY`].
    slab_limit: usize,
    /// The slab was once full (over four billion live objects), so an id inside the
    /// window with an empty slot may be in `old`.
    overflowed: bool,
}

impl<T: Plain> Default for LiveTable<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Plain> LiveTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::spilling(&Spill::memory())
    }

    /// An empty table whose window and values grow as `spill` says: in files
    /// of its folder past a few MiB ([`tracekit_columns::spill`]), so that a
    /// trace whose objects live long holds no memory of its own for them.
    pub fn spilling(spill: &Spill) -> Self {
        Self::with_slab_limit(spill, EMPTY as usize)
    }

    /// A table whose slab holds at most `slab_limit` entries (tests reach the limit
    /// with small ones).
    fn with_slab_limit(spill: &Spill, slab_limit: usize) -> Self {
        LiveTable {
            base: 0,
            window: Grow::new(spill),
            head: 0,
            in_window: 0,
            slab: Grow::new(spill),
            free: Grow::new(spill),
            old: FxHashMap::default(),
            far_max: None,
            slab_limit: slab_limit.min(EMPTY as usize),
            overflowed: false,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.in_window + self.old.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn slot(&self, id: u64) -> Option<usize> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        (i >= self.head && i < self.window.len()).then_some(i)
    }

    /// Stores `value` in the slab; `None` (and `overflowed` set) when it holds
    /// `slab_limit` entries already.
    #[inline]
    fn put(&mut self, value: T) -> Option<u32> {
        if let Some(k) = self.free.pop() {
            self.slab[k as usize] = value;
            return Some(k);
        }
        if self.slab.len() >= self.slab_limit {
            self.overflowed = true;
            return None;
        }
        // Below `slab_limit`, which is at most `EMPTY`.
        let k = self.slab.len() as u32;
        self.slab.push(value);
        Some(k)
    }

    /// Frees slab entry `k`, returning its value.
    #[inline]
    fn take(&mut self, k: u32) -> T {
        self.free.push(k);
        self.slab[k as usize]
    }

    /// Inserts `value` for `id`, returning the previous value.
    #[inline]
    pub fn insert(&mut self, id: u64, value: T) -> Option<T> {
        // The common case, checked first because it is most of a trace's events: the
        // id just past the window's end, which no far-ahead id has claimed.
        if self.in_window != 0
            && id.wrapping_sub(self.base) == self.window.len() as u64
            && self.far_max.is_none_or(|m| m < id)
            && let Some(k) = self.put(value)
        {
            self.window.push(k);
            self.in_window += 1;
            if self.window.len() - self.head > 4 * self.in_window + MIN_WINDOW {
                self.compact();
            }
            return None;
        }
        self.insert_slow(id, value)
    }

    fn insert_slow(&mut self, id: u64, value: T) -> Option<T> {
        if self.in_window == 0 && self.window.len() == self.head {
            // Empty window: restart it here.
            self.window.truncate(0);
            self.head = 0;
            self.base = id;
        }
        if let Some(i) = self.slot(id) {
            let k = self.window[i];
            if k != EMPTY {
                return Some(std::mem::replace(&mut self.slab[k as usize], value));
            }
            let previous = if self.overflowed {
                self.old.remove(&id)
            } else {
                None
            };
            if let Some(k) = self.put(value) {
                self.window[i] = k;
                self.in_window += 1;
                return previous;
            }
            // The slab is full: keep it in the hash map.
            return self.old.insert(id, value).or(previous);
        }
        let fits = id >= self.base
            && id - self.base >= self.window.len() as u64
            && id - self.base - self.window.len() as u64 <= MAX_GAP
            // Room for every id of the gap and for `id` itself.
            && self.slab.len() - self.free.len() + (MAX_GAP as usize) < self.slab_limit;
        if fits {
            // Ids in the window are unique, but an id that arrived far ahead of the
            // window may be in the old generation.
            let far = self.far_max.is_some_and(|m| m >= id);
            let previous = if far { self.old.remove(&id) } else { None };
            let i = (id - self.base) as usize;
            let start = self.window.len();
            self.window.resize(i, EMPTY);
            if far || self.far_max.is_some_and(|m| m >= self.base + start as u64) {
                // Ids that arrived far ahead of the window are now inside it.
                for j in start..i {
                    let key = self.base + j as u64;
                    // Taken from the hash map only once the slab holds it, so that
                    // nothing is lost even if `fits` were wrong.
                    if let Some(&v) = self.old.get(&key)
                        && let Some(k) = self.put(v)
                    {
                        self.old.remove(&key);
                        self.window[j] = k;
                        self.in_window += 1;
                    }
                }
            }
            match self.put(value) {
                Some(k) => {
                    self.window.push(k);
                    self.in_window += 1;
                }
                // `fits` left room for it; were the slab full all the same, the
                // hash map keeps it as an id ahead of the window.
                None => {
                    self.far_max = Some(self.far_max.map_or(id, |m| m.max(id)));
                    self.old.insert(id, value);
                }
            }
            if self.window.len() - self.head > 4 * self.in_window + MIN_WINDOW {
                self.compact();
            }
            previous
        } else {
            if id >= self.base {
                self.far_max = Some(self.far_max.map_or(id, |m| m.max(id)));
            }
            self.old.insert(id, value)
        }
    }

    /// Removes and returns the value of `id`.
    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<T> {
        match self.slot(id) {
            Some(i) => {
                let k = std::mem::replace(&mut self.window[i], EMPTY);
                if k == EMPTY {
                    // Not here; in the hash map only if the slab was full when it came.
                    return if self.overflowed {
                        self.old.remove(&id)
                    } else {
                        None
                    };
                }
                self.in_window -= 1;
                if i == self.head {
                    self.advance();
                }
                Some(self.take(k))
            }
            None => self.old.remove(&id),
        }
    }

    /// The value of `id`, mutably.
    #[inline]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        match self.slot(id) {
            Some(i) if self.window[i] != EMPTY => self.slab.get_mut(self.window[i] as usize),
            Some(_) if !self.overflowed => None,
            _ => self.old.get_mut(&id),
        }
    }

    /// Skips the holes at the front.
    fn advance(&mut self) {
        while self.head < self.window.len() && self.window[self.head] == EMPTY {
            self.head += 1;
        }
        if self.head > MIN_WINDOW && self.head * 2 > self.window.len() {
            self.window.drain_front(self.head);
            self.base += self.head as u64;
            self.head = 0;
        }
    }

    /// Moves the live entries of the older half of a sparse window to the old
    /// generation and drops that half.
    #[cold]
    fn compact(&mut self) {
        let cut = self.head + (self.window.len() - self.head) / 2;
        for i in self.head..cut {
            let k = std::mem::replace(&mut self.window[i], EMPTY);
            if k != EMPTY {
                let v = self.take(k);
                self.old.insert(self.base + i as u64, v);
                self.in_window -= 1;
            }
        }
        self.window.drain_front(cut);
        self.base += cut as u64;
        self.head = 0;
        self.advance();
    }

    /// Every entry, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.window[self.head..]
            .iter()
            .filter(|&&k| k != EMPTY)
            .filter_map(|&k| self.slab.get(k as usize))
            .chain(self.old.values())
    }

    /// Every entry with its id, by id (what is left live at a trace's end, in
    /// allocation order).
    pub fn into_sorted(self) -> Vec<(u64, T)> {
        let mut all: Vec<(u64, T)> = Vec::with_capacity(self.len());
        for (i, &k) in self.window.iter().enumerate().skip(self.head) {
            if let Some(&v) = (k != EMPTY).then(|| self.slab.get(k as usize)).flatten() {
                all.push((self.base + i as u64, v));
            }
        }
        all.extend(self.old);
        all.sort_unstable_by_key(|&(id, _)| id);
        all
    }
}

/// A sampled object between its allocation and its collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LiveObject {
    pub(crate) samples: u64,
    pub(crate) time: Timedelta,
    pub(crate) site: u32,
    pub(crate) domain: DomainId,
    pub(crate) promoted: bool,
}

/// A [`LiveObject`] in 16 bytes rather than 24: a long trace can hold tens of
/// millions, most of an analysis's memory. The time (48 bits of microseconds,
/// four years either way) shares a word with the domain, the samples have 32
/// bits and the site 31, next to the promoted flag. An object that does not fit
/// is kept whole aside ([`LiveObjects`]), its packed entry marked by
/// [`OVERSIZE`] samples.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Packed {
    time_domain: u64,
    samples: u32,
    site_promoted: u32,
}

tracekit_columns::plain_struct!(Packed {
    time_domain: u64,
    samples: u32,
    site_promoted: u32,
});

/// The samples of a packed entry whose object is kept whole aside.
const OVERSIZE: u32 = u32::MAX;
/// The packed site of an object charged to no site (`u32::MAX` unpacked).
const PACKED_NO_SITE: u32 = (1 << 31) - 1;
const PROMOTED: u32 = 1 << 31;

impl Packed {
    fn new(o: &LiveObject) -> Option<Packed> {
        let t = o.time.as_micros();
        let time_domain = ((t as u64) << 16) | u64::from(o.domain.get());
        let site = match o.site {
            u32::MAX => PACKED_NO_SITE,
            s if s < PACKED_NO_SITE => s,
            _ => return None,
        };
        let fits = (time_domain as i64) >> 16 == t && o.samples < u64::from(OVERSIZE);
        fits.then_some(Packed {
            time_domain,
            samples: o.samples as u32,
            site_promoted: site | if o.promoted { PROMOTED } else { 0 },
        })
    }

    /// The object, unless it is kept aside.
    fn get(self) -> Option<LiveObject> {
        if self.samples == OVERSIZE {
            return None;
        }
        let site = match self.site_promoted & !PROMOTED {
            PACKED_NO_SITE => u32::MAX,
            s => s,
        };
        Some(LiveObject {
            samples: u64::from(self.samples),
            time: Timedelta::from_micros((self.time_domain as i64) >> 16),
            site,
            domain: DomainId::new(self.time_domain as u16),
            promoted: self.site_promoted & PROMOTED != 0,
        })
    }
}

/// The live objects by id: packed in a [`LiveTable`], and those that do not
/// pack whole in a hash map.
#[derive(Debug)]
pub(crate) struct LiveObjects {
    table: LiveTable<Packed>,
    oversize: FxHashMap<u64, LiveObject>,
}

/// The packed entry of an object kept aside.
const ASIDE: Packed = Packed {
    time_domain: 0,
    samples: OVERSIZE,
    site_promoted: 0,
};

impl LiveObjects {
    /// No object, their table grown as `spill` says ([`LiveTable::spilling`]).
    pub(crate) fn spilling(spill: &Spill) -> Self {
        LiveObjects {
            table: LiveTable::spilling(spill),
            oversize: FxHashMap::default(),
        }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// The object a packed entry of `id` stands for.
    fn unpack(&mut self, id: u64, p: Packed) -> Option<LiveObject> {
        p.get().or_else(|| self.oversize.remove(&id))
    }

    /// Adds `obj` under `id`, returning the object that had it.
    #[inline]
    pub(crate) fn insert(&mut self, id: u64, obj: LiveObject) -> Option<LiveObject> {
        let (packed, aside) = match Packed::new(&obj) {
            Some(p) => (p, None),
            None => (ASIDE, Some(obj)),
        };
        let old = self.table.insert(id, packed);
        let old = old.and_then(|p| self.unpack(id, p));
        if let Some(obj) = aside {
            self.oversize.insert(id, obj);
        }
        old
    }

    /// Removes and returns the object `id`.
    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<LiveObject> {
        let p = self.table.remove(id)?;
        self.unpack(id, p)
    }

    /// Marks the object `id` promoted, returning its site if it was not yet;
    /// `Err(())` if there is no such object.
    #[inline]
    pub(crate) fn promote(&mut self, id: u64) -> Result<Option<u32>, ()> {
        let p = self.table.get_mut(id).ok_or(())?;
        if p.samples == OVERSIZE {
            let obj = self.oversize.get_mut(&id).ok_or(())?;
            return Ok((!std::mem::replace(&mut obj.promoted, true)).then_some(obj.site));
        }
        if p.site_promoted & PROMOTED != 0 {
            return Ok(None);
        }
        p.site_promoted |= PROMOTED;
        Ok(p.get().map(|o| o.site))
    }

    /// Every live object.
    pub(crate) fn values(&self) -> impl Iterator<Item = LiveObject> + '_ {
        let packed = self.table.values().filter_map(|p| p.get());
        packed.chain(self.oversize.values().copied())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_packed_object_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Packed>(), 16);
    }

    #[test]
    fn objects_come_back_whole_packed_or_aside() {
        let obj = |samples, time, site, promoted| LiveObject {
            samples,
            time: Timedelta::from_micros(time),
            site,
            domain: DomainId::new(7),
            promoted,
        };
        let edge = [
            obj(1, 0, 0, false),
            obj(
                u64::from(u32::MAX) - 1,
                (1 << 47) - 1,
                PACKED_NO_SITE - 1,
                true,
            ),
            obj(3, -(1 << 47), u32::MAX, false),
            // These do not pack.
            obj(u64::from(u32::MAX), 5, 1, false),
            obj(u64::MAX, 5, 1, true),
            obj(2, 1 << 47, 1, false),
            obj(2, i64::MIN, 1, false),
            obj(2, 5, PACKED_NO_SITE, false),
            obj(2, 5, u32::MAX - 1, false),
        ];
        for (i, o) in edge.iter().enumerate() {
            assert_eq!(Packed::new(o).is_some(), i < 3, "{o:?}");
        }
        let mut live = LiveObjects::spilling(&Spill::memory());
        for (id, o) in edge.iter().enumerate() {
            assert_eq!(live.insert(id as u64, *o), None);
        }
        assert_eq!(live.len(), edge.len());
        let mut all: Vec<LiveObject> = live.values().collect();
        all.sort_by_key(|o| (o.samples, o.time, o.site));
        let mut expected = edge.to_vec();
        expected.sort_by_key(|o| (o.samples, o.time, o.site));
        assert_eq!(all, expected);
        // Promotion, once, packed or aside; an unknown id is an error.
        for id in [0u64, 3] {
            assert_eq!(live.promote(id), Ok(Some(edge[id as usize].site)));
            assert_eq!(live.promote(id), Ok(None));
        }
        assert_eq!(live.promote(1), Ok(None), "promoted at allocation");
        assert_eq!(live.promote(99), Err(()));
        // A reused id gives back the old object, the new one replacing it aside.
        let again = obj(u64::MAX - 1, 9, 2, false);
        let old = live.insert(4, again).unwrap();
        assert_eq!((old.samples, old.promoted), (u64::MAX, true));
        assert_eq!(
            live.insert(3, edge[0]).map(|o| o.samples),
            Some(u64::from(u32::MAX))
        );
        for (id, o) in edge.iter().enumerate() {
            let want = match id {
                3 => edge[0],
                4 => again,
                0 => LiveObject {
                    promoted: true,
                    ..*o
                },
                _ => *o,
            };
            assert_eq!(live.remove(id as u64), Some(want), "{id}");
        }
        assert_eq!(live.len(), 0);
        assert_eq!(live.values().count(), 0);
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_map(
            ops in proptest::collection::vec((0u8..4, 0u64..300_000), 1..400),
            small_slab in proptest::bool::ANY,
        ) {
            // A small slab fills up, which sends values to the hash map.
            let mut t = if small_slab {
                LiveTable::with_slab_limit(&Spill::memory(), 40)
            } else {
                LiveTable::new()
            };
            let mut m = HashMap::new();
            let mut next = 0u64;
            for (op, x) in ops {
                match op {
                    // Mostly increasing ids, sometimes far jumps or old ids.
                    0 | 1 => {
                        let id = if op == 0 { next += 1 + x % 3; next } else { x };
                        proptest::prop_assert_eq!(t.insert(id, id * 2), m.insert(id, id * 2));
                    }
                    2 => {
                        let id = if next > 0 { next - x % next.max(1) } else { x };
                        proptest::prop_assert_eq!(t.remove(id), m.remove(&id));
                    }
                    _ => {
                        let id = x % (next + 1);
                        proptest::prop_assert_eq!(t.get_mut(id).copied(), m.get(&id).copied());
                    }
                }
                proptest::prop_assert_eq!(t.len(), m.len());
            }
            let mut a: Vec<u64> = t.values().copied().collect();
            let mut b: Vec<u64> = m.values().copied().collect();
            a.sort_unstable();
            b.sort_unstable();
            proptest::prop_assert_eq!(a, b);
            let mut b: Vec<(u64, u64)> = m.into_iter().collect();
            b.sort_unstable();
            proptest::prop_assert_eq!(t.into_sorted(), b);
        }
    }

    /// A full slab: an id inside the window whose slot is empty then goes to the hash
    /// map, and every operation must still find it there.
    #[test]
    fn a_full_slab_spills_to_the_map() {
        let limit = MAX_GAP as usize + 100;
        let mut t = LiveTable::with_slab_limit(&Spill::memory(), limit);
        let mut m = HashMap::new();
        let check = |t: &mut LiveTable<u64>, m: &HashMap<u64, u64>| {
            assert_eq!(t.len(), m.len());
            let mut a: Vec<u64> = t.values().copied().collect();
            let mut b: Vec<u64> = m.values().copied().collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        };
        let limit = limit as u64;
        for id in 0..limit {
            assert_eq!(t.insert(id, id), m.insert(id, id));
        }
        // Empty slots inside the window, then appends that take their slab entries.
        for id in 10..20 {
            assert_eq!(t.remove(id), m.remove(&id));
        }
        for id in limit..limit + 10 {
            assert_eq!(t.insert(id, id), m.insert(id, id));
        }
        assert!(!t.overflowed);
        // The slab is full: these go to the hash map.
        for id in 12..16 {
            assert_eq!(t.insert(id, 7), m.insert(id, 7));
        }
        assert!(t.overflowed);
        check(&mut t, &m);
        assert_eq!(t.get_mut(13).copied(), Some(7));
        assert_eq!(t.insert(14, 8), m.insert(14, 8));
        assert_eq!(t.remove(15), m.remove(&15));
        assert_eq!(t.remove(15), None);
        assert_eq!(t.get_mut(15), None);
        check(&mut t, &m);
        // Then a mix of everything, against the model.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = limit + 10;
        for step in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let back = (x >> 8) % (2 * limit);
            let id = next.saturating_sub(back);
            match x % 4 {
                0 => {
                    next += 1;
                    assert_eq!(t.insert(next, step), m.insert(next, step));
                }
                1 => assert_eq!(t.remove(id), m.remove(&id), "remove {id}"),
                2 => assert_eq!(t.insert(id, step), m.insert(id, step), "insert {id}"),
                _ => assert_eq!(t.get_mut(id).copied(), m.get(&id).copied(), "get {id}"),
            }
        }
        check(&mut t, &m);
        let mut b: Vec<(u64, u64)> = m.into_iter().collect();
        b.sort_unstable();
        assert_eq!(t.into_sorted(), b);
    }

    #[test]
    fn memory_follows_the_live_set() {
        // One immortal object, then a million short-lived ones.
        let mut t = LiveTable::new();
        t.insert(0, 0u64);
        for id in 1..300_000u64 {
            t.insert(id, id);
            if id > 10 {
                t.remove(id - 10);
            }
        }
        assert_eq!(t.len(), 11);
        assert!(t.window.len() < 4 * MIN_WINDOW, "{}", t.window.len());
    }
}
