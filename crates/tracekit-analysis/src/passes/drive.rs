//! The two ways `passes::analyze` runs a pass over a reader: [`one_thread`],
//! and [`two_threads`] with decoding and analysis on two. Both feed the [`Analyzer`]
//! the reader's events as they come, backtraces borrowed from its buffer.

use std::borrow::Cow;
use std::collections::HashMap;

use tracekit_memtrace as mt;

use crate::analyzer::{Analyzer, Options, Profile};
use crate::backtrace::{BacktraceId, Backtraces};
use crate::sampling::Sampling;
use crate::symbols::FrameSkip;
use rustc_hash::FxHashMap;
use tracekit_columns::Spill;
use tracekit_memtrace::{
    Alloc, AllocationSource, DomainId, Event, LocationCode, ObjId, ReadError, Timedelta, Warning,
};

/// How a pass over a trace went.
#[derive(Debug)]
pub struct Pass {
    /// What the analysis found (over the events before `error`, if any).
    pub profile: Profile,
    /// Packets the reader skipped.
    pub warnings: Vec<Warning>,
    /// Why the pass stopped early, if it did.
    pub error: Option<ReadError>,
    /// Events read.
    pub events: u64,
}

/// Where an allocation site's frames start in a backtrace, for
/// [`Options::leaf_only`]: the innermost entry that names the site under a
/// [`FrameSkip`] (the rule of [`crate::symbols::site_label`]), so that a site is named
/// from its few innermost entries exactly as from the whole backtrace.
///
/// Whether an entry names a site depends on its location code alone, so the answer is
/// memoised per code; a small direct-mapped cache in front of the map answers the
/// common case (the leaf of a recent allocation) in a few instructions.
pub(crate) struct SiteStart<'s> {
    skip: &'s FrameSkip,
    /// `skip.is_empty()`, kept here so that the common case reads no pointer.
    skip_empty: bool,
    /// `(code, names a site)`, indexed by a hash of the code.
    cache: Vec<(i64, bool)>,
    memo: FxHashMap<i64, bool>,
}

const SITE_CACHE_BITS: u32 = 12;

impl<'s> SiteStart<'s> {
    pub(crate) fn new(skip: &'s FrameSkip) -> Self {
        SiteStart {
            skip,
            skip_empty: skip.is_empty(),
            // No location code is i64::MIN with a `false` answer cached, so an empty
            // slot never matches (see `cached`).
            cache: vec![(i64::MIN, false); 1 << SITE_CACHE_BITS],
            memo: FxHashMap::default(),
        }
    }

    /// The index of the first entry of `backtrace` (caller first) to keep.
    ///
    /// Inline only the common case, a leaf known to name its site; the walk towards
    /// the caller and the memo are out of line, so that the decoding loop around this
    /// stays small.
    #[inline(always)]
    pub(crate) fn start(&mut self, table: &mt::LocationTable, backtrace: &[LocationCode]) -> usize {
        let leaf = backtrace.len().saturating_sub(1);
        if self.skip_empty {
            return leaf;
        }
        if let Some(&code) = backtrace.last()
            && self.cached(code.get()) == Some(true)
        {
            return leaf;
        }
        self.walk(table, backtrace)
    }

    #[inline(always)]
    fn slot(c: i64) -> usize {
        ((c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SITE_CACHE_BITS)) as usize
    }

    /// The cached answer for code `c`, if its slot holds it.
    #[inline(always)]
    fn cached(&self, c: i64) -> Option<bool> {
        let &(k, v) = self.cache.get(Self::slot(c))?;
        (k == c && (v || c != i64::MIN)).then_some(v)
    }

    #[inline(never)]
    fn walk(&mut self, table: &mt::LocationTable, backtrace: &[LocationCode]) -> usize {
        let leaf = backtrace.len().saturating_sub(1);
        for (i, &code) in backtrace.iter().enumerate().rev() {
            if self.names_site(table, code) {
                return i;
            }
        }
        // Every location is looked past: the leaf names the site.
        leaf
    }

