//! What a pass counts per allocation site: [`SiteCounts`], the quantities a
//! report shows, and [`SiteTable`], which holds them per distinct allocating
//! backtrace in the order of first allocation.
//!
//! A deep trace has millions of distinct backtraces, and a full [`SiteCounts`]
//! is 88 bytes. A flame graph weighs each by one quantity ([`Weight`]), so a
//! pass for one keeps that quantity alone ([`PerSite::Weight`]): 12 bytes a
//! site with its backtrace id instead of 92, which is most of what a flame
//! graph of a large trace holds. The table still sums every count over all
//! sites, so the totals a report prints are whole either way. A table of every
//! count over many sites (whole backtraces) keeps each count in 32 bits while it
//! fits ([`PerSite::Narrow`]): 44 bytes a site.

use rustc_hash::FxHashMap;
use tracekit_columns::{Grow, Plain, Spill};
use tracekit_memtrace::{AllocationSource, Timedelta};

use crate::backtrace::BacktraceId;

/// Counts for one backtrace (or, summed, for a site or the whole trace). All sizes are
/// in samples; [`Sampling`](crate::Sampling) turns them into estimated bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[repr(C)]
pub struct SiteCounts {
    /// Allocation events (sampled objects).
    pub allocs: u64,
    /// Samples allocated.
    pub samples: u64,
    /// Samples allocated, by [`AllocationSource`] (minor, major, external).
    pub samples_by_source: [u64; 3],
    /// Words of the sampled objects themselves (`length`).
    pub words: u64,
    /// Sampled objects that were promoted to the major heap.
    pub promoted: u64,
    /// Sampled objects collected.
    pub collected_allocs: u64,
    /// Samples collected.
    pub collected: u64,
    /// Sampled objects live at `Options::live_at`.
    pub live_at_allocs: u64,
    /// Samples live at `Options::live_at`.
    pub live_at: u64,
}

impl SiteCounts {
    /// Samples still live at the end of the trace.
    pub fn live_end(&self) -> u64 {
        self.samples.saturating_sub(self.collected)
    }

    /// Objects still live at the end of the trace.
    pub fn live_end_allocs(&self) -> u64 {
        self.allocs.saturating_sub(self.collected_allocs)
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &SiteCounts) {
        self.allocs += other.allocs;
        self.samples += other.samples;
        for (a, b) in self
            .samples_by_source
            .iter_mut()
            .zip(other.samples_by_source)
        {
            *a += b;
        }
        self.words += other.words;
        self.promoted += other.promoted;
        self.collected_allocs += other.collected_allocs;
        self.collected += other.collected;
        self.live_at_allocs += other.live_at_allocs;
        self.live_at += other.live_at;
    }
}

tracekit_columns::plain_struct!(SiteCounts {
    allocs: u64,
    samples: u64,
    samples_by_source: [u64; 3],
    words: u64,
    promoted: u64,
    collected_allocs: u64,
    collected: u64,
    live_at_allocs: u64,
    live_at: u64,
});

/// Which quantity a flame graph weighs stacks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Bytes allocated.
    Allocated,
    /// Bytes live at the profile's `live_at` time.
    LiveAt,
    /// Bytes live at the end.
    LiveEnd,
}

impl Weight {
    /// This weight of a site, in samples.
    pub fn of(self, c: &SiteCounts) -> u64 {
        match self {
            Weight::Allocated => c.samples,
            Weight::LiveAt => c.live_at,
            Weight::LiveEnd => c.live_end(),
        }
    }

    /// How many sampled objects this weight of a site counts.
    pub fn objects(self, c: &SiteCounts) -> u64 {
        match self {
            Weight::Allocated => c.allocs,
            Weight::LiveAt => c.live_at_allocs,
            Weight::LiveEnd => c.allocs.saturating_sub(c.collected_allocs),
        }
    }

