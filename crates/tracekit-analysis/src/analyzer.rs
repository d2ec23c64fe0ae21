//! The one pass over a trace's events: per live sampled object its allocation (source,
//! samples, domain, time, backtrace) until it is collected, aggregated per interned
//! backtrace. Everything the subcommands print is derived from the resulting
//! [`Profile`].
//!
//! Memory is bounded by the number of live sampled objects (16 bytes each, see
//! `live`), plus the backtrace trie and one entry of the [`SiteTable`] per distinct
//! allocating backtrace (its [`SiteCounts`], or a single weight for a flame graph),
//! plus fixed-size buffers (timeline buckets, the peak reorder buffer, the `--big`
//! heap). Nothing is kept per event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::allocations::AllocationSet;
use crate::backtrace::{BacktraceId, Backtraces};
use crate::curve::{Peak, PeakTracker, SiteCurves, Timeline};
use crate::filter::{Filter, LocationMask, WordRange};
use crate::live::{LiveObject, LiveObjects};
use crate::sampling::Sampling;
use crate::sites::{PerSite, SiteCounts, SiteTable};
use crate::symbols::FrameSkip;
use tracekit_columns::Spill;
use tracekit_memtrace::{Alloc, AllocationSource, DomainId, Event, LocationCode, ObjId, Timedelta};

/// How a pass over a reader spreads its work ([`Options::threads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// [`Threads::Two`] when the host has at least two cores, else [`Threads::One`].
    #[default]
    Auto,
    /// Decoding and analysis on the calling thread.
    One,
    /// Decoding on the calling thread and analysis on a second, fed in batches, so
    /// that on a host with an idle core a pass takes about as long as the slower of
    /// the two rather than their sum. A location filter matches locations as
    /// backtraces are decoded, which only the one-thread pass does: with one, the pass
    /// runs on one thread.
    Two,
}

/// What to compute.
#[derive(Clone, Debug)]
pub struct Options {
    /// Which allocations count. An allocation that fails the filter is ignored, and
    /// so are its promotion and collection. The analysis decides the clauses on the
    /// allocation event itself, and the location clauses as [`Analyzer::push_matching`]
    /// is told; the clauses on objects' lives it takes from [`Options::objects`].
    pub filter: Filter,
    /// The allocations whose objects' lives pass the filter's clauses on them, found
    /// before the pass (`passes::Source::objects`); only these are kept. A
    /// pass (`passes::analyze`) finds them itself when the filter has such
    /// clauses and this is `None`.
    pub objects: Option<Arc<AllocationSet>>,
    /// Also count what is live at this time (`alloc time <= T < collect time`).
    pub live_at: Option<Timedelta>,
    /// Intern backtraces. Off, every allocation is charged to the empty backtrace,
    /// which is enough for the timeline and the peak and lets a reader skip decoding
    /// backtraces.
    pub backtraces: bool,
    /// Charge each allocation to its allocation site alone (a one-entry backtrace)
    /// rather than its whole backtrace: enough for sites grouped by leaf, function or
    /// file, and it keeps the analysis state as small as the set of allocation sites.
    /// Ignored with a location filter, which needs whole backtraces.
    pub leaf_only: bool,
    /// With [`Options::leaf_only`], the frames that naming a site looks past
    /// ([`FrameSkip`]): a pass over a reader (`passes::analyze`), which has
    /// the trace's locations, then keeps the backtrace from its innermost entry that
    /// names the site (nearly always the leaf alone), so that the site is named
    /// exactly as from the whole backtrace. [`Analyzer::push`] has no locations and
    /// keeps the leaf.
    pub site_skip: FrameSkip,
    /// Keep the `big` largest allocations (by object size).
    pub big: usize,
    /// With [`Options::backtraces`], intern only the backtraces of the
    /// [`Options::big`] allocations, each when it enters the set, and charge every
    /// allocation to the empty backtrace as without backtraces: the profile then has
    /// one site, and its trie holds the big allocations' backtraces alone. Enough for
    /// an FXT trace (`fxt`); interning every backtrace of a deep trace is
    /// most of a pass. Ignored with [`Options::leaf_only`] and with a location
    /// filter, which need each allocation's backtrace.
    pub big_backtraces_only: bool,
    /// Bucket budget of the timeline (per domain). 0 turns the timeline off (the
    /// [`Profile::timeline`] stays empty), for reports that do not show it: it saves
    /// a bucket update per event.
    pub timeline_buckets: usize,
    /// Domains the peak tracker should wait for from the start. Needed for an exact
    /// peak only when a domain's first events arrive after later-stamped events of
    /// another; [`Peak::late_events`] says when a rerun with [`Peak::domains`] helps.
    pub domains: Vec<DomainId>,
    /// How a pass over a reader (`passes::analyze`) spreads its work; the
    /// [`Analyzer`] itself ignores it.
    pub threads: Threads,
    /// What to keep per site: every count, or only what a flame graph weighs.
    pub per_site: PerSite,
    /// Also keep each site's live heap at these times, in order
    /// ([`Profile::curves`]).
    pub curve_times: Option<Arc<[Timedelta]>>,
    /// Where the pass grows its backtrace trie, its table of live objects and
    /// its sites' counts, and a flame graph folded from it its tree: in
    /// memory, or in files of a folder past a few MiB
    /// ([`tracekit_columns::spill`]), so that a pass beside a build of the
    /// trace's tables does not hold them in memory beside the build's, nor a
    /// query over millions of whole backtraces their counts.
    pub spill: Spill,
}

impl Options {
    /// Whether a pass interns only the big allocations' backtraces:
    /// [`Options::big_backtraces_only`] with backtraces on and nothing that needs
    /// every allocation's.
    pub(crate) fn interns_big_only(&self) -> bool {
        self.backtraces
            && self.big_backtraces_only
            && !self.leaf_only
            && self.filter.location_mask().is_none()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            filter: Filter::default(),
            objects: None,
            live_at: None,
            backtraces: true,
            leaf_only: false,
            site_skip: FrameSkip::none(),
            big: 0,
            big_backtraces_only: false,
            timeline_buckets: 1 << 14,
            domains: Vec::new(),
            threads: Threads::Auto,
            per_site: PerSite::All,
            curve_times: None,
            spill: Spill::memory(),
        }
    }
}