    #[inline]
    fn names_site(&mut self, table: &mt::LocationTable, code: LocationCode) -> bool {
        let c = code.get();
        if let Some(v) = self.cached(c) {
            return v;
        }
        let skip = self.skip;
        let v = *self.memo.entry(c).or_insert_with(|| match table.get(code) {
            // Nothing is known about a code without locations: it is not plumbing.
            None => true,
            Some(locs) => locs.is_empty() || locs.iter().any(|l| !skip.skips(l)),
        });
        if let Some(e) = self.cache.get_mut(Self::slot(c)) {
            *e = (c, v);
        }
        v
    }
}

/// Runs one analysis pass over `reader` on this thread. Backtraces are decoded only
/// when the options need them, or the filter's location clauses (which match the
/// locations as they are decoded). `progress` is called now and then with the byte
/// position reached.
pub(super) fn one_thread(
    reader: &mut mt::Reader<'_>,
    mut options: Options,
    progress: &mut dyn FnMut(u64),
) -> Pass {
    let sampling = Sampling::from(reader.info());
    // More clauses than a mask holds are refused where the filter is checked
    // (`Filter::check`); here they would all be dropped.
    let clauses = options.filter.clone();
    let location = options.filter.location_mask().map(|_| &clauses);
    let parse_backtraces = options.backtraces || location.is_some();
    options.backtraces = parse_backtraces;
    let leaf_sites = options.leaf_only && parse_backtraces && location.is_none();
    let skip = options.site_skip.clone();
    let mut site_start = SiteStart::new(&skip);
    let mut analyzer = Analyzer::new(sampling, options);
    let mut events = reader.events(parse_backtraces);
    let mut error = None;
    let mut count: u64 = 0;
    let mut memo: HashMap<LocationCode, u8> = HashMap::new();
    loop {
        let item = match events.next_event_with_locations() {
            None => break,
            Some(item) => item,
        };
        let (dt, event, table) = match item {
            Ok(x) => x,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        count += 1;
        match location {
            None => match &event {
                Event::Alloc(a) if leaf_sites => {
                    let k = site_start.start(table, &a.backtrace);
                    let site = Alloc {
                        backtrace: Cow::Borrowed(a.backtrace.get(k..).unwrap_or(&[])),
                        common_prefix: 0,
                        ..*a
                    };
                    analyzer.push_alloc_suffix(dt, &site, 0);
                }
                _ => analyzer.push(dt, &event),
            },
            Some(clauses) => analyzer.push_matching(dt, &event, &mut |code| {
                *memo
                    .entry(code)
                    .or_insert_with(|| clauses.clause_matches(table, code))
            }),
        }
        if count & 0xFFFF == 0 {
            progress(events.position());
        }
    }
    progress(events.position());
    let warnings = events.take_warnings();
    Pass {
        profile: analyzer.finish(),
        warnings,
        error,
        events: count,
    }
}

/// An event as the decoding thread ships it: fixed size, with the backtrace's new
/// entries in the batch's frame buffer, or the one new entry in the record itself.
#[derive(Clone, Copy, Debug)]
struct Packed {
    kind: u8,
    source: AllocationSource,
    domain: DomainId,
    /// For [`KIND_ALLOC`], how many leading entries the analysis keeps (low 32 bits)
    /// and how many new ones follow in the frame buffer (high 32 bits); for
    /// [`KIND_ALLOC_LEAF`], the one new entry's location code; else 0.
    bt: u64,
    time: Timedelta,
    obj_id: ObjId,
    length: u64,
    nsamples: u64,
}

impl Packed {
    /// The alloc this record holds, with the new backtrace entries `new`.
    #[inline(always)]
    fn alloc<'f>(&self, new: &'f [LocationCode]) -> Alloc<'f> {
        Alloc {
            obj_id: self.obj_id,
            domain: self.domain,
            length: self.length,
            nsamples: self.nsamples,
            source: self.source,
            backtrace: Cow::Borrowed(new),
            common_prefix: 0,
        }
    }

    /// A promote or collect.
    #[inline(always)]
    fn other(kind: u8, time: Timedelta, obj_id: ObjId, domain: DomainId) -> Packed {
        Packed {
            kind,
            source: AllocationSource::Minor,
            domain,
            bt: 0,
            time,
            obj_id,
            length: 0,
            nsamples: 0,
        }
    }
}

