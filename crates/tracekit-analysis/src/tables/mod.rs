//! Trace tables: a memtrace trace decoded once into columns, which every later
//! question is answered from without decoding again.
//!
//! A question on the command line is best answered by one pass over the compressed
//! trace. A viewer asks many, and decoding the same bytes for each is wasted work:
//! [`Tables`] holds what the passes need of the events, in trace order:
//!
//! | column | per | type | what |
//! | --- | --- | --- | --- |
//! | kind | event | `u8` | alloc, promote or collect |
//! | time | allocation; promote or collect | `u32` or `u64` | microseconds from the trace's start |
//! | object | allocation | `u32` or `u64` | the object's id; no column while each is the first's plus the allocation's ordinal |
//! | target | promote or collect | `u32` or `u64` | 1 + the ordinal of the allocation whose object it is, 0 if none is live with its id |
//! | domain | allocation; promote or collect | `u16` | the allocating or reporting domain (no column when every value is 0) |
//! | length | allocation | `u32` or `u64` | the object's size in words |
//! | samples | allocation | `u32` or `u64` | samples that hit it |
//! | source | allocation | `u8` | minor, major or external |
//! | backtrace | allocation | `u32` | its node in the backtrace trie |
//! | site | allocation | `u32` | its node in the trie of sites: the entries from the one that names its site under the default [`FrameSkip`] |
//! | ended | allocation | `u32` or `u64` | when it was collected (or its id reused); never: `u32::MAX` in a column of `u32`, [`NEVER`] in one of `u64` |
//!
//! A `u32 or u64` column is kept narrow until a value does not fit, then widened once,
//! so a trace of under 71 minutes and 4 G objects costs 4 bytes a value. Backtraces are
//! interned once into the trie the passes use ([`Backtraces`]); locations once, in the
//! trace's own [`LocationTable`].
//!
//! A pass over the tables ([`Source::pass`]) is, for tables of one domain whose events
//! are in time order, one scan of the allocation columns (the `scan` module): each
//! allocation visited once with its object's end, and the live heap's peak found from
//! sums per bucket of time. Other tables are replayed: the same [`Analyzer`] is fed the
//! events of a pass over the reader, with the backtraces already interned. Either way
//! every answer is the reader's exactly. A replay follows objects by the target column
//! rather than by id (unless an allocation reused a live object's id, which the
//! analysis takes as the older object's end), and what cannot change an answer but its
//! counts it counts without feeding: with an allocated-between filter and allocations
//! in time order, the events before the range's first allocation, and after its last
//! the allocations and the promotes and collects of objects the filter dropped. Filters
//! are decided on columns before it: the location and function clauses once per
//! distinct backtrace, the clauses on objects' lives from the allocation and end
//! columns; both become the set of allocations the pass keeps. A flame graph's fold
//! over a pass's profile reuses what earlier folds found of the trie's frames
//! ([`Source::fold`]).
//!
//! A trace that stops at damage gives tables of the events before it, and every pass
//! over them reports the damage as the reader's pass would.
//!
//! The tables are written as bytes and read back by the `file` module
//! ([`Tables::write_to`], [`Tables::read_from`]), so that a viewer keeps them between
//! runs. Read back from a mapped file ([`Tables::read_in_place`]), the columns stay
//! in it ([`tracekit_columns::Store`]), the tries' too ([`Backtraces::from_columns`]):
//! the system pages them in as passes read them and may drop them again, so tables
//! larger than memory still answer.

mod file;
pub mod follow;
mod scan;

pub use file::FileError;

use std::borrow::Cow;
use std::sync::Arc;

use tracekit_columns::{Grow, Spill, Store, TraceBytes};

use tracekit_memtrace::{
    Alloc, AllocationSource, DomainId, Event, Events, Info, LocationCode, LocationTable, ObjId,
    ReadError, Reader, Timedelta, Warning,
};

use crate::analyzer::{Analyzer, Options, Profile, Row, Skipped};
use crate::backtrace::{BacktraceId, Backtraces};
use crate::filter::{Filter, LocationMask};
use crate::frames::{FrameTree, Hide};
use crate::live::LiveObject;
use crate::passes::drive::SiteStart;
use crate::passes::objects::AllocationSet;
use crate::passes::{Pass, Progress, Source, Stage};
use crate::report::FoldOptions;
use crate::sampling::Sampling;
use crate::symbols::FrameSkip;

/// A column of unsigned values as it is built, 4 bytes each until one needs 8.
#[derive(Clone, Debug)]
enum ColumnBuilder {
    Narrow(Grow<u32>),
    Wide(Grow<u64>),
}

impl ColumnBuilder {
    fn new(spill: &Spill) -> ColumnBuilder {
        ColumnBuilder::Narrow(Grow::new(spill))
    }

    #[inline]
    fn push(&mut self, v: u64) {
        match self {
            ColumnBuilder::Narrow(n) => match u32::try_from(v) {
                Ok(x) => n.push(x),
                Err(_) => {
                    self.widen(u64::from);
                    self.push(v);
                }
            },
            ColumnBuilder::Wide(w) => w.push(v),
        }
    }

    /// The column at 8 bytes a value from now on, each narrow value `x`
    /// becoming `wide_of(x)`.
    #[cold]
    fn widen(&mut self, wide_of: impl Fn(u32) -> u64) {
        if let ColumnBuilder::Narrow(n) = self {
            let mut wide = Grow::new(n.spill());
            n.iter().for_each(|&x| wide.push(wide_of(x)));
            *self = ColumnBuilder::Wide(wide);
        }
    }

    #[inline]
    fn get(&self, i: usize) -> u64 {
        match self {
            ColumnBuilder::Narrow(n) => n.get(i).map_or(0, |&x| u64::from(x)),
            ColumnBuilder::Wide(w) => w.get(i).copied().unwrap_or(0),
        }
    }

    /// The column, its spare capacity let go.
    fn finish(self) -> Column {
        match self {
            ColumnBuilder::Narrow(n) => Column::Narrow(n.finish()),
            ColumnBuilder::Wide(w) => Column::Wide(w.finish()),
        }
    }
}

/// A column of unsigned values, 4 bytes each unless one needs 8, in memory or in
/// place in a mapped cache file ([`Store`]).
#[derive(Clone, Debug)]
enum Column {
    Narrow(Store<u32>),
    Wide(Store<u64>),
}

impl Default for Column {
    fn default() -> Self {
        Column::Narrow(Store::default())
    }
}

impl Column {
    #[inline]
    fn get(&self, i: usize) -> u64 {
        match self {
            Column::Narrow(n) => n.get(i).map_or(0, |&x| u64::from(x)),
            Column::Wide(w) => w.get(i).copied().unwrap_or(0),
        }
    }

    /// The values in order.
    fn values(&self) -> Values<'_> {
        match self {
            Column::Narrow(n) => Values::Narrow(n.iter()),
            Column::Wide(w) => Values::Wide(w.iter()),
        }
    }

    /// Whether the values, read as signed times, never decrease.
    fn sorted(&self) -> bool {
        match self {
            Column::Narrow(n) => n.windows(2).all(|w| w[0] <= w[1]),
            Column::Wide(w) => w.windows(2).all(|w| (w[0] as i64) <= (w[1] as i64)),
        }
    }

    /// The first index whose value fails `pred`, which holds for a prefix.
    fn partition_point(&self, pred: impl Fn(u64) -> bool) -> usize {
        match self {
            Column::Narrow(n) => n.partition_point(|&x| pred(u64::from(x))),
            Column::Wide(w) => w.partition_point(|&x| pred(x)),
        }
    }

    fn own_bytes(&self) -> usize {
        match self {
            Column::Narrow(n) => n.own_bytes(),
            Column::Wide(w) => w.own_bytes(),
        }
    }
}

