//! Any bytes given to the memtrace reader: no panic, no hang, bounded
//! memory. `read_into` must yield what `next_event` yields, stopping at the
//! same error. When a trace decodes and re-encodes without error, the copy
//! must decode to the same events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_memtrace::{Event, ReadError, Reader, Timedelta, WriterOptions, copy_trace};

/// The events and error of a pass through `next_event`, then through
/// `read_into` in runs of `run` events.
fn both_ways(
    reader: &mut Reader<'_>,
    run: usize,
) -> [(Vec<(Timedelta, Event<'static>)>, Option<ReadError>); 2] {
    let mut a = Vec::new();
    let mut events = reader.events(true);
    let a_err = loop {
        match events.next_event() {
            None => break None,
            Some(Err(e)) => break Some(e),
            Some(Ok((dt, ev))) => a.push((dt, ev.into_owned())),
        }
    };
    drop(events);
    let mut events = reader.events(true);
    let mut sink = Vec::new();
    let b_err = loop {
        match events.read_into(&mut sink, run) {
            Ok(n) if n < run => break None,
            Ok(_) => {}
            Err(e) => break Some(e),
        }
    };
    [(a, a_err), (sink, b_err)]
}

fn events(reader: &mut Reader<'_>, parse_backtraces: bool) -> (Vec<(i64, Event<'static>)>, bool) {
    let mut out = Vec::new();
    let mut events = reader.events(parse_backtraces);
    let mut line = Vec::new();
    while let Some(item) = events.next_event_with_locations() {
        match item {
            Ok((dt, ev, table)) => {
                line.clear();
                let _ = ev.write_to(&mut line, table);
                let _ = ev.display(table).to_string();
                out.push((dt.as_micros(), ev.into_owned()));
            }
            Err(_) => return (out, false),
        }
    }
    (out, true)
}

/// The parts of an event a copy preserves (the copy computes its own
/// common prefixes).
fn key(e: &(i64, Event<'static>)) -> (i64, Event<'static>) {
    let mut e = e.clone();
    if let Event::Alloc(a) = &mut e.1 {
        a.common_prefix = 0;
    }
    e
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = Reader::from_bytes(data) else {
        return;
    };
    let run = 1 + usize::from(data.last().copied().unwrap_or(0) % 8);
    let [a, b] = both_ways(&mut reader, run);
    assert_eq!(a, b, "read_into agrees with next_event");
    let (with_bt, ok) = events(&mut reader, true);
    let (without_bt, ok2) = events(&mut reader, false);
    // Without backtraces the reader checks less, so it gets at least as far.
    assert!(without_bt.len() >= with_bt.len() || !ok2);
    let mut dump = Vec::new();
    let _ = tracekit_memtrace::dump::write_dump(&mut reader, &mut dump, |_| {}, |_| {});
    if !ok {
        return;
    }
    // Short backtraces only: long ones may be truncated by the writer.
    let short = with_bt.iter().all(|(_, e)| match e {
        Event::Alloc(a) => a.backtrace.len() <= 64 && a.common_prefix <= a.backtrace.len(),
        _ => true,
    });
    let Ok((copy, _)) = copy_trace(&mut reader, Vec::new(), WriterOptions::new()) else {
        return;
    };
    let mut again = Reader::from_bytes(&copy).expect("a copy opens");
    let (copied, ok) = events(&mut again, true);
    assert!(ok, "a copy decodes");
    if short {
        assert_eq!(copied.len(), with_bt.len());
        for (a, b) in copied.iter().zip(&with_bt) {
            assert_eq!(key(a), key(b));
        }
    }
});