const KIND_ALLOC: u8 = 0;
const KIND_PROMOTE: u8 = 1;
const KIND_COLLECT: u8 = 2;
/// An alloc whose backtrace the walking side interned ([`walk_batches`]): the record
/// holds its [`BacktraceId`].
const KIND_ALLOC_ID: u8 = 4;
/// An alloc whose one new backtrace entry is in the record (the common case of
/// [`Options::leaf_only`]), which spares the frame buffer a push and a read.
const KIND_ALLOC_LEAF: u8 = 3;

#[derive(Default)]
struct Batch {
    events: Vec<Packed>,
    frames: Vec<LocationCode>,
}

impl Batch {
    fn with_capacity() -> Self {
        Batch {
            events: Vec::with_capacity(BATCH_EVENTS),
            frames: Vec::with_capacity(BATCH_EVENTS),
        }
    }
}

const BATCH_EVENTS: usize = 32768;

/// Like [`one_thread`] without a location filter, but with the analysis on a second
/// thread fed in batches, so that on a host with an idle core a pass can take about
/// as long as the slower of decoding and analysing rather than their sum. Only the
/// backtrace entries past each alloc's common prefix cross threads; whole backtraces
/// are interned on a third thread between the two ([`walk_batches`]). The result is
/// the same as [`one_thread`]'s.
pub(super) fn two_threads(
    reader: &mut mt::Reader<'_>,
    options: Options,
    progress: &mut dyn FnMut(u64),
) -> Pass {
    use std::sync::mpsc;
    let sampling = Sampling::from(reader.info());
    let parse_backtraces = options.backtraces;
    let leaf_only = options.leaf_only;
    // The analysis then interns a few backtraces itself, from the frames it is sent.
    let big_only = options.interns_big_only();
    let skip = options.site_skip.clone();
    let spill = options.spill.clone();
    let mut site_start = SiteStart::new(&skip);
    let mut analyzer = Analyzer::new(sampling, options);
    let (mut full_tx, full_rx) = mpsc::sync_channel::<Batch>(4);
    let (empty_tx, empty_rx) = mpsc::channel::<Batch>();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let mut patience = Patience::default();
            while let Some(batch) = recv_patiently(&full_rx, &mut patience) {
                let mut at = 0usize;
                for p in &batch.events {
                    match p.kind {
                        KIND_ALLOC_LEAF => {
                            let leaf = [LocationCode::new(p.bt as i64)];
                            analyzer.push_alloc_suffix(p.time, &p.alloc(&leaf), 0);
                        }
                        KIND_ALLOC => {
                            let (keep, frames) = (p.bt as u32, (p.bt >> 32) as usize);
                            let end = at + frames;
                            let new = batch.frames.get(at..end).unwrap_or(&[]);
                            analyzer.push_alloc_suffix(p.time, &p.alloc(new), keep as usize);
                            at = end;
                        }
                        KIND_ALLOC_ID => {
                            let bt = BacktraceId(p.bt as u32);
                            analyzer.push_alloc_interned(p.time, &p.alloc(&[]), bt);
                        }
                        KIND_PROMOTE => analyzer.promote(p.time, p.obj_id),
                        _ => analyzer.collect(p.time, p.obj_id, p.domain),
                    }
                }
                let mut batch = batch;
                batch.events.clear();
                batch.frames.clear();
                // The decoder may be gone already; then the batch is simply dropped.
                let _ = empty_tx.send(batch);
            }
            analyzer
        });

        let mut events = reader.events(parse_backtraces);
        let mut patience = Patience::default();
        // Whole backtraces are interned on a thread of their own, between the decoder
        // and the analysis: walking the trie is the larger part of such a pass (a
        // cache miss or two per new entry on random stacks), and the decoder and the
        // analysis together take less. Only the ids reach the analysis.
        let walk = !leaf_only && parse_backtraces && !big_only;
        let (walked_tx, walked_rx) = mpsc::sync_channel::<Batch>(4);
        let walker = walk.then(|| {
            let to_analysis = std::mem::replace(&mut full_tx, walked_tx);
            scope.spawn(move || walk_batches(&walked_rx, &to_analysis, &spill))
        });
        let (count, error, batch) = produce(
            &mut events,
            leaf_only,
            &mut site_start,
            &mut |full| {
                let next = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Batch::with_capacity());
                // The analysis is gone only if it panicked; `join` below reports it.
                send_patiently(&full_tx, full, &mut patience)
                    .ok()
                    .map(|()| next)
            },
            progress,
        );
        // Empty when the analysis is gone (`produce` stops with a fresh batch).
        if !batch.events.is_empty() {
            let _ = full_tx.send(batch);
        }
        progress(events.position());
        let warnings = events.take_warnings();
        drop(full_tx);
        let trie = match walker.map(|w| w.join()) {
            Some(Ok(trie)) => Some(trie),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => None,
        };
        let mut analyzer = match worker.join() {
            Ok(a) => a,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        if let Some(trie) = trie {
            analyzer.adopt_backtraces(std::sync::Arc::new(trie));
        }
        let profile = analyzer.finish();
        Pass {
            profile,
            warnings,
            error,
            events: count,
        }
    })
}