/// One of the largest allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BigAlloc {
    /// Object size in words.
    pub length: u64,
    /// Samples.
    pub nsamples: u64,
    /// Allocation time.
    pub time: Timedelta,
    /// Object id.
    pub obj_id: ObjId,
    /// Allocating domain.
    pub domain: DomainId,
    /// Source.
    pub source: AllocationSource,
    /// Backtrace.
    pub backtrace: BacktraceId,
}

/// Event counts, including the events the analysis ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventCounts {
    /// Alloc events seen.
    pub allocs: u64,
    /// Promote events seen.
    pub promotes: u64,
    /// Collect events seen.
    pub collects: u64,
    /// Allocs the filter dropped.
    pub filtered_allocs: u64,
    /// Promotes and collects of objects not being tracked (filtered out, or unknown to
    /// the trace).
    pub untracked: u64,
    /// Allocs reusing the id of an object still live (the older one is dropped as if
    /// collected; a valid trace has none).
    pub duplicate_ids: u64,
}

/// Events a pass over columns knows change nothing but the counts, and leaves
/// out: allocations the filter drops, promotes and collects of no kept object.
/// The analysis counts them as if fed ([`Analyzer::skipped`]); what else an event
/// changes, the time seen, is a maximum, which does not depend on the order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Skipped {
    pub(crate) allocs: u64,
    pub(crate) promotes: u64,
    pub(crate) collects: u64,
    /// The latest time of them.
    pub(crate) end: Option<Timedelta>,
}

impl Skipped {
    /// Counts an event at `time`: an allocation, else a promote or a collect.
    #[inline]
    pub(crate) fn event(&mut self, time: Timedelta, alloc: bool, promote: bool) {
        if alloc {
            self.allocs += 1;
        } else if promote {
            self.promotes += 1;
        } else {
            self.collects += 1;
        }
        self.end = Some(self.end.map_or(time, |e| e.max(time)));
    }
}

/// The one-pass analysis state. Feed it every event with [`Analyzer::push`] (or
/// [`Analyzer::push_matching`] for a location filter), then call
/// [`Analyzer::finish`].
#[derive(Debug)]
pub struct Analyzer {
    options: Options,
    sampling: Sampling,
    /// The filter's clauses on the allocation event and on its object's life,
    /// as checked per allocation.
    keep: Keep,
    location: Option<LocationMask>,
    backtraces: Backtraces,
    /// The trie grown elsewhere, once adopted ([`Analyzer::adopt_backtraces`]).
    adopted: Option<Arc<Backtraces>>,
    /// Per trie node its site, when the trie is grown elsewhere
    /// ([`Analyzer::push_alloc_interned`]); empty otherwise (the trie's nodes hold it).
    site_of: Vec<u32>,
    sites: SiteTable,
    /// Per trie node, the location clauses its path matches, with [`MASK_KNOWN`]
    /// set; 0 when not known yet.
    node_match: Vec<u16>,
    live: LiveObjects,
    timeline: Timeline,
    timeline_on: bool,
    peak: PeakTracker,
    big: BinaryHeap<Reverse<BigAlloc>>,
    /// Once `big` is full, the `(length, nsamples)` an allocation must exceed to enter
    /// it (its smallest entry's): checked inline for every allocation, which nearly
    /// always fails it.
    big_floor: Option<(u64, u64)>,
    /// [`Options::big_backtraces_only`] in effect.
    big_only: bool,
    /// With `big_only` and allocations fed by [`Analyzer::push_alloc_suffix`], per
    /// domain its previous backtrace (what the trie's paths hold otherwise).
    current: Vec<(DomainId, Vec<LocationCode>)>,
    counts: EventCounts,
    end: Timedelta,
    curves: Option<SiteCurves>,
}

const NO_SITE: u32 = u32::MAX;

/// What a filter's clauses and a site's counts read of an allocation (its
/// object id and backtrace aside).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    pub(crate) nsamples: u64,
    pub(crate) length: u64,
    pub(crate) source: AllocationSource,
    pub(crate) domain: DomainId,
}

impl Row {
    /// What `a` holds of a row.
    #[inline(always)]
    pub(crate) fn of(a: &Alloc<'_>) -> Row {
        Row {
            nsamples: a.nsamples,
            length: a.length,
            source: a.source,
            domain: a.domain,
        }
    }
}

/// Which allocations a filter keeps, but for its location clauses (which
/// [`Analyzer::keep_nth`] decides after): the clauses on the allocation event
/// and the allocations whose objects' lives pass ([`Options::objects`]).
#[derive(Clone, Debug)]
pub(crate) struct Keep {
    /// Every allocation is kept (no clause, a location clause neither).
    all: bool,
    source: [bool; 3],
    words: WordRange,
    domain: Option<Vec<u16>>,
    between: Option<(Timedelta, Timedelta)>,
    objects: Option<Arc<AllocationSet>>,
}

impl Keep {
    /// The clauses of `options`' filter, sizes in words of `word_bytes`.
    fn of(options: &Options, word_bytes: u64) -> Keep {
        let f = &options.filter;
        let mut source = [f.source.is_empty(); 3];
        for s in &f.source {
            source[*s as usize] = true;
        }
        Keep {
            all: f.without_location_clauses().is_empty()
                && f.location_mask().is_none()
                && options.objects.is_none(),
            source,
            words: WordRange::of(f, word_bytes),
            domain: (!f.domain.is_empty()).then(|| f.domain.clone()),
            between: f.allocated_between(),
            objects: options.objects.clone(),
        }
    }

    /// Whether allocation `n`, of `a`'s source, length and domain at `time`,
    /// is kept (its object id and backtrace are not asked).
    #[inline(always)]
    pub(crate) fn keeps(&self, n: u64, time: Timedelta, a: &Row) -> bool {
        if self.all {
            return true;
        }
        self.source[a.source as usize]
            && self.words.min <= a.length
            && a.length <= self.words.max
            && self
                .domain
                .as_ref()
                .is_none_or(|d| d.contains(&a.domain.get()))
            && self.between.is_none_or(|(lo, hi)| lo <= time && time <= hi)
            && self.objects.as_ref().is_none_or(|set| set.contains(n))
    }
}