/// The allocations' object ids as they are built: none is kept while each is
/// the first's plus its ordinal (as a trace numbers its objects in allocation
/// order), the column made from the first id that is not.
#[derive(Clone, Debug)]
struct ObjectsBuilder {
    first: u64,
    /// Allocations whose ids follow `first`, while `ids` is `None`.
    count: usize,
    ids: Option<ColumnBuilder>,
    spill: Spill,
}

impl ObjectsBuilder {
    fn new(spill: &Spill) -> ObjectsBuilder {
        ObjectsBuilder {
            first: 0,
            count: 0,
            ids: None,
            spill: spill.clone(),
        }
    }

    #[inline]
    fn push(&mut self, id: u64) {
        if let Some(ids) = &mut self.ids {
            return ids.push(id);
        }
        if self.count == 0 {
            self.first = id;
        }
        if id == self.first.wrapping_add(self.count as u64) {
            self.count += 1;
        } else {
            self.make_ids(id);
        }
    }

    /// The column of every id so far, made from the ordinals, then `id`.
    #[cold]
    fn make_ids(&mut self, id: u64) {
        let mut ids = ColumnBuilder::new(&self.spill);
        (0..self.count as u64).for_each(|n| ids.push(self.first.wrapping_add(n)));
        ids.push(id);
        self.ids = Some(ids);
    }

    fn finish(self) -> Objects {
        match self.ids {
            Some(ids) => Objects::Ids(ids.finish()),
            None => Objects::Ordinals {
                first: self.first,
                count: self.count,
            },
        }
    }
}

/// The allocations' object ids: the first's plus each one's ordinal, or a
/// [`Column`] of them.
#[derive(Clone, Debug)]
enum Objects {
    Ordinals { first: u64, count: usize },
    Ids(Column),
}

impl Default for Objects {
    fn default() -> Self {
        Objects::Ids(Column::default())
    }
}

impl Objects {
    /// The object id of allocation `i` (0 past the last).
    #[inline]
    fn get(&self, i: usize) -> u64 {
        match self {
            Objects::Ordinals { first, count } if i < *count => first.wrapping_add(i as u64),
            Objects::Ordinals { .. } => 0,
            Objects::Ids(ids) => ids.get(i),
        }
    }

    fn own_bytes(&self) -> usize {
        match self {
            Objects::Ordinals { .. } => 0,
            Objects::Ids(ids) => ids.own_bytes(),
        }
    }
}

/// When each allocation's object ended: a [`Column`] whose greatest narrow
/// value, `u32::MAX`, is [`NEVER`], so that a trace whose objects end within
/// 71 minutes keeps 4 bytes an end even with objects never collected.
#[derive(Clone, Debug, Default)]
struct Ends(Column);

impl Ends {
    /// When allocation `i`'s object ended, [`NEVER`] if it did not.
    #[inline]
    fn get(&self, i: usize) -> u64 {
        match &self.0 {
            Column::Narrow(n) => match n.get(i) {
                Some(&u32::MAX) => NEVER,
                x => x.map_or(0, |&x| u64::from(x)),
            },
            Column::Wide(w) => w.get(i).copied().unwrap_or(0),
        }
    }
}

/// [`Ends`] as they are built: [`NEVER`] for each allocation until its end
/// is known.
#[derive(Clone, Debug)]
struct EndsBuilder(ColumnBuilder);

impl EndsBuilder {
    #[inline]
    fn push_never(&mut self) {
        match &mut self.0 {
            ColumnBuilder::Narrow(n) => n.push(u32::MAX),
            ColumnBuilder::Wide(w) => w.push(NEVER),
        }
    }

    /// Allocation `i`'s object ended at `v` (the bits of a time, never
    /// [`NEVER`]).
    #[inline]
    fn set(&mut self, i: usize, v: u64) {
        if let ColumnBuilder::Narrow(n) = &mut self.0 {
            match u32::try_from(v) {
                Ok(x) if x != u32::MAX => {
                    if let Some(slot) = n.get_mut(i) {
                        *slot = x;
                    }
                    return;
                }
                // `u32::MAX` read as never from now on.
                _ => self.0.widen(|x| match x {
                    u32::MAX => NEVER,
                    x => u64::from(x),
                }),
            }
        }
        if let ColumnBuilder::Wide(w) = &mut self.0
            && let Some(slot) = w.get_mut(i)
        {
            *slot = v;
        }
    }

    fn finish(self) -> Ends {
        Ends(self.0.finish())
    }
}

/// The values of a [`Column`] in order.
enum Values<'a> {
    Narrow(std::slice::Iter<'a, u32>),
    Wide(std::slice::Iter<'a, u64>),
}

impl Iterator for Values<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        match self {
            Values::Narrow(n) => n.next().map(|&x| u64::from(x)),
            Values::Wide(w) => w.next().copied(),
        }
    }
}

/// What folds of passes over one trie found of its frames
/// ([`crate::report::fold_tree_on`]): shared by copies of the tables, whose trie
/// is the same.
#[derive(Clone, Default)]
struct Skeletons(Arc<std::sync::Mutex<Vec<crate::frames::Skeleton>>>);

impl std::fmt::Debug for Skeletons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Skeletons")
    }
}

/// Skeletons kept per tables: one per options and hidden frames asked, the
/// latest (each holds about as much as the trie).
const SKELETONS: usize = 2;

/// The [`Tables::ended`] of an object never collected.
pub const NEVER: u64 = u64::MAX;

const KIND_ALLOC: u8 = 0;
const KIND_PROMOTE: u8 = 1;
const KIND_COLLECT: u8 = 2;

/// A time is stored as its microseconds reinterpreted as unsigned: a negative time (an
/// event stamped before the trace's start) widens its column but stays exact.
#[inline]
fn time_bits(t: Timedelta) -> u64 {
    t.as_micros() as u64
}

#[inline]
fn time_of(bits: u64) -> Timedelta {
    Timedelta::from_micros(bits as i64)
}

/// A memtrace trace decoded into columns (see the module docs).
#[derive(Clone, Debug)]
pub struct Tables {
    info: Info,
    locations: LocationTable,
    size_bytes: u64,
    /// Shared with the profiles of passes that charge whole backtraces.
    backtraces: Arc<Backtraces>,
    kind: Store<u8>,
    /// Per allocation, in order.
    time: Column,
    object: Objects,
    domain: Store<u16>,
    length: Column,
    samples: Column,
    source: Store<u8>,
    backtrace: Store<u32>,
    /// The trie of the allocations' backtraces from the entry that names their site
    /// under [`FrameSkip::rust_std`] (what the reader's pass interns for sites named
    /// by leaf, function or file), and each allocation's node in it.
    sites: Arc<Backtraces>,
    site: Store<u32>,
    ended: Ends,
    /// Per promote or collect, in order.
    other_time: Column,
    /// 1 + the ordinal of the allocation whose object the event is of, 0 when no
    /// object with its id is live: a pass follows objects by ordinal, without
    /// looking their ids up.
    other_target: Column,
    other_domain: Store<u16>,
    /// Whether the allocations are in time order (as every trace of one domain
    /// is), so that those of a time range are a run of them.
    times_sorted: bool,
    /// What folds of passes over these tables found of their trie's frames.
    skeletons: Skeletons,
    /// What a scan of the columns needs of the promotes and collects, once found.
    scan: scan::Scan,
    /// Allocations that reused the id of an object still live (a valid trace has
    /// none). With any, a pass follows objects by id, as the analysis does: an
    /// allocation its filter drops then leaves the older object live, which
    /// following by ordinal would not.
    duplicates: u64,
    end: Timedelta,
    warnings: Vec<Warning>,
    error: Option<ReadError>,
}

