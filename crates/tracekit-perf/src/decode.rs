//! The call-stack decoder driven over a text source, or over a perf.data file read
//! directly; [`direct`] says which a recording gets.
//!
//! `--filter START..STOP` needs the whole input twice: a first pass collects the
//! calls to START and STOP (which pair up only once all are known), the second
//! decodes what lies between them. Without a filter the text is decoded as it
//! comes, on a second core when there is one. Warnings go to the caller as each
//! piece is decoded, so a long decode shows them while it runs.

use std::io;
use std::io::Write;
use std::sync::Arc;

use tracekit_callstack::decode::{DecodeStats, Decoder, HitCollector};
use tracekit_callstack::event::Time;
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::sink::Sink;
use tracekit_callstack::transcript::{self, Transcriber, Transcript, TranscriptOptions};
use tracekit_callstack::writer::{Config, SampleTiming, TraceScope, TraceWriter, Warning};
use tracekit_columns::Spill;
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::write::Writer;

use crate::data::{PerfData, ReadOptions, ReadStats, recording_period};
use crate::text::{Progress, TextSource};
use crate::{Error, Mode, Result};
use tracekit_symbols::DebugDirs;

/// What the decoder is told beyond its input and output: the options of `tracekit
/// perf decode` (with the `clap` feature, its command line).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DecodeOptions {
    /// What was traced: user space, kernel, or both.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "user"))]
    pub scope: TraceScope,
    /// For perf.data input: branch trace (Intel PT) or sampled stacks.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "auto"))]
    pub mode: Mode,
    /// Append " [inferred start time]" to frames whose start was inferred (default with --transcript).
    #[cfg_attr(feature = "clap", arg(long))]
    pub annotate_inferred_start_times: bool,
    /// Keep only what happens between calls to START and STOP (`START..STOP`).
    #[cfg_attr(feature = "clap", arg(long, value_name = "START..STOP", value_parser = range_filter))]
    pub filter: Option<RangeFilter>,
    /// OCaml pushtrap addresses (hex, comma-separated); with the two below enables
    /// precise OCaml exception tracking.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)
    )]
    pub ocaml_pushtraps: Option<Vec<String>>,
    /// OCaml poptrap addresses (hex, comma-separated).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)
    )]
    pub ocaml_poptraps: Option<Vec<String>>,
    /// OCaml entertrap addresses (hex, comma-separated).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "ADDRS", value_delimiter = ',', num_args = 0..)
    )]
    pub ocaml_entertraps: Option<Vec<String>>,
    /// Do not queue events inside TSX transactions.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_transactions: bool,
    /// Sampled stacks as magic-trace draws them (calls spread over the interval to
    /// the next sample, frames deferred to the end) instead of at sample instants.
    #[cfg_attr(feature = "clap", arg(long))]
    pub magic_trace_compat: bool,
    /// The sampling period (`100us`): a thread not sampled for two periods is idle,
    /// and its frames close one period after its last sample. Default: from the
    /// recording, else the median gap between samples of a thread.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DURATION", value_parser = duration))]
    pub sample_period: Option<std::time::Duration>,
    /// Read perf.data through `perf script` instead of directly (always so for
    /// Intel PT recordings and with --filter).
    #[cfg_attr(feature = "clap", arg(long))]
    pub via_perf_script: bool,
    /// Where separate debug files are looked for when reading perf.data directly
    /// (repeatable; default /usr/lib/debug).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub debug_dir: Vec<std::path::PathBuf>,
    /// Use no separate debug files (names from the objects alone; faster where
    /// debug files are large).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "debug_dir"))]
    pub no_debug_files: bool,
    /// Name every address from the objects, without the names kept by earlier
    /// runs (by build id, under $XDG_CACHE_HOME/tracekit/names), and keep none.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_cache: bool,
    /// Where names are kept across runs, by build id; the caller says (the
    /// command line cannot), and `no_cache` leaves it unused.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub name_cache: Option<std::path::PathBuf>,
    /// Where a recording's samples grow while they wait for their names
    /// ([`ReadOptions::spill`]); the caller says.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub spill: Spill,
}

#[cfg(feature = "clap")]
fn duration(s: &str) -> std::result::Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 100us, 1ms)"))
}

#[cfg(feature = "clap")]
fn range_filter(s: &str) -> std::result::Result<RangeFilter, String> {
    RangeFilter::parse(s).ok_or_else(|| "wants START..STOP".to_string())
}

