//! Writing traces (OCaml `Trace.Writer`), byte for byte as the reference
//! writer does for the same events.
//!
//! A [`Writer`] encodes the events of one domain into a 32 KiB packet
//! buffer and writes a packet when the buffer is nearly full, when more than
//! 128 new locations are pending, when the packet would span more than 30 s,
//! when its chunk of object ids is used up, and on [`Writer::flush`]. Before
//! each event packet it writes the location packets for the codes that the
//! packet's backtraces use for the first time. So a process that dies loses
//! at most the packet being filled.
//!
//! Writers for several domains share one sink ([`Writer::for_domain`]);
//! [`MultiplexedDomains`] switches between them for a stream of events from
//! any domain, as memtrace's own trace copier does.
//!
//! This module decides when packets are written and hands out object ids:
//! `docs/memtrace-format.md` (at the repository root), §2, §10 and §11. Each
//! part of a packet is encoded by the submodule of the same name as its
//! decoder in [`crate::read`]: `packet`, `info`, `events`, `location`,
//! `backtrace` and `buf`.

mod backtrace;
pub(crate) mod buf;
mod events;
mod info;
mod location;
pub(crate) mod packet;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::WriteError;
use crate::event::Event;
use crate::format::{
    EV_COLLECT, EV_LOCATION, EV_PROMOTE, LOCATION_MAX_LENGTH, MAX_EVENT_SIZE, MAX_PACKET_SIZE,
    OCAML_MAX_INT, PACKET_MAX_TIME,
};
use crate::types::{
    AllocationSource, DomainId, FormatVersion, Info, Location, LocationCode, ObjId, Timestamp,
};
use backtrace::BacktraceEncoder;
#[cfg(feature = "read")]
use buf::put_vint;
use info::trace_info_packet;
use location::LocationEncoder;
pub use location::location_list_fits;
use packet::{finish_header, put_event_header, put_header};
use rustc_hash::FxHashMap;

/// A function returning the current process id; see [`WriterOptions::getpid`].
pub type GetPid = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Options for [`Writer::with_options`].
#[derive(Clone)]
pub struct WriterOptions {
    format_version: FormatVersion,
    getpid: Option<GetPid>,
    obj_ids_per_chunk: u64,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            format_version: FormatVersion::V3,
            getpid: None,
            obj_ids_per_chunk: 10_000,
        }
    }
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("format_version", &self.format_version)
            .field("getpid", &self.getpid.is_some())
            .field("obj_ids_per_chunk", &self.obj_ids_per_chunk)
            .finish()
    }
}

impl WriterOptions {
    /// The defaults: format v3, no pid check, chunks of 10000 object ids.
    pub fn new() -> WriterOptions {
        WriterOptions::default()
    }

    /// The format to write. [`FormatVersion::V3`] (the default) is what
    /// current memtrace writes; [`FormatVersion::V2`] writes single-domain
    /// traces that memtrace 0.2.x and older memtrace_viewer builds read.
    pub fn format_version(mut self, version: FormatVersion) -> WriterOptions {
        self.format_version = version;
        self
    }

    /// A function returning the current pid. The writer calls it before
    /// writing each packet; when the value differs from its value at creation
    /// (the process forked), it writes nothing and fails with
    /// [`WriteError::PidChanged`]. Without it the pid is `Info::pid` and never
    /// checked.
    pub fn getpid(mut self, getpid: impl Fn() -> i64 + Send + Sync + 'static) -> WriterOptions {
        self.getpid = Some(Arc::new(getpid));
        self
    }

    /// How many object ids a v3 domain writer takes at a time (OCaml
    /// `Private.obj_ids_per_chunk`, 10000); a packet never spans two chunks.
    pub fn obj_ids_per_chunk(mut self, n: u64) -> WriterOptions {
        self.obj_ids_per_chunk = n.max(1);
        self
    }
}

struct Sink<W> {
    out: W,
    closed: bool,
}

/// What the writers of all domains of one trace share.
struct Shared<W> {
    sink: Mutex<Sink<W>>,
    /// Start of the next unallocated chunk of object ids.
    next_chunk: AtomicU64,
}