/// The columns of [`Tables::build`] as they grow.
#[derive(Clone)]
struct Building {
    kind: Grow<u8>,
    time: ColumnBuilder,
    object: ObjectsBuilder,
    domain: DomainBuilder,
    length: ColumnBuilder,
    samples: ColumnBuilder,
    source: Grow<u8>,
    backtrace: Grow<u32>,
    site: Grow<u32>,
    ended: EndsBuilder,
    other_time: ColumnBuilder,
    other_target: ColumnBuilder,
    other_domain: DomainBuilder,
}

/// A domain column as it is built: nothing while every value is 0 (every
/// trace before OCaml 5), the zeros written out when another value comes.
#[derive(Clone, Debug)]
struct DomainBuilder {
    values: Grow<u16>,
    /// Values pushed (those in `values` once one was not 0).
    len: usize,
}

impl DomainBuilder {
    fn new(spill: &Spill) -> DomainBuilder {
        DomainBuilder {
            values: Grow::new(spill),
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, d: u16) {
        if d != 0 && self.values.is_empty() {
            (0..self.len).for_each(|_| self.values.push(0));
        }
        if !self.values.is_empty() || d != 0 {
            self.values.push(d);
        }
        self.len += 1;
    }

    /// The column: none when every value is 0.
    fn finish(self) -> Store<u16> {
        self.values.finish()
    }
}

impl Building {
    fn new(spill: &Spill) -> Building {
        let column = || ColumnBuilder::new(spill);
        Building {
            kind: Grow::new(spill),
            time: column(),
            object: ObjectsBuilder::new(spill),
            domain: DomainBuilder::new(spill),
            length: column(),
            samples: column(),
            source: Grow::new(spill),
            backtrace: Grow::new(spill),
            site: Grow::new(spill),
            ended: EndsBuilder(column()),
            other_time: column(),
            other_target: column(),
            other_domain: DomainBuilder::new(spill),
        }
    }

    /// Allocation `ordinal`'s object ended at `time` (not before it was allocated).
    fn end(&mut self, ordinal: u64, time: Timedelta) {
        let allocated = time_of(self.time.get(ordinal as usize));
        self.ended
            .set(ordinal as usize, time_bits(time.max(allocated)));
    }
}

/// The frames that name allocations' sites in the tables' trie of sites.
fn site_skip() -> &'static FrameSkip {
    static SKIP: std::sync::OnceLock<FrameSkip> = std::sync::OnceLock::new();
    SKIP.get_or_init(FrameSkip::rust_std)
}

/// Tables as a trace's events are read: in one pass ([`Tables::build`]), or in
/// as many as a trace followed while it is written comes in, each made into
/// tables at any point ([`TablesBuilder::tables`]) without decoding again.
pub struct TablesBuilder {
    b: Building,
    /// Live objects: id -> allocation ordinal, for the `ended` column (an id reused
    /// while live ends the older object, as the analysis takes it).
    live: crate::live::LiveTable<u64>,
    backtraces: Backtraces,
    sites: Backtraces,
    duplicates: u64,
    end: Timedelta,
    events: u64,
    warnings: Vec<Warning>,
    error: Option<ReadError>,
}

impl Default for TablesBuilder {
    fn default() -> Self {
        TablesBuilder::spilling(&Spill::memory())
    }
}

impl TablesBuilder {
    /// A builder whose columns spill as `spill` says: grown in files of its
    /// folder rather than in memory, they cost the process no memory of its
    /// own however large the trace ([`tracekit_columns::spill`]).
    pub fn spilling(spill: &Spill) -> TablesBuilder {
        TablesBuilder {
            b: Building::new(spill),
            live: crate::live::LiveTable::spilling(spill),
            backtraces: Backtraces::spilling(spill),
            sites: Backtraces::spilling(spill),
            duplicates: 0,
            end: Timedelta::default(),
            events: 0,
            warnings: Vec::new(),
            error: None,
        }
    }

    /// Decodes the events of `events` into the columns until the pass ends
    /// (at the end of what it has, or at damage, after which nothing more is
    /// read); `progress` hears the byte position now and then.
    pub fn read(&mut self, events: &mut Events<'_>, progress: &mut dyn FnMut(u64)) {
        self.read_seeing(events, progress, |_, _| {});
    }