/// The walking stage of [`two_threads`]: interns each alloc's new backtrace
/// entries (sent by the decoder after the entries it keeps) into a trie, and
/// passes the batch on with the ids in their place; the trie once the decoder is
/// done. The ids are those the decoder would have interned itself, in the same
/// order.
fn walk_batches(
    from_decoder: &std::sync::mpsc::Receiver<Batch>,
    to_analysis: &std::sync::mpsc::SyncSender<Batch>,
    spill: &Spill,
) -> Backtraces {
    let mut trie = Backtraces::spilling(spill);
    let (mut patience_in, mut patience_out) = (Patience::default(), Patience::default());
    while let Some(mut batch) = recv_patiently(from_decoder, &mut patience_in) {
        let mut at = 0usize;
        for p in &mut batch.events {
            if p.kind != KIND_ALLOC {
                continue;
            }
            let (keep, frames) = (p.bt as u32 as usize, (p.bt >> 32) as usize);
            let end = at + frames;
            let new = batch.frames.get(at..end).unwrap_or(&[]);
            at = end;
            let id = trie.intern_suffix(p.domain, keep, new);
            p.kind = KIND_ALLOC_ID;
            p.bt = u64::from(id.0);
        }
        batch.frames.clear();
        if send_patiently(to_analysis, batch, &mut patience_out).is_err() {
            break;
        }
    }
    trie
}

/// How long one side of the pipeline polls the other before blocking.
///
/// A side that blocks must be woken with a system call by the other, which costs the
/// other side's thread (the decoder, the critical path, when the analysis waits for
/// it). A side waits at most about one batch's work for the other (well under a
/// millisecond) when the two keep pace, so polling this long almost never ends in
/// blocking. On the bench's program trace, alternating ten times with blocking at
/// once: 84.7 ms a pass against 86.5 ms (medians of the rounds the host ran at its
/// usual speed).
const POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// Waits that block at once after a poll that took over [`LONG_POLL`]: a side far
/// faster than the other (the decoder, when the analysis interns whole backtraces)
/// would otherwise spin for much of the pass, to save a wake-up that costs
/// microseconds; and when both threads share one core, a spinning side holds up the
/// side it waits for (`taskset -c 1 top_speed ... pipelined`: 322 ms a pass when
/// always polling, 183 ms with this; 90 ms on two cores either way).
const BLOCK_AFTER_LONG_POLL: u8 = 8;

/// A poll longer than this shows that the other side is the slower one.
const LONG_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// One side's memory of its recent waits for the other (see [`POLL`] and
/// [`BLOCK_AFTER_LONG_POLL`]).
#[derive(Default)]
struct Patience {
    block_next: u8,
}

