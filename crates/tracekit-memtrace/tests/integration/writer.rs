//! Writer contracts: the backtrace-suffix variant, argument checks, shared
//! sinks, format v2 limits, clamped clocks.

#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use tracekit_memtrace::synth::{synth_info, synth_locations};
use tracekit_memtrace::*;

fn code(n: i64) -> LocationCode {
    LocationCode::new(0x5555_0000_0000 + n * 8)
}

fn events(trace: &[u8]) -> Vec<(i64, Event<'static>)> {
    let mut r = Reader::from_bytes(trace).unwrap();
    r.events(true)
        .owned()
        .map(|e| e.map(|(t, e)| (t.as_micros(), e)))
        .collect::<Result<_, _>>()
        .unwrap()
}

fn backtrace(e: &Event<'_>) -> Vec<LocationCode> {
    match e {
        Event::Alloc(a) => a.backtrace.to_vec(),
        _ => panic!("not an alloc"),
    }
}

#[test]
fn backtrace_suffix_drops_the_innermost_slots() {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let t = info.start_time;
    let stack = [code(9), code(8), code(3), code(2), code(1)]; // innermost first
    w.put_alloc_backtrace_suffix(t, 2, 1, AllocationSource::Minor, &stack, 2, synth_locations)
        .unwrap();
    // Same outer frames, different dropped ones: all of it is a common prefix.
    let other = [code(7), code(6), code(3), code(2), code(1)];
    w.put_alloc_backtrace_suffix(t, 2, 1, AllocationSource::Minor, &other, 2, synth_locations)
        .unwrap();
    // More slots dropped than there are: an empty backtrace, no panic.
    w.put_alloc_backtrace_suffix(
        t,
        2,
        1,
        AllocationSource::Minor,
        &stack,
        10,
        synth_locations,
    )
    .unwrap();
    let evs = events(&w.into_inner().unwrap());
    assert_eq!(backtrace(&evs[0].1), vec![code(1), code(2), code(3)]);
    assert_eq!(backtrace(&evs[1].1), vec![code(1), code(2), code(3)]);
    let Event::Alloc(a) = &evs[1].1 else { panic!() };
    assert_eq!(a.common_prefix, 3);
    assert!(backtrace(&evs[2].1).is_empty());
}

#[test]
fn out_of_range_values_are_rejected_before_writing() {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let t = info.start_time;
    let huge = 1u64 << 62;
    assert!(matches!(
        w.put_alloc(t, huge, 1, AllocationSource::Major, &[], synth_locations),
        Err(WriteError::ValueOutOfRange)
    ));
    assert!(matches!(
        w.put_alloc(t, 1, huge, AllocationSource::Major, &[], synth_locations),
        Err(WriteError::ValueOutOfRange)
    ));
    assert!(matches!(
        w.put_collect(t, ObjId::new(huge)),
        Err(WriteError::ValueOutOfRange)
    ));
    let id = w
        .put_alloc(
            t,
            huge - 1,
            3,
            AllocationSource::Major,
            &[],
            synth_locations,
        )
        .unwrap();
    assert_eq!(id, ObjId::new(0), "nothing was written or numbered before");
    let evs = events(&w.into_inner().unwrap());
    assert_eq!(evs.len(), 1);
    let Event::Alloc(a) = &evs[0].1 else { panic!() };
    assert_eq!((a.length, a.nsamples), (huge - 1, 3));
}

#[test]
fn a_clock_that_steps_back_is_clamped() {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let t = |us| info.start_time.offset(Timedelta::from_micros(us));
    let a = w
        .put_alloc(
            t(100),
            1,
            1,
            AllocationSource::Minor,
            &[code(1)],
            synth_locations,
        )
        .unwrap();
    w.put_collect(t(50), a).unwrap();
    // Before the start of the trace, too.
    w.put_alloc(
        t(-1000),
        1,
        1,
        AllocationSource::Minor,
        &[code(1)],
        synth_locations,
    )
    .unwrap();
    let evs = events(&w.into_inner().unwrap());
    let times: Vec<i64> = evs.iter().map(|e| e.0).collect();
    assert_eq!(times, vec![100, 100, 100]);
}

#[test]
fn put_event_checks_domain_order_and_ids() {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let t = info.start_time.offset(Timedelta::from_micros(10));
    let alloc = |id, domain| {
        Event::Alloc(Alloc {
            obj_id: ObjId::new(id),
            length: 1,
            domain,
            nsamples: 1,
            source: AllocationSource::Minor,
            backtrace: Cow::Borrowed(&[]),
            common_prefix: 0,
        })
    };
    assert!(matches!(
        w.put_event(synth_locations, t, &alloc(0, DomainId::new(1))),
        Err(WriteError::DomainMismatch)
    ));
    w.put_event(synth_locations, t, &alloc(0, DomainId::MAIN))
        .unwrap();
    assert!(matches!(
        w.put_event(synth_locations, info.start_time, &alloc(1, DomainId::MAIN)),
        Err(WriteError::TimestampOutOfOrder)
    ));
    assert!(matches!(
        w.put_event(synth_locations, t, &alloc(5, DomainId::MAIN)),
        Err(WriteError::IncorrectAllocationId {
            expected: 1,
            actual: 5
        })
    ));
}

