//! The call-stack decoder driven over a text source.
//!
//! `--filter START..STOP` needs the whole input twice: a first pass collects the
//! calls to START and STOP (which pair up only once all are known), the second
//! decodes what lies between them. Without a filter the text is decoded as it
//! comes, on a second core when there is one. Warnings go to the caller as each
//! piece is decoded, so a long decode shows them while it runs.

use std::io;

use tracekit_callstack::decode::{DecodeStats, Decoder, HitCollector};
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::sink::Sink;
use tracekit_callstack::transcript::{self, Transcriber, Transcript, TranscriptOptions};
use tracekit_callstack::writer::{Config, Warning};

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
