//! The live heap over time: a bucketed timeline (for `timeline`, plots and FXT counters)
//! and the exact peak of the live heap (for `top --peak`).
//!
//! Both count samples (integers), not bytes, so sums are exact; the caller converts with
//! [`Sampling`](crate::Sampling).
//!
//! Events of one domain arrive in time order, but in a multi-domain (v3) trace the
//! packets of different domains interleave, so the event stream as a whole is not
//! sorted (the reference `Event.t` documentation says readers needing a global order
//! must merge the domains' streams). The timeline does not care: it adds each event to
//! the bucket its time falls in. The peak tracker merges the domains with a small
//! reorder buffer (below).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tracekit_memtrace::{DomainId, Timedelta};

/// Allocated and freed samples of one domain, per bucket.
#[derive(Clone, Debug, Default)]
struct Series {
    allocated: Vec<u64>,
    freed: Vec<u64>,
}

/// Live heap and allocation volume per time bucket, per domain.
///
/// Bucket `b` holds the events with time in `(b * w, (b + 1) * w]` (bucket 0 also holds
/// time 0). The width `w` starts at 1 µs and grows 1, 2, 10, 20, 100, 200 ... µs (so
/// points fall on round times) whenever the trace outgrows the bucket budget. The live heap at the end of a bucket is therefore
/// exactly the live heap at time `(b + 1) * w`, events at that instant included, which is
/// the "alloc time <= T < collect time" definition used by `--at`.
#[derive(Clone, Debug)]
pub struct Timeline {
    width: u64,
    /// `u64::MAX / width`, for [`Timeline::bucket`]: a division per event out
    /// of time order costs as much as the rest of counting it.
    reciprocal: u64,
    /// The last bucket used and its time range `(lo, hi]`: events mostly arrive in
    /// time order, so this saves a division per event.
    cached: (u64, u64, usize),
    max_buckets: usize,
    domains: Vec<DomainId>,
    series: Vec<Series>,
    last: usize,
    end: Timedelta,
}

/// One point of a timeline: totals over an interval ending at `time`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelinePoint {
    /// End of the interval (inclusive): the live values hold at this instant.
    pub time: Timedelta,
    /// Length of the interval.
    pub interval: Timedelta,
    /// Live samples at `time`, all domains.
    pub live: u64,
    /// Live samples at `time`, per domain, in the order of [`Timeline::domains`].
    pub live_by_domain: Vec<u64>,
    /// Samples allocated during the interval.
    pub allocated: u64,
    /// Samples freed (collected) during the interval.
    pub freed: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Self::new(1 << 14)
    }
}

impl Timeline {
    /// A timeline keeping at most `max_buckets` buckets (at least 2) per domain.
    pub fn new(max_buckets: usize) -> Self {
        Timeline {
            width: 1,
            reciprocal: u64::MAX,
            cached: (u64::MAX, 0, 0),
            max_buckets: max_buckets.max(2),
            domains: Vec::new(),
            series: Vec::new(),
            last: 0,
            end: Timedelta::default(),
        }
    }

    /// The domains seen, in order of first appearance.
    pub fn domains(&self) -> &[DomainId] {
        &self.domains
    }

    /// Latest event time seen.
    pub fn end(&self) -> Timedelta {
        self.end
    }

    /// Marks `time` as seen (an event that changes nothing, e.g. a promote), so the
    /// timeline covers the whole trace.
    #[inline]
    pub fn touch(&mut self, time: Timedelta) {
        self.end = self.end.max(time);
    }

    /// Records `samples` allocated at `time` on `domain`.
    #[inline(always)]
    pub fn allocated(&mut self, time: Timedelta, domain: DomainId, samples: u64) {
        let (s, b) = self.slot(time, domain);
        let v = &mut self.series[s].allocated[b];
        *v = v.saturating_add(samples);
    }

    /// Records `samples` freed at `time`, charged to the allocating `domain`.
    #[inline]
    pub fn freed(&mut self, time: Timedelta, domain: DomainId, samples: u64) {
        let (s, b) = self.slot(time, domain);
        let v = &mut self.series[s].freed[b];
        *v = v.saturating_add(samples);
    }

