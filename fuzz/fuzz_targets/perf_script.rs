//! `perf script` text parser and call-stack state machine: no input may panic, hang or
//! allocate without bound. The first byte picks the settings (scope, OCaml trap tables,
//! filter); the rest is the text, decoded once to FXT and once as a transcript.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_callstack::decode::{Decoder, HitCollector};
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::fxt_sink::FxtSink;
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::script::complete_prefix;
use tracekit_callstack::transcript::{self, TranscriptOptions};
use tracekit_callstack::writer::{Config, TraceScope};
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
    let ocaml = (settings & 4 != 0).then(|| OcamlExceptionInfo::new(&[0x10, 0x40], &[0x20], &[0x30]));
    let filter = (settings & 8 != 0).then(|| RangeFilter {
        start: "a".into(),
        stop: "b".into(),
    });
    let config = Config {
        scope,
        annotate_inferred_start_times: settings & 16 != 0,
        ocaml_exception_info: ocaml.clone(),
        transactions: settings & 32 == 0,
    };
    let hits = filter.clone().map(|f| {
        let mut c = HitCollector::new(f);
        c.feed(&text);
        c.finish()
    });
    let Ok(writer) = Writer::new(VecDestination::new()) else {
        return;
    };
    let mut d = Decoder::new(FxtSink::new(writer), config, hits);
    // Two pieces, as a stream reader would feed them.
    let split = complete_prefix(text.as_bytes(), false);
    d.feed(&text[..split], 0);
    d.feed(&text[split..], split as u64);
    let (sink, _, _) = d.finish();
    let _ = sink.finish();
    let t = transcript::run(
        &text,
        &TranscriptOptions {
            scope,
            ocaml_exception_info: ocaml,
            filter,
            events_output: settings & 64 != 0,
            ..TranscriptOptions::default()
        },
    );
    let _ = t.render();
});
