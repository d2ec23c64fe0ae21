//! A pass over the tables as one scan of their allocation columns.
//!
//! A replay feeds the analysis every event in trace order and follows each object
//! from its allocation to its collect. Most of what it counts does not need that
//! order: an allocation's site, whether the filter keeps it, when its object ended
//! (the `ended` column) and whether it was promoted are all known per allocation.
//! A scan visits each allocation once, in order (so sites are numbered, and the
//! largest allocations tie-broken, as the replay does), and counts its object's end
//! with it. Only the live heap's peak depends on how allocations and collects
//! interleave; the scan adds each change to one of 65,536 buckets of time, finds
//! from the buckets' sums which buckets can hold the peak, and replays the changes
//! of those buckets alone, in time order.
//!
//! That stands for the replay when the events are of one domain, stamped in order
//! and none before the trace's start: then every collect follows its allocation,
//! the peak tracker applies each change as it comes, and the peak is the highest
//! live heap after all the changes of one instant, its time the first instant at
//! that height. [`Tables::others`] checks this once per tables (and that the
//! trace's samples sum in 63 bits, as the buckets do), with the promotes' counts
//! per allocation; other tables are replayed.
//!
//! Nothing in a scan depends on the order of the allocations but the numbering
//! of the sites, so a scan is cut in parts of the allocations, one a core when
//! no other scan is under way ([`Shape`], [`Running`]), each counted on its own
//! thread into sites of its own, its own
//! timeline and buckets ([`ScanPart`]). The parts are absorbed in order: a part's
//! sites in the order it first kept them, numbered in the whole as they come, are
//! the order the single scan would have numbered them. Each kept allocation is
//! counted at one place ([`crate::sites::SiteTable::counted`]) without branching
//! on whether its object was promoted, collected or live at the asked time: over
//! many allocations these are as good as random.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;
use tracekit_memtrace::{DomainId, Timedelta};

use super::{Charge, KIND_ALLOC, NEVER, Tables, UNKNOWN, time_of};
use crate::allocations::AllocationSet;
use crate::analyzer::{Analyzer, EventCounts, ScanPart};
use crate::backtrace::BacktraceId;
use crate::curve::Peak;
use crate::passes::{Progress, Stage};

/// What a scan needs of the promotes and collects, found once per tables and
/// shared by their copies; `None` inside when the tables are not scanned.
#[derive(Clone, Default)]
pub(super) struct Scan(Arc<OnceLock<Option<Others>>>);

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scan")
    }
}

/// The promote and collect events, as a scan counts them.
pub(super) struct Others {
    /// Per allocation, the promotes of its object, [`u8::MAX`] for that many or
    /// more (then exact in `many`).
    promotes: Vec<u8>,
    many: FxHashMap<u64, u64>,
    promote_events: u64,
    collect_events: u64,
    /// Per promote or collect, whether it is a collect.
    collects: Vec<u64>,
}

impl Others {
    /// Whether promote or collect `o` is a collect.
    #[inline]
    fn is_collect(&self, o: usize) -> bool {
        self.collects
            .get(o / 64)
            .is_some_and(|w| w >> (o % 64) & 1 == 1)
    }

    /// The promotes of allocation `n`'s object.
    #[inline]
    fn promotes(&self, n: usize) -> u64 {
        match self.promotes.get(n).copied().unwrap_or(0) {
            u8::MAX => self.many.get(&(n as u64)).copied().unwrap_or(0),
            p => u64::from(p),
        }
    }
}

/// Buckets of time the peak's changes are summed in before the few that can
/// hold it are replayed.
pub(super) const BUCKETS: usize = 1 << 16;

/// The live heap's changes summed per bucket of time.
struct PeakBuckets {
    /// A bucket is `1 << shift` microseconds.
    shift: u32,
    /// Per bucket, the sum of its changes, and of its increases alone: the live
    /// heap inside a bucket is at most what it was before it plus the increases.
    /// Neither outgrows the samples of the whole trace, which a scan needs to
    /// fit in 63 bits ([`Tables::others`]), so they add without overflow.
    net: Vec<i64>,
    up: Vec<i64>,
    changed: bool,
}