impl DecodeOptions {
    /// The decoder's configuration; `transcript` annotates inferred start times, as
    /// magic-trace's transcripts do. An error names a trap address that is not hex.
    pub fn config(&self, transcript: bool) -> Result<Config> {
        let traps = [
            &self.ocaml_pushtraps,
            &self.ocaml_poptraps,
            &self.ocaml_entertraps,
        ];
        let ocaml_exception_info = match traps.iter().any(|t| t.is_some()) {
            true => Some(OcamlExceptionInfo::new(
                &hex_list(traps[0])?,
                &hex_list(traps[1])?,
                &hex_list(traps[2])?,
            )),
            false => None,
        };
        Ok(Config {
            scope: self.scope,
            annotate_inferred_start_times: self.annotate_inferred_start_times || transcript,
            ocaml_exception_info,
            transactions: !self.no_transactions,
            sample_timing: self.sample_timing(),
        })
    }

    /// How the direct reader reads a recording: kernel names only where kernel
    /// frames are kept, debug files where `--debug-dir` and `--no-debug-files` say.
    pub fn read_options(&self) -> ReadOptions {
        let debug_dirs = match self.debug_dir.as_slice() {
            _ if self.no_debug_files => DebugDirs::none(),
            [] => DebugDirs::default(),
            dirs => DebugDirs(dirs.to_vec()),
        };
        ReadOptions {
            debug_dirs,
            kernel_symbols: self.scope != TraceScope::User,
            name_cache: self.name_cache.clone().filter(|_| !self.no_cache),
            spill: self.spill.clone(),
        }
    }

    /// How sampled stacks become slices, as the options say.
    pub fn sample_timing(&self) -> SampleTiming {
        if self.magic_trace_compat {
            return SampleTiming::MagicTrace;
        }
        SampleTiming::Accurate {
            period: self
                .sample_period
                .map(|d| Time(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))),
        }
    }

    /// The options of a transcript (`echo`: the input records too); times start at
    /// the first event.
    pub fn transcript(&self, echo: bool) -> Result<TranscriptOptions> {
        let config = self.config(true)?;
        Ok(TranscriptOptions {
            scope: config.scope,
            annotate_inferred_start_times: config.annotate_inferred_start_times,
            echo,
            time_origin_first_event: true,
            ocaml_exception_info: config.ocaml_exception_info,
            filter: self.filter.clone(),
            events_output: false,
            sample_timing: config.sample_timing,
        })
    }
}

/// Hex addresses (`0x` optional); empty items are left out, so that a script can pass
/// an empty list as `""`.
fn hex_list(v: &Option<Vec<String>>) -> Result<Vec<u64>> {
    v.iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| {
            u64::from_str_radix(s.trim_start_matches("0x"), 16)
                .map_err(|_| Error::NotHexAddress(s.clone()))
        })
        .collect()
}

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

impl FxtDecoded {
    /// What a user should know about the input and the trace: records that were not
    /// `perf script` output (the first few on indented lines below), names cut to
    /// FXT's limit.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let s = &self.stats;
        if s.unparsed > 0 {
            let examples: String = s
                .first_unparsed
                .iter()
                .map(|e| format!("\n  {e}"))
                .collect();
            out.push(format!(
                "skipped {} of {} records that were not perf script output tracekit knows{examples}",
                s.unparsed, s.records
            ));
        }
        if self.truncated_strings > 0 {
            out.push(format!(
                "{} names longer than FXT's 32,000 bytes were cut (they end in \"{}\")",
                self.truncated_strings,
                tracekit_callstack::fxt_sink::TRUNCATED_MARKER
            ));
        }
        out
    }
}

impl std::fmt::Display for FxtDecoded {
    /// `decoded 120 records (118 events, 0 decode errors)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.stats;
        write!(
            f,
            "decoded {} records ({} events, {} decode errors)",
            s.records, s.events, s.decode_errors
        )
    }
}

/// Decodes `source` into an FXT trace written to `out` (named `name` in
/// errors), as [`decode`] does; returns `out` once the trace is complete and
/// flushed. Without a sampling period in `config`, a recording's own is used. An
/// I/O error is `out`'s own (it names its file).
pub fn decode_to_fxt<W: Write>(
    source: &mut TextSource,
    mut config: Config,
    filter: Option<RangeFilter>,
    (out, name): (W, &str),
    progress: impl FnMut(Progress),
    warn: impl FnMut(&Warning),
) -> Result<(W, FxtDecoded)> {
    let fxt_error = |source| Error::Fxt {
        name: name.to_string(),
        source,
    };
    // perf script's text does not say how often it sampled; the recording does.
    if let (TextSource::PerfData { path, .. }, SampleTiming::Accurate { period: None }) =
        (&*source, config.sample_timing)
    {
        let period = recording_period(path);
        config.sample_timing = SampleTiming::Accurate { period };
    }
    let writer = Writer::new(IoDestination::with_buffer_size(out, 1 << 20)).map_err(fxt_error)?;
    let (sink, stats) = decode(source, config, filter, FxtSink::new(writer), progress, warn)?;
    let (out, records, truncated_strings) = close_fxt(sink, name)?;
    let decoded = FxtDecoded {
        stats,
        records,
        truncated_strings,
    };
    Ok((out, decoded))
}