/// The object ids of one domain writer: it takes a chunk from the shared
/// counter when the current chunk is used up.
#[derive(Clone, Copy, Debug)]
struct IdAllocator {
    /// First id of the current packet.
    start: u64,
    next: u64,
    /// End of the current chunk.
    last: u64,
    chunk: u64,
}

impl IdAllocator {
    fn has_next(&self) -> bool {
        self.next < self.last
    }

    fn new_packet(&mut self, counter: &AtomicU64) {
        if !self.has_next() {
            self.next = counter.fetch_add(self.chunk, Ordering::Relaxed);
            self.last = self.next.saturating_add(self.chunk);
        }
        self.start = self.next;
    }
}

/// A trace writer for one domain.
///
/// Events are encoded into a 32 KiB packet, written when it is nearly full,
/// when more than 128 new locations are pending, when it would span more than
/// 30 s, when its chunk of object ids is used up, and on [`Writer::flush`];
/// the location packets its backtraces need go out just before it. A process
/// that dies loses at most the packet being filled. For the same events the
/// bytes are those of OCaml memtrace's writer.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use tracekit_memtrace::*;
/// let info = Info {
///     sample_rate: 1e-4,
///     word_size: 64,
///     executable_name: "prog".into(),
///     host_name: "host".into(),
///     ocaml_runtime_params: "".into(),
///     pid: 1234,
///     initial_domain: DomainId::MAIN,
///     start_time: Timestamp::from_micros(1_700_000_000_000_000),
///     context: None,
/// };
/// let mut out = Vec::new();
/// let mut w = Writer::new(&mut out, &info)?;
/// let loc = |code: LocationCode| vec![Location {
///     filename: "main.ml".into(), line: code.get() as u32, start_char: 1, end_char: 9,
///     defname: "Main.f".into(),
/// }];
/// // Call stacks are innermost frame first.
/// let stack = [LocationCode::new(3), LocationCode::new(2), LocationCode::new(1)];
/// let t = info.start_time.offset(Timedelta::from_micros(10));
/// let id = w.put_alloc(t, 4, 1, AllocationSource::Minor, &stack, loc)?;
/// w.put_collect(t, id)?;
/// w.close()?;
/// let mut reader = Reader::from_bytes(&out)?;
/// assert_eq!(reader.events(true).owned().count(), 2);
/// # Ok(()) }
/// ```
pub struct Writer<W: Write> {
    shared: Arc<Shared<W>>,
    version: FormatVersion,
    pid: i64,
    getpid: Option<GetPid>,
    domain: DomainId,
    locations: LocationEncoder,
    cache: Box<BacktraceEncoder>,
    /// Encoded bodies of the location events due before the next event packet.
    pending_locs: Vec<u8>,
    pending_loc_ends: Vec<usize>,
    last_callstack: Vec<LocationCode>,
    last_dropped_slots: usize,
    ids: IdAllocator,
    packet_time_start: i64,
    packet_time_end: i64,
    packet: Vec<u8>,
    header_len: usize,
    location_packet: Vec<u8>,
    reversed: Vec<LocationCode>,
    /// Whether code 0's locations have been sent (only `put_event_exact`
    /// sends them).
    zero_sent: bool,
    closed: bool,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("version", &self.version)
            .field("domain", &self.domain)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn lock<W>(shared: &Shared<W>) -> Result<MutexGuard<'_, Sink<W>>, WriteError> {
    shared
        .sink
        .lock()
        .map_err(|_| WriteError::Io(std::io::Error::other("trace sink poisoned by a panic")))
}

impl<W: Write> Writer<W> {
    /// A writer of a v3 trace to `out`; writes the trace-info packet at once.
    pub fn new(out: W, info: &Info) -> Result<Writer<W>, WriteError> {
        Writer::with_options(out, info, WriterOptions::default())
    }

