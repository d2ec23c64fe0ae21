//! The call-stack decoder driven over a text source.
//!
//! `--filter START..STOP` needs the whole input twice: a first pass collects the
//! calls to START and STOP (which pair up only once all are known), the second
//! decodes what lies between them. Without a filter the text is decoded as it
//! comes, on a second core when there is one. Warnings go to the caller as each
//! piece is decoded, so a long decode shows them while it runs.

use std::io;
use std::io::Write;

use tracekit_callstack::decode::{DecodeStats, Decoder, HitCollector};
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::sink::Sink;
use tracekit_callstack::transcript::{self, Transcriber, Transcript, TranscriptOptions};
use tracekit_callstack::writer::{Config, Warning};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::Writer;

use crate::text::{Progress, TextSource};
use crate::{Error, Result};

/// Decodes `source` into `sink`; returns the sink and what was read.
///
/// `progress` hears about the decoding pass (not the filter's first pass), and
/// `warn` gets each warning as it is made.
pub fn decode<S: Sink>(
    source: &mut TextSource,
    config: Config,
    filter: Option<RangeFilter>,
    sink: S,
    progress: impl FnMut(Progress),
    mut warn: impl FnMut(&Warning),
) -> Result<(S, DecodeStats)> {
    let hits = match filter {
        Some(f) => {
            if !source.rereadable() {
                return Err(Error::FilterNeedsFile);
            }
            let mut collector = HitCollector::new(f);
            source.for_each_piece(|_| {}, |t, _| collector.feed(t))?;
            Some(collector.finish())
        }
        None => None,
    };
    let mut decoder = Decoder::new(sink, config, hits);
    source.for_each_piece(progress, |t, off| {
        // Same output as `feed`; parses on a second core when there is one.
        decoder.feed_pipelined(t, off);
        for w in decoder.drain_warnings() {
            warn(&w);
        }
    })?;
    let (sink, stats, warnings) = decoder.finish();
    for w in &warnings {
        warn(w);
    }
    Ok((sink, stats))
}

/// What a decode into FXT wrote.
#[derive(Debug)]
pub struct FxtDecoded {
    /// What was read.
    pub stats: DecodeStats,
    /// FXT records written.
    pub records: u64,
    /// Names longer than FXT's limit, cut.
    pub truncated_strings: u64,
}

/// Decodes `source` into an FXT trace written to `out` (named `name` in
/// errors), as [`decode`] does; returns `out` once the trace is complete and
/// flushed. An I/O error is `out`'s own (it names its file).
pub fn decode_to_fxt<W: Write>(
    source: &mut TextSource,
    config: Config,
    filter: Option<RangeFilter>,
    (out, name): (W, &str),
    progress: impl FnMut(Progress),
    warn: impl FnMut(&Warning),
) -> Result<(W, FxtDecoded)> {
    let fxt_error = |source| Error::Fxt {
        name: name.to_string(),
        source,
    };
    let writer = Writer::new(IoDestination::with_buffer_size(out, 1 << 20)).map_err(fxt_error)?;
    let (mut sink, stats) = decode(source, config, filter, FxtSink::new(writer), progress, warn)?;
    let (truncated_strings, records) = (sink.truncated_strings(), sink.records());
    let closed = sink.close();
    if let Some(e) = sink.destination_mut().take_error() {
        // The output's own error, which names it, and the root of the writer's.
        return Err(Error::Io(tracekit_io::Error::Write(e)));
    }
    closed.map_err(fxt_error)?;
    let out = sink.finish().map_err(fxt_error)?.into_inner();
    let decoded = FxtDecoded {
        stats,
        records,
        truncated_strings,
    };
    Ok((out, decoded))
}

/// Fails when a decode of `name` found no event: nothing in it was `perf
/// script` output, or there were no samples.
pub fn require_events(name: &str, stats: &DecodeStats) -> Result<()> {
    if stats.events > 0 {
        return Ok(());
    }
    Err(Error::NothingDecoded {
        name: name.to_string(),
        records: stats.records,
        first_unparsed: stats.first_unparsed.first().map(|e| e.to_string()),
    })
}

