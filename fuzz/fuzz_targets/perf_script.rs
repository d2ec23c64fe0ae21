//! `perf script` text parser and call-stack state machine: no input may panic, hang or
//! allocate without bound. The first byte picks the settings (scope, OCaml trap tables,
//! filter); the rest is the text, decoded once to FXT and once as a transcript. The
//! caching record parser must agree with `parse_record`, and the pipelined decode must
//! write the same bytes as the single-thread one.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_callstack::decode::{Decoder, HitCollector};
use tracekit_callstack::event::Time;
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::script::{RecordParser, Records, complete_prefix, parse_record};
use tracekit_callstack::transcript::{self, TranscriptOptions};
use tracekit_callstack::writer::{Config, SampleTiming, TraceScope};
use tracekit_fxt::write::{VecDestination, Writer};

fuzz_target!(|data: &[u8]| {
    let Some((&settings, body)) = data.split_first() else {
        return;
    };
    let cut = complete_prefix(body, false);
    assert!(cut <= body.len());
    let text = String::from_utf8_lossy(body);
    let scope = match settings % 3 {
        0 => TraceScope::User,
        1 => TraceScope::Kernel,
        _ => TraceScope::UserAndKernel,
    };
    let ocaml =
        (settings & 4 != 0).then(|| OcamlExceptionInfo::new(&[0x10, 0x40], &[0x20], &[0x30]));
    let filter = (settings & 8 != 0).then(|| RangeFilter {
        start: "a".into(),
        stop: "b".into(),
    });
    let config = Config {
        scope,
        annotate_inferred_start_times: settings & 16 != 0,
        ocaml_exception_info: ocaml.clone(),
        transactions: settings & 32 == 0,
        // Both timings of sampled stacks; the accurate one with a given period or
        // with the period estimated from the samples.
        sample_timing: match settings >> 6 {
            0 => SampleTiming::MagicTrace,
            1 => SampleTiming::Accurate { period: None },
            _ => SampleTiming::Accurate {
                period: Some(Time(1000)),
            },
        },
    };
    let hits = filter.clone().map(|f| {
        let mut c = HitCollector::new(f);
        c.feed(&text);
        c.finish()
    });
    let mut parser = RecordParser::new();
    for rec in Records::new(&text) {
        assert_eq!(parser.parse(&rec, 0), parse_record(&rec, 0));
    }
    let decode = |pipelined: bool| {
        let writer = Writer::new(VecDestination::new()).ok()?;
        let mut d = Decoder::new(FxtSink::new(writer), config.clone(), hits.clone());
        // Two pieces, as a stream reader would feed them.
        let split = complete_prefix(text.as_bytes(), false);
        if pipelined {
            d.feed_in_pieces(&text[..split], 0, 64);
            d.feed_in_pieces(&text[split..], split as u64, 64);
        } else {
            d.feed(&text[..split], 0);
            d.feed(&text[split..], split as u64);
        }
        let (sink, stats, _) = d.finish();
        Some((sink.finish().ok().map(VecDestination::into_vec), stats))
    };
    assert_eq!(decode(false), decode(true));
    let t = transcript::run(
        &text,
        &TranscriptOptions {
            scope,
            ocaml_exception_info: ocaml,
            filter,
            events_output: settings & 64 != 0,
            sample_timing: config.sample_timing,
            ..TranscriptOptions::default()
        },
    );
    let _ = t.render();
});