    /// A writer with [`WriterOptions`].
    pub fn with_options(
        mut out: W,
        info: &Info,
        options: WriterOptions,
    ) -> Result<Writer<W>, WriteError> {
        let version = options.format_version;
        match version {
            FormatVersion::V3 => {}
            FormatVersion::V2 if info.initial_domain == DomainId::MAIN => {}
            _ => return Err(WriteError::UnsupportedByFormat(version)),
        }
        let pid = match &options.getpid {
            Some(getpid) => getpid(),
            None => info.pid,
        };
        let start = info.start_time.as_micros();
        let b = trace_info_packet(version, pid, info);
        out.write_all(&b)?;
        out.flush()?;
        let shared = Arc::new(Shared {
            sink: Mutex::new(Sink { out, closed: false }),
            next_chunk: AtomicU64::new(0),
        });
        let chunk = match version {
            // Format v2 writers number objects with one unbroken counter.
            FormatVersion::V2 => OCAML_MAX_INT as u64 + 1,
            _ => options.obj_ids_per_chunk,
        };
        Ok(Writer::for_domain_at(
            shared,
            version,
            pid,
            options.getpid,
            info.initial_domain,
            chunk,
            start,
        ))
    }

    fn for_domain_at(
        shared: Arc<Shared<W>>,
        version: FormatVersion,
        pid: i64,
        getpid: Option<GetPid>,
        domain: DomainId,
        chunk: u64,
        start_time: i64,
    ) -> Writer<W> {
        let mut ids = IdAllocator {
            start: 0,
            next: 0,
            last: 0,
            chunk,
        };
        ids.new_packet(&shared.next_chunk);
        let mut packet = Vec::with_capacity(MAX_PACKET_SIZE);
        put_header(&mut packet, version.number(), pid, domain.get(), None);
        let header_len = packet.len();
        Writer {
            shared,
            version,
            pid,
            getpid,
            domain,
            locations: LocationEncoder::default(),
            cache: Box::new(BacktraceEncoder::new()),
            pending_locs: Vec::new(),
            pending_loc_ends: Vec::new(),
            last_callstack: Vec::new(),
            last_dropped_slots: 0,
            ids,
            packet_time_start: start_time,
            packet_time_end: start_time,
            packet,
            header_len,
            location_packet: Vec::with_capacity(MAX_PACKET_SIZE),
            reversed: Vec::new(),
            zero_sent: false,
            closed: false,
        }
    }

    /// The domain this writer writes events for.
    pub fn domain(&self) -> DomainId {
        self.domain
    }

    /// The format this writer writes.
    pub fn format_version(&self) -> FormatVersion {
        self.version
    }

    /// A writer for events of `domain`, sharing this writer's sink and object
    /// id counter, with its own packets and encoder state (format v3 only).
    pub fn for_domain(&self, domain: DomainId) -> Result<Writer<W>, WriteError> {
        self.for_domain_from(domain, self.packet_time_end)
    }

    /// A writer for events of `domain` from time `since` on (the trace's start
    /// for a domain that began with it), as [`for_domain`](Self::for_domain)
    /// otherwise: its events are not held to this writer's latest time, which
    /// may be later than the new domain's first events.
    pub fn for_domain_since(
        &self,
        domain: DomainId,
        since: Timestamp,
    ) -> Result<Writer<W>, WriteError> {
        self.for_domain_from(domain, since.as_micros())
    }

