//! Any bytes, read by the streaming memtrace reader in reads of any sizes,
//! also as a file still being written (reads that would block between
//! pieces, the reader asked again once more is written): it must decode what
//! the slice reader decodes (events, positions, warnings, error, location
//! table) and dump the same text. And copying
//! must follow the dump's rules: it succeeds exactly when the dump does,
//! with the same warnings, and the copy dumps to the same text (from either
//! reader, the same bytes); when it fails, it fails with the dump's error.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tracekit_memtrace::dump::{write_dump, write_dump_stream};
use tracekit_memtrace::{
    Event, Info, OpenError, ReadError, Reader, StreamReader, Timedelta, Warning, WriterOptions,
    copy_trace, copy_trace_stream,
};

/// Hands out `data` in reads whose sizes come from `sizes`, cycling; with
/// `blocks`, every other read after the 64th would block (a file still being
/// written, its trace-info packet usually whole by then).
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
    blocks: bool,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.blocks && self.turn >= 64 && self.turn % 2 == 1 && !self.data.is_empty() {
            self.turn += 1;
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let size = match self.sizes {
            [] => usize::MAX,
            s => 1 + usize::from(s[self.turn % s.len()]) * 16,
        };
        self.turn += 1;
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

type Pass = (
    Vec<(u64, Timedelta, Event<'static>)>,
    Option<ReadError>,
    Vec<Warning>,
);

fn slice_pass(reader: &mut Reader<'_>, bt: bool) -> Pass {
    let mut events = reader.events(bt);
    let mut out = Vec::new();
    let error = loop {
        match events.next_event() {
            None => break None,
            Some(Err(e)) => break Some(e),
            Some(Ok((dt, ev))) => {
                let ev = ev.into_owned();
                out.push((events.position(), dt, ev));
            }
        }
    };
    (out, error, events.take_warnings())
}

fn stream_pass<R: Read>(stream: &mut StreamReader<R>) -> Pass {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut error = None;
    loop {
        let Some(mut packet) = stream.next_packet().expect("reads from memory") else {
            // Written further: ask again.
            if stream.is_waiting() {
                continue;
            }
            break;
        };
        loop {
            match packet.next_event() {
                None => break,
                Some(Err(e)) => {
                    error = Some(e);
                    break;
                }
                Some(Ok((dt, ev))) => {
                    let ev = ev.into_owned();
                    out.push((packet.position(), dt, ev));
                }
            }
        }
        warnings.extend(packet.take_warnings());
    }
    warnings.extend(stream.take_warnings());
    (out, error, warnings)
}

/// An `Info` to compare: its sample rate as bits (a NaN is not equal to
/// itself).
fn info_key(info: &Info) -> (u64, Info) {
    let mut info = info.clone();
    let bits = info.sample_rate.to_bits();
    info.sample_rate = 0.0;
    (bits, info)
}

fn dump(reader: &mut Reader<'_>) -> (Vec<u8>, bool, Vec<Warning>) {
    let mut text = Vec::new();
    let mut warnings = Vec::new();
    let o = write_dump(reader, &mut text, |w| warnings.push(*w), |_| {}).expect("to memory");
    (text, o.failure.is_none(), warnings)
}

fuzz_target!(|input: &[u8]| {
    // The first bytes say how to cut the input into reads.
    let (head, data) = input.split_at(input.len().min(4));
    let chunked = || Chunked {
        data,
        sizes: head,
        turn: 0,
        blocks: false,
    };
    // Still being written: the rest comes in pieces.
    let written = || Chunked {
        data,
        sizes: head,
        turn: 0,
        blocks: true,
    };
    let bt = head.first().is_none_or(|b| b & 0x80 == 0);
    // A fresh reader for every pass: a reader keeps the location table of
    // its earlier passes.
    let fresh = || Reader::from_bytes(data).expect("opened before");
    let mut reader = match (Reader::from_bytes(data), StreamReader::new(chunked(), bt)) {
        (Ok(r), Ok(s)) => {
            assert_eq!(info_key(r.info()), info_key(s.info()));
            r
        }
        (Err(a), Err(OpenError::Malformed(b))) => {
            assert_eq!(a, b);
            return;
        }
        (a, b) => panic!("opening differs: {:?} / {:?}", a.err(), b.err()),
    };
    let mut stream = StreamReader::new(chunked(), bt).expect("opened before");
    let a = slice_pass(&mut reader, bt);
    let b = stream_pass(&mut stream);
    assert_eq!(a, b, "the stream decodes what the slice does");
    if let Ok(mut followed) = StreamReader::new(written(), bt) {
        let c = stream_pass(&mut followed);
        assert_eq!(b, c, "a trace followed while written decodes as the stream does");
    }
    assert_eq!(reader.locations().len(), stream.locations().len());
    for (code, locs) in reader.locations().iter() {
        assert_eq!(stream.locations().get(code), Some(locs));
    }

    // The dump, both ways.
    let (text, ok, warnings) = dump(&mut fresh());
    let mut stream = StreamReader::new(chunked(), true).expect("opened before");
    let mut text2 = Vec::new();
    let mut warnings2 = Vec::new();
    let o = write_dump_stream(&mut stream, &mut text2, |w| warnings2.push(*w), |_| {})
        .expect("to and from memory");
    assert!(text == text2, "the streamed dump is the dump");
    assert_eq!((ok, &warnings), (o.failure.is_none(), &warnings2));

    // The copy follows the dump's rules.
    let copied = copy_trace(&mut fresh(), Vec::new(), WriterOptions::new());
    let mut stream = StreamReader::new(chunked(), true).expect("opened before");
    let streamed = copy_trace_stream(&mut stream, Vec::new(), WriterOptions::new());
    match (&copied, &streamed) {
        (Ok(x), Ok(y)) => assert!(x == y, "a streamed copy is the copy"),
        (Err(x), Err(y)) => assert_eq!(x.dump_failure(), y.dump_failure()),
        _ => panic!("copying from a stream differs"),
    }
    match copied {
        Ok((copy, copy_warnings)) => {
            assert!(ok, "a copy succeeds only where the dump does");
            assert_eq!(copy_warnings, warnings);
            let mut again = Reader::from_bytes(&copy).expect("a copy opens");
            let (text3, ok3, warnings3) = dump(&mut again);
            assert!(ok3 && warnings3.is_empty(), "a copy dumps cleanly");
            assert!(text3 == text, "a copy dumps as the original does");
        }
        Err(e) => {
            assert!(!ok, "a copy fails only where the dump does: {e}");
            let mut sink = Vec::new();
            let o = write_dump(&mut fresh(), &mut sink, |_| {}, |_| {}).expect("to memory");
            assert_eq!(e.dump_failure(), o.failure, "with the dump's error");
        }
    }
});
