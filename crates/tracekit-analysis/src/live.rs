//! The table of live sampled objects, keyed by object id.
//!
//! Object ids are handed out in allocation order (per domain chunk in v3), and most
//! objects die young, so the live set is mostly a dense window of recent ids. The
//! table keeps that window as a vector indexed by `id - base` (an allocation appends, a
//! collection clears a slot) and moves objects that outlive the window into a hash map,
//! the "old generation". The window is compacted when under a quarter of it is live
//! (beyond a fixed slack), so memory stays proportional to the number of live objects:
//! at most four 24-byte slots per live object, about what a hash map entry costs, and
//! objects that die in random order mostly stay out of the slower hash map.

use rustc_hash::FxHashMap;

/// Ids further than this past the window's end go to the hash map rather than
/// stretching the window over a gap.
const MAX_GAP: u64 = 1 << 16;
/// Slack before a sparse window is compacted: objects that live up to a few hundred
/// thousand allocations (a medium-lived cache) stay in the window (8 MiB at most).
const MIN_WINDOW: usize = 1 << 18;

/// A table from object id to `T`, for ids that mostly arrive in increasing order.
#[derive(Debug)]
pub(crate) struct LiveTable<T> {
    /// Id of `window[0]`.
    base: u64,
    window: Vec<Option<T>>,
    /// First possibly occupied index of `window`.
    head: usize,
    /// Occupied slots of `window`.
    in_window: usize,
    old: FxHashMap<u64, T>,
    /// Largest id put in `old` ahead of the window (ids spilled from the window are all
    /// below `base`), so appends need not probe `old` in the common case.
    far_max: Option<u64>,
}

impl<T: Copy> LiveTable<T> {
    pub(crate) fn new() -> Self {
        LiveTable {
            base: 0,
            window: Vec::new(),
            head: 0,
            in_window: 0,
            old: FxHashMap::default(),
            far_max: None,
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.in_window + self.old.len()
    }

    #[inline]
    fn slot(&self, id: u64) -> Option<usize> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        (i >= self.head && i < self.window.len()).then_some(i)
    }

    /// Inserts `value` for `id`, returning the previous value.
    #[inline]
    pub(crate) fn insert(&mut self, id: u64, value: T) -> Option<T> {
        // The common case, checked first because it is most of a trace's events: the
        // id just past the window's end, which no far-ahead id has claimed.
        if self.in_window != 0
            && id.wrapping_sub(self.base) == self.window.len() as u64
            && self.far_max.is_none_or(|m| m < id)
        {
            self.window.push(Some(value));
            self.in_window += 1;
            if self.window.len() - self.head > 4 * self.in_window + MIN_WINDOW {
                self.compact();
            }
            return None;
        }
        if self.in_window == 0 && self.window.len() == self.head {
            // Empty window: restart it here.
            self.window.clear();
            self.head = 0;
            self.base = id;
        }
        if let Some(i) = self.slot(id) {
            let old = self.window[i].replace(value);
            if old.is_none() {
                self.in_window += 1;
            }
            return old;
        }
        let fits = id >= self.base
            && id - self.base >= self.window.len() as u64
            && id - self.base - self.window.len() as u64 <= MAX_GAP;
        if fits {
            // Ids in the window are unique, but an id that arrived far ahead of the
            // window may be in the old generation.
            let far = self.far_max.is_some_and(|m| m >= id);
            let previous = if far { self.old.remove(&id) } else { None };
            let i = (id - self.base) as usize;
            let start = self.window.len();
            self.window.resize(i, None);
            if far || self.far_max.is_some_and(|m| m >= self.base + start as u64) {
                // Ids that arrived far ahead of the window are now inside it.
                for j in start..i {
                    if let Some(v) = self.old.remove(&(self.base + j as u64)) {
                        self.window[j] = Some(v);
                        self.in_window += 1;
                    }
                }
            }
            self.window.push(Some(value));
            self.in_window += 1;
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
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        match self.slot(id) {
            Some(i) => {
                let v = self.window[i].take();
                if v.is_some() {
                    self.in_window -= 1;
                    if i == self.head {
                        self.advance();
                    }
                }
                v
            }
            None => self.old.remove(&id),
        }
    }

    /// The value of `id`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        match self.slot(id) {
            Some(i) => self.window[i].as_mut(),
            None => self.old.get_mut(&id),
        }
    }

    /// Skips the holes at the front.
    fn advance(&mut self) {
        while self.head < self.window.len() && self.window[self.head].is_none() {
            self.head += 1;
        }
        if self.head > MIN_WINDOW && self.head * 2 > self.window.len() {
            self.window.drain(..self.head);
            self.base += self.head as u64;
            self.head = 0;
        }
    }

    /// Moves the live entries of the older half of a sparse window to the old
    /// generation and drops that half.
    #[cold]
    fn compact(&mut self) {
        let cut = self.head + (self.window.len() - self.head) / 2;
        for (i, slot) in self.window[self.head..cut].iter_mut().enumerate() {
            if let Some(v) = slot.take() {
                self.old.insert(self.base + (self.head + i) as u64, v);
                self.in_window -= 1;
            }
        }
        self.window.drain(..cut);
        self.base += cut as u64;
        self.head = 0;
        self.advance();
    }

    /// Every entry, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.window[self.head..]
            .iter()
            .flatten()
            .chain(self.old.values())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    proptest::proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..4, 0u64..300_000), 1..400)) {
            let mut t = LiveTable::new();
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
        }
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
