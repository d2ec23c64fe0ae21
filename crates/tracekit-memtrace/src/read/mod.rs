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

mod backtrace;
pub(crate) mod buf;
mod location;
mod packet;
mod stream;

use std::borrow::Cow;

use crate::error::{ReadError, ReadErrorKind, Warning};
use crate::event::{Alloc, Event};
use crate::format::{
    EV_ALLOC, EV_COLLECT, EV_LOCATION, EV_PROMOTE, EV_SHORT_ALLOC_BASE, EV_TRACE_INFO, ocaml_int,
};
use crate::types::{
    AllocationSource, DomainId, FormatVersion, Info, Location, LocationCode, Name, ObjId,
    Timedelta, Timestamp,
};
use backtrace::{BacktraceCache, BtError, skip_backtrace};
use buf::{Cursor, Eof};
pub use location::LocationTable;
use location::{LocError, LocationDecoder};
use packet::{PacketClock, PacketHeader, event_code, event_time, read_packet_header};
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

/// Decodes the trace-info packet at the start of `data`.
fn read_trace_info(data: &[u8]) -> Result<(Info, FormatVersion, usize), ReadError> {
    let header = read_packet_header(data, 0)?;
    let start = header.header_size;
    let end = start + header.content_size;
    let bad = |kind, at: usize| ReadError::new(kind, at as u64);
    if data.len() < end {
        return Err(bad(ReadErrorKind::UnexpectedEof, data.len()));
    }
    let mut c = Cursor {
        data: &data[..end],
        pos: start,
    };
    let eof = |c: &Cursor<'_>| bad(ReadErrorKind::UnexpectedEof, c.pos);
    let word = c.u32().map_err(|_| eof(&c))?;
    let time = event_time(word, header.time_begin);
    if event_code(word) != EV_TRACE_INFO || time != header.time_begin {
        return Err(bad(ReadErrorKind::BadTraceInfo, start));
    }
    let info = (|| -> Result<Info, Eof> {
        let sample_rate = c.f64()?;
        let word_size = c.u8()?;
        let executable_name = Name::new(c.string()?);
        let host_name = Name::new(c.string()?);
        let ocaml_runtime_params = Name::new(c.string()?);
        let pid = c.i64()?;
        let context = if header.version >= 2 {
            match c.string()? {
                b"" => None,
                s => Some(Name::new(s)),
            }
        } else {
            None
        };
        Ok(Info {
            sample_rate,
            word_size,
            executable_name,
            host_name,
            ocaml_runtime_params,
            pid,
            initial_domain: DomainId::new(header.domain),
            start_time: Timestamp::from_micros(header.time_begin),
            context,
        })
    })()
    .map_err(|_| eof(&c))?;
    if c.remaining() != 0 {
        return Err(bad(ReadErrorKind::BadTraceInfo, c.pos));
    }
    let version = FormatVersion::from_number(header.version).unwrap_or(FormatVersion::V3);
    Ok((info, version, end))
}

/// Decoder state of one domain, kept across its packets.
struct DomainState {
    id: DomainId,
    locations: LocationDecoder,
    cache: Option<Box<BacktraceCache>>,
    backtrace: Vec<LocationCode>,
    last_time: i64,
}

/// What an event code is, looked up in [`EVENT_CLASS`].
const CLASS_UNKNOWN: u8 = 0;
const CLASS_TRACE_INFO: u8 = 1;
const CLASS_LOCATION: u8 = 2;
const CLASS_ALLOC: u8 = 3;
const CLASS_SHORT_ALLOC: u8 = 4;
const CLASS_PROMOTE: u8 = 5;
const CLASS_COLLECT: u8 = 6;

const EVENT_CLASS: [u8; 256] = {
    let mut t = [CLASS_UNKNOWN; 256];
    t[EV_TRACE_INFO as usize] = CLASS_TRACE_INFO;
    t[EV_LOCATION as usize] = CLASS_LOCATION;
    t[EV_ALLOC as usize] = CLASS_ALLOC;
    t[EV_PROMOTE as usize] = CLASS_PROMOTE;
    t[EV_COLLECT as usize] = CLASS_COLLECT;
    let mut n = 1;
    while n <= 16 {
        t[(EV_SHORT_ALLOC_BASE + n) as usize] = CLASS_SHORT_ALLOC;
        n += 1;
    }
    t
};