/// What a part of a scan of columns counts ([`Analyzer::part`]): per site of
/// its own, numbered as the part first keeps an allocation of it, the counts
/// of kept allocations and of their objects' ends, and the timeline.
pub(crate) struct ScanPart {
    /// Which allocations count.
    pub(crate) keep: Keep,
    live_at: Option<Timedelta>,
    sites: SiteTable,
    timeline: Option<Timeline>,
}

impl ScanPart {
    /// A new site of the part, for trie node `bt`: its index.
    #[inline]
    pub(crate) fn site(&mut self, bt: BacktraceId) -> u32 {
        self.sites.push(bt) as u32
    }

    /// The part's sites' trie nodes, in order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = BacktraceId> + '_ {
        (0..self.sites.len()).map(|i| self.sites.backtrace(i))
    }

    /// Asks for the part's site `site`'s counts ahead of counting it.
    #[inline(always)]
    pub(crate) fn prefetch(&self, site: u32) {
        self.sites.prefetch(site);
    }

    /// A kept allocation `a` at `time`, charged to the part's site `site`:
    /// its object promoted when `promoted`, ended at `end` unless `None` (as
    /// [`Analyzer::alloc_scanned`] and the calls after it count them).
    #[inline(always)]
    pub(crate) fn counted(
        &mut self,
        site: u32,
        time: Timedelta,
        a: &Row,
        promoted: bool,
        end: Option<Timedelta>,
    ) {
        let live_at = self
            .live_at
            .is_some_and(|t| time <= t && end.is_none_or(|end| t < end));
        self.sites.counted(
            site,
            a.nsamples,
            a.source,
            a.length,
            promoted,
            end.is_some(),
            live_at,
        );
        if let Some(t) = &mut self.timeline {
            t.allocated(time, a.domain, a.nsamples);
            if let Some(end) = end {
                t.freed_aside(end, a.domain, a.nsamples);
            }
        }
    }
}

/// Set in [`Analyzer::node_match`]'s entries that are known.
const MASK_KNOWN: u16 = 1 << 8;

impl Analyzer {
    /// A fresh analysis of a trace with the given sampling parameters.
    pub fn new(sampling: Sampling, options: Options) -> Self {
        let keep = Keep::of(&options, sampling.word_bytes());
        let location = options.filter.location_mask();
        let big_only = options.interns_big_only();
        let curves = options.curve_times.clone().map(SiteCurves::new);
        let backtraces = Backtraces::spilling(&options.spill);
        let live = LiveObjects::spilling(&options.spill);
        Analyzer {
            sites: SiteTable::spilling(options.per_site, &options.spill),
            timeline: Timeline::new(options.timeline_buckets),
            timeline_on: options.timeline_buckets > 0,
            peak: PeakTracker::with_domains(1 << 20, &options.domains),
            options,
            sampling,
            keep,
            location,
            backtraces,
            adopted: None,
            site_of: Vec::new(),
            node_match: Vec::new(),
            live,
            big: BinaryHeap::new(),
            big_floor: None,
            big_only,
            current: Vec::new(),
            counts: EventCounts::default(),
            end: Timedelta::default(),
            curves,
        }
    }

    /// Feeds one event, at `time` from the trace start (as the reader yields them).
    #[inline]
    pub fn push(&mut self, time: Timedelta, event: &Event<'_>) {
        self.push_matching(time, event, &mut |_| 0);
    }

    /// Feeds one event. When the filter has location or function clauses, an
    /// allocation is kept only if its backtrace's location codes match them: `matches`
    /// says which clauses a code matches, a bit each. It is asked once per new trie
    /// node, not per event.
    #[inline]
    pub fn push_matching(
        &mut self,
        time: Timedelta,
        event: &Event<'_>,
        matches: &mut dyn FnMut(LocationCode) -> u8,
    ) {
        match event {
            Event::Alloc(a) => self.alloc(time, a, matches),
            &Event::Promote(obj_id, _) => self.promote(time, obj_id),
            &Event::Collect(obj_id, domain) => self.collect(time, obj_id, domain),
        }
    }

    /// Feeds a promote event (what [`Analyzer::push`] does with one).
    #[inline]
    pub fn promote(&mut self, time: Timedelta, obj_id: ObjId) {
        self.counts.promotes += 1;
        self.see(time);
        match self.live.promote(obj_id.get()) {
            Ok(Some(site)) => self.sites.promoted(site),
            Ok(None) => {}
            Err(()) => self.counts.untracked += 1,
        }
    }

    /// Feeds a collect event of `obj_id` reported by `domain` (what
    /// [`Analyzer::push`] does with one).
    #[inline]
    pub fn collect(&mut self, time: Timedelta, obj_id: ObjId, domain: DomainId) {
        self.counts.collects += 1;
        self.see(time);
        match self.live.remove(obj_id.get()) {
            Some(obj) => self.release(obj, time, domain),
            None => self.counts.untracked += 1,
        }
    }

    #[inline]
    fn see(&mut self, time: Timedelta) {
        if time > self.end {
            self.end = time;
        }
        if self.timeline_on {
            self.timeline.touch(time);
        }
    }

