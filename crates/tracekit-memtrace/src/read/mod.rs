//! Reading traces (OCaml `Trace.Reader`).
//!
//! A [`Reader`] holds the whole trace as bytes (borrowed, or owned in any
//! container: a `Vec`, or a memory map the caller made) and its [`Info`]. [`Reader::events`]
//! starts a pass over the events; each pass decodes from the start, as OCaml's
//! `Reader.iter` does, and fills the reader's [`LocationTable`].
//!
//! A [`StreamReader`] reads a trace from any [`Read`](std::io::Read) one
//! packet at a time, in memory bounded by the largest packet, and lends an
//! [`Events`] pass over each packet. Both decode with the same code: an
//! [`Events`] pass over a byte slice, whose decoder state that outlives a
//! packet ([`DecodeState`]) moves from one packet's pass to the next.
//!
//! Packets written by another process and a truncated last packet are
//! skipped with a [`Warning`]; every other inconsistency stops the pass with a
//! [`ReadError`] that carries the byte offset.
//!
//! This module is the packet loop: the file structure, per-domain state and
//! skipping rules of `docs/memtrace-format.md` (at the repository root), §2,
//! §10 and §12. Each part of a packet is decoded by the submodule of the same
//! name as its encoder in [`crate::write`]: `packet` (headers), `info` (the
//! trace-info packet), `events` (event bodies), `location` (location events),
//! `backtrace` (backtrace codewords) and `buf` (integers, strings, vints).

mod backtrace;
pub(crate) mod buf;
mod events;
mod info;
mod location;
mod packet;
mod stream;

use crate::error::{ReadError, ReadErrorKind, Warning};
use crate::event::{Alloc, Event};
use crate::format::ocaml_int;
use crate::types::{DomainId, FormatVersion, Info, Location, LocationCode, ObjId, Timedelta};
use backtrace::BacktraceCache;
use events::RawEvent;
use info::read_trace_info;
use location::LocationDecoder;
pub use location::LocationTable;
use packet::{PacketClock, PacketHeader, read_packet_header};
use rustc_hash::FxHashMap;
pub use stream::{PacketEvents, StreamReader};

/// Most distinct domains a pass keeps decoder state for; OCaml runtimes
/// allow at most 4096 domains. A domain's backtrace cache (160 KiB) is
/// allocated at its first allocation event.
pub const MAX_DOMAINS: usize = 4096;

/// Most backtrace frames all domains together may buffer.
const MAX_TOTAL_BACKTRACE_FRAMES: usize = 1 << 24;

/// The trace's bytes: borrowed, or in a container the reader owns.
enum Data<'d> {
    Borrowed(&'d [u8]),
    Owned(Box<dyn AsRef<[u8]> + Send + Sync>),
}

impl Data<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Borrowed(b) => b,
            Data::Owned(o) => (**o).as_ref(),
        }
    }
}

/// A memtrace trace, ready to be read.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let bytes = tracekit_memtrace::doc_example_trace();
/// use tracekit_memtrace::{Event, Reader};
/// let mut reader = Reader::from_bytes(&bytes)?;
/// println!("traced {}", reader.info().executable_name);
/// let mut events = reader.events(true);
/// while let Some(item) = events.next_event() {
///     let (time, event) = item?;
///     if let Event::Alloc(a) = event {
///         println!("{} µs: {} words, {} frames", time.as_micros(), a.length, a.backtrace.len());
///     }
/// }
/// # Ok(()) }
/// ```
pub struct Reader<'d> {
    data: Data<'d>,
    info: Info,
    version: FormatVersion,
    data_offset: usize,
    locations: LocationTable,
}

impl std::fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("info", &self.info)
            .field("version", &self.version)
            .field("size_bytes", &self.size_bytes())
            .finish_non_exhaustive()
    }
}