    /// What the weight is, in words: `allocated`, `live at 1.5s`, `live at the peak
    /// (1.5s)`, `live at the end`. `at` is the profile's `live_at` time, `at_peak`
    /// whether that is the heap's peak.
    pub fn describe(self, at: Option<Timedelta>, at_peak: bool) -> String {
        match (self, at) {
            (Weight::LiveAt, Some(t)) if at_peak => format!("live at the peak ({t})"),
            (Weight::LiveAt, Some(t)) => format!("live at {t}"),
            (Weight::LiveEnd, _) => "live at the end".to_string(),
            _ => "allocated".to_string(),
        }
    }
}

/// What a pass keeps for each site.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PerSite {
    /// Every count ([`SiteCounts`]).
    #[default]
    All,
    /// One quantity; the other counts of a site read as 0 (the totals stay
    /// whole).
    Weight(Weight),
    /// One quantity and the sampled objects it counts ([`Weight::objects`]), 4
    /// bytes more a site, for tables that show a count.
    Counted(Weight),
    /// Every count, as [`PerSite::All`], each in 32 bits while it fits: 44 bytes a
    /// site rather than 88 (a site whose count outgrows 32 bits is kept whole
    /// aside), for passes over many sites, such as whole backtraces.
    Narrow,
}

impl PerSite {
    /// The one quantity kept, and whether its objects are counted too (`None`:
    /// every count is kept).
    fn one(self) -> Option<(Weight, bool)> {
        match self {
            PerSite::All | PerSite::Narrow => None,
            PerSite::Weight(w) => Some((w, false)),
            PerSite::Counted(w) => Some((w, true)),
        }
    }
}

/// A site's counts in 32 bits each ([`PerSite::Narrow`]), in the order of
/// [`Narrow::of`]; `allocs` at [`Narrow::WIDE`] says they are kept whole aside.
#[derive(Clone, Copy, Debug, Default)]
#[repr(transparent)]
struct Narrow([u32; 11]);

// SAFETY: `repr(transparent)` over `[u32; 11]`, which is `Plain`.
unsafe impl Plain for Narrow {
    const WIDTH: usize = <[u32; 11]>::WIDTH;

    fn from_le(b: &[u8]) -> Self {
        Narrow(<[u32; 11]>::from_le(b))
    }
}

impl Narrow {
    /// In `allocs`: the counts outgrew 32 bits.
    const WIDE: u32 = u32::MAX;

    fn wide() -> Narrow {
        let mut n = Narrow::default();
        n.0[0] = Narrow::WIDE;
        n
    }

    /// `c` in 32 bits each, unless a count does not fit (or would read as
    /// [`Narrow::WIDE`]).
    #[inline(always)]
    fn of(c: &SiteCounts) -> Option<Narrow> {
        let all = [
            c.allocs,
            c.samples,
            c.samples_by_source[0],
            c.samples_by_source[1],
            c.samples_by_source[2],
            c.words,
            c.promoted,
            c.collected_allocs,
            c.collected,
            c.live_at_allocs,
            c.live_at,
        ];
        if all.iter().any(|&v| v >= u64::from(Narrow::WIDE)) {
            return None;
        }
        Some(Narrow(all.map(|v| v as u32)))
    }

    /// The counts, or `None` when they are kept aside.
    #[inline(always)]
    fn get(&self) -> Option<SiteCounts> {
        let n = self.0.map(u64::from);
        (self.0[0] != Narrow::WIDE).then_some(SiteCounts {
            allocs: n[0],
            samples: n[1],
            samples_by_source: [n[2], n[3], n[4]],
            words: n[5],
            promoted: n[6],
            collected_allocs: n[7],
            collected: n[8],
            live_at_allocs: n[9],
            live_at: n[10],
        })
    }
}

