//! Decoding the bodies of the events inside a packet: allocations (long and
//! short form), promotions and collections, and handing location events to
//! the location decoder. The encoder is [`crate::write`]'s `events` module;
//! the whole format is described in `docs/memtrace-format.md` at the
//! repository root, §4 "Event header and event codes", §7 "Allocation events"
//! and §8 "Promotions and collections".
//!
//! Every event starts with a 4-byte header word (see [`crate::format`]): the
//! event code in its top 7 bits, the low 25 bits of its time (µs) below.
//!
//! | code | event | body |
//! | --- | --- | --- |
//! | 0 | trace info | only as the one event of the first packet (see the `info` module); anywhere else an error |
//! | 1 | location | a location code and its source locations (see the `location` module) |
//! | 2 | allocation, long form | the table below |
//! | 3 | promotion to the major heap | vint `delta` |
//! | 4 | collection | vint `delta` |
//! | 101–116 | allocation, short form: `length = code − 100` words | the table below |
//! | any other | | an error |
//!
//! A vint is one tag byte and 0 to 8 more (see the `buf` module): 0–252
//! is the value itself, 253 a u16 follows, 254 an i32 (sign-extended), 255
//! an i64.
//!
//! **Allocation, long form** (code 2):
//!
//! | field | encoding | meaning |
//! | --- | --- | --- |
//! | length | vint | the block's size in words, header excluded; may be 0, must not be negative |
//! | nsamples | vint | samples this allocation stands for; must not be negative |
//! | source | u8 | 0 minor heap, 1 major heap, 2 external; other values are an error |
//! | common_prefix | vint | how many outermost frames are those of the previous allocation of the same domain; must not be negative |
//! | nencoded | u16 | number of backtrace codewords that follow (not frames: one codeword may stand for up to 256 frames) |
//! | codewords | 2 to 10 bytes each | the backtrace below the common prefix (see the `backtrace` module) |
//!
//! **Allocation, short form** (codes 101–116): the length is in the code,
//! `nsamples` is 1 and the source is minor.
//!
//! | field | encoding | meaning |
//! | --- | --- | --- |
//! | common_prefix | vint | as in the long form |
//! | nencoded | u8 | as in the long form |
//! | codewords | 2 to 10 bytes each | as in the long form |
//!
//! The reference writer uses the short form exactly when the length is 1 to
//! 16 words, the source minor, `nsamples` 1 and fewer than 256 frames are
//! coded (so that the count fits a byte).
//!
//! An allocation's object id is not written: it is the packet's running
//! counter, which starts at the header's `alloc_id_begin` and goes up by one
//! per allocation. At the end of the packet the counter must equal the
//! header's `alloc_id_end`.
//!
//! **Promotion and collection** (codes 3 and 4): one vint `delta`; the
//! object is `counter − 1 − delta`, with the counter as it stands at this
//! event (so 0 means the packet's latest allocation). A promotion's delta
//! must not be negative. A collection's may be: in v3 a domain can collect
//! an object allocated by another domain with higher ids. The resulting id
//! must not be negative.
//!
//! **Times.** The event's time is rebuilt from its 25 low bits and the
//! packet's `time_begin` (the `packet` module). It must not be after the
//! packet's `time_end`, nor before the previous event of the same domain
//! (the first event of a domain is compared with the trace's start time).

use std::borrow::Cow;

use super::backtrace::{BacktraceCache, BtError, skip_backtrace};
use super::buf::Cursor;
use super::location::LocError;
use super::packet::event_code;
use super::{DomainState, Events, Output, at};
use crate::error::{ReadError, ReadErrorKind};
use crate::event::{Alloc, Event};
use crate::format::{
    EV_ALLOC, EV_COLLECT, EV_LOCATION, EV_PROMOTE, EV_SHORT_ALLOC_BASE, EV_TRACE_INFO,
};
use crate::types::{AllocationSource, ObjId};

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
pub(super) struct RawEvent {
    pub(super) class: u8,
    pub(super) source: AllocationSource,
    pub(super) time: i64,
    pub(super) obj_id: u64,
    pub(super) length: u64,
    pub(super) nsamples: u64,
    pub(super) common_prefix: usize,
}

impl RawEvent {
    pub(super) const EMPTY: RawEvent = RawEvent {
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
    pub(super) fn to_event<'d>(self, domain: &'d DomainState, parse_backtraces: bool) -> Event<'d> {
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

impl Events<'_> {
    /// Decodes the event at `self.pos` into `out`; `Ok(false)` for a
    /// location event.
    #[inline(always)]
    pub(super) fn decode_event<O: Output>(&mut self, out: &mut O) -> Result<bool, ReadError> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::LocationCode;
    use crate::write::buf::{put_i64, put_u8, put_u16, put_vint};
    use crate::{Reader, Writer, synth::synth_info};

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