impl<'d> Reader<'d> {
    /// A reader over a trace held in memory.
    pub fn from_bytes(data: &'d [u8]) -> Result<Reader<'d>, ReadError> {
        Reader::new(Data::Borrowed(data))
    }
}

impl Reader<'static> {
    /// A reader that owns the trace's bytes.
    pub fn from_vec(data: Vec<u8>) -> Result<Reader<'static>, ReadError> {
        Reader::from_owner(data)
    }

    /// A reader that owns the container holding the trace's bytes: a
    /// `Vec<u8>`, a `Box<[u8]>`, an `Arc<[u8]>`, or a memory map.
    ///
    /// `owner.as_ref()` must give the same bytes every time, as every
    /// standard container does (this is not a safety condition: other bytes
    /// only give wrong results or errors).
    ///
    /// This is how to read a large file without copying it: map it (with
    /// `memmap2`, say) and hand over the map. Mapping a file is `unsafe`
    /// because the bytes of a `&[u8]` must not change while it lives: if
    /// another process writes the file meanwhile that is undefined
    /// behaviour, and if it truncates the file, reading a page past the new
    /// end kills the process with `SIGBUS`. [`Reader::open`] reads the file
    /// instead.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let bytes = tracekit_memtrace::doc_example_trace();
    /// use std::sync::Arc;
    /// use tracekit_memtrace::Reader;
    /// let shared: Arc<[u8]> = bytes.into();
    /// let mut reader = Reader::from_owner(Arc::clone(&shared))?;
    /// assert_eq!(reader.bytes(), &shared[..]);
    /// assert!(reader.events(true).next_event().is_some());
    /// # Ok(()) }
    /// ```
    pub fn from_owner(
        owner: impl AsRef<[u8]> + Send + Sync + 'static,
    ) -> Result<Reader<'static>, ReadError> {
        Reader::new(Data::Owned(Box::new(owner)))
    }
}

impl<'d> Reader<'d> {
    fn new(data: Data<'d>) -> Result<Reader<'d>, ReadError> {
        let (info, version, data_offset) = read_trace_info(data.bytes())?;
        Ok(Reader {
            data,
            info,
            version,
            data_offset,
            locations: LocationTable::default(),
        })
    }

    /// The trace metadata.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The format version of the trace-info packet.
    pub fn format_version(&self) -> FormatVersion {
        self.version
    }

    /// Size of the trace in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.data.bytes().len() as u64
    }

    /// The trace's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The locations of `code`, once a pass over the events has reached the
    /// location event that defines it (OCaml `lookup_location_code`, which
    /// raises where this returns `None`).
    pub fn lookup_location_code(&self, code: LocationCode) -> Option<&[Location]> {
        self.locations.get(code)
    }

    /// Every location code seen so far.
    pub fn locations(&self) -> &LocationTable {
        &self.locations
    }

    /// Starts a pass over the events from the start of the trace. Without
    /// `parse_backtraces`, allocations come with empty backtraces and decoding
    /// is several times faster.
    #[inline]
    pub fn events(&mut self, parse_backtraces: bool) -> Events<'_> {
        Events::new(
            self.data.bytes(),
            0,
            &self.info,
            &mut self.locations,
            DecodeState::default(),
            parse_backtraces,
            self.data_offset,
        )
    }

    /// Calls `f` with every event, as OCaml's `Reader.iter`, and returns the
    /// warnings about skipped packets.
    pub fn iter<F>(&mut self, parse_backtraces: bool, mut f: F) -> Result<Vec<Warning>, ReadError>
    where
        F: FnMut(Timedelta, &Event<'_>, &LocationTable),
    {
        let mut events = self.events(parse_backtraces);
        while let Some(item) = events.next_event_with_locations() {
            let (time, event, locations) = item?;
            f(time, &event, locations);
        }
        Ok(events.take_warnings())
    }
}

/// Decoder state of one domain, kept across its packets.
struct DomainState {
    id: DomainId,
    locations: LocationDecoder,
    cache: Option<Box<BacktraceCache>>,
    backtrace: Vec<LocationCode>,
    last_time: i64,
}

/// Where [`Events::decode_event`] puts an event: a [`RawEvent`] for
/// [`Events::next_event`], or a caller's [`EventSink`] for
/// [`Events::read_into`]. Generic, so that either way the fields go straight
/// from the decoder's registers to their destination.
trait Output {
    /// The event `e` (an alloc, promote or collect; its time absolute) of
    /// `domain`, whose backtrace buffer holds an alloc's backtrace.
    fn event(&mut self, e: &RawEvent, domain: &DomainState, locations: &LocationTable);
}

impl Output for RawEvent {
    #[inline(always)]
    fn event(&mut self, e: &RawEvent, _: &DomainState, _: &LocationTable) {
        *self = *e;
    }
}