/// Per distinct allocating backtrace its counts, in order of first allocation
/// (a site's index is its place in that order). All sizes are in samples. Its
/// columns grow where [`SiteTable::spilling`] says: a pass over millions of
/// whole backtraces then holds their counts in a file's pages, not in memory.
#[derive(Clone, Debug, Default)]
pub struct SiteTable {
    keep: PerSite,
    ids: Grow<BacktraceId>,
    /// With [`PerSite::All`].
    counts: Grow<SiteCounts>,
    /// With [`PerSite::Narrow`]; the sites marked [`Narrow::WIDE`] in `wide`.
    narrow: Grow<Narrow>,
    wide: FxHashMap<u32, SiteCounts>,
    /// With [`PerSite::Weight`].
    weights: Grow<u64>,
    /// With [`PerSite::Counted`], the objects that weight counts ([`Weight::objects`]).
    objects: Grow<u32>,
    /// With [`PerSite::Weight`] or [`PerSite::Counted`], the sum of every count over all sites (with
    /// [`PerSite::All`] it is summed at the end).
    totals: SiteCounts,
}

impl SiteTable {
    /// An empty table keeping `keep`, in memory.
    pub fn new(keep: PerSite) -> SiteTable {
        SiteTable::spilling(keep, &Spill::memory())
    }

    /// An empty table keeping `keep`, whose columns grow where `spill` says.
    pub fn spilling(keep: PerSite, spill: &Spill) -> SiteTable {
        SiteTable {
            keep,
            ids: Grow::new(spill),
            counts: Grow::new(spill),
            narrow: Grow::new(spill),
            wide: FxHashMap::default(),
            weights: Grow::new(spill),
            objects: Grow::new(spill),
            totals: SiteCounts::default(),
        }
    }

    /// Where the table's columns grow.
    pub fn spill(&self) -> &Spill {
        self.ids.spill()
    }

    /// What the table keeps per site.
    pub fn keeps(&self) -> PerSite {
        self.keep
    }

    /// Number of sites.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is no site.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The backtrace of site `i` (`i < len`).
    pub fn backtrace(&self, i: usize) -> BacktraceId {
        self.ids[i]
    }

    /// The counts of site `i` (`i < len`); with one quantity kept, only that
    /// weight's quantities are set (`samples`, and `allocs` with
    /// [`PerSite::Counted`], for [`Weight::Allocated`] and [`Weight::LiveEnd`];
    /// `live_at` and `live_at_allocs` for [`Weight::LiveAt`]), so that
    /// [`Weight::of`] and [`Weight::objects`] read them back.
    pub fn counts(&self, i: usize) -> SiteCounts {
        let objects = self.objects.get(i).map_or(0, |&o| u64::from(o));
        match self.keep.one() {
            None if self.keep == PerSite::Narrow => match self.narrow[i].get() {
                Some(c) => c,
                None => self.wide.get(&(i as u32)).copied().unwrap_or_default(),
            },
            None => self.counts[i],
            Some((Weight::LiveAt, _)) => SiteCounts {
                live_at: self.weights[i],
                live_at_allocs: objects,
                ..SiteCounts::default()
            },
            Some(_) => SiteCounts {
                samples: self.weights[i],
                allocs: objects,
                ..SiteCounts::default()
            },
        }
    }