    fn for_domain_from(&self, domain: DomainId, start_time: i64) -> Result<Writer<W>, WriteError> {
        if self.version != FormatVersion::V3 {
            return Err(WriteError::UnsupportedByFormat(self.version));
        }
        Ok(Writer::for_domain_at(
            Arc::clone(&self.shared),
            self.version,
            self.pid,
            self.getpid.clone(),
            domain,
            self.ids.chunk,
            start_time,
        ))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Sink<W>>, WriteError> {
        lock(&self.shared)
    }

    /// Writes the pending location packets and the event packet, and starts
    /// a new packet at `now`.
    fn flush_at(&mut self, now: i64) -> Result<(), WriteError> {
        if let Some(getpid) = &self.getpid
            && getpid() != self.pid
        {
            return Err(WriteError::PidChanged);
        }
        let version = self.version.number();
        let domain = self.domain.get();
        let start = self.packet_time_start;
        {
            let mut sink = lock(&self.shared)?;
            if sink.closed {
                return Err(WriteError::Closed);
            }
            let mut body_start = 0;
            let mut i = 0;
            let b = &mut self.location_packet;
            while i < self.pending_loc_ends.len() {
                b.clear();
                put_header(b, version, self.pid, domain, None);
                // Saturating: a location event written whole (see
                // `put_event_exact`) may fill a packet past its size.
                while i < self.pending_loc_ends.len()
                    && MAX_PACKET_SIZE.saturating_sub(b.len()) > LOCATION_MAX_LENGTH
                {
                    put_event_header(b, EV_LOCATION, start);
                    let end = self.pending_loc_ends[i];
                    b.extend_from_slice(&self.pending_locs[body_start..end]);
                    body_start = end;
                    i += 1;
                }
                finish_header(b, start, start, self.ids.start, self.ids.start);
                sink.out.write_all(b)?;
            }
            finish_header(
                &mut self.packet,
                start,
                self.packet_time_end,
                self.ids.start,
                self.ids.next,
            );
            sink.out.write_all(&self.packet)?;
            sink.out.flush()?;
        }
        self.packet_time_start = now;
        self.packet_time_end = now;
        self.pending_locs.clear();
        self.pending_loc_ends.clear();
        self.packet.clear();
        self.ids.new_packet(&self.shared.next_chunk);
        put_header(
            &mut self.packet,
            version,
            self.pid,
            domain,
            Some(&mut self.cache),
        );
        Ok(())
    }

    /// Whether an event at `now` must start a new packet; `EXACT` for
    /// [`Writer::put_event_exact`] (a constant, so that the tracer's path
    /// carries none of its checks).
    fn must_flush_before<const EXACT: bool>(&self, now: i64) -> bool {
        let too_long = now.saturating_sub(self.packet_time_start) > PACKET_MAX_TIME;
        if EXACT && self.ids.next > OCAML_MAX_INT as u64 {
            // A reader takes a packet's first object id as an OCaml int, so
            // no packet can start at this one: the packet goes on, however
            // large, unless its time span would become ambiguous.
            return too_long;
        }
        // An event written whole may fill a packet past its size; any other
        // event is at most `MAX_EVENT_SIZE`, which this keeps free.
        let free = if EXACT {
            MAX_PACKET_SIZE.saturating_sub(self.packet.len())
        } else {
            MAX_PACKET_SIZE - self.packet.len()
        };
        free < MAX_EVENT_SIZE
            || self.pending_loc_ends.len() > 128
            || too_long
            || !self.ids.has_next()
    }

    /// Flushes if an event at `now` must start a new packet.
    fn flush_if_needed<const EXACT: bool>(&mut self, now: i64) -> Result<(), WriteError> {
        if self.must_flush_before::<EXACT>(now) {
            if EXACT && self.ids.next > OCAML_MAX_INT as u64 {
                return Err(WriteError::NotReproducible(
                    "object ids beyond OCaml's max_int in a packet spanning more than 30 s",
                ));
            }
            self.flush_at(now)?;
        }
        Ok(())
    }

    /// Flushes if the event at `now` must start a new packet, then writes its
    /// event header.
    fn begin_event<const EXACT: bool>(&mut self, code: u8, now: i64) -> Result<(), WriteError> {
        self.flush_if_needed::<EXACT>(now)?;
        self.packet_time_end = now;
        put_event_header(&mut self.packet, code, now);
        Ok(())
    }

    /// A trace cannot go back in time: an event earlier than the previous one
    /// (a wall clock stepped back) is recorded at the previous one's time.
    fn clamp_time(&self, time: Timestamp) -> i64 {
        time.as_micros().max(self.packet_time_end)
    }

    /// Writes an allocation and returns its object id.
    ///
    /// `callstack` is the allocation's backtrace **innermost frame first**
    /// (as OCaml's raw backtraces are); `decode` gives the source locations of
    /// a code the first time the writer sends it (and again after the
    /// backtrace cache evicted it). Lengths and sample counts are limited to
    /// OCaml's `max_int`.
    pub fn put_alloc<L: AsRef<[Location]>>(
        &mut self,
        time: Timestamp,
        length: u64,
        nsamples: u64,
        source: AllocationSource,
        callstack: &[LocationCode],
        decode: impl FnMut(LocationCode) -> L,
    ) -> Result<ObjId, WriteError> {
        let now = self.clamp_time(time);
        self.alloc(now, length, nsamples, source, callstack, 0, decode)
    }

    /// Like [`Writer::put_alloc`], leaving out the first `drop_slots`
    /// (innermost) entries of `callstack`, as OCaml's
    /// `put_alloc_backtrace_suffix` does for the tracer's own frames.
    #[allow(clippy::too_many_arguments)]
    pub fn put_alloc_backtrace_suffix<L: AsRef<[Location]>>(
        &mut self,
        time: Timestamp,
        length: u64,
        nsamples: u64,
        source: AllocationSource,
        callstack: &[LocationCode],
        drop_slots: usize,
        decode: impl FnMut(LocationCode) -> L,
    ) -> Result<ObjId, WriteError> {
        let now = self.clamp_time(time);
        self.alloc(now, length, nsamples, source, callstack, drop_slots, decode)
    }

    /// Writes that object `id` was collected.
    pub fn put_collect(&mut self, time: Timestamp, id: ObjId) -> Result<(), WriteError> {
        let now = self.clamp_time(time);
        self.promote_or_collect(EV_COLLECT, now, id)
    }

    /// Writes that object `id` was promoted to the major heap.
    pub fn put_promote(&mut self, time: Timestamp, id: ObjId) -> Result<(), WriteError> {
        let now = self.clamp_time(time);
        self.promote_or_collect(EV_PROMOTE, now, id)
    }

    /// The event's time in µs, once it is known to be this writer's domain's
    /// and not earlier than what was written.
    fn check_event(&self, time: Timestamp, event: &Event<'_>) -> Result<i64, WriteError> {
        if event.domain() != self.domain {
            return Err(WriteError::DomainMismatch);
        }
        let now = time.as_micros();
        if now < self.packet_time_end {
            return Err(WriteError::TimestampOutOfOrder);
        }
        Ok(now)
    }

    /// Writes an event as read from a trace. Its domain must be this
    /// writer's, its time must not be earlier than the previous event's, and
    /// an allocation's id must be the one the writer assigns (see
    /// [`MultiplexedDomains::next_alloc_id`]). The backtrace is caller first,
    /// as the reader gives it.
    pub fn put_event<L: AsRef<[Location]>>(
        &mut self,
        decode: impl FnMut(LocationCode) -> L,
        time: Timestamp,
        event: &Event<'_>,
    ) -> Result<(), WriteError> {
        let now = self.check_event(time, event)?;
        match event {
            Event::Alloc(a) => {
                let mut reversed = std::mem::take(&mut self.reversed);
                reversed.clear();
                reversed.extend(a.backtrace.iter().rev());
                let result = self.alloc(now, a.length, a.nsamples, a.source, &reversed, 0, decode);
                self.reversed = reversed;
                let id = result?;
                if id != a.obj_id {
                    return Err(WriteError::IncorrectAllocationId {
                        expected: id.get(),
                        actual: a.obj_id.get(),
                    });
                }
                Ok(())
            }
            Event::Promote(id, _) => self.promote_or_collect(EV_PROMOTE, now, *id),
            Event::Collect(id, _) => self.promote_or_collect(EV_COLLECT, now, *id),
        }
    }

    /// Writes `event`, as decoded from a trace by a reader, so that a reader
    /// decodes exactly the same event from the output: the same object id,
    /// time, stored common prefix and backtrace (the copy of a trace, see
    /// [`copy_trace`](crate::copy_trace)). Where the output cannot say the
    /// same with this writer's own choices, it says it otherwise:
    ///
    /// * an object id other than the next one starts a new packet whose
    ///   header starts its ids there (after a skipped packet, say);
    /// * so does a promote of an object at or above the next id, and a
    ///   collect whose delta would be out of range;
    /// * the backtrace is coded after the stored common prefix (which a
    ///   damaged trace may have shorter than the prefix actually shared, or
    ///   longer than the previous backtrace, which then repeats), and never
    ///   truncated;
    /// * location lists are written whole, however long their names, and
    ///   code 0 (which the reference writer never sends) is sent.
    ///
    /// For the events of a trace that the reference writer wrote event by
    /// event, with no truncated backtrace, none of this happens and the bytes
    /// are those of [`Writer::put_event`] (the corpus tests check this on the
    /// reference's own copy). Every allocation of this writer must go through
    /// here: the encoding relies on the reader holding exactly the previous
    /// backtrace.
    #[cfg(feature = "read")]
    pub(crate) fn put_event_exact<L: AsRef<[Location]>>(
        &mut self,
        decode: impl FnMut(LocationCode) -> L,
        time: Timestamp,
        event: &Event<'_>,
    ) -> Result<(), WriteError> {
        let now = self.check_event(time, event)?;
        // Any new packet first, so that the ids below are the packet's.
        self.flush_if_needed::<true>(now)?;
        match event {
            Event::Alloc(a) => {
                self.start_ids_at(now, a.obj_id.get(), |next| next == a.obj_id.get())?;
                let mut reversed = std::mem::take(&mut self.reversed);
                reversed.clear();
                reversed.extend(a.backtrace.iter().rev());
                let result = self.alloc_exact(now, a, &reversed, decode);
                self.reversed = reversed;
                result
            }
            Event::Promote(id, _) | Event::Collect(id, _) => {
                let promote = matches!(event, Event::Promote(..));
                let id = i128::from(id.get());
                // A reader takes `next - 1 - delta`, `delta` an OCaml int
                // (non-negative for a promote).
                let delta_of = |next: u64| i128::from(next) - 1 - id;
                let fits = |next: u64| {
                    let delta = delta_of(next);
                    delta >= if promote { 0 } else { -(1 << 62) } && delta < 1 << 62
                };
                // Otherwise: a packet whose ids start just above the object
                // (delta 0), or as high as a packet header can start them.
                let start = (id + 1).min(i128::from(OCAML_MAX_INT)) as u64;
                self.start_ids_at(now, start, fits)?;
                let code = if promote { EV_PROMOTE } else { EV_COLLECT };
                // No new packet here: the one needed was started above.
                self.begin_event::<true>(code, now)?;
                debug_assert!(fits(self.ids.next));
                put_vint(&mut self.packet, delta_of(self.ids.next) as i64);
                Ok(())
            }
        }
    }

    /// Unless `next_ok` accepts the next object id, starts a new packet
    /// (writing the current one, if it holds events) whose ids start at
    /// `start`.
    #[cfg(feature = "read")]
    fn start_ids_at(
        &mut self,
        now: i64,
        start: u64,
        next_ok: impl Fn(u64) -> bool,
    ) -> Result<(), WriteError> {
        if next_ok(self.ids.next) {
            return Ok(());
        }
        // A reader takes a packet's first id as an OCaml int.
        if start > OCAML_MAX_INT as u64 || !next_ok(start) {
            return Err(WriteError::NotReproducible(
                "an object id a packet header cannot start",
            ));
        }
        if self.is_dirty() {
            self.flush_at(now)?;
        }
        self.ids.start = start;
        self.ids.next = start;
        self.ids.last = start.saturating_add(self.ids.chunk);
        Ok(())
    }

    /// Writes the buffered events (as one packet, possibly empty, preceded by
    /// any location packets). More events may follow.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        self.flush_at(self.packet_time_end)
    }

