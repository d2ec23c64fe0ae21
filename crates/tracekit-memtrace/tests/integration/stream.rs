//! The streaming reader: it decodes what a [`Reader`] over the same bytes
//! decodes (events, location tables, warnings, errors, byte offsets), on
//! every corpus trace and thousands of damaged ones, however the input is
//! split into reads; its dump is the slice reader's dump, byte for byte; and
//! it dumps the first packets before the rest of the input exists.
//!
//! The corpus parts are skipped when `TRACEKIT_CORPUS` is unset and fail
//! when it is set and a file is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::common;

use std::io::{self, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use tracekit_memtrace::dump::{DumpOutcome, StreamDumpError, write_dump, write_dump_stream};
use tracekit_memtrace::synth::{Rng, SynthConfig, write_synthetic};
use tracekit_memtrace::{
    Event, FormatVersion, Info, LocationTable, OpenError, ReadError, Reader, StreamReader,
    Timedelta, Warning,
};

/// A `Read` that hands out its bytes in pieces of random size, as a pipe
/// does.
struct Chunked<'a> {
    data: &'a [u8],
    rng: Rng,
    max: u64,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (1 + self.rng.below(self.max) as usize)
            .min(buf.len())
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn chunked(data: &[u8], seed: u64) -> Chunked<'_> {
    let max = [1, 7, 100, 5000, 1 << 20][(seed % 5) as usize];
    Chunked {
        data,
        rng: Rng::new(seed),
        max,
    }
}

/// What a pass decodes: each event with its time and the pass's position
/// after it, the error that ended it, the warnings.
#[derive(Debug, PartialEq)]
struct Pass {
    events: Vec<(u64, Timedelta, Event<'static>)>,
    error: Option<ReadError>,
    warnings: Vec<Warning>,
}

fn slice_pass(reader: &mut Reader<'_>, parse_backtraces: bool) -> Pass {
    let mut events = reader.events(parse_backtraces);
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
    Pass {
        events: out,
        error,
        warnings: events.take_warnings(),
    }
}

fn stream_pass<R: Read>(stream: &mut StreamReader<R>) -> Pass {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut error = None;
    while let Some(mut packet) = stream.next_packet().expect("reading from memory") {
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
    Pass {
        events: out,
        error,
        warnings,
    }
}

fn same_tables(a: &LocationTable, b: &LocationTable) -> bool {
    a.len() == b.len() && a.iter().all(|(code, locs)| b.get(code) == Some(locs))
}

/// The streaming reader decodes `data` exactly as the slice reader does.
fn check_same(data: &[u8], seed: u64, parse_backtraces: bool) -> Result<(), String> {
    let slice = Reader::from_bytes(data);
    let stream = StreamReader::new(chunked(data, seed), parse_backtraces);
    let (mut slice, mut stream) = match (slice, stream) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(OpenError::Malformed(b))) if a == b => return Ok(()),
        (a, b) => return Err(format!("opening differs: {:?} vs {:?}", a.err(), b.err())),
    };
    // The sample rate as bits: a NaN is not equal to itself.
    let key = |i: &Info| {
        let mut i = i.clone();
        let bits = i.sample_rate.to_bits();
        i.sample_rate = 0.0;
        (bits, i)
    };
    if key(slice.info()) != key(stream.info()) || slice.format_version() != stream.format_version()
    {
        return Err("trace info differs".into());
    }
    let a = slice_pass(&mut slice, parse_backtraces);
    let b = stream_pass(&mut stream);
    if a.error != b.error {
        return Err(format!("errors differ: {:?} vs {:?}", a.error, b.error));
    }
    if a.warnings != b.warnings {
        return Err(format!(
            "warnings differ: {:?} vs {:?}",
            a.warnings, b.warnings
        ));
    }
    if a.events.len() != b.events.len() {
        return Err(format!("{} events vs {}", a.events.len(), b.events.len()));
    }
    if let Some(i) = (0..a.events.len()).find(|&i| a.events[i] != b.events[i]) {
        return Err(format!(
            "event {i} differs (or its position): {:?} vs {:?}",
            a.events[i].0, b.events[i].0
        ));
    }
    if !same_tables(slice.locations(), stream.locations()) {
        return Err("location tables differ".into());
    }
    Ok(())
}

/// A dump's text (with its progress offsets appended), outcome and warnings.
type Dumped = (Vec<u8>, DumpOutcome, Vec<Warning>);