    /// [`TablesBuilder::read`], showing `each` every event as it is added (so
    /// that another count of the same pass needs no second one).
    pub fn read_seeing(
        &mut self,
        events: &mut Events<'_>,
        progress: &mut dyn FnMut(u64),
        mut each: impl FnMut(Timedelta, &Event<'_>),
    ) {
        if self.error.is_some() {
            return;
        }
        let mut site_start = SiteStart::new(site_skip());
        loop {
            let (time, event, table) = match events.next_event_with_locations() {
                None => break,
                Some(Ok(x)) => x,
                Some(Err(e)) => {
                    self.error = Some(e);
                    break;
                }
            };
            self.add(&mut site_start, time, &event, table);
            each(time, &event);
            if self.events & 0xFFFF == 0 {
                progress(events.position());
            }
        }
        progress(events.position());
        self.warnings.extend(events.take_warnings());
    }

    /// Adds `event`, at `time`, whose backtrace's codes are in `table`.
    fn add(
        &mut self,
        site_start: &mut SiteStart<'_>,
        time: Timedelta,
        event: &Event<'_>,
        table: &LocationTable,
    ) {
        let b = &mut self.b;
        self.end = self.end.max(time);
        match event {
            Event::Alloc(a) => {
                let ordinal = b.source.len();
                let bt = self
                    .backtraces
                    .intern(a.domain, a.common_prefix, &a.backtrace);
                b.kind.push(KIND_ALLOC);
                b.time.push(time_bits(time));
                b.object.push(a.obj_id.get());
                b.domain.push(a.domain.get());
                b.length.push(a.length);
                b.samples.push(a.nsamples);
                b.source.push(a.source as u8);
                b.backtrace.push(bt.0);
                let k = site_start.start(table, &a.backtrace);
                let site = self.sites.intern_full(a.backtrace.get(k..).unwrap_or(&[]));
                b.site.push(site.0);
                b.ended.push_never();
                if let Some(old) = self.live.insert(a.obj_id.get(), ordinal as u64) {
                    self.duplicates += 1;
                    b.end(old, time);
                }
            }
            Event::Promote(id, domain) => {
                b.kind.push(KIND_PROMOTE);
                b.other_time.push(time_bits(time));
                b.other_target
                    .push(self.live.get_mut(id.get()).map_or(0, |o| *o + 1));
                b.other_domain.push(domain.get());
            }
            Event::Collect(id, domain) => {
                b.kind.push(KIND_COLLECT);
                b.other_time.push(time_bits(time));
                b.other_domain.push(domain.get());
                let old = self.live.remove(id.get());
                b.other_target.push(old.map_or(0, |o| o + 1));
                if let Some(old) = old {
                    b.end(old, time);
                }
            }
        }
        self.events += 1;
    }

    /// Events decoded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Why the events ended early, if they did.
    pub fn error(&self) -> Option<ReadError> {
        self.error
    }

    /// The warnings so far: packets skipped.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The tables of the events decoded so far, of a trace whose header is
    /// `info`, whose location table is `locations` and whose bytes read are
    /// `size_bytes`; the builder kept to decode more.
    pub fn tables(&self, info: &Info, locations: &LocationTable, size_bytes: u64) -> Tables {
        // The live objects only follow later events: a copy to finish needs none.
        let copy = TablesBuilder {
            b: self.b.clone(),
            live: crate::live::LiveTable::new(),
            backtraces: self.backtraces.clone(),
            sites: self.sites.clone(),
            duplicates: self.duplicates,
            end: self.end,
            events: self.events,
            warnings: self.warnings.clone(),
            error: self.error,
        };
        copy.finish(info, locations, size_bytes)
    }

    /// The tables of the events decoded (see [`TablesBuilder::tables`]).
    pub fn finish(self, info: &Info, locations: &LocationTable, size_bytes: u64) -> Tables {
        let b = self.b;
        let time = b.time.finish();
        let times_sorted = time.sorted();
        Tables {
            info: info.clone(),
            locations: locations.clone(),
            size_bytes,
            backtraces: Arc::new(self.backtraces),
            kind: b.kind.finish(),
            time,
            object: b.object.finish(),
            domain: b.domain.finish(),
            length: b.length.finish(),
            samples: b.samples.finish(),
            source: b.source.finish(),
            backtrace: b.backtrace.finish(),
            sites: Arc::new(self.sites),
            site: b.site.finish(),
            ended: b.ended.finish(),
            other_time: b.other_time.finish(),
            other_target: b.other_target.finish(),
            other_domain: b.other_domain.finish(),
            times_sorted,
            skeletons: Skeletons::default(),
            scan: scan::Scan::default(),
            duplicates: self.duplicates,
            end: self.end,
            warnings: self.warnings,
            error: self.error,
        }
    }
}

impl Tables {
    /// Decodes every event of `reader`'s trace into tables; `progress` hears the byte
    /// position now and then. Damage ends the tables where it starts ([`Tables::error`]).
    pub fn build(reader: &mut Reader<'_>, progress: &mut dyn FnMut(u64)) -> Tables {
        Tables::build_spilling(reader, &Spill::memory(), progress)
    }

    /// [`Tables::build`], the columns grown as `spill` says
    /// ([`TablesBuilder::spilling`]).
    pub fn build_spilling(
        reader: &mut Reader<'_>,
        spill: &Spill,
        progress: &mut dyn FnMut(u64),
    ) -> Tables {
        let mut builder = TablesBuilder::spilling(spill);
        {
            let mut events = reader.events(true);
            builder.read(&mut events, progress);
        }
        builder.finish(reader.info(), reader.locations(), reader.size_bytes())
    }

    /// Decodes the trace whose bytes are `bytes` into tables, letting go of the
    /// pages read as it goes ([`TraceBytes::pass`]); `progress` hears the byte
    /// position reached; the columns grow as `spill` says. `None` when the
    /// trace's header does not read.
    pub fn from_bytes(
        bytes: &TraceBytes,
        spill: &Spill,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Tables> {
        let mut reader = Reader::from_owner(bytes.clone()).ok()?;
        let mut release = bytes.pass();
        let tables = Tables::build_spilling(&mut reader, spill, &mut |pos| {
            release.at(pos);
            progress(pos);
        });
        bytes.release_all();
        Some(tables)
    }

    /// The trace's header.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// Every location code of the trace.
    pub fn locations(&self) -> &LocationTable {
        &self.locations
    }

    /// Events held.
    pub fn events(&self) -> u64 {
        self.kind.len() as u64
    }

    /// Allocations held.
    pub fn allocations(&self) -> u64 {
        self.source.len() as u64
    }

    /// Why decoding stopped before the end of the trace, if it did.
    pub fn error(&self) -> Option<&ReadError> {
        self.error.as_ref()
    }

    /// The packets decoding skipped.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The time of the last event.
    pub fn end(&self) -> Timedelta {
        self.end
    }

    /// Nodes of the backtrace trie (distinct backtrace prefixes, the empty one
    /// included).
    pub fn backtrace_nodes(&self) -> usize {
        self.backtraces.len()
    }

    /// Approximate heap bytes the columns hold (the trie and locations aside):
    /// none for columns read in place from a mapped cache file
    /// ([`Tables::read_in_place`]).
    pub fn column_bytes(&self) -> usize {
        self.kind.own_bytes()
            + self.time.own_bytes()
            + self.object.own_bytes()
            + self.domain.own_bytes()
            + self.length.own_bytes()
            + self.samples.own_bytes()
            + self.source.own_bytes()
            + self.backtrace.own_bytes()
            + self.site.own_bytes()
            + self.ended.0.own_bytes()
            + self.other_time.own_bytes()
            + self.other_target.own_bytes()
            + self.other_domain.own_bytes()
    }
}

/// The allocation source stored as `n`.
fn source_of(n: u8) -> AllocationSource {
    match n {
        0 => AllocationSource::Minor,
        1 => AllocationSource::Major,
        _ => AllocationSource::External,
    }
}

/// How a pass over the tables charges an allocation's backtrace, as the reader's
/// pass with the same options would.
enum Charge<'s> {
    /// No backtraces: every allocation to the empty one.
    Nothing,
    /// To the node of its whole backtrace, in (a copy of) the tables' trie.
    Whole,
    /// To its node in the tables' trie of sites (a copy of it): sites named under
    /// the default frame skip.
    Sites,
    /// To the node of the entries from the one that names its site, in a trie of
    /// those alone; memoised per node of the whole trie.
    Site {
        start: SiteStart<'s>,
        trie: Box<Backtraces>,
        of: Vec<u32>,
    },
    /// The whole backtrace handed to the analysis, which interns only the big
    /// allocations'.
    BigOnly,
}

const UNKNOWN: u32 = u32::MAX;

/// A followed allocation's object not live, or not kept. (A kept allocation
/// charged to the site past the last one a `u32` numbers, which no trace of
/// fewer than 4 G allocations has, would count as not kept.)
const GONE: u32 = u32::MAX;

impl Tables {
    /// Per node of the trie, whether its backtrace passes `mask`'s clauses of
    /// `filter` (a frame matching every required clause, none a forbidden one).
    fn nodes_passing(&self, filter: &Filter, mask: LocationMask) -> Vec<bool> {
        let n = self.backtraces.len();
        let mut matched = vec![0u8; n];
        let mut memo: rustc_hash::FxHashMap<LocationCode, u8> = rustc_hash::FxHashMap::default();
        // A node's parent was interned before it, so one pass in index order sees
        // every parent first.
        for i in 1..n {
            let id = BacktraceId(i as u32);
            let parent = self.backtraces.parent(id).0 as usize;
            let inherited = matched.get(parent).copied().unwrap_or(0);
            let own = match self.backtraces.leaf(id) {
                Some(code) => *memo
                    .entry(code)
                    .or_insert_with(|| filter.clause_matches(&self.locations, code)),
                None => 0,
            };
            matched[i] = inherited | own;
        }
        matched.into_iter().map(|m| mask.keeps(m)).collect()
    }