    /// Flushes, then closes the sink for every writer sharing it (later
    /// writes by them fail with [`WriteError::Closed`]), flushing it too.
    pub fn close(mut self) -> Result<(), WriteError> {
        self.flush()?;
        self.closed = true;
        let mut sink = self.lock()?;
        sink.closed = true;
        sink.out.flush()?;
        Ok(())
    }

    /// Writes any buffered events and returns the sink. Fails with
    /// [`WriteError::SinkShared`] if writers for other domains still share it.
    pub fn into_inner(mut self) -> Result<W, WriteError> {
        if self.is_dirty() {
            self.flush()?;
        }
        self.closed = true;
        let shared = Arc::clone(&self.shared);
        drop(self);
        match Arc::try_unwrap(shared) {
            Ok(shared) => match shared.sink.into_inner() {
                Ok(sink) => Ok(sink.out),
                Err(p) => Ok(p.into_inner().out),
            },
            Err(_) => Err(WriteError::SinkShared),
        }
    }

    fn is_dirty(&self) -> bool {
        self.packet.len() > self.header_len || !self.pending_loc_ends.is_empty()
    }
}

/// A writer dropped with buffered events flushes them (ignoring errors), so
/// that a trace is not cut short by a forgotten [`Writer::close`]. A writer
/// with nothing buffered writes nothing.
impl<W: Write> Drop for Writer<W> {
    fn drop(&mut self) {
        if !self.closed && self.is_dirty() {
            let _ = self.flush();
        }
    }
}