/// Receives the events of [`Events::read_into`] as they are decoded.
///
/// For consumers that repack every event into a record of their own (such as
/// a pipeline that hands events to another thread): the fields go from the
/// decoder straight into that record, with no [`Event`] in between.
pub trait EventSink {
    /// An allocation; its backtrace is lent from the decoder's state (empty
    /// when the pass does not parse backtraces), and `locations` holds every
    /// code in it (unless the trace is damaged).
    fn alloc(&mut self, time: Timedelta, alloc: &Alloc<'_>, locations: &LocationTable);
    /// A promotion to the major heap.
    fn promote(&mut self, time: Timedelta, obj_id: ObjId, domain: DomainId);
    /// A collection.
    fn collect(&mut self, time: Timedelta, obj_id: ObjId, domain: DomainId);
}

/// Collects owned copies of the events, with their times.
impl EventSink for Vec<(Timedelta, Event<'static>)> {
    fn alloc(&mut self, time: Timedelta, alloc: &Alloc<'_>, _: &LocationTable) {
        self.push((time, Event::Alloc(alloc.clone()).into_owned()));
    }

    fn promote(&mut self, time: Timedelta, obj_id: ObjId, domain: DomainId) {
        self.push((time, Event::Promote(obj_id, domain)));
    }

    fn collect(&mut self, time: Timedelta, obj_id: ObjId, domain: DomainId) {
        self.push((time, Event::Collect(obj_id, domain)));
    }
}

/// An [`EventSink`] as an [`Output`].
struct SinkOutput<'s, S> {
    sink: &'s mut S,
    start_time: i64,
    parse_backtraces: bool,
}

impl<S: EventSink> Output for SinkOutput<'_, S> {
    #[inline(always)]
    fn event(&mut self, e: &RawEvent, domain: &DomainState, locations: &LocationTable) {
        let dt = Timedelta::from_micros(e.time.wrapping_sub(self.start_time));
        match e.to_event(domain, self.parse_backtraces) {
            Event::Alloc(a) => self.sink.alloc(dt, &a, locations),
            Event::Promote(id, d) => self.sink.promote(dt, id, d),
            Event::Collect(id, d) => self.sink.collect(dt, id, d),
        }
    }
}

/// The decoder state that outlives a packet: each domain's decoder state,
/// the scratch buffer for location lists, the warnings so far and the memory
/// budget for backtraces. A [`StreamReader`] moves it from one packet's
/// [`Events`] pass to the next.
pub(crate) struct DecodeState {
    domains: Vec<DomainState>,
    domain_index: FxHashMap<u16, usize>,
    scratch_locs: Vec<Location>,
    warnings: Vec<Warning>,
    /// Frames of backtrace buffer all domains may still allocate.
    backtrace_budget: usize,
}

impl Default for DecodeState {
    /// The state at the start of a trace; allocates nothing.
    fn default() -> DecodeState {
        DecodeState {
            domains: Vec::new(),
            domain_index: FxHashMap::default(),
            scratch_locs: Vec::new(),
            warnings: Vec::new(),
            backtrace_budget: MAX_TOTAL_BACKTRACE_FRAMES,
        }
    }
}

/// One pass over the events of a trace; see [`Reader::events`]. A
/// [`StreamReader`] lends one per packet ([`PacketEvents`]).
///
/// [`Events::next_event`] lends each event's backtrace from the decoder's
/// state, so the steady state allocates nothing. Call [`Events::owned`] for a
/// standard [`Iterator`] of owned events.
pub struct Events<'r> {
    /// The bytes decoded: the whole trace, or one packet of a stream.
    data: &'r [u8],
    /// Offset of `data` in the trace. Offsets are relative to `data` while
    /// decoding; errors, warnings and [`Events::position`] add this, so that
    /// the hot path never does.
    base: u64,
    info: &'r Info,
    locations: &'r mut LocationTable,
    parse_backtraces: bool,
    /// Offset of the next packet header.
    next_packet: usize,
    /// The current packet: `data[..end]`, decoded up to `pos`. Empty between
    /// packets.
    content: &'r [u8],
    pos: usize,
    in_packet: bool,
    clock: PacketClock,
    time_end: i64,
    domain: usize,
    /// The id of the current packet's domain, `domains[domain].id`.
    domain_id: DomainId,
    /// Id of the next allocation (an OCaml int).
    alloc_id: i64,
    alloc_id_end: i64,
    state: DecodeState,
    done: bool,
    /// Whether the pass ended with an error.
    failed: bool,
}

fn at(kind: ReadErrorKind, offset: usize) -> ReadError {
    ReadError::new(kind, offset as u64)
}