    /// Feeds an allocation whose `backtrace` holds only the entries after the first
    /// `keep` of the previous backtrace of its domain (`common_prefix` is ignored).
    /// For sources that ship events elsewhere and want to send only new entries; see
    /// [`Backtraces::intern_suffix`] for what `keep` may be.
    ///
    /// Always inlined: it is most of the pipelined pass's analysis thread, whose loop
    /// it should not leave per event (callgrind, `top_speed ... pipelined` on the
    /// corpus's synth_v2.ctf: that thread ran 17.6 M instructions inlined, 18.8-19.0 M
    /// when the compiler kept it out of line).
    #[inline(always)]
    pub fn push_alloc_suffix(&mut self, time: Timedelta, a: &Alloc<'_>, keep: usize) {
        self.counts.allocs += 1;
        self.see(time);
        if self.big_only {
            let slot = self.current_slot(a.domain);
            let mut path = std::mem::take(&mut self.current[slot].1);
            path.truncate(keep);
            path.extend_from_slice(&a.backtrace);
            self.alloc_interned(time, a, BacktraceId::EMPTY, Some(&path), &mut |_| 0);
            self.current[slot].1 = path;
            return;
        }
        let bt = if !self.options.backtraces {
            BacktraceId::EMPTY
        } else if self.options.leaf_only {
            // The source sends the leaf alone.
            self.backtraces.intern_full(&a.backtrace)
        } else {
            self.backtraces.intern_suffix(a.domain, keep, &a.backtrace)
        };
        self.alloc_interned(time, a, bt, None, &mut |_| 0);
    }

    /// The slot of `domain` in [`Analyzer::current`], added on first use.
    #[inline]
    fn current_slot(&mut self, domain: DomainId) -> usize {
        match self.current.iter().position(|(d, _)| *d == domain) {
            Some(i) => i,
            None => {
                self.current.push((domain, Vec::new()));
                self.current.len() - 1
            }
        }
    }

    /// An alloc whose backtrace was interned elsewhere, into a trie the analysis adopts
    /// before it finishes ([`Analyzer::adopt_backtraces`]): so that a pipelined pass can
    /// walk the trie on the decoding thread. `a`'s backtrace is ignored. Not for a
    /// location filter, which matches the analysis's own trie.
    pub(crate) fn push_alloc_interned(&mut self, time: Timedelta, a: &Alloc<'_>, bt: BacktraceId) {
        self.counts.allocs += 1;
        self.see(time);
        self.alloc_interned(time, a, bt, None, &mut |_| 0);
    }

    /// [`Analyzer::push_alloc_interned`] for a caller that follows the objects' lives
    /// itself (by where each allocation is in its trace, not by id): no live object
    /// is kept. The allocation's site when the filter keeps it; the caller hands it
    /// back with the object to [`Analyzer::promote_followed`],
    /// [`Analyzer::collect_followed`] and [`Analyzer::finish_followed`]. Exact
    /// only when no allocation reuses the id of a live object, which the analysis
    /// would take as the older object's end.
    #[inline(always)]
    pub(crate) fn alloc_followed(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
    ) -> Option<u32> {
        self.counts.allocs += 1;
        self.see(time);
        if !self.keep(time, a, bt, &mut |_| 0) {
            self.counts.filtered_allocs += 1;
            return None;
        }
        let site = self.site(bt);
        self.peak_up(time, a);
        self.account(time, a, bt, site, None);
        Some(site)
    }

    /// A promote event of a kept object followed by the caller: its site, or
    /// `None` when it was promoted before (what [`Analyzer::promote`] finds by
    /// id). A promote of no kept object is [`Skipped`].
    #[inline]
    pub(crate) fn promote_followed(&mut self, time: Timedelta, site: Option<u32>) {
        self.counts.promotes += 1;
        self.see(time);
        if let Some(site) = site {
            self.sites.promoted(site);
        }
    }

    /// A collect event reported by `by` of the kept object `obj`, followed by the
    /// caller, as [`Analyzer::collect`] finds it by id. A collect of no kept
    /// object is [`Skipped`].
    #[inline]
    pub(crate) fn collect_followed(&mut self, time: Timedelta, obj: LiveObject, by: DomainId) {
        self.counts.collects += 1;
        self.see(time);
        self.release(obj, time, by);
    }

    /// Allocation `n` of a scan of columns ([`crate::tables`]), which visits each
    /// allocation once, its object's end with it, and finds the live heap's peak
    /// itself: kept or not as [`Analyzer::alloc_followed`] decides, and counted
    /// per site and on the timeline, but not counted as an event (the scan counts
    /// those) nor as a change of the live heap. Its site when kept.
    /// The scan has decided the location clauses into [`Options::objects`], and
    /// finds the site and node of a kept allocation with `site`, which the scan
    /// remembers per node of its trie, calling [`Analyzer::site_of_node`] once.
    #[inline(always)]
    pub(crate) fn alloc_scanned(
        &mut self,
        n: u64,
        time: Timedelta,
        a: &Alloc<'_>,
        site: impl FnOnce(&mut Analyzer) -> (u32, BacktraceId),
    ) -> Option<u32> {
        debug_assert!(self.location.is_none());
        if !self.keep_nth(n, time, a, BacktraceId::EMPTY, &mut |_| 0) {
            return None;
        }
        let (site, bt) = site(self);
        self.account(time, a, bt, site, None);
        Some(site)
    }

    /// A part of a scan of columns that counts on its own, on any thread, what
    /// [`Analyzer::alloc_scanned`] and the calls after it count here, and is
    /// [`Analyzer::absorb`]ed after: `None` when this analysis keeps what a part
    /// cannot (the largest allocations, sites' curves, a location clause).
    pub(crate) fn part(&self) -> Option<ScanPart> {
        if self.options.big > 0 || self.curves.is_some() || self.location.is_some() {
            return None;
        }
        Some(ScanPart {
            keep: self.keep.clone(),
            live_at: self.options.live_at,
            sites: SiteTable::spilling(self.sites.keeps(), self.sites.spill()),
            timeline: self.timeline_on.then(|| self.timeline.part()),
        })
    }

    /// Adds what `part` counted, its site `i` being site `to[i]` here.
    pub(crate) fn absorb(&mut self, part: ScanPart, to: &[u32]) {
        self.sites.absorb(&part.sites, to);
        if let Some(t) = part.timeline {
            self.timeline.merge(t);
        }
    }

    /// Whether [`Analyzer::adopt`] may take `part`: this analysis has no site
    /// yet, and keeps per site what the part keeps.
    pub(crate) fn may_adopt(&self, part: &ScanPart) -> bool {
        self.sites.is_empty() && self.sites.keeps() == part.sites.keeps()
    }