/// Writers for several domains of one trace, multiplexed into one stream
/// (OCaml `Writer.Multiplexed_domains`): each event goes to its domain's
/// writer, and the previous domain's writer is flushed whenever the domain
/// changes, so that every domain's packets stay in order in the file.
pub struct MultiplexedDomains<W: Write> {
    last_domain: DomainId,
    writers: FxHashMap<u16, Writer<W>>,
    start_time: i64,
}

impl<W: Write> std::fmt::Debug for MultiplexedDomains<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiplexedDomains")
            .field("last_domain", &self.last_domain)
            .field("domains", &self.writers.len())
            .finish_non_exhaustive()
    }
}

impl<W: Write> MultiplexedDomains<W> {
    /// A multiplexed v3 writer to `out`; writes the trace-info packet at once.
    pub fn new(out: W, info: &Info) -> Result<MultiplexedDomains<W>, WriteError> {
        MultiplexedDomains::with_options(out, info, WriterOptions::default())
    }

    /// A multiplexed writer with [`WriterOptions`]. With format v2 every event
    /// must be of the main domain.
    pub fn with_options(
        out: W,
        info: &Info,
        options: WriterOptions,
    ) -> Result<MultiplexedDomains<W>, WriteError> {
        let w = Writer::with_options(out, info, options)?;
        let domain = w.domain();
        let mut writers = FxHashMap::default();
        writers.insert(domain.get(), w);
        Ok(MultiplexedDomains {
            last_domain: domain,
            writers,
            start_time: info.start_time.as_micros(),
        })
    }