impl Patience {
    /// Calls `attempt` until it gives an answer, polling for up to [`POLL`] unless a
    /// recent poll was long, and then calls `block`.
    fn wait<S, R>(
        &mut self,
        state: &mut S,
        mut attempt: impl FnMut(&mut S) -> Option<R>,
        block: impl FnOnce(&mut S) -> R,
    ) -> R {
        if let Some(r) = attempt(state) {
            return r;
        }
        if self.block_next > 0 {
            self.block_next -= 1;
            return block(state);
        }
        let start = std::time::Instant::now();
        loop {
            for _ in 0..64 {
                if let Some(r) = attempt(state) {
                    if start.elapsed() > LONG_POLL {
                        self.block_next = BLOCK_AFTER_LONG_POLL;
                    }
                    return r;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() > POLL {
                self.block_next = BLOCK_AFTER_LONG_POLL;
                return block(state);
            }
        }
    }
}

/// Receives from `rx` (see [`Patience`]); `None` once the sender is gone.
fn recv_patiently<T>(rx: &std::sync::mpsc::Receiver<T>, patience: &mut Patience) -> Option<T> {
    use std::sync::mpsc::TryRecvError;
    patience.wait(
        &mut (),
        |_| match rx.try_recv() {
            Ok(v) => Some(Some(v)),
            Err(TryRecvError::Disconnected) => Some(None),
            Err(TryRecvError::Empty) => None,
        },
        |_| rx.recv().ok(),
    )
}

/// Sends `v` on `tx` (see [`Patience`]); `Err` once the receiver is gone.
fn send_patiently<T>(
    tx: &std::sync::mpsc::SyncSender<T>,
    v: T,
    patience: &mut Patience,
) -> Result<(), ()> {
    use std::sync::mpsc::TrySendError;
    patience.wait(
        &mut Some(v),
        |slot| match tx.try_send(slot.take()?) {
            Ok(()) => Some(Ok(())),
            Err(TrySendError::Disconnected(_)) => Some(Err(())),
            Err(TrySendError::Full(back)) => {
                *slot = Some(back);
                None
            }
        },
        |slot| match slot.take() {
            Some(v) => tx.send(v).map_err(|_| ()),
            None => Err(()),
        },
    )
}

/// The decoding side of [`two_threads`] alone, its batches dropped
/// instead of analysed: for measuring how much of the pipeline's time it takes
/// (`examples/top_speed.rs`). Returns the events read.
#[doc(hidden)]
pub fn decode_side_only(reader: &mut mt::Reader<'_>, options: &Options) -> u64 {
    let mut site_start = SiteStart::new(&options.site_skip);
    let mut events = reader.events(options.backtraces);
    let (count, _, _) = produce(
        &mut events,
        options.leaf_only,
        &mut site_start,
        &mut |mut empty| {
            empty.events.clear();
            empty.frames.clear();
            Some(empty)
        },
        &mut |_| {},
    );
    count
}

/// The decoding side of [`two_threads`]: reads every event of `events`,
/// packs it, and hands each full batch to `ship`, which returns an empty one, or
/// `None` when the analysis is gone. Returns the events read, the error that stopped
/// the pass (if any), and the last, partly filled batch.
fn produce(
    events: &mut mt::Events<'_>,
    leaf_only: bool,
    site_start: &mut SiteStart<'_>,
    ship: &mut dyn FnMut(Batch) -> Option<Batch>,
    progress: &mut dyn FnMut(u64),
) -> (u64, Option<mt::ReadError>, Batch) {
    match leaf_only {
        true => produce_with::<true>(events, site_start, ship, progress),
        false => produce_with::<false>(events, site_start, ship, progress),
    }
}

/// [`produce`] for one value of [`Options::leaf_only`], so that the decoding loop
/// holds the code of one way of packing alone (fewer instructions than choosing per
/// event; figures in `docs/performance.md`).
///
/// Out of line, so that its code (the pipeline's critical path) does not depend on
/// the caller's.
#[inline(never)]
fn produce_with<const LEAF: bool>(
    events: &mut mt::Events<'_>,
    site_start: &mut SiteStart<'_>,
    ship: &mut dyn FnMut(Batch) -> Option<Batch>,
    progress: &mut dyn FnMut(u64),
) -> (u64, Option<mt::ReadError>, Batch) {
    let mut packer = Packer::<LEAF> {
        batch: Batch::with_capacity(),
        site_start,
        prev_len: Vec::new(),
        last_slot: 0,
    };
    let mut count: u64 = 0;
    let error = loop {
        let before = packer.batch.events.len();
        let room = BATCH_EVENTS - before;
        match events.read_into(&mut packer, room) {
            Ok(n) => {
                count += n as u64;
                if n < room {
                    // The end of the trace.
                    break None;
                }
            }
            Err(e) => {
                // The events before the error are in the batch.
                count += (packer.batch.events.len() - before) as u64;
                break Some(e);
            }
        }
        match ship(std::mem::take(&mut packer.batch)) {
            Some(next) => packer.batch = next,
            None => break None,
        }
        progress(events.position());
    };
    (count, error, packer.batch)
}

/// Packs the reader's events into a [`Batch`], straight from the decoder
/// ([`mt::EventSink`]): this is the pipeline's critical path, so it does as little
/// as the analysis allows.
///
/// `LEAF` is [`Options::leaf_only`]: the analysis wants each allocation's site alone.
struct Packer<'a, 's, const LEAF: bool> {
    batch: Batch,
    site_start: &'a mut SiteStart<'s>,
    /// Per domain, the length of its previous backtrace: the analysis can keep at
    /// most that many entries.
    prev_len: Vec<(DomainId, usize)>,
    last_slot: usize,
}

impl<const LEAF: bool> Packer<'_, '_, LEAF> {
    /// How many leading entries of an alloc's backtrace the analysis already has.
    #[inline(always)]
    fn keep(&mut self, a: &mt::Alloc<'_>, table: &mt::LocationTable) -> usize {
        let backtrace: &[LocationCode] = &a.backtrace;
        if LEAF {
            return self.site_start.start(table, backtrace);
        }
        let len = backtrace.len();
        let domain = a.domain;
        if self
            .prev_len
            .get(self.last_slot)
            .is_none_or(|(d, _)| *d != domain)
        {
            self.last_slot = match self.prev_len.iter().position(|(d, _)| *d == domain) {
                Some(i) => i,
                None => {
                    self.prev_len.push((domain, 0));
                    self.prev_len.len() - 1
                }
            };
        }
        let prev = self.prev_len.get_mut(self.last_slot).map_or(0, |(_, l)| {
            let p = *l;
            *l = len;
            p
        });
        a.common_prefix.min(len).min(prev)
    }
}

impl<const LEAF: bool> mt::EventSink for Packer<'_, '_, LEAF> {
    #[inline(always)]
    fn alloc(&mut self, dt: Timedelta, a: &mt::Alloc<'_>, table: &mt::LocationTable) {
        let keep = self.keep(a, table);
        let new = a.backtrace.get(keep..).unwrap_or(&[]);
        let (kind, bt) = match new {
            // With `LEAF` the analysis ignores `keep`.
            [one] if LEAF => (KIND_ALLOC_LEAF, one.get() as u64),
            _ => {
                self.batch.frames.extend_from_slice(new);
                // The reader caps a domain's backtrace far below 2^32 entries
                // (ReadErrorKind::BacktraceTooLong), so these cannot truncate.
                (KIND_ALLOC, keep as u64 | (new.len() as u64) << 32)
            }
        };
        self.batch.events.push(Packed {
            kind,
            source: a.source,
            domain: a.domain,
            bt,
            time: dt,
            obj_id: a.obj_id,
            length: a.length,
            nsamples: a.nsamples,
        });
    }

    #[inline(always)]
    fn promote(&mut self, dt: Timedelta, id: ObjId, d: DomainId) {
        self.batch
            .events
            .push(Packed::other(KIND_PROMOTE, dt, id, d));
    }

    #[inline(always)]
    fn collect(&mut self, dt: Timedelta, id: ObjId, d: DomainId) {
        self.batch
            .events
            .push(Packed::other(KIND_COLLECT, dt, id, d));
    }
}