/// Closes a decode's FXT sink: its output once the trace is complete and flushed,
/// the records written and the names cut. An I/O error is the output's own (it
/// names its file).
fn close_fxt<W: Write>(mut sink: FxtSink<IoDestination<W>>, name: &str) -> Result<(W, u64, u64)> {
    let fxt_error = |source| Error::Fxt {
        name: name.to_string(),
        source,
    };
    let (truncated_strings, records) = (sink.truncated_strings(), sink.records());
    let closed = sink.close();
    if let Some(e) = sink.destination_mut().take_error() {
        // The output's own error, which names it, and the root of the writer's.
        return Err(Error::Write(e));
    }
    closed.map_err(fxt_error)?;
    let out = sink.finish().map_err(fxt_error)?.into_inner();
    Ok((out, records, truncated_strings))
}

/// The recording `source` opened for the direct reader ([`crate::data`]), or `None`
/// where it goes through `perf script`: text, an Intel PT recording (as `mode` says,
/// or as its events say), or when the options ask for it (`via_perf_script`, or a
/// `filter`, whose hits only the text path finds). A recording that cannot be read
/// is an error, not a detour.
pub fn direct(source: &TextSource, options: &DecodeOptions) -> Result<Option<PerfData>> {
    let TextSource::PerfData {
        path, mode, bytes, ..
    } = source
    else {
        return Ok(None);
    };
    if options.via_perf_script || options.filter.is_some() || *mode == Mode::IntelPt {
        return Ok(None);
    }
    let data = match bytes {
        Some(bytes) => PerfData::from_bytes(Arc::clone(bytes), path.display().to_string()),
        None => PerfData::open(path),
    };
    match data {
        Ok(data) => Ok(Some(data)),
        Err(Error::PerfDataIntelPt { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Decodes the perf.data file `data` read directly (see [`crate::data`]) into an FXT
/// trace written to `out`, as [`decode_to_fxt`] does for text. Without a sampling
/// period in `config`, the recording's own is used. Returns `out` once the trace is
/// complete, what was written, and what the reader found.
pub fn decode_data_to_fxt<W: Write>(
    data: PerfData,
    options: &ReadOptions,
    mut config: Config,
    (out, name): (W, &str),
    progress: impl FnMut(u64),
    mut warn: impl FnMut(&Warning),
) -> Result<(W, FxtDecoded, ReadStats)> {
    let fxt_error = |source| Error::Fxt {
        name: name.to_string(),
        source,
    };
    if let SampleTiming::Accurate { period: None } = config.sample_timing {
        config.sample_timing = SampleTiming::Accurate {
            period: data
                .info()
                .period_ns
                .map(|p| Time(i64::try_from(p).unwrap_or(i64::MAX))),
        };
    }
    let writer = Writer::new(IoDestination::with_buffer_size(out, 1 << 20)).map_err(fxt_error)?;
    let mut tw = TraceWriter::new(FxtSink::new(writer), config, Time::ZERO);
    let mut first = true;
    let read = data.samples(options, progress, |event| {
        if first {
            first = false;
            tw.set_base_time(event.time().unwrap_or_default());
        }
        tw.write_event(event, true);
        for w in tw.drain_warnings() {
            warn(&w);
        }
    })?;
    let (out, records, truncated_strings) = close_fxt(tw.finish(), name)?;
    let stats = DecodeStats {
        bytes: read.bytes,
        records: read.records,
        events: read.samples,
        ..DecodeStats::default()
    };
    let decoded = FxtDecoded {
        stats,
        records,
        truncated_strings,
    };
    Ok((out, decoded, read))
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
    let write_error = Error::Write;
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

    fn text_file(text: &str) -> TextSource {
        TextSource::File {
            path: "perf.txt".into(),
            text: Box::new(text.as_bytes().to_vec()),
        }
    }

    /// A recording of sampled stacks (see `tests/data`), as recorded in `mode`.
    fn recording(mode: Mode) -> TextSource {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        TextSource::PerfData {
            path: dir.join("tests/data/recording_dwarf.data"),
            perf: "perf".into(),
            mode,
            bytes: None,
        }
    }

    #[test]
    fn recordings_of_sampled_stacks_are_read_directly_unless_asked_otherwise() {
        let options = DecodeOptions::default();
        let data = direct(&recording(Mode::Auto), &options).unwrap().unwrap();
        assert!(data.info().dwarf && !data.info().intel_pt);
        assert!(
            direct(&recording(Mode::Sampling), &options)
                .unwrap()
                .is_some()
        );
        assert!(direct(&text_file(SAMPLES), &options).unwrap().is_none());
        // Intel PT, and what only the text path does, go through perf script.
        assert!(
            direct(&recording(Mode::IntelPt), &options)
                .unwrap()
                .is_none()
        );
        let via_script = DecodeOptions {
            via_perf_script: true,
            ..DecodeOptions::default()
        };
        assert!(
            direct(&recording(Mode::Auto), &via_script)
                .unwrap()
                .is_none()
        );
        let filtered = DecodeOptions {
            filter: RangeFilter::parse("a..b"),
            ..DecodeOptions::default()
        };
        assert!(direct(&recording(Mode::Auto), &filtered).unwrap().is_none());
    }

    #[test]
    fn a_recording_already_read_is_read_from_its_bytes_not_its_file_again() {
        let file = recording(Mode::Sampling);
        let TextSource::PerfData { path, .. } = &file else {
            unreachable!()
        };
        let bytes = std::fs::read(path).unwrap();
        let options = DecodeOptions {
            no_debug_files: true,
            ..DecodeOptions::default()
        };
        let samples = |source: &TextSource| {
            let data = direct(source, &options).unwrap().unwrap();
            let stats = data.samples(&options.read_options(), |_| {}, |_| {});
            stats.unwrap().samples
        };
        let held = TextSource::PerfData {
            path: "/nowhere/perf.data".into(),
            perf: "perf".into(),
            mode: Mode::Sampling,
            bytes: Some(Arc::new(bytes)),
        };
        assert!(samples(&held) > 0);
        assert_eq!(samples(&held), samples(&file));
    }

    #[test]
    fn a_damaged_recording_is_an_error_not_a_detour_through_perf_script() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.data");
        std::fs::write(&path, b"PERFILE2\x68\0\0\0\0\0\0\0").unwrap();
        let source = TextSource::PerfData {
            path,
            perf: "perf".into(),
            mode: Mode::Auto,
            bytes: None,
        };
        let r = direct(&source, &DecodeOptions::default());
        assert!(matches!(r, Err(Error::PerfData { .. })), "{:?}", r.err());
    }

    #[test]
    fn trap_addresses_are_hex_with_or_without_0x_and_empty_items_are_left_out() {
        let some = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let options = DecodeOptions {
            ocaml_pushtraps: some(&["0x41100b", "41100c"]),
            ocaml_poptraps: some(&[""]),
            ..DecodeOptions::default()
        };
        let with_traps = options.config(false).unwrap();
        let expected = OcamlExceptionInfo::new(&[0x41100b, 0x41100c], &[], &[]);
        assert_eq!(with_traps.ocaml_exception_info, Some(expected));
        assert_eq!(
            DecodeOptions::default()
                .config(false)
                .unwrap()
                .ocaml_exception_info,
            None
        );
        let bad = DecodeOptions {
            ocaml_entertraps: some(&["0x12", "zz"]),
            ..DecodeOptions::default()
        };
        assert!(matches!(bad.config(false), Err(Error::NotHexAddress(s)) if s == "zz"));
    }

    #[test]
    fn a_transcript_annotates_inferred_starts_and_keeps_the_filter() {
        let options = DecodeOptions {
            filter: RangeFilter::parse("start..stop"),
            no_transactions: true,
            ..DecodeOptions::default()
        };
        assert!(!options.config(false).unwrap().annotate_inferred_start_times);
        assert!(!options.config(false).unwrap().transactions);
        let t = options.transcript(false).unwrap();
        assert!(t.annotate_inferred_start_times && !t.echo && t.time_origin_first_event);
        assert_eq!(t.filter, RangeFilter::parse("start..stop"));
    }

    #[test]
    fn a_transcript_is_written_and_counted() {
        let mut source = text_file(SAMPLES);
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
        let mut source = text_file("hello\nworld\n");
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
        let mut source = text_file(SAMPLES);
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
        assert!(d.warnings().is_empty());
        assert_eq!(
            d.to_string(),
            "decoded 2 records (2 events, 0 decode errors)"
        );
    }

    #[test]
    fn records_that_are_not_perf_script_output_are_warned_about_with_examples() {
        let mut source = text_file(&format!("this is not perf output\n\n{SAMPLES}"));
        let out = (Vec::new(), "out.fxt");
        let (_, d) =
            decode_to_fxt(&mut source, Config::default(), None, out, |_| {}, |_| {}).unwrap();
        let warnings = d.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let (first, example) = warnings[0].split_once('\n').unwrap();
        assert_eq!(
            first,
            "skipped 1 of 3 records that were not perf script output tracekit knows"
        );
        assert_eq!(example, "  no timestamp column (record at byte 0)");
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
        let mut source = text_file(SAMPLES);
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