    fn writer_for_domain(&mut self, domain: DomainId) -> Result<&mut Writer<W>, WriteError> {
        if domain != self.last_domain {
            let last = self
                .writers
                .get_mut(&self.last_domain.get())
                .ok_or(WriteError::DomainMismatch)?;
            last.flush()?;
            let new = if self.writers.contains_key(&domain.get()) {
                None
            } else {
                let last = self
                    .writers
                    .get(&self.last_domain.get())
                    .ok_or(WriteError::DomainMismatch)?;
                Some(last.for_domain_from(domain, self.start_time)?)
            };
            if let Some(w) = new {
                self.writers.insert(domain.get(), w);
            }
            self.last_domain = domain;
        }
        self.writers
            .get_mut(&domain.get())
            .ok_or(WriteError::DomainMismatch)
    }

    /// The id the next allocation of `domain` will get.
    pub fn next_alloc_id(&mut self, domain: DomainId) -> Result<ObjId, WriteError> {
        let w = self.writer_for_domain(domain)?;
        if !w.ids.has_next() {
            w.flush()?;
        }
        Ok(ObjId::new(w.ids.next))
    }

    /// Writes `event` with its domain's writer; see [`Writer::put_event`].
    pub fn put_event<L: AsRef<[Location]>>(
        &mut self,
        decode: impl FnMut(LocationCode) -> L,
        time: Timestamp,
        event: &Event<'_>,
    ) -> Result<(), WriteError> {
        self.writer_for_domain(event.domain())?
            .put_event(decode, time, event)
    }

    /// Writes `event` with its domain's writer so that it reads back exactly;
    /// see [`Writer::put_event_exact`].
    #[cfg(feature = "read")]
    pub(crate) fn put_event_exact<L: AsRef<[Location]>>(
        &mut self,
        decode: impl FnMut(LocationCode) -> L,
        time: Timestamp,
        event: &Event<'_>,
    ) -> Result<(), WriteError> {
        self.writer_for_domain(event.domain())?
            .put_event_exact(decode, time, event)
    }

    /// Flushes the writer of the last domain written to (the others are
    /// already flushed).
    pub fn flush(&mut self) -> Result<(), WriteError> {
        match self.writers.get_mut(&self.last_domain.get()) {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }

    /// Writes any buffered events and returns the sink.
    pub fn into_inner(mut self) -> Result<W, WriteError> {
        let last = self
            .writers
            .remove(&self.last_domain.get())
            .ok_or(WriteError::DomainMismatch)?;
        self.writers.clear();
        last.into_inner()
    }
}