impl<'r> Events<'r> {
    /// A pass over `data`, which starts at offset `base` of the trace, from
    /// the packet at `data[start..]`, in decoder state `state`.
    fn new(
        data: &'r [u8],
        base: u64,
        info: &'r Info,
        locations: &'r mut LocationTable,
        state: DecodeState,
        parse_backtraces: bool,
        start: usize,
    ) -> Events<'r> {
        Events {
            data,
            base,
            info,
            locations,
            parse_backtraces,
            next_packet: start,
            content: &[],
            pos: 0,
            in_packet: false,
            clock: PacketClock::default(),
            time_end: 0,
            domain: 0,
            domain_id: DomainId::new(0),
            alloc_id: 0,
            alloc_id_end: 0,
            state,
            done: false,
            failed: false,
        }
    }

    /// The next event and its time since the start of the trace, or `None`
    /// at the end of the trace or after an error.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next_event(&mut self) -> Option<Result<(Timedelta, Event<'_>), ReadError>> {
        self.next_inner().map(|r| r.map(|(t, e, _)| (t, e)))
    }

    /// Like [`Events::next_event`], with the location table as it stands
    /// after the event (every code in the event's backtrace is in it, unless
    /// the trace is damaged).
    #[inline]
    pub fn next_event_with_locations(
        &mut self,
    ) -> Option<Result<(Timedelta, Event<'_>, &LocationTable), ReadError>> {
        self.next_inner()
    }

    #[inline(always)]
    fn next_inner(&mut self) -> Option<Result<(Timedelta, Event<'_>, &LocationTable), ReadError>> {
        if self.done {
            return None;
        }
        let mut e = RawEvent::EMPTY;
        match self.advance(&mut e) {
            Ok(true) => {}
            Ok(false) => {
                self.done = true;
                return None;
            }
            Err(e) => return Some(Err(self.fail(e))),
        }
        let event = e.to_event(self.current_domain(), self.parse_backtraces);
        let dt = Timedelta::from_micros(e.time.wrapping_sub(self.info.start_time.as_micros()));
        Some(Ok((dt, event, &*self.locations)))
    }

    /// The location table as it stands.
    pub fn locations(&self) -> &LocationTable {
        self.locations
    }

    /// The trace metadata.
    pub fn info(&self) -> &Info {
        self.info
    }

    /// Warnings about skipped packets so far.
    pub fn warnings(&self) -> &[Warning] {
        &self.state.warnings
    }

    /// Takes the warnings recorded so far, leaving none.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.state.warnings)
    }

    /// Byte offset up to which the trace has been decoded.
    pub fn position(&self) -> u64 {
        let local = if self.in_packet {
            self.pos
        } else {
            self.next_packet
        };
        self.base + local as u64
    }

    /// Ends the pass with the error `e`, its offset made absolute.
    #[cold]
    #[inline(never)]
    fn fail(&mut self, mut e: ReadError) -> ReadError {
        self.done = true;
        self.failed = true;
        e.offset += self.base;
        e
    }

    /// A standard iterator over owned copies of the events.
    pub fn owned(self) -> OwnedEvents<'r> {
        OwnedEvents { events: self }
    }

    /// The state of the current packet's domain.
    ///
    /// Invariant: once a packet has been entered, `self.domain <
    /// self.domains.len()`: `end_packet` sets it from `domain_state`, which
    /// returns an index into `domains`, and `domains` never shrinks. Events
    /// are decoded and lent out only after a packet was entered (before,
    /// `content` is empty). Unchecked because this runs for every event.
    #[inline(always)]
    fn current_domain(&self) -> &DomainState {
        debug_assert!(self.domain < self.state.domains.len());
        // SAFETY: the invariant above.
        unsafe { self.state.domains.get_unchecked(self.domain) }
    }

    fn domain_state(&mut self, domain: u16, at_offset: usize) -> Result<usize, ReadError> {
        let state = &mut self.state;
        if let Some(&i) = state.domain_index.get(&domain) {
            return Ok(i);
        }
        if state.domains.len() >= MAX_DOMAINS {
            return Err(at(ReadErrorKind::TooManyDomains(MAX_DOMAINS), at_offset));
        }
        state.domains.push(DomainState {
            id: DomainId::new(domain),
            locations: LocationDecoder::default(),
            cache: None,
            backtrace: Vec::new(),
            last_time: self.info.start_time.as_micros(),
        });
        let i = state.domains.len() - 1;
        state.domain_index.insert(domain, i);
        Ok(i)
    }

    /// Decodes events into `sink` until it has `max` more, the trace ends or
    /// an error stops the pass; returns how many it decoded. Fewer than `max`
    /// means the pass is over: every event before an error went to `sink`
    /// before the error is returned. The events are the same as
    /// [`Events::next_event`]'s, and the two can be mixed in one pass.
    ///
    /// A pass drives this loop itself, so the decoder and the sink compile
    /// into one loop: for a sink that copies every event, this is cheaper than
    /// the same work over [`Events::next_event`].
    pub fn read_into<S: EventSink>(
        &mut self,
        sink: &mut S,
        max: usize,
    ) -> Result<usize, ReadError> {
        let mut out = SinkOutput {
            sink,
            start_time: self.info.start_time.as_micros(),
            parse_backtraces: self.parse_backtraces,
        };
        let mut n = 0;
        while n < max && !self.done {
            match self.advance(&mut out) {
                Ok(true) => n += 1,
                Ok(false) => self.done = true,
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(n)
    }

    /// Decodes up to the next alloc, promote or collect event, into `out`.
    /// `Ok(false)` at the end of the trace.
    #[inline(always)]
    fn advance<O: Output>(&mut self, out: &mut O) -> Result<bool, ReadError> {
        loop {
            if self.pos < self.content.len() {
                if self.decode_event(out)? {
                    return Ok(true);
                }
            } else if !self.end_packet()? {
                return Ok(false);
            }
        }
    }

    /// Checks the packet just decoded and moves to the next packet to decode;
    /// `Ok(false)` at the end of the trace.
    #[inline(never)]
    fn end_packet(&mut self) -> Result<bool, ReadError> {
        if self.in_packet {
            self.in_packet = false;
            if self.alloc_id != self.alloc_id_end {
                return Err(at(ReadErrorKind::AllocIdMismatch, self.content.len()));
            }
        }
        loop {
            let start = self.next_packet;
            if start >= self.data.len() {
                self.content = &[];
                self.pos = 0;
                return Ok(false);
            }
            let header: PacketHeader = read_packet_header(self.data, start)?;
            let content_start = start + header.header_size;
            let available = self.data.len() - content_start;
            if header.pid != self.info.pid {
                self.state.warnings.push(Warning::WrongPid {
                    offset: self.base + start as u64,
                    pid: header.pid,
                    expected: self.info.pid,
                });
                self.next_packet = content_start + header.content_size.min(available);
                continue;
            }
            if available < header.content_size {
                self.state.warnings.push(Warning::TruncatedPacket {
                    offset: self.base + start as u64,
                    content_size: header.content_size as u64,
                    available: available as u64,
                });
                self.next_packet = self.data.len();
                continue;
            }
            let domain = self.domain_state(header.domain, start)?;
            if self.parse_backtraces {
                // A domain's cache is allocated at its first allocation; until
                // then it is all zeros.
                let ok = match &self.state.domains[domain].cache {
                    Some(cache) => cache.verify(&header.verifier),
                    None => BacktraceCache::verify_empty(&header.verifier),
                };
                if !ok {
                    return Err(at(ReadErrorKind::CacheVerificationFailed, start));
                }
            }
            let end = content_start + header.content_size;
            self.next_packet = end;
            self.content = &self.data[..end];
            self.pos = content_start;
            self.in_packet = true;
            self.clock = PacketClock::new(header.time_begin);
            self.time_end = header.time_end;
            self.domain = domain;
            self.domain_id = self.state.domains[domain].id;
            self.alloc_id = ocaml_int(header.alloc_id_begin);
            self.alloc_id_end = header.alloc_id_end;
            return Ok(true);
        }
    }
}

/// A standard [`Iterator`] over owned events; see [`Events::owned`].
pub struct OwnedEvents<'r> {
    events: Events<'r>,
}

impl OwnedEvents<'_> {
    /// Warnings about skipped packets so far.
    pub fn warnings(&self) -> &[Warning] {
        self.events.warnings()
    }

    /// The location table as it stands.
    pub fn locations(&self) -> &LocationTable {
        self.events.locations()
    }
}

impl Iterator for OwnedEvents<'_> {
    type Item = Result<(Timedelta, Event<'static>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.events
            .next_event()
            .map(|r| r.map(|(t, e)| (t, e.into_owned())))
    }
}