    /// Every site's backtrace and counts ([`SiteTable::counts`]), in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (BacktraceId, SiteCounts)> + '_ {
        (0..self.len()).map(|i| (self.ids[i], self.counts(i)))
    }

    /// Asks the processor to fetch site `i`'s counts, which a count of it soon
    /// reads: a scan over many sites waits on memory for nearly each.
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: u32) {
        let i = i as usize;
        match self.keep.one() {
            None if self.keep == PerSite::Narrow => {
                tracekit_columns::huge::prefetch(self.narrow.get(i))
            }
            None => tracekit_columns::huge::prefetch(self.counts.get(i)),
            Some(_) => tracekit_columns::huge::prefetch(self.weights.get(i)),
        }
    }

    /// The sum over all sites of every count.
    pub fn totals(&self) -> SiteCounts {
        match self.keep {
            PerSite::All => {
                let mut t = SiteCounts::default();
                for c in self.counts.iter() {
                    t.add(c);
                }
                t
            }
            PerSite::Narrow => {
                let mut t = SiteCounts::default();
                for i in 0..self.len() {
                    t.add(&self.counts(i));
                }
                t
            }
            PerSite::Weight(_) | PerSite::Counted(_) => self.totals,
        }
    }

    /// Adds a site for `bt`, returning its index.
    pub(crate) fn push(&mut self, bt: BacktraceId) -> usize {
        self.ids.push(bt);
        match self.keep.one() {
            None if self.keep == PerSite::Narrow => self.narrow.push(Narrow::default()),
            None => self.counts.push(SiteCounts::default()),
            Some((_, counted)) => {
                self.weights.push(0);
                if counted {
                    self.objects.push(0);
                }
            }
        }
        self.ids.len() - 1
    }

    /// Applies `f` to the counts of site `i` (if there is one). With one
    /// quantity kept, `f` changes the totals instead, and the site's weight (and
    /// objects, when counted) move by as much as the totals' did.
    #[inline(always)]
    fn change(&mut self, i: u32, f: impl Fn(&mut SiteCounts)) {
        let i = i as usize;
        match self.keep.one() {
            None if self.keep == PerSite::Narrow => {
                let Some(n) = self.narrow.get_mut(i) else {
                    return;
                };
                match n.get() {
                    Some(mut c) => {
                        f(&mut c);
                        match Narrow::of(&c) {
                            Some(narrow) => *n = narrow,
                            None => {
                                *n = Narrow::wide();
                                self.wide.insert(i as u32, c);
                            }
                        }
                    }
                    None => {
                        if let Some(c) = self.wide.get_mut(&(i as u32)) {
                            f(c);
                        }
                    }
                }
            }
            None => {
                if let Some(c) = self.counts.get_mut(i) {
                    f(c);
                }
            }
            Some((w, _)) => {
                if let Some(slot) = self.weights.get_mut(i) {
                    let before = (w.of(&self.totals), w.objects(&self.totals));
                    f(&mut self.totals);
                    // The site's weight moves as the change moved the totals' weight.
                    *slot = slot.wrapping_add(w.of(&self.totals).wrapping_sub(before.0));
                    if let Some(objects) = self.objects.get_mut(i) {
                        // Object counts change by one at a time: the low bits carry
                        // the change.
                        let moved = w.objects(&self.totals).wrapping_sub(before.1);
                        *objects = objects.wrapping_add(moved as u32);
                    }
                }
            }
        }
    }

    /// An allocation of `samples` samples and `words` words from `source` at
    /// site `i`.
    #[inline(always)]
    pub(crate) fn allocated(&mut self, i: u32, samples: u64, source: AllocationSource, words: u64) {
        self.change(i, |c| {
            c.allocs += 1;
            c.samples = c.samples.saturating_add(samples);
            let s = &mut c.samples_by_source[source as usize];
            *s = s.saturating_add(samples);
            c.words = c.words.saturating_add(words);
        });
    }

    /// An allocation at site `i` with what became of its object, as
    /// [`SiteTable::allocated`], [`SiteTable::promoted`] when `promoted`, then
    /// [`SiteTable::collected`] when `collected` or [`SiteTable::live_at_end`]
    /// when not and `live_at`, count it; with every count kept, at one place
    /// and without a branch on the object, whose fate a scan cannot predict.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn counted(
        &mut self,
        i: u32,
        samples: u64,
        source: AllocationSource,
        words: u64,
        promoted: bool,
        collected: bool,
        live_at: bool,
    ) {
        if self.keep != PerSite::All {
            self.allocated(i, samples, source, words);
            if promoted {
                self.promoted(i);
            }
            match (collected, live_at) {
                (true, _) => self.collected(i, samples, live_at),
                (false, true) => self.live_at_end(i, samples),
                (false, false) => {}
            }
            return;
        }
        if let Some(c) = self.counts.get_mut(i as usize) {
            c.allocs += 1;
            c.samples = c.samples.saturating_add(samples);
            let s = &mut c.samples_by_source[source as usize];
            *s = s.saturating_add(samples);
            c.words = c.words.saturating_add(words);
            c.promoted += u64::from(promoted);
            c.collected_allocs += u64::from(collected);
            c.collected = c.collected.saturating_add(samples * u64::from(collected));
            c.live_at_allocs += u64::from(live_at);
            c.live_at = c.live_at.saturating_add(samples * u64::from(live_at));
        }
    }

    /// A promotion of an object of site `i`.
    #[inline(always)]
    pub(crate) fn promoted(&mut self, i: u32) {
        self.change(i, |c| c.promoted += 1);
    }

    /// The collection of an object of `samples` samples of site `i`, which was
    /// live at the pass's `live_at` time if `live_at`.
    #[inline(always)]
    pub(crate) fn collected(&mut self, i: u32, samples: u64, live_at: bool) {
        self.change(i, |c| {
            c.collected_allocs += 1;
            c.collected = c.collected.saturating_add(samples);
            if live_at {
                c.live_at_allocs += 1;
                c.live_at = c.live_at.saturating_add(samples);
            }
        });
    }

    /// Adds the counts of `part`, a table keeping what this one keeps, site
    /// `i` of it into site `to[i]` of this one (which must exist): what counting
    /// `part`'s events here would have made.
    pub(crate) fn absorb(&mut self, part: &SiteTable, to: &[u32]) {
        debug_assert_eq!(self.keep, part.keep);
        match self.keep.one() {
            None => {
                for (i, &t) in to.iter().enumerate().take(part.len()) {
                    let c = part.counts(i);
                    self.change(t, |into| into.add(&c));
                }
            }
            Some(_) => {
                for (i, &t) in to.iter().enumerate() {
                    let t = t as usize;
                    if let (Some(w), Some(&add)) = (self.weights.get_mut(t), part.weights.get(i)) {
                        *w = w.wrapping_add(add);
                    }
                    if let (Some(o), Some(&add)) = (self.objects.get_mut(t), part.objects.get(i)) {
                        *o = o.wrapping_add(add);
                    }
                }
                self.totals.add(&part.totals);
            }
        }
    }

    /// An object of `samples` samples of site `i` never collected, live at the
    /// pass's `live_at` time.
    pub(crate) fn live_at_end(&mut self, i: u32, samples: u64) {
        self.change(i, |c| {
            c.live_at_allocs += 1;
            c.live_at = c.live_at.saturating_add(samples);
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn narrow_counts_read_back_as_whole_ones_past_32_bits() {
        let mut all = SiteTable::new(PerSite::All);
        let mut narrow = SiteTable::new(PerSite::Narrow);
        let big = u64::from(u32::MAX) - 3;
        for t in [&mut all, &mut narrow] {
            for bt in 0..3 {
                t.push(BacktraceId(bt));
            }
            // Site 1 outgrows 32 bits on its third allocation; site 2 on a
            // count other than the first.
            for _ in 0..3 {
                t.allocated(1, big / 2, AllocationSource::Major, 7);
            }
            t.allocated(0, 5, AllocationSource::Minor, 2);
            t.promoted(0);
            t.collected(0, 5, true);
            t.allocated(2, 1, AllocationSource::External, big);
            t.allocated(2, 1, AllocationSource::External, big);
            t.collected(1, big / 2, false);
            t.live_at_end(2, 1);
        }
        assert!(!narrow.wide.is_empty());
        let counts = |t: &SiteTable| t.iter().collect::<Vec<_>>();
        assert_eq!(counts(&narrow), counts(&all));
        assert_eq!(narrow.totals(), all.totals());
        assert!(narrow.counts(1).samples > u64::from(u32::MAX));
    }
}