    /// Records `samples` freed at `time`, as [`Timeline::freed`] does, but
    /// keeping the bucket at hand for the next event where it is: for frees
    /// recorded with their allocations, whose times jump about.
    #[inline(always)]
    pub fn freed_aside(&mut self, time: Timedelta, domain: DomainId, samples: u64) {
        let b = self
            .cached_bucket(time)
            .unwrap_or_else(|| self.bucket(time));
        if b >= self.max_buckets {
            return self.freed(time, domain, samples);
        }
        self.touch(time);
        let s = self.series_at(domain, b);
        let v = &mut self.series[s].freed[b];
        *v = v.saturating_add(samples);
    }

    /// The bucket at hand, if `time` is in it.
    #[inline(always)]
    fn cached_bucket(&self, time: Timedelta) -> Option<usize> {
        let (lo, hi, cached) = self.cached;
        let t = micros(time);
        (t > lo && t <= hi).then_some(cached)
    }

    /// The series of `domain`, grown to hold bucket `b`.
    #[inline(always)]
    fn series_at(&mut self, domain: DomainId, b: usize) -> usize {
        let s = self.domain_slot(domain);
        if self
            .series
            .get(s)
            .is_none_or(|series| series.allocated.len() <= b)
        {
            self.grow(s, b);
        }
        s
    }

    /// Series `s` grown to hold bucket `b`.
    #[cold]
    fn grow(&mut self, s: usize, b: usize) {
        if let Some(series) = self.series.get_mut(s) {
            series.allocated.resize(b + 1, 0);
            series.freed.resize(b + 1, 0);
        }
    }

    /// The bucket of `time`; times before the trace start (which the reader never
    /// yields) count as time 0.
    #[inline(always)]
    fn bucket(&self, time: Timedelta) -> usize {
        match micros(time) {
            0 => 0,
            t => {
                // `(t - 1) / width` by a multiplication: the quotient by the
                // reciprocal, rounded down, is short of the true one by at most
                // 2 (`u64::MAX / width` is within 1 of 2^64 / width, which is
                // off by less than 1.5 at any `x`), made up one at a time.
                let x = t - 1;
                let mut q = ((u128::from(x) * u128::from(self.reciprocal)) >> 64) as u64;
                while u128::from(q + 1) * u128::from(self.width) <= u128::from(x) {
                    q += 1;
                }
                q as usize
            }
        }
    }

    #[inline(always)]
    fn slot(&mut self, time: Timedelta, domain: DomainId) -> (usize, usize) {
        self.touch(time);
        let b = match self.cached_bucket(time) {
            Some(b) => b,
            None => self.slot_slow(time),
        };
        (self.series_at(domain, b), b)
    }

    #[cold]
    fn slot_slow(&mut self, time: Timedelta) -> usize {
        let mut b = self.bucket(time);
        while b >= self.max_buckets {
            self.coarsen();
            b = self.bucket(time);
        }
        // Bucket 0 also holds time 0; the cache covers `(b * w, (b + 1) * w]` only.
        let lo = (b as u64).saturating_mul(self.width);
        self.cached = (lo, lo.saturating_add(self.width), b);
        b
    }

    #[inline(always)]
    fn domain_slot(&mut self, domain: DomainId) -> usize {
        if self.domains.get(self.last) == Some(&domain) {
            return self.last;
        }
        self.domain_slot_slow(domain)
    }

    #[cold]
    fn domain_slot_slow(&mut self, domain: DomainId) -> usize {
        let s = match self.domains.iter().position(|d| *d == domain) {
            Some(s) => s,
            None => {
                self.domains.push(domain);
                self.series.push(Series::default());
                self.domains.len() - 1
            }
        };
        self.last = s;
        s
    }

    /// An empty timeline of the same bucket budget, for a part of a pass whose
    /// timeline is [`Timeline::merge`]d into this one after.
    pub(crate) fn part(&self) -> Timeline {
        Timeline::new(self.max_buckets)
    }

    /// Adds `other`'s events, as if this timeline had been told them too: both
    /// are made as wide as the wider (widths run through one sequence, so each
    /// divides the next), and a series is as long as the longer. Which order
    /// the events came in changes nothing, so the parts of a pass merge into
    /// what one pass over them all makes.
    pub(crate) fn merge(&mut self, mut other: Timeline) {
        while self.width < other.width {
            self.coarsen();
        }
        while other.width < self.width {
            other.coarsen();
        }
        self.touch(other.end);
        for (domain, series) in other.domains.iter().zip(other.series) {
            let len = series.allocated.len().max(series.freed.len());
            let Some(last) = len.checked_sub(1) else {
                self.domain_slot(*domain);
                continue;
            };
            let s = self.series_at(*domain, last);
            let into = &mut self.series[s];
            for (v, add) in [
                (&mut into.allocated, series.allocated),
                (&mut into.freed, series.freed),
            ] {
                for (v, a) in v.iter_mut().zip(add) {
                    *v = v.saturating_add(a);
                }
            }
        }
        self.cached = (u64::MAX, 0, 0);
    }