/// Writes magic-trace's transcript of `source` to `out` as it is made (each
/// piece's lines before the next piece is waited for); `err` gets the lines
/// magic-trace prints on standard error, in order.
///
/// With a filter the whole input is read first (its hits pair up only then).
/// Returns the transcript's counts; fails when nothing was decoded.
pub fn transcribe(
    source: &mut TextSource,
    opts: &TranscriptOptions,
    mut out: impl FnMut(&str) -> io::Result<()>,
    mut err: impl FnMut(&str),
) -> Result<Transcript> {
    let write_error = |e| Error::Io(tracekit_io::Error::Write(e));
    let t = if opts.filter.is_some() {
        let mut text = String::new();
        source.for_each_piece(|_| {}, |t, _| text.push_str(t))?;
        transcript::run(&text, opts)
    } else {
        let mut tr = Transcriber::new(opts);
        let mut failed = None;
        source.for_each_piece(
            |_| {},
            |text, _| {
                if failed.is_some() {
                    return;
                }
                tr.feed(text);
                for line in tr.take_stderr() {
                    err(&line);
                }
                if let Err(e) = out(&tr.take_stdout()) {
                    failed = Some(e);
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(write_error(e));
        }
        tr.finish()
    };
    for line in &t.stderr {
        err(line);
    }
    out(&t.stdout).map_err(write_error)?;
    if t.events == 0 {
        return Err(Error::NothingDecoded {
            name: source.name(),
            records: t.records,
            first_unparsed: t.unparsed.first().map(|e| e.to_string()),
        });
    }
    Ok(t)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    const SAMPLES: &str = "prog 7/7 1.000000000: 1 cpu-clock:u:\n\t401000 leaf+0x0 (/bin/prog)\n\t402000 main+0x10 (/bin/prog)\n\nprog 7/7 1.000100000: 1 cpu-clock:u:\n\t401000 leaf+0x0 (/bin/prog)\n\t402000 main+0x10 (/bin/prog)\n\n";

    fn text_file(text: &str) -> (tempfile::TempDir, TextSource) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.txt");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        (dir, TextSource::File(path))
    }

    #[test]
    fn a_transcript_is_written_and_counted() {
        let (_dir, mut source) = text_file(SAMPLES);
        let mut out = String::new();
        let opts = TranscriptOptions {
            echo: false,
            ..TranscriptOptions::default()
        };
        let t = transcribe(
            &mut source,
            &opts,
            |s| {
                out.push_str(s);
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(t.records, 2);
        assert!(
            out.contains("BEGIN main") && out.contains("BEGIN leaf"),
            "{out}"
        );
    }

    #[test]
    fn text_that_is_not_perf_script_output_is_named() {
        let (_dir, mut source) = text_file("hello\nworld\n");
        let opts = TranscriptOptions::default();
        let e = transcribe(&mut source, &opts, |_| Ok(()), |_| {}).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("perf.txt: none of its 2 records is perf script output"),
            "{msg}"
        );
    }

    #[test]
    fn an_fxt_decode_writes_a_complete_trace() {
        let (_dir, mut source) = text_file(SAMPLES);
        let (out, d) = decode_to_fxt(
            &mut source,
            Config::default(),
            None,
            (Vec::new(), "out.fxt"),
            |_| {},
            |_| {},
        )
        .unwrap();
        assert_eq!((d.stats.records, d.stats.events), (2, 2));
        let mut reader = tracekit_fxt::read::Reader::new(&out);
        let stats = tracekit_fxt::stats::Stats::collect(&mut reader, |_| {}).unwrap();
        // Read to its end without error: the trace was closed and flushed.
        let events = stats.event_types.values().sum::<u64>();
        assert!(events >= 2 && events <= d.records, "{stats:?}");
    }

    #[test]
    fn an_output_that_fails_is_the_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "writing out.fxt: disk full",
                ))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (_dir, mut source) = text_file(SAMPLES);
        let out = (Full, "out.fxt");
        let e = decode_to_fxt(&mut source, Config::default(), None, out, |_| {}, |_| {})
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "writing out.fxt: disk full");
    }

    #[test]
    fn a_filter_on_standard_input_is_refused() {
        let mut source = TextSource::Stream(Some(Box::new(SAMPLES.as_bytes())));
        let filter = RangeFilter::parse("a..b").unwrap();
        let r = decode(
            &mut source,
            Config::default(),
            Some(filter),
            tracekit_callstack::sink::NullSink::default(),
            |_| {},
            |_| {},
        );
        assert!(matches!(r, Err(Error::FilterNeedsFile)));
    }
}