    /// [`Analyzer::absorb`] of `part` into an analysis that has no site yet
    /// ([`Analyzer::may_adopt`]), without a copy: the part's sites become this
    /// analysis's, numbered as the part numbers them.
    pub(crate) fn adopt(&mut self, part: ScanPart) {
        debug_assert!(self.may_adopt(&part));
        for (s, bt) in part.nodes().enumerate() {
            self.name_site(bt, s as u32);
        }
        self.sites = part.sites;
        if let Some(t) = part.timeline {
            self.timeline.merge(t);
        }
    }

    /// Asks for site `site`'s counts ahead of counting it.
    #[inline(always)]
    pub(crate) fn prefetch_site(&self, site: u32) {
        self.sites.prefetch(site);
    }

    /// The site of trie node `bt`, numbered when first asked.
    #[inline]
    pub(crate) fn site_of_node(&mut self, bt: BacktraceId) -> u32 {
        self.site(bt)
    }

    /// The end at `end` of the kept object `obj` of a scan of columns
    /// ([`Analyzer::alloc_scanned`]): what [`Analyzer::release`] counts but the
    /// change of the live heap.
    #[inline(always)]
    pub(crate) fn ended_scanned(&mut self, obj: &LiveObject, end: Timedelta) {
        self.count_end(obj, end, true);
    }

    /// The end of `obj` at `end`, counted on its site, the timeline (`aside`:
    /// keeping the timeline's bucket at hand, for ends out of time order) and
    /// its site's curve; the live heap's peak is the caller's.
    #[inline(always)]
    fn count_end(&mut self, obj: &LiveObject, end: Timedelta, aside: bool) {
        let live_at = match self.options.live_at {
            Some(t) => obj.time <= t && t < end,
            None => false,
        };
        self.sites.collected(obj.site, obj.samples, live_at);
        if self.timeline_on {
            match aside {
                true => self.timeline.freed_aside(end, obj.domain, obj.samples),
                false => self.timeline.freed(end, obj.domain, obj.samples),
            }
        }
        if let Some(c) = &mut self.curves
            && obj.site != NO_SITE
        {
            c.freed(obj.site, end, obj.samples);
        }
    }

    /// A kept object of a scan of columns that was promoted, once or more.
    #[inline]
    pub(crate) fn promoted_scanned(&mut self, site: u32) {
        self.sites.promoted(site);
    }

    /// A kept object of a scan of columns live at the end: counted as live at
    /// [`Options::live_at`] when allocated by then (what
    /// [`Analyzer::finish_followed`] does with the objects it is handed).
    #[inline]
    pub(crate) fn live_at_end_scanned(&mut self, obj: &LiveObject) {
        if self.options.live_at.is_some_and(|t| obj.time <= t) {
            self.sites.live_at_end(obj.site, obj.samples);
        }
    }

    /// Ends a scan of columns: its event counts, its peak and `count` kept
    /// objects live at the end (already counted by
    /// [`Analyzer::live_at_end_scanned`]).
    pub(crate) fn finish_scanned(
        mut self,
        counts: EventCounts,
        peak: Peak,
        end: Timedelta,
        count: u64,
    ) -> Profile {
        self.counts = counts;
        self.see(end);
        let mut profile = self.finish_followed(count, std::iter::empty());
        profile.peak = peak;
        profile
    }

    /// The domains [`Options::domains`] names, each once: those a peak tracker
    /// waits for from the start.
    pub(crate) fn peak_domains(&self) -> &[DomainId] {
        &self.options.domains
    }

    /// Counts events a pass over columns left out (see [`Skipped`]).
    pub(crate) fn skipped(&mut self, s: &Skipped) {
        self.counts.allocs += s.allocs;
        self.counts.filtered_allocs += s.allocs;
        self.counts.promotes += s.promotes;
        self.counts.collects += s.collects;
        self.counts.untracked += s.promotes + s.collects;
        if let Some(t) = s.end {
            self.see(t);
        }
    }

    /// Takes the trie that [`Analyzer::push_alloc_interned`]'s ids are nodes of,
    /// for the profile, once every allocation is in. It is shared, not copied:
    /// its nodes carry no sites of this analysis ([`Backtraces::site`]).
    pub(crate) fn adopt_backtraces(&mut self, backtraces: Arc<Backtraces>) {
        self.adopted = Some(backtraces);
        self.site_of = Vec::new();
    }

    #[inline]
    fn alloc(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        matches: &mut dyn FnMut(LocationCode) -> u8,
    ) {
        self.counts.allocs += 1;
        self.see(time);
        // The trie must follow every alloc of a domain, kept or not, because the next
        // alloc's common prefix refers to this one.
        if self.big_only {
            // The reader's backtrace is whole (its common prefix included).
            self.alloc_interned(time, a, BacktraceId::EMPTY, Some(&a.backtrace), matches);
            return;
        }
        let bt = if !self.options.backtraces {
            BacktraceId::EMPTY
        } else if self.options.leaf_only && self.location.is_none() {
            let n = a.backtrace.len();
            self.backtraces
                .intern_full(&a.backtrace[n.saturating_sub(1)..])
        } else {
            self.backtraces
                .intern(a.domain, a.common_prefix, &a.backtrace)
        };
        self.alloc_interned(time, a, bt, None, matches);
    }

    /// Accounts for an allocation charged to `bt`. `whole` is its whole backtrace
    /// when only the big allocations' are interned ([`Analyzer::big_only`]).
    #[inline(always)]
    fn alloc_interned(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
        whole: Option<&[LocationCode]>,
        matches: &mut dyn FnMut(LocationCode) -> u8,
    ) {
        if !self.keep(time, a, bt, matches) {
            self.counts.filtered_allocs += 1;
            return;
        }
        let site = self.site(bt);
        self.peak_up(time, a);
        self.account(time, a, bt, site, whole);
        let obj = LiveObject {
            samples: a.nsamples,
            time,
            site,
            domain: a.domain,
            promoted: false,
        };
        if let Some(old) = self.live.insert(a.obj_id.get(), obj) {
            self.counts.duplicate_ids += 1;
            self.release(old, time, a.domain);
        }
    }

