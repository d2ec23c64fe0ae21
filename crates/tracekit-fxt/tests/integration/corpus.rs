//! Every corpus file reads to the end, with exactly the warnings documented here.

#![allow(clippy::unwrap_used)]

use tracekit_fxt::read::{Problem, ReadOptions, Reader, Record, StreamReader};

/// (file, records yielded, expected warnings).
fn expectations() -> Vec<(&'static str, usize, Vec<Problem>)> {
    vec![
        ("magic_trace_sample.fxt", 35463, vec![]),
        ("jst_tracing_demo.fxt", 32, vec![]),
        ("ocaml_trace_fuchsia_t2_first.fxt", 3, vec![]),
        // The provider info (id 1) comes after the thread record, which therefore
        // belongs to provider 0: the three events' thread ref 5 is unbound in provider
        // 1's table, as Perfetto and the Fuchsia readers also see it.
        (
            "ocaml_trace_fuchsia_t2_second.fxt",
            7,
            vec![Problem::UnknownThreadRef(5); 3],
        ),
        ("synthetic_all_records.fxt", 46, vec![]),
    ]
}

#[test]
fn every_corpus_file_reads() {
    let Some(_) = tracekit_testutil::corpus_path("fxt") else {
        return;
    };
    for (name, count, warnings) in expectations() {
        let data = tracekit_testutil::corpus_bytes(format!("fxt/{name}")).unwrap();
        let mut r = Reader::new(&data);
        let mut n = 0;
        while let Some(_rec) = r.next_record().unwrap_or_else(|e| panic!("{name}: {e}")) {
            n += 1;
        }
        assert_eq!(n, count, "{name}: record count");
        let got: Vec<_> = r.warnings().iter().map(|w| w.problem).collect();
        assert_eq!(got, warnings, "{name}: warnings");
        assert_eq!(r.offset() as usize, data.len());

        // The streaming reader agrees.
        let mut s = StreamReader::new(&data[..]);
        let mut m = 0;
        while s.next_record().unwrap().is_some() {
            m += 1;
        }
        assert_eq!(m, count, "{name}: stream record count");
        assert_eq!(s.warning_count(), warnings.len() as u64);

        // Strict mode accepts exactly the files without warnings.
        let mut strict = Reader::with_options(&data, ReadOptions::strict());
        let mut result = Ok(());
        loop {
            match strict.next_raw() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        assert_eq!(
            result.is_ok(),
            warnings.is_empty(),
            "{name}: strict {result:?}"
        );
    }
}

#[test]
fn magic_trace_sample_contents() {
    let Some(data) = tracekit_testutil::corpus_bytes("fxt/magic_trace_sample.fxt") else {
        return;
    };
    let mut r = Reader::new(&data);
    let (mut begins, mut ends, mut strings, mut inferred) = (0, 0, 0, 0);
    let mut max_ns = 0;
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::String { .. } => strings += 1,
            Record::Event(e) => {
                use tracekit_fxt::format::EventKind;
                match e.kind {
                    EventKind::DurationBegin => {
                        begins += 1;
                        assert!(e.args.get("address").is_some());
                        assert!(e.args.get("symbol").is_some());
                    }
                    EventKind::DurationEnd => ends += 1,
                    other => panic!("unexpected {other:?}"),
                }
                if e.args.get("inferred_start_time").is_some() {
                    inferred += 1;
                }
                assert!(e.category.is_empty());
                max_ns = max_ns.max(e.ticks);
            }
            _ => {}
        }
    }
    assert_eq!((begins, ends), (17296, 17296));
    assert_eq!(strings, 864); // "process" included
    assert_eq!(inferred, 18);
    assert_eq!(max_ns, 329913);
}