    /// One pass over the tables (see [`Source::pass`]): a scan of the allocation
    /// columns where one stands for a replay of the events and `scan` gives its
    /// buckets of time (the `scan` module), else a replay.
    fn replay(
        &self,
        mut options: Options,
        stage: Stage,
        progress: Progress<'_>,
        scan: Option<scan::Shape>,
    ) -> Pass {
        progress(stage, 0);
        let sampling = Sampling::from(&self.info);
        // More clauses than a mask holds are refused where the filter is checked;
        // here they would all be dropped, as the reader's pass drops them. The
        // clauses are decided here, per node of the trie, into the set of
        // allocations kept: the analysis is told nothing of them.
        let mask = options.filter.location_mask();
        let clauses = options.filter.clone();
        options.filter = options.filter.without_location_clauses();
        if let Some(mask) = mask {
            // As the reader's pass: location clauses need whole backtraces.
            options.backtraces = true;
            let passing = self.nodes_passing(&clauses, mask);
            let before = options.objects.take();
            let mut set = AllocationSet::default();
            for (n, &bt) in self.backtrace.iter().enumerate() {
                let n = n as u64;
                if passing.get(bt as usize).copied().unwrap_or(false)
                    && before.as_ref().is_none_or(|b| b.contains(n))
                {
                    set.insert(n);
                }
            }
            options.objects = Some(Arc::new(set));
        }
        let located = mask.is_some();
        let skip = options.site_skip.clone();
        let mut charge = if !options.backtraces {
            Charge::Nothing
        } else if options.interns_big_only() && !located {
            Charge::BigOnly
        } else if options.leaf_only
            && !located
            && skip == FrameSkip::rust_std().with_naming(skip.naming)
        {
            // The tables' sites are these; how they are named is the report's.
            Charge::Sites
        } else if options.leaf_only && !located {
            Charge::Site {
                start: SiteStart::new(&skip),
                trie: Box::default(),
                of: vec![UNKNOWN; self.backtraces.len()],
            }
        } else {
            Charge::Whole
        };
        let between = options.filter.allocated_between();
        let mut analyzer = Analyzer::new(sampling, options);
        // Objects followed by ordinal (see `other_target`): per allocation that can
        // be kept its site while its object is live and kept, `GONE` otherwise.
        let follow = self.duplicates == 0 && !matches!(charge, Charge::BigOnly);
        // The allocations that can be kept, `first..last`: those in the filter's
        // time range when the allocations are in time order, else all.
        let (first, last) = match between {
            Some((lo, hi)) if follow && self.times_sorted => {
                let first = self.time.partition_point(|t| time_of(t) < lo);
                (
                    first,
                    self.time.partition_point(|t| time_of(t) <= hi).max(first),
                )
            }
            _ => (0, self.source.len()),
        };
        if follow
            && let Some(shape) = scan
            && analyzer.peak_domains().iter().all(|d| d.get() == 0)
            && let Some(others) = self.others()
        {
            let (counts, peak, live) = match self.scan_in_parts(
                &mut analyzer,
                others,
                &charge,
                (first, last),
                stage,
                &mut *progress,
                shape,
            ) {
                Some(scanned) => scanned,
                None => self.scan(
                    &mut analyzer,
                    others,
                    &mut charge,
                    (first, last),
                    stage,
                    progress,
                    shape.buckets,
                ),
            };
            self.adopt(&mut analyzer, charge);
            progress(stage, self.size_bytes);
            return Pass {
                profile: analyzer.finish_scanned(counts, peak, self.end, live),
                warnings: self.warnings.clone(),
                error: self.error,
                events: self.kind.len() as u64,
            };
        }
        let mut site_of: Vec<u32> = Vec::new();
        let mut promoted: Vec<u64> = Vec::new();
        if follow {
            site_of = vec![GONE; last - first];
            promoted = vec![0; (last - first).div_ceil(64)];
        }
        // Before the first allocation that can be kept, every allocation is
        // dropped and every promote and collect is of a dropped object: counted,
        // not replayed.
        let (start, before) = self.before(first);
        analyzer.skipped(&before);
        let mut after = Skipped::default();
        let mut codes = Vec::new();
        let (mut a, mut o) = (first, start - first);
        let total = self.kind.len().max(1);
        for (i, &kind) in self.kind.iter().enumerate().skip(start) {
            if kind == KIND_ALLOC {
                let time = time_of(self.time.get(a));
                if a >= last {
                    after.event(time, true, false);
                    a += 1;
                    continue;
                }
                let mut alloc = self.alloc(a);
                let bt = match &mut charge {
                    Charge::BigOnly => {
                        let whole = BacktraceId(self.backtrace.get(a).copied().unwrap_or(0));
                        self.backtraces.codes_into(whole, &mut codes);
                        alloc.backtrace = Cow::Borrowed(&codes);
                        analyzer.push_alloc_suffix(time, &alloc, 0);
                        a += 1;
                        continue;
                    }
                    charge => self.charged(a, charge, &mut codes),
                };
                if follow {
                    if let (Some(site), Some(slot)) = (
                        analyzer.alloc_followed(time, &alloc, bt),
                        site_of.get_mut(a - first),
                    ) {
                        *slot = site;
                    }
                } else {
                    analyzer.push_alloc_interned(time, &alloc, bt);
                }
                a += 1;
            } else {
                let time = time_of(self.other_time.get(o));
                let target = self.other_target.get(o).checked_sub(1).map(|n| n as usize);
                let promote = kind == KIND_PROMOTE;
                let by = DomainId::new(self.other_domain.get(o).copied().unwrap_or(0));
                o += 1;
                if follow {
                    let site = target
                        .and_then(|n| site_of.get(n.wrapping_sub(first)).copied())
                        .filter(|&s| s != GONE);
                    match (site, target) {
                        (Some(site), Some(n)) if promote => {
                            let k = n - first;
                            let (word, bit) = (k / 64, 1u64 << (k % 64));
                            let again = promoted.get(word).is_some_and(|w| w & bit != 0);
                            if let Some(w) = promoted.get_mut(word) {
                                *w |= bit;
                            }
                            analyzer.promote_followed(time, (!again).then_some(site));
                        }
                        (Some(site), Some(n)) => {
                            if let Some(slot) = site_of.get_mut(n - first) {
                                *slot = GONE;
                            }
                            analyzer.collect_followed(time, self.object_at(n, site), by);
                        }
                        _ => after.event(time, false, promote),
                    }
                } else {
                    match target {
                        // The id of the object the event is of: the live object
                        // of that id in the analysis, if it keeps one.
                        Some(n) => {
                            let id = ObjId::new(self.object.get(n));
                            if promote {
                                analyzer.promote(time, id);
                            } else {
                                analyzer.collect(time, id, by);
                            }
                        }
                        // No object of that id is live, so none that the analysis
                        // keeps is either.
                        None => after.event(time, false, promote),
                    }
                }
            }
            if i & 0xF_FFFF == 0xF_FFFF {
                progress(
                    stage,
                    (self.size_bytes as u128 * i as u128 / total as u128) as u64,
                );
            }
        }
        analyzer.skipped(&after);
        let live = site_of.iter().enumerate().filter(|(_, s)| **s != GONE);
        let count = live.clone().count() as u64;
        let live = live.map(|(n, &site)| self.object_at(first + n, site));
        self.adopt(&mut analyzer, charge);
        progress(stage, self.size_bytes);
        let profile = if follow {
            analyzer.finish_followed(count, live)
        } else {
            analyzer.finish()
        };
        Pass {
            profile,
            warnings: self.warnings.clone(),
            error: self.error,
            events: self.kind.len() as u64,
        }
    }