    /// A kept allocation's rise of the live heap, for its peak.
    #[inline(always)]
    fn peak_up(&mut self, time: Timedelta, a: &Alloc<'_>) {
        let delta = i64::try_from(a.nsamples).unwrap_or(i64::MAX);
        self.peak.change(time, a.domain, delta);
    }

    /// Counts a kept allocation charged to `site`: all but following its object
    /// and the live heap's peak ([`Analyzer::peak_up`]).
    #[inline(always)]
    fn account(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
        site: u32,
        whole: Option<&[LocationCode]>,
    ) {
        self.sites.allocated(site, a.nsamples, a.source, a.length);
        if self.timeline_on {
            self.timeline.allocated(time, a.domain, a.nsamples);
        }
        if let Some(c) = &mut self.curves
            && site != NO_SITE
        {
            c.allocated(site, time, a.nsamples);
        }
        if self.options.big > 0
            && self
                .big_floor
                .is_none_or(|floor| (a.length, a.nsamples) > floor)
        {
            self.note_big(time, a, bt, whole);
        }
    }

    #[inline]
    fn keep(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
        matches: &mut dyn FnMut(LocationCode) -> u8,
    ) -> bool {
        self.keep_nth(self.counts.allocs.wrapping_sub(1), time, a, bt, matches)
    }

    /// Whether the filter keeps `a`, the allocation of ordinal `n`.
    #[inline(always)]
    fn keep_nth(
        &mut self,
        n: u64,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
        matches: &mut dyn FnMut(LocationCode) -> u8,
    ) -> bool {
        if !self.keep.keeps(n, time, &Row::of(a)) {
            return false;
        }
        if let Some(m) = self.location {
            return m.keeps(self.node_mask(bt, matches));
        }
        true
    }

    /// The location clauses the frames of backtrace `bt` match (the union of what
    /// `matches` says of each), memoised per node.
    fn node_mask(&mut self, bt: BacktraceId, matches: &mut dyn FnMut(LocationCode) -> u8) -> u8 {
        let len = self.backtraces.len();
        if self.node_match.len() < len {
            self.node_match.resize(len, 0);
        }
        // Walk up to the nearest node whose answer is known, then fill in downwards.
        let mut pending = Vec::new();
        let mut node = bt;
        let mut mask = loop {
            if node == BacktraceId::EMPTY {
                break 0;
            }
            match self.node_match[node.0 as usize] {
                0 => {
                    pending.push(node);
                    node = self.backtraces.parent(node);
                }
                known => break known as u8,
            }
        };
        for node in pending.into_iter().rev() {
            if let Some(code) = self.backtraces.leaf(node) {
                mask |= matches(code);
            }
            self.node_match[node.0 as usize] = MASK_KNOWN | u16::from(mask);
        }
        mask
    }

    #[inline]
    fn site(&mut self, bt: BacktraceId) -> u32 {
        if let Some(s) = self.backtraces.site(bt) {
            return s;
        }
        if bt.0 as usize >= self.backtraces.len() {
            return self.site_elsewhere(bt);
        }
        let s = u32::try_from(self.sites.len()).unwrap_or(NO_SITE);
        if s != NO_SITE {
            self.sites.push(bt);
            self.backtraces.set_site(bt, s);
        }
        s
    }

    /// Makes `s` the site of trie node `bt`, as [`Analyzer::site`] would have
    /// numbered it: in this analysis's trie, or in `site_of` for a trie grown
    /// elsewhere.
    fn name_site(&mut self, bt: BacktraceId, s: u32) {
        if (bt.0 as usize) < self.backtraces.len() {
            self.backtraces.set_site(bt, s);
            return;
        }
        *self.site_of_slot(bt) = s;
    }

    /// The slot of trie node `bt` (of a trie grown elsewhere) in `site_of`,
    /// which grows to hold it.
    fn site_of_slot(&mut self, bt: BacktraceId) -> &mut u32 {
        let i = bt.0 as usize;
        if i >= self.site_of.len() {
            let more = i + 1 - self.site_of.len();
            tracekit_columns::huge::reserve(&mut self.site_of, more);
            self.site_of.resize(i + 1, NO_SITE);
        }
        &mut self.site_of[i]
    }

    /// [`Analyzer::site`] of a node of a trie grown elsewhere.
    #[inline(never)]
    fn site_elsewhere(&mut self, bt: BacktraceId) -> u32 {
        let known = *self.site_of_slot(bt);
        if known != NO_SITE {
            return known;
        }
        let s = u32::try_from(self.sites.len()).unwrap_or(NO_SITE);
        if s != NO_SITE {
            self.sites.push(bt);
            *self.site_of_slot(bt) = s;
        }
        s
    }

    /// Keeps `a`, which is one of the `big` largest so far ([`Analyzer::big_floor`]);
    /// `whole` is its backtrace to intern, instead of `bt`, when only these are
    /// interned.
    #[inline(never)]
    fn note_big(
        &mut self,
        time: Timedelta,
        a: &Alloc<'_>,
        bt: BacktraceId,
        whole: Option<&[LocationCode]>,
    ) {
        // Interned only now: most allocations never enter the set.
        let backtrace = match whole {
            Some(w) => self.backtraces.intern_full(w),
            None => bt,
        };
        let entry = BigAlloc {
            length: a.length,
            nsamples: a.nsamples,
            time,
            obj_id: a.obj_id,
            domain: a.domain,
            source: a.source,
            backtrace,
        };
        if self.big.len() < self.options.big {
            self.big.push(Reverse(entry));
        } else if let Some(mut smallest) = self.big.peek_mut() {
            // Replaced in place: one sift down, where a pop and a push sift twice
            // (a fifth of `to-fxt --big 200000`'s time went to popping).
            *smallest = Reverse(entry);
        }
        if self.big.len() >= self.options.big {
            self.big_floor = self
                .big
                .peek()
                .map(|Reverse(smallest)| (smallest.length, smallest.nsamples));
        }
    }