    #[cold]
    fn coarsen(&mut self) {
        self.cached = (u64::MAX, 0, 0);
        let factor = next_factor(self.width);
        self.width = self.width.saturating_mul(factor as u64);
        self.reciprocal = u64::MAX / self.width.max(1);
        for series in &mut self.series {
            for v in [&mut series.allocated, &mut series.freed] {
                let merged: Vec<u64> = v
                    .chunks(factor)
                    .map(|c| c.iter().fold(0u64, |a, b| a.saturating_add(*b)))
                    .collect();
                *v = merged;
            }
        }
    }

    /// The timeline as at most about `max_points` points of equal length covering
    /// `[0, end]` (every point's interval is a whole number of buckets, so the live
    /// values are exact at each point's time). Empty for a trace without events.
    pub fn points(&self, max_points: usize) -> Vec<TimelinePoint> {
        let max_points = max_points.max(1);
        let nbuckets = self
            .series
            .iter()
            .map(|s| s.allocated.len())
            .max()
            .unwrap_or(0)
            .max(self.bucket(self.end) + 1);
        if self.series.is_empty() && self.end == Timedelta::default() {
            return Vec::new();
        }
        let needed = nbuckets.div_ceil(max_points).max(1);
        // Buckets per point: the smallest of 1, 2, 5, 10, 20, 50 ... that is enough.
        let mut per_point = 1usize;
        let mut steps = [2usize, 5, 10].into_iter().cycle();
        let mut decade = 1usize;
        while per_point < needed {
            match steps.next() {
                Some(10) | None => {
                    decade = decade.saturating_mul(10);
                    per_point = decade;
                }
                Some(m) => per_point = decade.saturating_mul(m),
            }
        }
        let width = self.width;
        let npoints = nbuckets.div_ceil(per_point);
        let ndom = self.domains.len();
        let mut live_by_domain = vec![0i128; ndom];
        let mut out = Vec::with_capacity(npoints);
        for p in 0..npoints {
            let lo = p * per_point;
            let hi = ((p + 1) * per_point).min(nbuckets);
            let mut allocated = 0u64;
            let mut freed = 0u64;
            for (d, series) in self.series.iter().enumerate() {
                // Buckets past a series' end are empty: a last event far after
                // the last allocation (one that only touched the timeline) must
                // not cost a step per bucket.
                let len = series.allocated.len().max(series.freed.len());
                for b in lo.min(len)..hi.min(len) {
                    let a = series.allocated.get(b).copied().unwrap_or(0);
                    let f = series.freed.get(b).copied().unwrap_or(0);
                    allocated = allocated.saturating_add(a);
                    freed = freed.saturating_add(f);
                    live_by_domain[d] += i128::from(a) - i128::from(f);
                }
            }
            let live_by_domain: Vec<u64> = live_by_domain
                .iter()
                .map(|&v| u64::try_from(v.max(0)).unwrap_or(u64::MAX))
                .collect();
            let live = live_by_domain
                .iter()
                .fold(0u64, |a, b| a.saturating_add(*b));
            out.push(TimelinePoint {
                time: from_micros((hi as u64).saturating_mul(width)),
                interval: from_micros(((hi - lo) as u64).saturating_mul(width)),
                live,
                live_by_domain,
                allocated,
                freed,
            });
        }
        out
    }
}

/// The microseconds of a time from the trace start; one before the start (which the
/// reader never yields) counts as the start.
#[inline(always)]
fn micros(time: Timedelta) -> u64 {
    time.as_micros().max(0) as u64
}

/// A time from the trace start of `us` microseconds, saturating.
fn from_micros(us: u64) -> Timedelta {
    Timedelta::from_micros(i64::try_from(us).unwrap_or(i64::MAX))
}

/// The factor from one round width to the next: 1 -> 2 -> 10 -> 20 -> 100 ...
fn next_factor(width: u64) -> usize {
    let mut w = width;
    while w >= 10 && w.is_multiple_of(10) {
        w /= 10;
    }
    if w == 1 { 2 } else { 5 }
}