    /// Hands `analyzer` the trie the pass charged allocations to.
    fn adopt(&self, analyzer: &mut Analyzer, charge: Charge<'_>) {
        match charge {
            Charge::Whole => analyzer.adopt_backtraces(Arc::clone(&self.backtraces)),
            Charge::Sites => analyzer.adopt_backtraces(Arc::clone(&self.sites)),
            Charge::Site { trie, .. } => analyzer.adopt_backtraces(Arc::new(*trie)),
            Charge::Nothing | Charge::BigOnly => {}
        }
    }

    /// The index of the event of allocation `first` (the number of events when
    /// there is none), and the events before it.
    fn before(&self, first: usize) -> (usize, Skipped) {
        let mut s = Skipped::default();
        if first == 0 {
            return (0, s);
        }
        let mut start = self.kind.len();
        let mut allocs = 0;
        for (i, &k) in self.kind.iter().enumerate() {
            if k == KIND_ALLOC {
                if allocs == first {
                    start = i;
                    break;
                }
                allocs += 1;
            } else if k == KIND_PROMOTE {
                s.promotes += 1;
            } else {
                s.collects += 1;
            }
        }
        s.allocs = allocs as u64;
        let others = start - allocs;
        let latest = (0..allocs)
            .map(|n| self.time.get(n))
            .chain((0..others).map(|n| self.other_time.get(n)))
            .map(time_of)
            .max();
        s.end = latest;
        (start, s)
    }

    /// Allocation `n` as the analysis takes it (its backtrace aside).
    #[inline]
    fn alloc(&self, n: usize) -> Alloc<'static> {
        let row = self.row(n);
        Alloc {
            obj_id: ObjId::new(self.object.get(n)),
            length: row.length,
            domain: row.domain,
            nsamples: row.nsamples,
            source: row.source,
            backtrace: Cow::Borrowed(&[]),
            common_prefix: 0,
        }
    }

    /// What a scan reads of allocation `n`.
    #[inline(always)]
    fn row(&self, n: usize) -> Row {
        Row {
            nsamples: self.samples.get(n),
            length: self.length.get(n),
            source: source_of(self.source.get(n).copied().unwrap_or(0)),
            domain: DomainId::new(self.domain.get(n).copied().unwrap_or(0)),
        }
    }

    /// The live object of allocation `n`, charged to `site`.
    #[inline]
    fn object_at(&self, n: usize, site: u32) -> LiveObject {
        LiveObject {
            samples: self.samples.get(n),
            time: time_of(self.time.get(n)),
            site,
            domain: DomainId::new(self.domain.get(n).copied().unwrap_or(0)),
            promoted: false,
        }
    }

    /// The node allocation `n` is charged to (any charge but
    /// [`Charge::BigOnly`], which hands the analysis whole backtraces).
    #[inline]
    fn charged(
        &self,
        n: usize,
        charge: &mut Charge<'_>,
        codes: &mut Vec<LocationCode>,
    ) -> BacktraceId {
        let whole = BacktraceId(self.backtrace.get(n).copied().unwrap_or(0));
        match charge {
            Charge::Nothing | Charge::BigOnly => BacktraceId::EMPTY,
            Charge::Whole => whole,
            Charge::Sites => BacktraceId(self.site.get(n).copied().unwrap_or(0)),
            Charge::Site { start, trie, of } => {
                let slot = whole.0 as usize;
                let mut id = of.get(slot).copied().unwrap_or(UNKNOWN);
                if id == UNKNOWN {
                    self.backtraces.codes_into(whole, codes);
                    let k = start.start(&self.locations, codes);
                    id = trie.intern_full(codes.get(k..).unwrap_or(&[])).0;
                    if let Some(s) = of.get_mut(slot) {
                        *s = id;
                    }
                }
                BacktraceId(id)
            }
        }
    }

    /// The allocations whose objects' lives pass `filter`'s clauses on them: a scan
    /// of the allocation and end columns.
    fn passing(&self, filter: &Filter) -> Arc<AllocationSet> {
        let mut set = AllocationSet::default();
        for n in 0..self.source.len() {
            let alloc = time_of(self.time.get(n));
            let ended = self.ended.get(n);
            let collect = (ended != NEVER).then(|| time_of(ended));
            if filter.keeps_life(alloc, collect, self.end) {
                set.insert(n as u64);
            }
        }
        Arc::new(set)
    }
}

impl Source for &Tables {
    fn info(&self) -> &Info {
        &self.info
    }