/// A domain that began with the trace keeps its own times: its first
/// events, older than what the main writer wrote last, are not dated at it
/// (`for_domain` holds a new domain to the main writer's latest time).
#[test]
fn a_domain_since_the_start_keeps_its_own_times() {
    let info = synth_info();
    let at = |us: i64| info.start_time.offset(Timedelta::from_micros(us));
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    w.put_alloc(
        at(100),
        1,
        1,
        AllocationSource::Minor,
        &[code(1)],
        synth_locations,
    )
    .unwrap();
    let mut since = w
        .for_domain_since(DomainId::new(1), info.start_time)
        .unwrap();
    since
        .put_alloc(
            at(40),
            1,
            1,
            AllocationSource::Minor,
            &[code(2)],
            synth_locations,
        )
        .unwrap();
    let mut held = w.for_domain(DomainId::new(2)).unwrap();
    held.put_alloc(
        at(50),
        1,
        1,
        AllocationSource::Minor,
        &[code(3)],
        synth_locations,
    )
    .unwrap();
    since.flush().unwrap();
    held.flush().unwrap();
    drop((since, held));
    let trace = w.into_inner().unwrap();
    let mut times: Vec<(LocationCode, i64)> = events(&trace)
        .iter()
        .map(|(t, e)| (backtrace(e)[0], *t))
        .collect();
    times.sort();
    assert_eq!(times, [(code(1), 100), (code(2), 40), (code(3), 100)]);
}

#[test]
fn closing_one_domain_writer_closes_the_shared_sink() {
    let info = synth_info();
    let w = Writer::new(Vec::new(), &info).unwrap();
    let mut other = w.for_domain(DomainId::new(4)).unwrap();
    let t = info.start_time;
    other
        .put_alloc(
            t,
            1,
            1,
            AllocationSource::Minor,
            &[code(1)],
            synth_locations,
        )
        .unwrap();
    w.close().unwrap();
    assert!(matches!(other.flush(), Err(WriteError::Closed)));
    assert!(matches!(other.into_inner(), Err(WriteError::Closed)));
}

#[test]
fn format_v2_is_single_domain() {
    let info = synth_info();
    let opts = || WriterOptions::new().format_version(FormatVersion::V2);
    let w = Writer::with_options(Vec::new(), &info, opts()).unwrap();
    assert!(matches!(
        w.for_domain(DomainId::new(1)),
        Err(WriteError::UnsupportedByFormat(_))
    ));
    let mut other = info.clone();
    other.initial_domain = DomainId::new(3);
    assert!(matches!(
        Writer::with_options(Vec::new(), &other, opts()),
        Err(WriteError::UnsupportedByFormat(_))
    ));
    assert!(matches!(
        Writer::with_options(
            Vec::new(),
            &info,
            WriterOptions::new().format_version(FormatVersion::V1)
        ),
        Err(WriteError::UnsupportedByFormat(_))
    ));
    // v2 numbers objects without chunks: no flush at 10000 ids.
    let mut w = Writer::with_options(Vec::new(), &info, opts()).unwrap();
    for _ in 0..25_000 {
        w.put_alloc(
            info.start_time,
            1,
            1,
            AllocationSource::Minor,
            &[code(1)],
            synth_locations,
        )
        .unwrap();
    }
    let trace = w.into_inner().unwrap();
    let mut r = Reader::from_bytes(&trace).unwrap();
    assert_eq!(r.format_version(), FormatVersion::V2);
    let ids: Vec<u64> = r
        .events(false)
        .owned()
        .map(|e| e.unwrap().1.obj_id().get())
        .collect();
    assert_eq!(ids, (0..25_000).collect::<Vec<_>>());
}

#[test]
fn empty_writer_close_matches_the_reference_layout() {
    // Writer.create + close: the trace-info packet and one header-only packet.
    let info = synth_info();
    let mut shared = Vec::new();
    let w = Writer::new(&mut shared, &info).unwrap();
    w.close().unwrap();
    let r = Reader::from_bytes(&shared).unwrap();
    assert_eq!(r.info(), &info);
    let info_packet = (u32::from_le_bytes(shared[4..8].try_into().unwrap()) / 8) as usize;
    assert_eq!(shared.len() - info_packet, 68, "one v3 header, no events");
}