impl PeakBuckets {
    /// `count` buckets over `0..=end`: the scan's argument, so that tests can
    /// make buckets of many instants from small traces.
    fn new(end: Timedelta, count: usize) -> PeakBuckets {
        let span = u64::try_from(end.as_micros())
            .unwrap_or(0)
            .saturating_add(1);
        let count = count.max(1);
        PeakBuckets {
            shift: span
                .div_ceil(count as u64)
                .next_power_of_two()
                .trailing_zeros(),
            net: vec![0; count],
            up: vec![0; count],
            changed: false,
        }
    }

    #[inline]
    fn bucket(&self, t: Timedelta) -> usize {
        let t = u64::try_from(t.as_micros()).unwrap_or(0);
        ((t >> self.shift) as usize).min(self.net.len() - 1)
    }

    /// Adds the changes of `other`, of as many buckets as wide.
    fn add(&mut self, other: &PeakBuckets) {
        for (v, o) in self.net.iter_mut().zip(&other.net) {
            *v = v.wrapping_add(*o);
        }
        for (v, o) in self.up.iter_mut().zip(&other.up) {
            *v = v.wrapping_add(*o);
        }
        self.changed |= other.changed;
    }

    #[inline]
    fn change(&mut self, t: Timedelta, delta: i64) {
        let k = self.bucket(t);
        self.net[k] = self.net[k].wrapping_add(delta);
        if delta > 0 {
            self.up[k] = self.up[k].wrapping_add(delta);
        }
        self.changed = true;
    }
}

/// Per promote or collect whether it is a collect, when the events whose kinds
/// are `kind` (allocations' times `time`, the others' `other`) are stamped in
/// order and none before the trace's start (a negative time is stored as its
/// bits, above every other). Without a branch per event: the kinds interleave
/// without a pattern a processor could predict.
fn in_order<T: Copy + Into<u64>, U: Copy + Into<u64>>(
    kind: &[u8],
    time: &[T],
    other: &[U],
) -> Option<Vec<u64>> {
    let mut collects = vec![0u64; other.len().div_ceil(64)];
    let (mut a, mut o) = (0usize, 0usize);
    let (mut last, mut disorder) = (0u64, false);
    for &k in kind {
        let is_alloc = k == KIND_ALLOC;
        let t_alloc = time.get(a).map_or(u64::MAX, |&t| t.into());
        let t_other = other.get(o).map_or(u64::MAX, |&t| t.into());
        let t = if is_alloc { t_alloc } else { t_other };
        disorder |= t < last || t > i64::MAX as u64;
        last = t;
        if let Some(w) = collects.get_mut(o / 64) {
            *w |= u64::from(k == super::KIND_COLLECT) << (o % 64);
        }
        a += usize::from(is_alloc);
        o += usize::from(!is_alloc);
    }
    (!disorder).then_some(collects)
}

/// How far ahead of an allocation the scan asks for the memory it will read.
const AHEAD: usize = 16;

/// Nodes from which the scan's memo and sites no longer fit in cache.
const PREFETCH_FROM: usize = 1 << 14;

/// Which column names an allocation's memo entry.
enum Keyed {
    One,
    Sites,
    Backtrace,
}

/// An allocation's samples as the peak tracker counts them.
#[inline]
fn delta(samples: u64) -> i64 {
    i64::try_from(samples).unwrap_or(i64::MAX)
}

/// How a scan is cut: its buckets of time, and in how many parts of how many
/// allocations at least, one a thread.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    pub(super) buckets: usize,
    pub(super) part_rows: usize,
    pub(super) parts: usize,
}

impl Shape {
    /// A part a core, up to 8, of 512 K allocations at least (a part of fewer
    /// costs more in its memo and sites than its thread saves), when the scan
    /// is `alone`; one part else: scans side by side already keep the cores
    /// busy, and each part holds sites of its own.
    pub(super) fn of_host(alone: bool) -> Shape {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Shape {
            buckets: BUCKETS,
            part_rows: 1 << 19,
            parts: if alone { cores.clamp(1, 8) } else { 1 },
        }
    }
}

/// Scans under way in the process.
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A scan under way, counted in [`RUNNING`] while it lives.
pub(super) struct Running {
    alone: bool,
}

impl Running {
    /// Counts a scan; whether no other was under way.
    pub(super) fn start() -> Running {
        let before = RUNNING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Running { alone: before == 0 }
    }