/// The moment of the largest live heap.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Peak {
    /// Live samples at the peak.
    pub live: u64,
    /// The earliest time at which the live heap reached that size (events at that
    /// instant included).
    pub time: Timedelta,
    /// Events that arrived later than the merge could wait for (see
    /// [`PeakTracker`]); when non-zero the peak is approximate.
    pub late_events: u64,
    /// Every domain that reported a change.
    pub domains: Vec<DomainId>,
}

/// Each site's live heap at a few chosen times, for ranking sites by how they grow.
///
/// An object is live at `t` when `alloc time <= t < collect time` (as
/// [`Timeline`]'s points and `--at`). Per site the curve keeps one change per
/// chosen time, and one past the last: an allocation adds its samples at the first
/// chosen time not before it, its end takes them away at the first not before the
/// end, and [`SiteCurves::live`] sums the changes up.
#[derive(Clone, Debug, Default)]
pub struct SiteCurves {
    times: std::sync::Arc<[Timedelta]>,
    /// Per site, `times.len() + 1` changes, site after site.
    changes: Vec<i64>,
}

impl SiteCurves {
    /// Curves at `times`, which are in order.
    pub fn new(times: std::sync::Arc<[Timedelta]>) -> SiteCurves {
        SiteCurves {
            times,
            changes: Vec::new(),
        }
    }

    /// The chosen times.
    pub fn times(&self) -> &[Timedelta] {
        &self.times
    }

    /// Sites with a curve: every site counted so far.
    pub fn sites(&self) -> usize {
        self.changes.len() / (self.times.len() + 1)
    }

    #[inline]
    fn slot(&mut self, site: u32, t: Timedelta) -> Option<&mut i64> {
        let stride = self.times.len() + 1;
        let at = (site as usize).checked_mul(stride)?;
        if self.changes.len() < at + stride {
            self.changes.resize(at + stride, 0);
        }
        let first = self.times.partition_point(|&x| x < t);
        self.changes.get_mut(at + first)
    }

    /// `samples` allocated at `time` to `site`.
    #[inline]
    pub(crate) fn allocated(&mut self, site: u32, time: Timedelta, samples: u64) {
        if let Some(c) = self.slot(site, time) {
            *c = c.saturating_add(i64::try_from(samples).unwrap_or(i64::MAX));
        }
    }

    /// `samples` of `site` that ended at `end`.
    #[inline]
    pub(crate) fn freed(&mut self, site: u32, end: Timedelta, samples: u64) {
        if let Some(c) = self.slot(site, end) {
            *c = c.saturating_sub(i64::try_from(samples).unwrap_or(i64::MAX));
        }
    }

    /// Site `site`'s live samples at each chosen time (zeros for a site never
    /// counted).
    pub fn live(&self, site: usize) -> Vec<u64> {
        let stride = self.times.len() + 1;
        let changes = site
            .checked_mul(stride)
            .and_then(|at| self.changes.get(at..at + stride))
            .unwrap_or(&[]);
        let mut live = 0i64;
        let mut out = vec![0; self.times.len()];
        for (o, c) in out.iter_mut().zip(changes) {
            live = live.saturating_add(*c);
            *o = u64::try_from(live).unwrap_or(0);
        }
        out
    }
}

/// Exact peak of the live heap over a stream of `(time, domain, delta)` changes.
///
/// With one domain the events are in time order and each is applied at once. With
/// several, a change is held in a min-heap until every domain has moved past its time
/// (each domain's own stream is sorted), then applied in time order. A domain that
/// stops reporting would hold everything back, so once the buffer exceeds its budget
/// the slowest domain is treated as finished; its later events, if any, are applied on
/// arrival and counted in [`Peak::late_events`]. Memory is therefore bounded.
///
/// A domain's first event can only be waited for if the domain is known in advance
/// ([`PeakTracker::with_domains`]); otherwise the changes before it may already have
/// been applied, and its earlier-stamped changes count as late. A caller that sees
/// late events can run again with the domains the first run found
/// ([`Peak::domains`]).
#[derive(Debug)]
pub struct PeakTracker {
    live: i128,
    group_time: i64,
    peak: i128,
    peak_time: i64,
    late: u64,
    domains: Vec<(DomainId, i64)>,
    seen: Vec<DomainId>,
    pending: BinaryHeap<Reverse<(i64, i64)>>,
    budget: usize,
}