    fn locations(&self) -> &LocationTable {
        &self.locations
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn pass(&mut self, options: Options, stage: Stage, progress: Progress<'_>) -> Pass {
        let running = scan::Running::start();
        self.replay(
            options,
            stage,
            progress,
            Some(scan::Shape::of_host(running.alone())),
        )
    }

    /// The tables hold it: the latest time of the events decoded, what a pass
    /// over them sees last.
    fn end(&mut self, _progress: Progress<'_>) -> Timedelta {
        self.end
    }

    fn objects(&mut self, filter: &Filter, progress: &mut dyn FnMut(u64)) -> Arc<AllocationSet> {
        progress(0);
        let set = self.passing(filter);
        progress(self.size_bytes);
        set
    }

    fn fold(&self, profile: &Profile, options: FoldOptions, hide: &Hide) -> FrameTree {
        // A profile of a pass that charged whole backtraces holds the tables'
        // own trie, which the skeletons are of.
        if !Arc::ptr_eq(&profile.backtraces, &self.backtraces) {
            return crate::report::fold_tree_hiding(profile, &self.locations, options, hide);
        }
        let mut skeletons = self.skeletons.0.lock().unwrap_or_else(|e| e.into_inner());
        crate::report::fold_tree_on(
            &mut skeletons,
            SKELETONS,
            profile,
            &self.locations,
            options,
            hide,
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Filter;
    use crate::query::{SiteSpec, TopQuery};
    use crate::render::TraceFile;
    use crate::report::GroupBy;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    /// Object ids that follow the first by ordinal keep no column; the first
    /// that does not makes one of every id, which reads as pushed.
    #[test]
    fn object_ids_are_kept_only_when_they_are_not_ordinals() {
        let mut b = ObjectsBuilder::new(&Spill::memory());
        (10..20).for_each(|id| b.push(id));
        let o = b.clone().finish();
        assert!(matches!(
            o,
            Objects::Ordinals {
                first: 10,
                count: 10
            }
        ));
        assert_eq!(o.own_bytes(), 0);
        assert!((0..10).map(|i| o.get(i)).eq(10..20));
        assert_eq!(o.get(10), 0);
        b.push(5);
        b.push(21);
        let o = b.finish();
        assert!(matches!(o, Objects::Ids(_)));
        assert!((0..12).map(|i| o.get(i)).eq((10..20).chain([5, 21])));
    }

    /// Ends stay 4 bytes each with objects never collected, and widen, never
    /// as never, when an end is `u32::MAX` or more.
    #[test]
    fn ends_are_narrow_with_never_and_widen_past_it() {
        let mut b = EndsBuilder(ColumnBuilder::new(&Spill::memory()));
        (0..4).for_each(|_| b.push_never());
        b.set(1, 5);
        b.set(3, u64::from(u32::MAX) - 1);
        let narrow = b.clone().finish();
        assert!(matches!(narrow.0, Column::Narrow(_)));
        let got = |e: &Ends| (0..4).map(|i| e.get(i)).collect::<Vec<_>>();
        let max = u64::from(u32::MAX);
        assert_eq!(got(&narrow), [NEVER, 5, NEVER, max - 1]);
        b.set(2, max);
        let wide = b.finish();
        assert!(matches!(wide.0, Column::Wide(_)));
        assert_eq!(got(&wide), [NEVER, 5, max, max - 1]);
    }

    /// An allocation as decoded, with when its object ended.
    struct Decoded {
        time: i64,
        length: u64,
        samples: u64,
        source: AllocationSource,
        functions: Vec<String>,
        ended: Option<i64>,
    }

    /// Every allocation of `bytes`, straight from the reader's events.
    fn decoded(bytes: &[u8]) -> (Vec<Decoded>, i64, Vec<String>) {
        let mut reader = Reader::from_bytes(bytes).unwrap();
        let mut out: Vec<Decoded> = Vec::new();
        let mut live = std::collections::HashMap::new();
        let mut end = 0;
        let mut events = reader.events(true);
        while let Some(item) = events.next_event_with_locations() {
            let (t, event, table) = item.unwrap();
            let t = t.as_micros();
            end = end.max(t);
            match event {
                Event::Alloc(a) => {
                    let functions = a
                        .backtrace
                        .iter()
                        .flat_map(|c| table.get(*c).unwrap_or(&[]))
                        .map(|l| l.defname.to_str_lossy().into_owned())
                        .collect();
                    live.insert(a.obj_id.get(), out.len());
                    out.push(Decoded {
                        time: t,
                        length: a.length,
                        samples: a.nsamples,
                        source: a.source,
                        functions,
                        ended: None,
                    });
                }
                Event::Collect(id, _) => {
                    if let Some(n) = live.remove(&id.get()) {
                        let d: &mut Decoded = &mut out[n];
                        d.ended = Some(t.max(d.time));
                    }
                }
                Event::Promote(..) => {}
            }
        }
        drop(events);
        let mut names: Vec<String> = reader
            .locations()
            .iter()
            .flat_map(|(_, ls)| ls.iter().map(|l| l.defname.to_str_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        (out, end, names)
    }

    fn trace() -> Vec<u8> {
        let config = SynthConfig {
            allocs: 3_000,
            depth: 8,
            functions: 40,
            ..SynthConfig::default()
        };
        write_synthetic(Vec::new(), &config).unwrap()
    }

    /// A trace whose samples together outgrow 63 bits is replayed, not scanned,
    /// and answers as the reader's pass does.
    #[test]
    fn samples_past_63_bits_are_replayed_exactly() {
        use tracekit_memtrace::{Location, Timestamp, Writer};
        let info = Info {
            sample_rate: 1e-4,
            word_size: 64,
            executable_name: "prog".into(),
            host_name: "host".into(),
            ocaml_runtime_params: "".into(),
            pid: 1,
            initial_domain: DomainId::MAIN,
            start_time: Timestamp::from_micros(1_700_000_000_000_000),
            context: None,
        };
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, &info).unwrap();
        let loc = |code: LocationCode| {
            vec![Location {
                filename: "main.ml".into(),
                line: code.get() as u32,
                start_char: 1,
                end_char: 9,
                defname: format!("Main.f{}", code.get()).into(),
            }]
        };
        // Two of 2^62 - 1 samples and one of 5 at the start, the two collected
        // later: the highest live heap, past 2^63, is at the start.
        let at = |us: i64| info.start_time.offset(Timedelta::from_micros(us));
        let huge = (1 << 62) - 1;
        let alloc = |w: &mut Writer<&mut Vec<u8>>, t, samples, code| {
            let stack = [LocationCode::new(code), LocationCode::new(9)];
            w.put_alloc(at(t), 4, samples, AllocationSource::Minor, &stack, loc)
                .unwrap()
        };
        let a = alloc(&mut w, 0, huge, 1);
        let b = alloc(&mut w, 0, huge, 2);
        alloc(&mut w, 0, 5, 3);
        w.put_collect(at(10), a).unwrap();
        w.put_collect(at(10), b).unwrap();
        alloc(&mut w, 20, 1, 4);
        w.close().unwrap();
        let mut reader = Reader::from_bytes(&out).unwrap();
        let tables = Tables::build(&mut reader, &mut |_| {});
        assert!(tables.others().is_none());
        let options = Options {
            leaf_only: true,
            ..Options::default()
        };
        let mut reader = Reader::from_bytes(&out).unwrap();
        let read = crate::passes::analyze(&mut reader, options.clone(), &mut |_, _| {});
        let mut t = &tables;
        let from_tables = crate::passes::analyze(&mut t, options, &mut |_, _| {});
        assert_eq!(
            profile_facts(&from_tables.profile),
            profile_facts(&read.profile)
        );
        assert_eq!(read.profile.peak.live, 2 * huge + 5);
    }

    /// What a pass's profile says, everything compared.
    fn profile_facts(p: &Profile) -> String {
        let sites: Vec<_> = p.sites.iter().collect();
        let curves = p
            .curves
            .as_ref()
            .map(|c| (0..c.sites()).map(|i| c.live(i)).collect::<Vec<_>>());
        format!(
            "sites {sites:?}\ntotals {:?}\ntimeline {:?} {:?}\npeak {:?}\nevents {:?}\n\
             big {:?}\nlive {} end {:?} live_at {:?} trie {}\ncurves {curves:?}",
            p.totals,
            p.timeline.domains(),
            p.timeline.points(500),
            p.peak,
            p.events,
            p.big,
            p.live_objects_at_end,
            p.end,
            p.live_at,
            p.backtraces.len(),
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// A pass over the tables as a scan of the allocation columns answers
        /// exactly as the replay of every event does, whatever the filter and
        /// what the pass counts.
        #[test]
        fn a_scan_answers_as_the_replay(
            seed in 0u64..1_000,
            allocs in 1u64..2_500,
            between in proptest::option::of((0i64..=100, 0i64..=100)),
            sizes in proptest::option::of((0u64..2_000, 0u64..4_000)),
            sources in proptest::sample::subsequence(vec![0u8, 1, 2], 0..=3),
            never in proptest::bool::weighted(0.15),
            lifetime in proptest::option::of((0i64..=50, 0i64..=100)),
            function in proptest::option::of((0usize..1000, proptest::bool::ANY)),
            live_at in proptest::option::of(0i64..=110),
            backtraces in proptest::bool::weighted(0.8),
            leaf_only in proptest::bool::ANY,
            std_skip in proptest::bool::ANY,
            big in proptest::sample::select(vec![0usize, 1, 5]),
            buckets in proptest::sample::select(vec![0usize, 7, 1 << 14]),
            bucket_count in proptest::sample::select(vec![1usize, 3, 64, scan::BUCKETS]),
            part_rows in proptest::sample::select(vec![1usize, 100, 1 << 19]),
            parts in 1usize..=5,
            curves in proptest::bool::ANY,
            per_site in proptest::sample::select(vec![
                crate::sites::PerSite::All,
                crate::sites::PerSite::Narrow,
                crate::sites::PerSite::Weight(crate::sites::Weight::Allocated),
                crate::sites::PerSite::Counted(crate::sites::Weight::LiveAt),
            ]),
        ) {
            let config = SynthConfig {
                allocs,
                seed,
                depth: 8,
                functions: 40,
                ..SynthConfig::default()
            };
            let bytes = write_synthetic(Vec::new(), &config).unwrap();
            let (_, end, names) = decoded(&bytes);
            let mut reader = Reader::from_bytes(&bytes).unwrap();
            let tables = Tables::build(&mut reader, &mut |_| {});
            // Else neither pass below is a scan and the test says nothing.
            proptest::prop_assert!(tables.others().is_some());
            let td = |share: i64| Timedelta::from_micros(end * share / 100);
            let ordered = |(a, b): (i64, i64)| vec![td(a.min(b)), td(a.max(b))];
            let function = function.map(|(i, forbid)| (names[i % names.len()].clone(), forbid));
            let filter = Filter {
                source: sources.into_iter().map(source_of).collect(),
                min_size: sizes.map(|s| s.0.min(s.1)),
                max_size: sizes.map(|s| s.0.max(s.1)),
                function: function.iter().filter(|f| !f.1).map(|f| f.0.clone()).collect(),
                forbid_function: function.iter().filter(|f| f.1).map(|f| f.0.clone()).collect(),
                between: between.map(ordered),
                never_collected: never,
                lifetime: lifetime.map(ordered),
                ..Filter::default()
            };
            let objects = filter.has_life_clauses().then(|| tables.passing(&filter));
            let options = Options {
                filter,
                objects,
                live_at: live_at.map(td),
                backtraces,
                leaf_only,
                site_skip: match std_skip {
                    true => FrameSkip::rust_std(),
                    false => FrameSkip::none(),
                },
                big,
                timeline_buckets: buckets,
                per_site,
                curve_times: curves.then(|| (1..=8).map(|i| td(i * 13)).collect()),
                ..Options::default()
            };
            let scan = Some(scan::Shape {
                buckets: bucket_count,
                part_rows,
                parts,
            });
            let scanned = tables.replay(options.clone(), Stage::Analysing, &mut |_, _| {}, scan);
            let replayed = tables.replay(options, Stage::Analysing, &mut |_, _| {}, None);
            proptest::prop_assert_eq!(
                profile_facts(&scanned.profile),
                profile_facts(&replayed.profile)
            );
            proptest::prop_assert_eq!(scanned.events, replayed.events);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The allocations a filter keeps, answered from the tables, are those a
        /// brute-force filter over the decoded events keeps.
        #[test]
        fn the_column_filter_keeps_what_brute_force_keeps(
            between in proptest::option::of((0i64..=100, 0i64..=100)),
            sizes in proptest::option::of((0u64..2_000, 0u64..4_000)),
            sources in proptest::sample::subsequence(vec![0u8, 1, 2], 0..=3),
            collected in proptest::option::of((0i64..=100, 0i64..=100)),
            never in proptest::bool::weighted(0.15),
            lifetime in proptest::option::of((0i64..=50, 0i64..=100)),
            live in proptest::option::of((0i64..=100, 0i64..=100)),
            function in proptest::option::of((0usize..1000, proptest::bool::ANY)),
        ) {
            let bytes = trace();
            let (allocs, end, names) = decoded(&bytes);
            let us = |share: i64| end * share / 100;
            let td = |share: i64| Timedelta::from_micros(us(share));
            let ordered = |(a, b): (i64, i64)| (a.min(b), a.max(b));
            let between = between.map(ordered);
            let collected = collected.map(ordered);
            let lifetime = lifetime.map(ordered);
            let live = live.map(ordered);
            let sizes = sizes.map(|(a, b)| (a.min(b), a.max(b)));
            let sources: Vec<AllocationSource> = sources.into_iter().map(source_of).collect();
            let function = function.map(|(i, forbid)| (names[i % names.len()].clone(), forbid));
            let spec = Filter {
                source: sources.clone(),
                min_size: sizes.map(|s| s.0),
                max_size: sizes.map(|s| s.1),
                function: function.iter().filter(|f| !f.1).map(|f| f.0.clone()).collect(),
                forbid_function: function.iter().filter(|f| f.1).map(|f| f.0.clone()).collect(),
                between: between.map(|(a, b)| vec![td(a), td(b)]),
                collected_between: collected.map(|(a, b)| vec![td(a), td(b)]),
                never_collected: never,
                lifetime: lifetime.map(|(a, b)| vec![td(a), td(b)]),
                live_between: live.map(|(a, b)| vec![td(a), td(b)]),
                ..Filter::default()
            };
            let within = |t: i64, (a, b): (i64, i64)| us(a) <= t && t <= us(b);
            let kept: Vec<&Decoded> = allocs
                .iter()
                .filter(|d| sources.is_empty() || sources.contains(&d.source))
                .filter(|d| sizes.is_none_or(|(lo, hi)| lo <= d.length * 8 && d.length * 8 <= hi))
                .filter(|d| between.is_none_or(|r| within(d.time, r)))
                .filter(|d| collected.is_none_or(|r| d.ended.is_some_and(|e| within(e, r))))
                .filter(|d| !never || d.ended.is_none())
                .filter(|d| {
                    lifetime.is_none_or(|r| within(d.ended.unwrap_or(end).max(d.time) - d.time, r))
                })
                .filter(|d| {
                    live.is_none_or(|(a, b)| d.time <= us(b) && d.ended.is_none_or(|e| e > us(a)))
                })
                .filter(|d| {
                    function.as_ref().is_none_or(|(name, forbid)| {
                        d.functions.contains(name) != *forbid
                    })
                })
                .collect();
            let mut reader = Reader::from_bytes(&bytes).unwrap();
            let tables = Tables::build(&mut reader, &mut |_| {});
            let query = TopQuery {
                growing: false,
                by: GroupBy::Leaf,
                limit: 1,
                at: None,
                peak: false,
                sites: SiteSpec::default(),
                filter: spec,
            };
            let answer = match query.run(&mut &tables, &mut |_, _| {}) {
                Ok(a) => a,
                // A range that ends before it starts keeps nothing by construction.
                Err(_) => return Ok(()),
            };
            let json = serde_json::to_value(answer.json(&TraceFile::new("t", tables.info())));
            let totals = &json.unwrap()["totals"];
            let samples: u64 = kept.iter().map(|d| d.samples).sum();
            let collected_allocs = kept.iter().filter(|d| d.ended.is_some()).count() as u64;
            proptest::prop_assert_eq!(&totals["allocs"], &serde_json::json!(kept.len()));
            proptest::prop_assert_eq!(&totals["samples"], &serde_json::json!(samples));
            proptest::prop_assert_eq!(
                &totals["collected_allocs"],
                &serde_json::json!(collected_allocs)
            );
        }
    }
}