    /// Accounts for the end of `obj` at `time`, reported by domain `by`.
    ///
    /// The timeline charges the allocating domain; the peak tracker needs the
    /// reporting one, whose events are in time order. A collect stamped before the
    /// allocation (another domain's clock; synthetic traces have them) ends the object
    /// at its allocation time: it was never live.
    #[inline(always)]
    fn release(&mut self, obj: LiveObject, time: Timedelta, by: DomainId) {
        let end = time.max(obj.time);
        self.count_end(&obj, end, false);
        let delta = -i64::try_from(obj.samples).unwrap_or(i64::MAX);
        if time >= obj.time {
            self.peak.change(time, by, delta);
        } else {
            self.peak.change_unclocked(end, delta);
        }
    }

    /// Ends the pass.
    pub fn finish(mut self) -> Profile {
        let live = std::mem::replace(&mut self.live, LiveObjects::spilling(&Spill::memory()));
        self.finish_followed(live.len() as u64, live.values())
    }

    /// Ends a pass whose objects the caller followed ([`Analyzer::alloc_followed`]):
    /// `count` kept objects are live at the end, those of `live`.
    pub(crate) fn finish_followed(
        mut self,
        count: u64,
        live: impl Iterator<Item = LiveObject>,
    ) -> Profile {
        let live_objects_at_end = count;
        if let Some(t) = self.options.live_at {
            for obj in live {
                if obj.time <= t {
                    self.sites.live_at_end(obj.site, obj.samples);
                }
            }
        }
        let totals = self.sites.totals();
        let mut big: Vec<BigAlloc> = self.big.into_iter().map(|Reverse(b)| b).collect();
        big.sort_by(|a, b| {
            (b.length, b.nsamples)
                .cmp(&(a.length, a.nsamples))
                .then(a.time.cmp(&b.time))
                .then(a.obj_id.cmp(&b.obj_id))
        });
        Profile {
            sampling: self.sampling,
            live_at: self.options.live_at,
            backtraces: match self.adopted {
                Some(trie) => trie,
                None => Arc::new(self.backtraces),
            },
            sites: self.sites,
            totals,
            timeline: self.timeline,
            peak: self.peak.finish(),
            events: self.counts,
            big,
            live_objects_at_end,
            end: self.end,
            curves: self.curves,
        }
    }
}

/// The result of one pass.
#[derive(Debug)]
pub struct Profile {
    /// Sample rate and word size, to turn samples into bytes.
    pub sampling: Sampling,
    /// The time [`SiteCounts::live_at`] refers to.
    pub live_at: Option<Timedelta>,
    /// The interned backtraces (shared with the trace tables a pass over them
    /// read).
    pub backtraces: Arc<Backtraces>,
    /// Counts per allocating backtrace, in order of first allocation.
    pub sites: SiteTable,
    /// Sum over all sites.
    pub totals: SiteCounts,
    /// Live heap and allocations over time.
    pub timeline: Timeline,
    /// Peak of the live heap (of the allocations that passed the filter).
    pub peak: Peak,
    /// Event counts.
    pub events: EventCounts,
    /// The largest allocations, largest first.
    pub big: Vec<BigAlloc>,
    /// Sampled objects never collected.
    pub live_objects_at_end: u64,
    /// Time of the last event.
    pub end: Timedelta,
    /// Each site's live heap at [`Options::curve_times`], when asked.
    pub curves: Option<SiteCurves>,
}