impl Default for PeakTracker {
    fn default() -> Self {
        Self::new(1 << 20)
    }
}

impl PeakTracker {
    /// A tracker whose reorder buffer holds at most `budget` changes.
    pub fn new(budget: usize) -> Self {
        PeakTracker {
            live: 0,
            group_time: 0,
            peak: 0,
            peak_time: 0,
            late: 0,
            domains: Vec::new(),
            seen: Vec::new(),
            pending: BinaryHeap::new(),
            budget: budget.max(1),
        }
    }

    /// A tracker that waits for each of `domains` from the start (see the type docs).
    pub fn with_domains(budget: usize, domains: &[DomainId]) -> Self {
        let mut p = Self::new(budget);
        for d in domains {
            if !p.domains.iter().any(|(x, _)| x == d) {
                p.domains.push((*d, 0));
                p.seen.push(*d);
            }
        }
        p
    }

    /// Records a change of `delta` samples at `time` on `domain`.
    #[inline]
    pub fn change(&mut self, time: Timedelta, domain: DomainId, delta: i64) {
        let t = time.as_micros();
        match self.domains.as_mut_slice() {
            [(d, last)] if *d == domain && self.pending.is_empty() => {
                *last = (*last).max(t);
                self.apply(t, delta);
            }
            _ => self.change_merged(t, domain, delta),
        }
    }

    /// Records a change at `time` that no domain's clock vouches for (the end of an
    /// object that another domain reported collected before its allocation time): it
    /// is merged in time order but does not advance any domain.
    pub fn change_unclocked(&mut self, time: Timedelta, delta: i64) {
        let t = time.as_micros();
        if self.domains.len() <= 1 && self.pending.is_empty() {
            if let Some((_, last)) = self.domains.first_mut() {
                *last = (*last).max(t);
            }
            self.apply(t, delta);
        } else {
            self.pending.push(Reverse((t, delta)));
            self.release();
        }
    }