/// The last decoded event, before its backtrace is lent out.
#[derive(Clone, Copy)]
struct RawEvent {
    class: u8,
    source: AllocationSource,
    time: i64,
    obj_id: u64,
    length: u64,
    nsamples: u64,
    common_prefix: usize,
}

impl RawEvent {
    const EMPTY: RawEvent = RawEvent {
        class: CLASS_UNKNOWN,
        source: AllocationSource::Minor,
        time: 0,
        obj_id: 0,
        length: 0,
        nsamples: 0,
        common_prefix: 0,
    };

    /// The event, an alloc's backtrace lent from `domain`'s buffer.
    #[inline(always)]
    fn to_event<'d>(self, domain: &'d DomainState, parse_backtraces: bool) -> Event<'d> {
        let obj_id = ObjId::new(self.obj_id);
        match self.class {
            CLASS_PROMOTE => Event::Promote(obj_id, domain.id),
            CLASS_COLLECT => Event::Collect(obj_id, domain.id),
            _ => Event::Alloc(Alloc {
                obj_id,
                length: self.length,
                domain: domain.id,
                nsamples: self.nsamples,
                source: self.source,
                backtrace: if parse_backtraces {
                    Cow::Borrowed(&domain.backtrace[..])
                } else {
                    Cow::Borrowed(&[])
                },
                common_prefix: self.common_prefix,
            }),
        }
    }
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

    /// Decodes the event at `self.pos` into `out`; `Ok(false)` for a
    /// location event.
    #[inline(always)]
    fn decode_event<O: Output>(&mut self, out: &mut O) -> Result<bool, ReadError> {
        let start = self.pos;
        let mut c = Cursor {
            data: self.content,
            pos: start,
        };
        let eof = |c: &Cursor<'_>| at(ReadErrorKind::UnexpectedEof, c.pos);
        let word = c.u32().map_err(|_| eof(&c))?;
        let time = self.clock.event_time(word);
        // `event_time` never yields a time before `time_begin`.
        if time > self.time_end {
            return Err(at(ReadErrorKind::TimeOutOfPacketBounds, start));
        }
        let code = event_code(word);
        let class = EVENT_CLASS[usize::from(code)];
        if class == CLASS_UNKNOWN {
            return Err(at(ReadErrorKind::UnknownEventCode(code), start));
        }
        debug_assert!(self.domain < self.state.domains.len());
        // SAFETY: an event is decoded only inside a packet (see
        // `current_domain`).
        let state = unsafe { self.state.domains.get_unchecked_mut(self.domain) };
        if state.last_time > time {
            return Err(at(ReadErrorKind::TimestampsNotMonotone, start));
        }
        state.last_time = time;
        match class {
            CLASS_SHORT_ALLOC | CLASS_ALLOC => {
                let (length, nsamples, source);
                if class == CLASS_SHORT_ALLOC {
                    length = u64::from(code - EV_SHORT_ALLOC_BASE);
                    nsamples = 1;
                    source = AllocationSource::Minor;
                } else {
                    let length_v = c.vint().map_err(|_| eof(&c))?;
                    let nsamples_v = c.vint().map_err(|_| eof(&c))?;
                    let s = c.u8().map_err(|_| eof(&c))?;
                    source = match s {
                        0 => AllocationSource::Minor,
                        1 => AllocationSource::Major,
                        2 => AllocationSource::External,
                        _ => return Err(at(ReadErrorKind::BadAllocationSource(s), c.pos - 1)),
                    };
                    let range = |v: i64| {
                        u64::try_from(v).map_err(|_| at(ReadErrorKind::ValueOutOfRange, start))
                    };
                    length = range(length_v)?;
                    nsamples = range(nsamples_v)?;
                }
                let (nencoded, common_prefix);
                match c.data.get(c.pos..).and_then(<[u8]>::first_chunk::<2>) {
                    // The usual short alloc: a one-byte common prefix and count.
                    Some(&[prefix @ 0..=252, count]) if class == CLASS_SHORT_ALLOC => {
                        c.pos += 2;
                        common_prefix = usize::from(prefix);
                        nencoded = usize::from(count);
                    }
                    _ => {
                        let v = c.vint().map_err(|_| eof(&c))?;
                        common_prefix = usize::try_from(v)
                            .map_err(|_| at(ReadErrorKind::ValueOutOfRange, start))?;
                        nencoded = if class == CLASS_SHORT_ALLOC {
                            c.u8().map(usize::from)
                        } else {
                            c.u16().map(usize::from)
                        }
                        .map_err(|_| eof(&c))?;
                    }
                }
                if self.parse_backtraces {
                    let cache = state
                        .cache
                        .get_or_insert_with(|| Box::new(BacktraceCache::new()));
                    cache
                        .read_backtrace(
                            &mut c,
                            nencoded,
                            common_prefix,
                            &mut state.backtrace,
                            &mut self.state.backtrace_budget,
                        )
                        .map_err(|e| match e {
                            BtError::Eof => eof(&c),
                            BtError::TooLong => at(ReadErrorKind::BacktraceTooLong, start),
                        })?;
                } else {
                    skip_backtrace(&mut c, nencoded).map_err(|_| eof(&c))?;
                }
                if self.alloc_id < 0 {
                    return Err(at(ReadErrorKind::ValueOutOfRange, start));
                }
                let obj_id = self.alloc_id as u64;
                self.alloc_id += 1;
                self.pos = c.pos;
                let e = RawEvent {
                    class: CLASS_ALLOC,
                    source,
                    time,
                    obj_id,
                    length,
                    nsamples,
                    common_prefix,
                };
                out.event(&e, state, self.locations);
            }
            CLASS_PROMOTE | CLASS_COLLECT => {
                let delta = c.vint().map_err(|_| eof(&c))?;
                if class == CLASS_PROMOTE && delta < 0 {
                    return Err(at(ReadErrorKind::PromoteIdSync, start));
                }
                let id = self.alloc_id.wrapping_sub(1).wrapping_sub(delta);
                let obj_id =
                    u64::try_from(id).map_err(|_| at(ReadErrorKind::ValueOutOfRange, start))?;
                self.pos = c.pos;
                let e = RawEvent {
                    class,
                    time,
                    obj_id,
                    ..RawEvent::EMPTY
                };
                out.event(&e, state, self.locations);
            }
            CLASS_LOCATION => {
                self.pos = self.location_event(c.pos, start)?;
                return Ok(false);
            }
            _ => return Err(at(ReadErrorKind::MultipleTraceInfo, start)),
        }
        Ok(true)
    }

    /// Decodes the body of a location event at `pos` into the location
    /// table; returns the offset after it.
    #[inline(never)]
    fn location_event(&mut self, pos: usize, start: usize) -> Result<usize, ReadError> {
        let mut c = Cursor {
            data: self.content,
            pos,
        };
        let state = &mut self.state;
        let code = state.domains[self.domain]
            .locations
            .location_event(&mut c, &mut self.locations.names, &mut state.scratch_locs)
            .map_err(|e| match e {
                LocError::Eof => at(ReadErrorKind::UnexpectedEof, c.pos),
                LocError::Kind(k) => at(k, c.pos),
            })?;
        self.locations
            .insert(code, &mut state.scratch_locs)
            .map_err(|k| at(k, start))?;
        Ok(c.pos)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::format::EV_ALLOC;
    use crate::write::buf::{put_i64, put_u8, put_u16, put_vint};
    use crate::{Writer, synth::synth_info};

    /// A trace-info packet followed by one event packet with `content`.
    fn trace_with_packet(content: &[u8], alloc_ids: (i64, i64)) -> Vec<u8> {
        let info = synth_info();
        let mut out = Writer::new(Vec::new(), &info)
            .unwrap()
            .into_inner()
            .unwrap();
        let mut p = Vec::new();
        crate::write::packet::put_header(&mut p, 3, info.pid, 0, None);
        p.extend_from_slice(content);
        let t = info.start_time.as_micros();
        crate::write::packet::finish_header(&mut p, t, t, alloc_ids.0 as u64, alloc_ids.1 as u64);
        out.extend_from_slice(&p);
        out
    }

    #[test]
    fn prediction_runs_beyond_the_memory_bound_are_an_error() {
        // One alloc of 65535 codewords, each a hit followed by 255
        // predictions: 16.7M frames from 196 KB.
        let t = synth_info().start_time.as_micros();
        let mut c = Vec::new();
        crate::write::packet::put_event_header(&mut c, EV_ALLOC, t);
        put_vint(&mut c, 1);
        put_vint(&mut c, 1);
        put_u8(&mut c, 0);
        put_vint(&mut c, 0);
        put_u16(&mut c, 0xffff);
        for _ in 0..0xffff {
            put_u16(&mut c, 2);
            put_u8(&mut c, 255);
        }
        let trace = trace_with_packet(&c, (0, 1));
        let mut reader = Reader::from_bytes(&trace).unwrap();
        let err = reader.events(true).next_event().unwrap().unwrap_err();
        assert_eq!(err.kind, ReadErrorKind::BacktraceTooLong);
        // Without backtraces nothing is buffered, so the event decodes.
        let mut events = reader.events(false);
        assert!(events.next_event().unwrap().is_ok());
    }

    #[test]
    fn common_prefix_beyond_the_backtrace_repeats_it() {
        let t = synth_info().start_time.as_micros();
        let mut c = Vec::new();
        // Short alloc: common prefix 0, one miss.
        crate::write::packet::put_event_header(&mut c, EV_SHORT_ALLOC_BASE + 1, t);
        put_vint(&mut c, 0);
        put_u8(&mut c, 1);
        put_u16(&mut c, (5 << 2) | 3);
        put_i64(&mut c, 77);
        // Then common prefix 9 > 1: the previous backtrace comes back.
        crate::write::packet::put_event_header(&mut c, EV_SHORT_ALLOC_BASE + 1, t);
        put_vint(&mut c, 9);
        put_u8(&mut c, 1);
        put_u16(&mut c, (6 << 2) | 3);
        put_i64(&mut c, 78);
        let trace = trace_with_packet(&c, (0, 2));
        let mut reader = Reader::from_bytes(&trace).unwrap();
        let events: Vec<_> = reader
            .events(true)
            .owned()
            .collect::<Result<_, _>>()
            .unwrap();
        let Event::Alloc(b) = &events[1].1 else {
            panic!()
        };
        assert_eq!(b.common_prefix, 9);
        assert_eq!(&*b.backtrace, &[LocationCode::new(77)]);
    }

    #[test]
    fn negative_and_unknown_values_are_typed_errors() {
        let t = synth_info().start_time.as_micros();
        let cases: Vec<(Vec<u8>, ReadErrorKind)> = vec![
            (
                {
                    let mut c = Vec::new();
                    crate::write::packet::put_event_header(&mut c, 50, t);
                    c
                },
                ReadErrorKind::UnknownEventCode(50),
            ),
            (
                {
                    let mut c = Vec::new();
                    crate::write::packet::put_event_header(&mut c, EV_PROMOTE, t);
                    put_vint(&mut c, -1);
                    c
                },
                ReadErrorKind::PromoteIdSync,
            ),
            (
                {
                    let mut c = Vec::new();
                    crate::write::packet::put_event_header(&mut c, EV_ALLOC, t);
                    put_vint(&mut c, -5);
                    put_vint(&mut c, 1);
                    put_u8(&mut c, 0);
                    put_vint(&mut c, 0);
                    put_u16(&mut c, 0);
                    c
                },
                ReadErrorKind::ValueOutOfRange,
            ),
            (
                {
                    let mut c = Vec::new();
                    crate::write::packet::put_event_header(&mut c, EV_ALLOC, t);
                    put_vint(&mut c, 5);
                    put_vint(&mut c, 1);
                    put_u8(&mut c, 7);
                    c
                },
                ReadErrorKind::BadAllocationSource(7),
            ),
            (
                {
                    let mut c = Vec::new();
                    crate::write::packet::put_event_header(&mut c, EV_TRACE_INFO, t);
                    c
                },
                ReadErrorKind::MultipleTraceInfo,
            ),
        ];
        for (content, kind) in cases {
            let trace = trace_with_packet(&content, (0, 0));
            let mut reader = Reader::from_bytes(&trace).unwrap();
            let err = reader.events(true).next_event().unwrap().unwrap_err();
            assert_eq!(err.kind, kind);
            assert!(err.offset as usize >= trace.len() - content.len(), "{err}");
        }
    }
}