/// The dump of `data` through both readers.
fn both_dumps(data: &[u8], seed: u64) -> Option<[Dumped; 2]> {
    let mut reader = Reader::from_bytes(data).ok()?;
    let mut stream = StreamReader::new(chunked(data, seed), true).unwrap();
    let mut run = |streamed: bool| {
        let mut text = Vec::new();
        let mut warnings = Vec::new();
        let mut progress = Vec::new();
        let outcome = if streamed {
            write_dump_stream(
                &mut stream,
                &mut text,
                |w| warnings.push(*w),
                |p| progress.push(p),
            )
            .unwrap()
        } else {
            write_dump(
                &mut reader,
                &mut text,
                |w| warnings.push(*w),
                |p| progress.push(p),
            )
            .unwrap()
        };
        // Progress offsets go into the text compared below.
        writeln!(text, "# test: progress {progress:?}").unwrap();
        (text, outcome, warnings)
    };
    Some([run(false), run(true)])
}

fn synthetic() -> Vec<(String, Vec<u8>)> {
    [FormatVersion::V3, FormatVersion::V2]
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let config = SynthConfig {
                allocs: 3000,
                seed: 40 + i as u64,
                format_version: v,
                ..SynthConfig::default()
            };
            (
                format!("synth-{v}"),
                write_synthetic(Vec::new(), &config).unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_corpus_trace_dumps_the_same_streamed() {
    let traces = common::corpus_traces();
    let mut dumped = 0;
    for (i, (name, data)) in traces.iter().chain(&synthetic()).enumerate() {
        let [a, b] = both_dumps(data, i as u64).expect("an intact trace opens");
        assert!(a.1.failure.is_none(), "{name}: {:?}", a.1.failure);
        assert!(a == b, "{name}: the streamed dump differs");
        dumped += 1;
    }
    eprintln!("{dumped} traces dump byte for byte the same streamed");
}

#[test]
fn damaged_corpus_traces_dump_the_same_streamed() {
    // A few damaged versions of each whole trace, dumped for real: text,
    // failure, warnings and progress offsets. (Rendering is what costs; the
    // next test checks thousands more mutants event by event.)
    let traces = common::corpus_traces();
    let mut rng = Rng::new(77);
    let mut n = 0;
    let mut failed = 0;
    for (i, (name, data)) in traces.iter().enumerate() {
        let other = &traces[(i + 1) % traces.len()].1;
        let ends: Vec<usize> = common::packets(data).iter().map(|p| p.0 + p.1).collect();
        for m in 0..6 {
            let mutant = match m {
                // Cut inside the last packet, and inside a packet header.
                0 => data[..data.len().saturating_sub(1 + rng.below(100) as usize)].to_vec(),
                1 => data[..(ends[ends.len() / 2] + 20).min(data.len())].to_vec(),
                _ => common::mutate(data, other, (m * 3 + i) % common::MUTATIONS.len(), &mut rng),
            };
            let Some([a, b]) = both_dumps(&mutant, n) else {
                continue;
            };
            assert!(a == b, "{name} mutant {m}: the streamed dump differs");
            n += 1;
            failed += usize::from(a.1.failure.is_some());
        }
    }
    eprintln!("{n} damaged traces dump the same streamed ({failed} with a failure)");
}

#[test]
fn damaged_traces_decode_the_same_streamed() {
    let mut bases: Vec<(String, Vec<u8>)> = common::corpus_traces()
        .into_iter()
        .map(|(name, data)| (name, common::prefix(&data, 64 << 10)))
        .collect();
    bases.extend(synthetic());
    let per_base = 3200 / bases.len().max(1) + 1;
    let mut rng = Rng::new(78);
    let mut total = 0;
    let mut errors = 0;
    let mut warned = 0;
    for (i, (name, base)) in bases.iter().enumerate() {
        let other = &bases[(i + 1) % bases.len()].1;
        check_same(base, i as u64, true).unwrap_or_else(|e| panic!("{name}: {e}"));
        for m in 0..per_base {
            let kind = m % common::MUTATIONS.len();
            let mut mutant = common::mutate(base, other, kind, &mut rng);
            if m % 5 == 4 {
                let again = rng.below(common::MUTATIONS.len() as u64) as usize;
                mutant = common::mutate(&mutant, other, again, &mut rng);
            }
            let seed = rng.next_u64();
            check_same(&mutant, seed, m % 7 != 3)
                .unwrap_or_else(|e| panic!("{name} mutant {m} ({}): {e}", common::MUTATIONS[kind]));
            if let Ok(mut r) = Reader::from_bytes(&mutant) {
                let p = slice_pass(&mut r, true);
                errors += usize::from(p.error.is_some());
                warned += usize::from(!p.warnings.is_empty());
            }
            total += 1;
        }
    }
    eprintln!(
        "{total} damaged traces decode the same streamed ({errors} end with an error, {warned} warn)"
    );
    assert!(total >= 3000);
}

/// A `Read` of chunks sent over a channel; blocks until the next chunk
/// comes, and ends when the sender is dropped.
struct ChannelReader {
    chunks: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            match self.chunks.recv() {
                Ok(c) => {
                    self.current = c;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A `Write` that sends what it is given over a channel.
struct ChannelWriter(mpsc::Sender<Vec<u8>>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf.to_vec()).map_err(io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_streamed_dump_starts_before_the_input_ends() {
    let data = match tracekit_testutil::corpus_path("memtrace") {
        Some(dir) => std::fs::read(dir.join("traces/lists_hashtbl_v2.ctf")).unwrap(),
        None => synthetic().remove(0).1,
    };
    let expected = {
        let mut reader = Reader::from_bytes(&data).unwrap();
        let mut text = Vec::new();
        write_dump(&mut reader, &mut text, |_| {}, |_| {}).unwrap();
        text
    };
    // The first part: the trace-info packet and the first two packets.
    let packets = common::packets(&data);
    let first = packets[2].0 + packets[2].1;
    assert!(first < data.len() / 2);
    let (to_reader, chunks) = mpsc::channel();
    let (lines, from_writer) = mpsc::channel();
    let dumper = std::thread::spawn(move || {
        let input = ChannelReader {
            chunks,
            current: Vec::new(),
            at: 0,
        };
        let mut stream = StreamReader::new(input, true).unwrap();
        let mut out = ChannelWriter(lines);
        write_dump_stream(&mut stream, &mut out, |_| {}, |_| {}).unwrap()
    });
    to_reader.send(data[..first].to_vec()).unwrap();
    // Event lines arrive while the rest of the input has not been sent.
    let mut text = Vec::new();
    while !text.windows(8).any(|w| w == b"events:\n") || text.ends_with(b"events:\n") {
        let chunk = from_writer
            .recv_timeout(Duration::from_secs(20))
            .expect("the dump writes event lines before the input ends");
        text.extend(chunk);
    }
    let early = text.len();
    assert!(expected.starts_with(&text));
    to_reader.send(data[first..].to_vec()).unwrap();
    drop(to_reader);
    let outcome = dumper.join().unwrap();
    text.extend(from_writer.iter().flatten());
    assert!(outcome.failure.is_none());
    assert!(text == expected, "the streamed dump is the dump");
    eprintln!(
        "{early} bytes of dump before the last {} of {} input bytes were sent",
        data.len() - first,
        data.len()
    );
}

/// A `Read` that fails after `ok` bytes.
struct Failing<'a> {
    data: &'a [u8],
    ok: usize,
}

impl Read for Failing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::other("the disk is on fire"));
        }
        let n = buf.len().min(self.ok).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn read_errors_are_errors_not_truncated_packets() {
    let data = synthetic().remove(0).1;
    let packets = common::packets(&data);
    // Inside the trace-info packet: opening fails with the I/O error.
    let e = StreamReader::new(
        Failing {
            data: &data,
            ok: 40,
        },
        true,
    )
    .unwrap_err();
    assert!(matches!(e, OpenError::Io(_)), "{e:?}");
    // Inside a packet's header and inside its content.
    for ok in [packets[3].0 + 10, packets[3].0 + packets[3].1 - 5] {
        let mut stream = StreamReader::new(Failing { data: &data, ok }, true).unwrap();
        let mut events = 0;
        let error = loop {
            match stream.next_packet() {
                Ok(Some(mut p)) => {
                    while let Some(item) = p.next_event() {
                        item.unwrap();
                        events += 1;
                    }
                    assert!(p.warnings().is_empty());
                }
                Ok(None) => panic!("the stream ended without the read error"),
                Err(e) => break e,
            }
        };
        assert_eq!(error.to_string(), "the disk is on fire");
        assert!(events > 0);
        assert!(stream.warnings().is_empty(), "no truncated-packet warning");
        assert!(stream.next_packet().unwrap().is_none(), "the stream ends");
        // The dump says so too.
        let mut stream = StreamReader::new(Failing { data: &data, ok }, true).unwrap();
        let mut text = Vec::new();
        let mut warnings = 0;
        let e = write_dump_stream(&mut stream, &mut text, |_| warnings += 1, |_| {}).unwrap_err();
        assert!(matches!(e, StreamDumpError::Input(_)), "{e:?}");
        assert!(text.ends_with(b"error: reading the trace: the disk is on fire\n"));
        assert_eq!(warnings, 0);
    }
}