    fn change_merged(&mut self, t: i64, domain: DomainId, delta: i64) {
        match self.domains.iter_mut().find(|(d, _)| *d == domain) {
            Some((_, last)) => *last = (*last).max(t),
            None => self.domains.push((domain, t)),
        }
        if !self.seen.contains(&domain) {
            self.seen.push(domain);
        }
        if self.domains.len() == 1 && self.pending.is_empty() {
            self.apply(t, delta);
            return;
        }
        self.pending.push(Reverse((t, delta)));
        self.release();
        while self.pending.len() > self.budget && self.domains.len() > 1 {
            // Give up waiting for the slowest domain.
            if let Some(slowest) = self
                .domains
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(i, _)| i)
            {
                self.domains.swap_remove(slowest);
            }
            self.release();
        }
    }

    fn release(&mut self) {
        let watermark = self.domains.iter().map(|(_, t)| *t).min().unwrap_or(0);
        while let Some(&Reverse((t, delta))) = self.pending.peek() {
            if t > watermark {
                break;
            }
            self.pending.pop();
            self.apply(t, delta);
        }
    }

    #[inline]
    fn apply(&mut self, t: i64, delta: i64) {
        if t > self.group_time {
            // Every change up to `group_time` is in: that instant is a candidate.
            if self.live > self.peak {
                self.peak = self.live;
                self.peak_time = self.group_time;
            }
            self.group_time = t;
        } else if t < self.group_time {
            self.late += 1;
        }
        self.live += i128::from(delta);
    }

    /// The peak, after all changes.
    pub fn finish(mut self) -> Peak {
        while let Some(Reverse((t, delta))) = self.pending.pop() {
            self.apply(t, delta);
        }
        if self.live > self.peak {
            self.peak = self.live;
            self.peak_time = self.group_time;
        }
        Peak {
            live: u64::try_from(self.peak.max(0)).unwrap_or(u64::MAX),
            time: Timedelta::from_micros(self.peak_time),
            late_events: self.late,
            domains: self.seen,
        }
    }

    /// Changes held in the reorder buffer now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(t: u64) -> Timedelta {
        Timedelta::from_micros(t as i64)
    }

    proptest::proptest! {
        /// The bucket by the reciprocal is the bucket by division, at every
        /// width a timeline takes.
        #[test]
        fn buckets_by_reciprocal_are_by_division(t in proptest::prelude::any::<u64>(), coarsened in 0usize..40) {
            let mut timeline = Timeline::new(2);
            for _ in 0..coarsened {
                timeline.coarsen();
            }
            let t = t >> (coarsened % 64);
            let time = Timedelta::from_micros(i64::try_from(t).unwrap_or(i64::MAX));
            let division = match micros(time) {
                0 => 0,
                t => ((t - 1) / timeline.width) as usize,
            };
            proptest::prop_assert_eq!(timeline.bucket(time), division);
        }
    }

    proptest::proptest! {
        /// Timelines told parts of the events and merged are the timeline told
        /// them all, whichever part reached the wider buckets.
        #[test]
        fn merged_parts_are_the_whole(
            events in proptest::collection::vec((0u64..100_000, 0u64..50, proptest::bool::ANY, 0u16..2, 0usize..3), 0..200),
            max_buckets in 2usize..40,
        ) {
            let mut whole = Timeline::new(max_buckets);
            let mut parts = [whole.part(), whole.part(), whole.part()];
            for &(t, n, freed, domain, part) in &events {
                let domain = DomainId::new(domain);
                for timeline in [&mut whole, &mut parts[part]] {
                    match freed {
                        true => timeline.freed_aside(us(t), domain, n),
                        false => timeline.allocated(us(t), domain, n),
                    }
                }
            }
            let mut merged = Timeline::new(max_buckets);
            for p in parts {
                merged.merge(p);
            }
            // Domains come in the order the parts first saw them, so they are
            // compared as sets, each with its own points.
            let by_domain = |t: &Timeline| {
                let mut d: Vec<_> = t
                    .points(1000)
                    .iter()
                    .map(|p| {
                        let mut v: Vec<_> = t.domains().iter().zip(&p.live_by_domain).collect();
                        v.sort();
                        (p.time, p.allocated, p.freed, p.live, format!("{v:?}"))
                    })
                    .collect();
                d.sort();
                d
            };
            proptest::prop_assert_eq!(merged.width, whole.width);
            proptest::prop_assert_eq!(by_domain(&merged), by_domain(&whole));
        }
    }

    fn brute_peak(changes: &[(u64, i64)]) -> (u64, u64) {
        let mut times: Vec<u64> = changes.iter().map(|c| c.0).collect();
        times.sort_unstable();
        times.dedup();
        let mut best = (0i64, 0u64);
        for &t in &times {
            let live: i64 = changes.iter().filter(|c| c.0 <= t).map(|c| c.1).sum();
            if live > best.0 {
                best = (live, t);
            }
        }
        (best.0.max(0) as u64, best.1)
    }

    /// An event far after the last allocation (a promote, or an allocation the
    /// filter left out, touches the timeline alone): the points cover it without
    /// a step per empty bucket.
    #[test]
    fn a_far_last_event_costs_no_step_per_empty_bucket() {
        let mut t = Timeline::new(1 << 10);
        t.allocated(us(5), DomainId::new(0), 3);
        t.freed(us(9), DomainId::new(0), 1);
        t.touch(us(1 << 33));
        let started = std::time::Instant::now();
        let points = t.points(100);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            !points.is_empty() && points.len() <= 100,
            "{}",
            points.len()
        );
        let last = points.last().map(|p| (p.time, p.live));
        assert!(
            last.is_some_and(|(t, live)| t >= us(1 << 33) && live == 2),
            "{last:?}"
        );
        assert_eq!(points.iter().map(|p| p.allocated).sum::<u64>(), 3);
        assert_eq!(points.iter().map(|p| p.freed).sum::<u64>(), 1);
    }

    #[test]
    fn single_domain_peak() {
        let mut p = PeakTracker::default();
        let d = DomainId::new(0);
        p.change(us(1), d, 5);
        p.change(us(2), d, 5);
        p.change(us(2), d, -5);
        p.change(us(3), d, 3);
        p.change(us(4), d, -8);
        let peak = p.finish();
        assert_eq!((peak.live, peak.time, peak.late_events), (8, us(3), 0));
    }

    #[test]
    fn interleaved_domains_are_merged() {
        // Domain 1's packet covering times 1..=9 arrives after domain 0's 5..=6.
        let run = |mut p: PeakTracker| {
            p.change(us(5), DomainId::new(0), 10);
            p.change(us(6), DomainId::new(0), -10);
            p.change(us(1), DomainId::new(1), 4);
            p.change(us(9), DomainId::new(1), -4);
            p.finish()
        };
        // Not told about domain 1, the tracker has applied domain 0 already.
        let peak = run(PeakTracker::default());
        assert_eq!(peak.late_events, 1);
        assert_eq!(peak.domains, vec![DomainId::new(0), DomainId::new(1)]);
        let peak = run(PeakTracker::with_domains(16, &peak.domains));
        assert_eq!((peak.live, peak.time, peak.late_events), (14, us(5), 0));
    }

    #[test]
    fn budget_bounds_the_buffer() {
        // Domain 1 reports once and falls silent; domain 0 goes on.
        let mut p = PeakTracker::with_domains(8, &[DomainId::new(0), DomainId::new(1)]);
        p.change(us(0), DomainId::new(1), 1);
        for t in 1..100 {
            p.change(us(t), DomainId::new(0), 1);
            assert!(p.pending() <= 8);
        }
        let peak = p.finish();
        assert_eq!((peak.live, peak.time, peak.late_events), (100, us(99), 0));
    }

    proptest::proptest! {
        #[test]
        fn merged_peak_is_exact(
            streams in proptest::collection::vec(
                proptest::collection::vec((0u64..5, -3i64..6), 0..20), 1..4),
            order in proptest::collection::vec(0usize..4, 0..80),
        ) {
            // Build per-domain sorted streams, then interleave them arbitrarily.
            let mut per_domain: Vec<Vec<(u64, i64)>> = streams
                .iter()
                .map(|s| {
                    let mut t = 0;
                    s.iter().map(|&(dt, d)| { t += dt; (t, d) }).collect()
                })
                .collect();
            let mut all = Vec::new();
            let doms: Vec<DomainId> = (0..per_domain.len() as u16).map(DomainId::new).collect();
            let mut p = PeakTracker::with_domains(1 << 10, &doms);
            let mut pick = order.into_iter();
            loop {
                let live: Vec<usize> = (0..per_domain.len()).filter(|&i| !per_domain[i].is_empty()).collect();
                if live.is_empty() { break; }
                let i = live[pick.next().unwrap_or(0) % live.len()];
                let (t, d) = per_domain[i].remove(0);
                all.push((t, d));
                p.change(us(t), DomainId::new(i as u16), d);
            }
            let peak = p.finish();
            let (live, time) = brute_peak(&all);
            proptest::prop_assert_eq!(peak.late_events, 0);
            proptest::prop_assert_eq!(peak.live, live);
            if live > 0 {
                proptest::prop_assert_eq!(peak.time, us(time));
            }
        }

        #[test]
        fn timeline_live_is_exact_at_point_times(
            events in proptest::collection::vec((0u64..5000, 0u16..3, 1u64..10, proptest::bool::ANY), 1..200),
            buckets in 2usize..40,
            points in 1usize..30,
        ) {
            let mut tl = Timeline::new(buckets);
            for &(t, d, s, is_alloc) in &events {
                if is_alloc {
                    tl.allocated(us(t), DomainId::new(d), s);
                } else {
                    tl.freed(us(t), DomainId::new(d), s);
                }
            }
            let pts = tl.points(points);
            proptest::prop_assert!(pts.len() <= points.max(1));
            proptest::prop_assert!(pts.last().map(|p| p.time) >= Some(tl.end()));
            let mut prev_time = 0;
            for p in &pts {
                for (i, d) in tl.domains().iter().enumerate() {
                    let expect: i64 = events.iter()
                        .filter(|e| e.1 == d.get() && e.0 <= (p.time.as_micros() as u64))
                        .map(|e| if e.3 { e.2 as i64 } else { -(e.2 as i64) })
                        .sum();
                    proptest::prop_assert_eq!(p.live_by_domain[i] as i64, expect.max(0));
                }
                let alloc: u64 = events.iter()
                    .filter(|e| e.3 && e.0 <= (p.time.as_micros() as u64) && (e.0 > prev_time || (prev_time == 0 && e.0 == 0)))
                    .map(|e| e.2).sum();
                proptest::prop_assert_eq!(p.allocated, alloc);
                proptest::prop_assert_eq!(p.interval.as_micros() as u64, p.time.as_micros() as u64 - prev_time);
                prev_time = p.time.as_micros() as u64;
            }
        }
    }
}