    /// Whether no other scan was under way when this one started.
    pub(super) fn alone(&self) -> bool {
        self.alone
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What a part of a scan counted.
struct Counted {
    part: ScanPart,
    buckets: PeakBuckets,
    kept: u64,
    tracked: u64,
    live: u64,
}

impl Tables {
    /// The promotes and collects as a scan counts them, when a scan stands for a
    /// replay of these tables (see the module docs); found on the first call.
    pub(super) fn others(&self) -> Option<&Others> {
        self.scan.0.get_or_init(|| self.find_others()).as_ref()
    }

    fn find_others(&self) -> Option<Others> {
        if !self.domain.is_empty() || !self.other_domain.is_empty() {
            return None;
        }
        // The live heap's buckets sum in 64 bits, exactly while every sample of
        // the trace together does.
        let samples = self
            .samples
            .values()
            .try_fold(0u64, |sum, n| sum.checked_add(n))?;
        if i64::try_from(samples).is_err() {
            return None;
        }
        use super::Column::{Narrow, Wide};
        let collects = match (&self.time, &self.other_time) {
            (Narrow(t), Narrow(o)) => in_order(&self.kind, t, o),
            (Narrow(t), Wide(o)) => in_order(&self.kind, t, o),
            (Wide(t), Narrow(o)) => in_order(&self.kind, t, o),
            (Wide(t), Wide(o)) => in_order(&self.kind, t, o),
        }?;
        let mut others = Others {
            promotes: vec![0; self.source.len()],
            many: FxHashMap::default(),
            promote_events: 0,
            collect_events: 0,
            collects,
        };
        for (o, target) in self.other_target.values().enumerate() {
            if others.is_collect(o) {
                others.collect_events += 1;
                continue;
            }
            others.promote_events += 1;
            let Some(n) = target.checked_sub(1) else {
                continue;
            };
            if let Some(p) = others.promotes.get_mut(n as usize) {
                match *p {
                    u8::MAX => *others.many.entry(n).or_default() += 1,
                    254 => {
                        *p = u8::MAX;
                        others.many.insert(n, 255);
                    }
                    _ => *p += 1,
                }
            }
        }
        Some(others)
    }

    /// A pass as a scan of the allocations `first..last` (the others are
    /// dropped), into `analyzer`: the replay's event counts, the peak and the
    /// kept objects live at the end. The caller makes sure the analysis waits
    /// for no domain but 0, which is all a scan models.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scan(
        &self,
        analyzer: &mut Analyzer,
        others: &Others,
        charge: &mut Charge<'_>,
        (first, last): (usize, usize),
        stage: Stage,
        progress: Progress<'_>,
        bucket_count: usize,
    ) -> (EventCounts, Peak, u64) {
        let mut buckets = PeakBuckets::new(self.end, bucket_count);
        let mut kept = AllocationSet::default();
        let (mut kept_count, mut tracked, mut live) = (0u64, 0u64, 0u64);
        let mut codes = Vec::new();
        let total = (last - first).max(1);
        // Per node of the trie an allocation's column names, its site and the
        // node it is charged to, once a kept allocation asked: one lookup an
        // allocation where the charge's own would be two or three.
        let nodes = match charge {
            Charge::Nothing => 1,
            Charge::Sites => self.sites.len(),
            Charge::Whole => self.backtraces.len(),
            // Grown as the charge's trie grows.
            _ => 0,
        };
        let mut memo: Vec<(u32, u32)> = vec![(UNKNOWN, 0); nodes];
        // The node of allocation `a` in the memo, when a column names it (a
        // charge that grows its own trie keys it by the node grown).
        let (fixed, keyed) = match charge {
            Charge::Nothing => (true, Keyed::One),
            Charge::Sites => (true, Keyed::Sites),
            Charge::Whole => (true, Keyed::Backtrace),
            _ => (false, Keyed::One),
        };
        let key_of = |a: usize| match keyed {
            Keyed::One => 0,
            Keyed::Sites => self.site.get(a).copied().unwrap_or(0) as usize,
            Keyed::Backtrace => self.backtrace.get(a).copied().unwrap_or(0) as usize,
        };
        for a in first..last {
            // With many nodes, each allocation's memo entry and site counts are
            // a wait on memory; asked for ahead (memo entries twice as far, so
            // that the site they name is known when it is asked for), they are
            // in cache when their allocation comes.
            if fixed && nodes > PREFETCH_FROM {
                tracekit_columns::huge::prefetch(memo.get(key_of(a + 2 * AHEAD)));
                if let Some(&(site, _)) = memo.get(key_of(a + AHEAD))
                    && site != UNKNOWN
                {
                    analyzer.prefetch_site(site);
                }
            }
            let time = time_of(self.time.get(a));
            let alloc = self.alloc(a);
            // A charge that grows its own trie grows it for every allocation, kept
            // or not, as the replay does, so that its nodes are numbered alike.
            let grown = match charge {
                Charge::Site { .. } => Some(self.charged(a, charge, &mut codes)),
                _ => None,
            };
            let key = grown.map_or_else(|| key_of(a), |bt| bt.0 as usize);
            if memo.len() <= key {
                memo.resize(key + 1, (UNKNOWN, 0));
            }
            let kept_site =
                analyzer.alloc_scanned(a as u64, time, &alloc, |analyzer| match memo.get(key) {
                    Some(&(site, bt)) if site != UNKNOWN => (site, BacktraceId(bt)),
                    _ => {
                        let bt = grown.unwrap_or_else(|| self.charged(a, charge, &mut codes));
                        let site = analyzer.site_of_node(bt);
                        if let Some(m) = memo.get_mut(key) {
                            *m = (site, bt.0);
                        }
                        (site, bt)
                    }
                });
            if let Some(site) = kept_site {
                kept.insert(a as u64);
                kept_count += 1;
                buckets.change(time, delta(alloc.nsamples));
                let obj = self.object_at(a, site);
                let promotes = others.promotes(a);
                if promotes > 0 {
                    analyzer.promoted_scanned(site);
                    tracked += promotes;
                }
                match self.ended.get(a) {
                    NEVER => {
                        live += 1;
                        analyzer.live_at_end_scanned(&obj);
                    }
                    ended => {
                        let end = time_of(ended);
                        analyzer.ended_scanned(&obj, end);
                        buckets.change(end, -delta(alloc.nsamples));
                        tracked += 1;
                    }
                }
            }
            if a & 0xF_FFFF == 0xF_FFFF {
                let done = (a - first) as u128;
                progress(
                    stage,
                    (self.size_bytes as u128 * done / total as u128) as u64,
                );
            }
        }
        let counts = self.scan_counts(others, kept_count, tracked);
        let peak = self.scan_peak(analyzer, others, &buckets, |n| kept.contains(n));
        (counts, peak, live)
    }

    /// [`Tables::scan`] cut in parts, each counted on a thread of its own into
    /// a [`ScanPart`] of `analyzer` and absorbed into it in order, so that the
    /// sites are numbered as one scan numbers them. `None` (and nothing done)
    /// when the analysis keeps what a part cannot, or the charge is not named
    /// by a column.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scan_in_parts(
        &self,
        analyzer: &mut Analyzer,
        others: &Others,
        charge: &Charge<'_>,
        (first, last): (usize, usize),
        stage: Stage,
        progress: Progress<'_>,
        shape: Shape,
    ) -> Option<(EventCounts, Peak, u64)> {
        let bucket_count = shape.buckets;
        let (keyed, nodes) = match charge {
            Charge::Nothing => (Keyed::One, 1),
            Charge::Sites => (Keyed::Sites, self.sites.len()),
            Charge::Whole => (Keyed::Backtrace, self.backtraces.len()),
            _ => return None,
        };
        let part = analyzer.part()?;
        let keep = part.keep.clone();
        let count = ((last - first) / shape.part_rows.max(1)).clamp(1, shape.parts.max(1));
        let bounds: Vec<usize> = (0..=count)
            .map(|i| first + (last - first) * i / count)
            .collect();
        let run = |i: usize, part: ScanPart, progress: Option<Progress<'_>>| {
            let range = (bounds[i], bounds[i + 1]);
            self.count_part(
                others,
                part,
                &keyed,
                nodes,
                range,
                bucket_count,
                progress,
                stage,
            )
        };
        let parts: Vec<Counted> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..count)
                .map(|i| {
                    let part = analyzer.part();
                    s.spawn(move || part.map(|p| run(i, p, None)))
                })
                .collect();
            let mut parts = vec![run(0, part, Some(progress))];
            for h in handles {
                // A part that could not count (it panicked) makes the pass the
                // single scan's.
                parts.push(h.join().ok().flatten()?);
            }
            Some(parts)
        })?;
        let mut buckets = PeakBuckets::new(self.end, bucket_count);
        let (mut kept, mut tracked, mut live) = (0u64, 0u64, 0u64);
        for c in parts {
            // The first part's sites, numbered first, are the analysis's own
            // (a table of every site not made twice); the others add to them.
            if analyzer.may_adopt(&c.part) {
                analyzer.adopt(c.part);
            } else {
                let to: Vec<u32> = c.part.nodes().map(|bt| analyzer.site_of_node(bt)).collect();
                analyzer.absorb(c.part, &to);
            }
            buckets.add(&c.buckets);
            kept += c.kept;
            tracked += c.tracked;
            live += c.live;
        }
        let counts = self.scan_counts(others, kept, tracked);
        let peak = self.scan_peak(analyzer, others, &buckets, |n| {
            let a = n as usize;
            (first..last).contains(&a) && keep.keeps(n, time_of(self.time.get(a)), &self.row(a))
        });
        Some((counts, peak, live))
    }

    /// What one part of [`Tables::scan_in_parts`] counts over allocations
    /// `first..last`, its memo keyed by `keyed` over `nodes` nodes.
    #[allow(clippy::too_many_arguments)]
    fn count_part(
        &self,
        others: &Others,
        mut part: ScanPart,
        keyed: &Keyed,
        nodes: usize,
        (first, last): (usize, usize),
        bucket_count: usize,
        mut progress: Option<Progress<'_>>,
        stage: Stage,
    ) -> Counted {
        let mut buckets = PeakBuckets::new(self.end, bucket_count);
        let (mut kept, mut tracked, mut live) = (0u64, 0u64, 0u64);
        let mut memo: Vec<u32> = vec![UNKNOWN; nodes.max(1)];
        let key_of = |a: usize| match keyed {
            Keyed::One => 0,
            Keyed::Sites => self.site.get(a).copied().unwrap_or(0) as usize,
            Keyed::Backtrace => self.backtrace.get(a).copied().unwrap_or(0) as usize,
        };
        let total = (last - first).max(1);
        for a in first..last {
            if nodes > PREFETCH_FROM {
                tracekit_columns::huge::prefetch(memo.get(key_of(a + 2 * AHEAD)));
                if let Some(&site) = memo.get(key_of(a + AHEAD))
                    && site != UNKNOWN
                {
                    part.prefetch(site);
                }
            }
            let time = time_of(self.time.get(a));
            let alloc = self.row(a);
            if !part.keep.keeps(a as u64, time, &alloc) {
                continue;
            }
            let key = key_of(a);
            let site = match memo.get(key).copied() {
                Some(site) if site != UNKNOWN => site,
                _ => {
                    let bt = match keyed {
                        Keyed::One => BacktraceId::EMPTY,
                        _ => BacktraceId(key as u32),
                    };
                    let site = part.site(bt);
                    if let Some(m) = memo.get_mut(key) {
                        *m = site;
                    }
                    site
                }
            };
            kept += 1;
            buckets.change(time, delta(alloc.nsamples));
            let promotes = others.promotes(a);
            tracked += promotes;
            let end = match self.ended.get(a) {
                NEVER => None,
                ended => Some(time_of(ended)),
            };
            part.counted(site, time, &alloc, promotes > 0, end);
            match end {
                None => live += 1,
                Some(end) => {
                    buckets.change(end, -delta(alloc.nsamples));
                    tracked += 1;
                }
            }
            if a & 0xF_FFFF == 0xF_FFFF
                && let Some(progress) = progress.as_mut()
            {
                let done = (a - first) as u128;
                progress(
                    stage,
                    (self.size_bytes as u128 * done / total as u128) as u64,
                );
            }
        }
        Counted {
            part,
            buckets,
            kept,
            tracked,
            live,
        }
    }

    /// A scan's peak of the live heap, from its `buckets` and the allocations
    /// it `kept`: naming the domains the analysis waits for, and 0 when the
    /// live heap changed.
    fn scan_peak(
        &self,
        analyzer: &Analyzer,
        others: &Others,
        buckets: &PeakBuckets,
        kept: impl Fn(u64) -> bool,
    ) -> Peak {
        let mut domains: Vec<DomainId> = Vec::new();
        for &d in analyzer.peak_domains() {
            if !domains.contains(&d) {
                domains.push(d);
            }
        }
        if buckets.changed && !domains.contains(&DomainId::new(0)) {
            domains.push(DomainId::new(0));
        }
        let (height, at) = self.peak_of(others, buckets, kept);
        Peak {
            live: u64::try_from(height.max(0)).unwrap_or(u64::MAX),
            time: Timedelta::from_micros(at),
            late_events: 0,
            domains,
        }
    }

    /// A scan's event counts, with `kept` allocations kept and `tracked`
    /// promotes and collects of their objects.
    fn scan_counts(&self, others: &Others, kept: u64, tracked: u64) -> EventCounts {
        let allocs = self.source.len() as u64;
        EventCounts {
            allocs,
            promotes: others.promote_events,
            collects: others.collect_events,
            filtered_allocs: allocs - kept,
            untracked: (others.promote_events + others.collect_events).saturating_sub(tracked),
            duplicate_ids: 0,
        }
    }

    /// The highest live heap after the changes of one instant, and the first
    /// instant at that height ((0, 0) when it is never above 0, as the peak
    /// tracker starts): the changes of the buckets that can reach the highest
    /// live heap at a bucket's end, replayed in time order.
    fn peak_of(
        &self,
        others: &Others,
        buckets: &PeakBuckets,
        kept: impl Fn(u64) -> bool,
    ) -> (i128, i64) {
        let n_buckets = buckets.net.len();
        let mut before = vec![0i128; n_buckets];
        let (mut live, mut floor) = (0i128, 0i128);
        for (k, b) in before.iter_mut().enumerate() {
            *b = live;
            live += i128::from(buckets.net[k]);
            floor = floor.max(live);
        }
        // A peak counts from 1 sample, as the tracker's starts at 0.
        let floor = floor.max(1);
        let candidate: Vec<bool> = (0..n_buckets)
            .map(|k| before[k] + i128::from(buckets.up[k]) >= floor)
            .collect();
        // The events are in time order, so each candidate bucket's allocations
        // and promotes or collects are a run of their columns.
        let mut changes: Vec<(i64, i64)> = Vec::new();
        let mut k = 0;
        while k < n_buckets {
            if !candidate[k] {
                k += 1;
                continue;
            }
            // A run of candidate buckets, `k..j`, as one range of time.
            let j = (k..n_buckets).find(|&j| !candidate[j]).unwrap_or(n_buckets);
            let lo = (k as u64) << buckets.shift;
            let hi = match j == n_buckets {
                true => u64::MAX,
                false => (j as u64) << buckets.shift,
            };
            // No time is negative here, so a stored time is its microseconds.
            let (a0, a1) = (
                self.time.partition_point(|t| t < lo),
                self.time.partition_point(|t| t < hi),
            );
            for a in a0..a1.max(a0) {
                if kept(a as u64) {
                    let t = time_of(self.time.get(a)).as_micros();
                    changes.push((t, delta(self.samples.get(a))));
                }
            }
            let (o0, o1) = (
                self.other_time.partition_point(|t| t < lo),
                self.other_time.partition_point(|t| t < hi),
            );
            for o in o0..o1.max(o0) {
                if let Some(n) = self.other_target.get(o).checked_sub(1)
                    && others.is_collect(o)
                    && kept(n)
                {
                    let t = time_of(self.other_time.get(o)).as_micros();
                    changes.push((t, -delta(self.samples.get(n as usize))));
                }
            }
            k = j;
        }
        changes.sort_unstable_by_key(|c| c.0);
        let (mut peak, mut at) = (0i128, 0i64);
        let mut i = 0;
        while i < changes.len() {
            let k = buckets.bucket(Timedelta::from_micros(changes[i].0));
            // The live heap before this bucket's first change.
            let mut live = before[k];
            while i < changes.len() && buckets.bucket(Timedelta::from_micros(changes[i].0)) == k {
                let t = changes[i].0;
                while i < changes.len() && changes[i].0 == t {
                    live += i128::from(changes[i].1);
                    i += 1;
                }
                if live > peak {
                    (peak, at) = (live, t);
                }
            }
        }
        (peak, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan started while another is under way is cut in one part.
    #[test]
    fn a_scan_beside_another_is_one_part() {
        let first = Running::start();
        let second = Running::start();
        assert!(!second.alone());
        assert_eq!(Shape::of_host(second.alone()).parts, 1);
        drop(first);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Shape::of_host(true).parts, cores.clamp(1, 8));
    }
}