/// Runs the analysis over `events`, each with its time from the trace start: the
/// [`Analyzer`] over events already in hand (a reader's go through
/// `passes::analyze`).
pub fn analyze_events<'a, I>(sampling: Sampling, options: Options, events: I) -> Profile
where
    I: IntoIterator<Item = (Timedelta, Event<'a>)>,
{
    let mut a = Analyzer::new(sampling, options);
    for (time, ev) in events {
        a.push(time, &ev);
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(t: i64) -> Timedelta {
        Timedelta::from_micros(t)
    }

    const SAMPLING: Sampling = Sampling {
        sample_rate: 0.5,
        word_size_bits: 64,
    };

    /// A backtrace of the codes `bt`, caller first.
    fn backtrace(bt: &[i64]) -> std::borrow::Cow<'static, [LocationCode]> {
        bt.iter().map(|&c| LocationCode::new(c)).collect()
    }

    fn alloc(
        t: i64,
        id: u64,
        samples: u64,
        source: AllocationSource,
        bt: &[i64],
        cp: usize,
    ) -> (Timedelta, Event<'static>) {
        let a = Alloc {
            obj_id: ObjId::new(id),
            domain: DomainId::new(0),
            length: samples * 2,
            nsamples: samples,
            source,
            backtrace: backtrace(bt),
            common_prefix: cp,
        };
        (us(t), Event::Alloc(a))
    }

    fn collect(t: i64, id: u64) -> (Timedelta, Event<'static>) {
        (us(t), Event::Collect(ObjId::new(id), DomainId::new(0)))
    }

    fn promote(t: i64, id: u64) -> (Timedelta, Event<'static>) {
        (us(t), Event::Promote(ObjId::new(id), DomainId::new(0)))
    }

    fn sample_events() -> Vec<(Timedelta, Event<'static>)> {
        vec![
            alloc(10, 0, 1, AllocationSource::Minor, &[1, 2], 0),
            alloc(20, 1, 3, AllocationSource::Major, &[1, 3], 1),
            alloc(30, 2, 2, AllocationSource::Minor, &[1, 2], 1),
            promote(35, 0),
            collect(40, 1),
            alloc(50, 3, 5, AllocationSource::External, &[1, 2], 2),
            collect(60, 3),
            collect(70, 99),
        ]
    }

    #[test]
    fn totals_live_and_peak() {
        let p = analyze_events(SAMPLING, Options::default(), sample_events());
        assert_eq!(p.totals.allocs, 4);
        assert_eq!(p.totals.samples, 11);
        assert_eq!(p.totals.samples_by_source, [3, 3, 5]);
        assert_eq!(p.totals.collected, 8);
        assert_eq!(p.totals.live_end(), 3);
        assert_eq!(p.totals.promoted, 1);
        assert_eq!(p.live_objects_at_end, 2);
        assert_eq!(p.events.untracked, 1);
        assert_eq!(p.sites.len(), 2);
        // Live: 1, 4, 6, 3 (t=40), 8 (t=50), 3.
        assert_eq!((p.peak.live, p.peak.time), (8, us(50)));
        assert_eq!(SAMPLING.bytes(p.totals.samples), 11 * 16);
        assert_eq!(p.end, us(70));
    }

    #[test]
    fn live_at_counts_alloc_le_t_lt_collect() {
        for (t, expect) in [
            (9, 0),
            (10, 1),
            (39, 6),
            (40, 3),
            (50, 8),
            (60, 3),
            (1000, 3),
        ] {
            let opts = Options {
                live_at: Some(us(t)),
                ..Options::default()
            };
            let p = analyze_events(SAMPLING, opts, sample_events());
            assert_eq!(p.totals.live_at, expect, "at {t}");
        }
    }

    #[test]
    fn filters() {
        let run = |filter: Filter| {
            let opts = Options {
                filter,
                ..Options::default()
            };
            analyze_events(SAMPLING, opts, sample_events())
        };
        let p = run(Filter {
            source: vec![AllocationSource::Minor],
            ..Filter::default()
        });
        assert_eq!((p.totals.allocs, p.totals.samples), (2, 3));
        // The collect of the filtered-out objects is ignored.
        assert_eq!(p.events.untracked, 3);
        let p = run(Filter {
            min_size: Some(4 * 8 + 1),
            ..Filter::default()
        });
        assert_eq!((p.totals.allocs, p.totals.samples), (2, 8));
        // Objects of 16, 48, 32 and 80 bytes.
        let p = run(Filter {
            max_size: Some(48),
            ..Filter::default()
        });
        assert_eq!((p.totals.allocs, p.totals.samples), (3, 6));
        let p = run(Filter {
            min_size: Some(33),
            max_size: Some(48),
            ..Filter::default()
        });
        assert_eq!((p.totals.allocs, p.totals.samples), (1, 3));
        let p = run(Filter {
            between: Some(vec![us(20), us(30)]),
            ..Filter::default()
        });
        assert_eq!((p.totals.allocs, p.totals.samples), (2, 5));
        let p = run(Filter {
            domain: vec![1],
            ..Filter::default()
        });
        assert_eq!(p.totals.allocs, 0);
    }

    #[test]
    fn location_filter_matches_any_frame() {
        // Backtraces [1, 2] (three allocs, 1 + 2 + 5 samples) and [1, 3] (3 samples).
        // `required` and `forbidden` codes, one clause each, numbered as the filter
        // numbers them: the required ones first.
        let run = |required: &[i64], forbidden: &[i64]| {
            let clause = |_: &i64| String::new();
            let opts = Options {
                filter: Filter {
                    location: required.iter().map(clause).collect(),
                    forbid: forbidden.iter().map(clause).collect(),
                    ..Filter::default()
                },
                ..Options::default()
            };
            let codes: Vec<i64> = required.iter().chain(forbidden).copied().collect();
            let mut a = Analyzer::new(SAMPLING, opts);
            let mut asked = Vec::new();
            for (t, ev) in sample_events() {
                a.push_matching(t, &ev, &mut |c| {
                    asked.push(c.get());
                    codes
                        .iter()
                        .enumerate()
                        .filter(|(_, k)| **k == c.get())
                        .fold(0, |m, (i, _)| m | 1 << i)
                });
            }
            // Each new node is asked about once, and none without a clause.
            asked.sort_unstable();
            let expected: &[i64] = if codes.is_empty() { &[] } else { &[1, 2, 3] };
            assert_eq!(asked, expected);
            let p = a.finish();
            (p.totals.allocs, p.totals.samples)
        };
        assert_eq!(run(&[3], &[]), (1, 3), "require 3");
        assert_eq!(run(&[], &[3]), (3, 8), "forbid 3");
        assert_eq!(run(&[1], &[]), (4, 11), "require 1: every backtrace");
        assert_eq!(run(&[1], &[2]), (1, 3), "require 1, forbid 2");
        assert_eq!(run(&[3, 2], &[]), (0, 0), "3 and 2: in no backtrace");
        assert_eq!(run(&[], &[]), (4, 11), "no clause");
    }

    #[test]
    fn collect_stamped_before_alloc_was_never_live() {
        // Domain 1 reports the collect of domain 0's object at an earlier time.
        let a = Event::Alloc(Alloc {
            obj_id: ObjId::new(7),
            domain: DomainId::new(0),
            length: 1,
            nsamples: 4,
            source: AllocationSource::Minor,
            backtrace: backtrace(&[]),
            common_prefix: 0,
        });
        let c = Event::Collect(ObjId::new(7), DomainId::new(1));
        let other = Event::Alloc(Alloc {
            obj_id: ObjId::new(8),
            domain: DomainId::new(1),
            length: 1,
            nsamples: 1,
            source: AllocationSource::Minor,
            backtrace: backtrace(&[]),
            common_prefix: 0,
        });
        for at in [40, 45, 50, 60] {
            let opts = Options {
                live_at: Some(us(at)),
                domains: vec![DomainId::new(0), DomainId::new(1)],
                ..Options::default()
            };
            let events = [(us(50), &a), (us(40), &c), (us(45), &other)];
            let p = analyze_events(SAMPLING, opts, events.map(|(t, e)| (t, e.clone())));
            assert_eq!(p.totals.live_at, u64::from(at >= 45), "at {at}");
            assert_eq!(
                (p.peak.live, p.peak.time, p.peak.late_events),
                (1, us(45), 0)
            );
            let pts = p.timeline.points(1000);
            assert!(pts.iter().all(|pt| pt.live <= 1));
        }
    }

    #[test]
    fn big_keeps_the_largest() {
        let opts = Options {
            big: 2,
            ..Options::default()
        };
        let p = analyze_events(SAMPLING, opts, sample_events());
        let lengths: Vec<u64> = p.big.iter().map(|b| b.length).collect();
        assert_eq!(lengths, vec![10, 6]);
        assert_eq!(p.backtraces.codes(p.big[0].backtrace).len(), 2);
    }
}
