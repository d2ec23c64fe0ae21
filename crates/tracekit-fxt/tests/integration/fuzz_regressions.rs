//! Inputs found by fuzzing (`fuzz/fuzz_targets/fxt_read.rs`), kept as regression
//! tests: every reader must get through them without panicking, the slice and stream
//! readers must agree, and `check` and `copy` must cope.

#![allow(clippy::unwrap_used)]

use tracekit_fxt::read::{ReadOptions, Reader, StreamReader};
use tracekit_fxt::write::{VecDestination, Writer};

fn run(data: &[u8]) {
    let mut slice = Reader::new(data);
    let mut stream = StreamReader::new(data);
    loop {
        let a = slice.next_record().map(|r| r.map(|r| format!("{r:?}")));
        let b = stream.next_record().map(|r| r.map(|r| format!("{r:?}")));
        match (&a, &b) {
            (Err(x), Err(y)) => {
                assert_eq!(x.offset, y.offset);
                assert!(x.problem.is_fatal() && y.problem.is_fatal());
                break;
            }
            _ => assert_eq!(a, b),
        }
        if a.unwrap().is_none() {
            break;
        }
    }
    assert_eq!(slice.warnings(), stream.warnings());
    let mut strict = Reader::with_options(data, ReadOptions::strict());
    for _ in 0..data.len() / 8 + 2 {
        match strict.next_raw() {
            Ok(None) => break,
            Err(e) if e.problem.is_fatal() => break,
            _ => {}
        }
    }
    let _ = tracekit_fxt::check::check(data);
    let mut w = Writer::without_header(VecDestination::new()).unwrap();
    if tracekit_fxt::copy::copy(data, &mut w).is_ok() {
        let copied = w.finish().unwrap().into_vec();
        let mut r = Reader::with_options(&copied, ReadOptions::strict());
        while r.next_record().unwrap().is_some() {}
    }
}

#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        run(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n > 0);
}

/// A large record whose size field claims 32 GiB: both readers see a record the
/// input cuts short (a warning: the trace ends there), and neither allocates it.
#[test]
fn huge_claimed_sizes_do_not_allocate() {
    let mut data = tracekit_fxt::format::MAGIC.to_le_bytes().to_vec();
    data.extend_from_slice(&(0xF | (0xFFFF_FFFFu64 << 4)).to_le_bytes());
    data.extend_from_slice(&[0; 64]);
    run(&data);
    let mut s = StreamReader::new(&data[..]);
    assert!(s.next_record().unwrap().is_some());
    assert!(s.next_record().unwrap().is_none());
    assert_eq!(s.warnings().len(), 1);
    assert_eq!(s.warnings()[0].offset, 8);
    assert!(matches!(
        s.warnings()[0].problem,
        tracekit_fxt::read::Problem::Truncated { .. }
    ));
    // Strictly read, the cut is an error.
    let mut strict = StreamReader::with_options(&data[..], ReadOptions::strict());
    assert!(strict.next_record().unwrap().is_some());
    assert_eq!(strict.next_record().unwrap_err().offset, 8);
}

/// A record really over the stream reader's limit is refused, not buffered.
#[test]
fn records_over_the_stream_limit_are_refused() {
    let mut data = tracekit_fxt::format::MAGIC.to_le_bytes().to_vec();
    // A large blob record of 4097 words (32776 bytes), all present.
    data.extend_from_slice(&(0xF | (4097u64 << 4)).to_le_bytes());
    data.extend_from_slice(&vec![0; 4096 * 8]);
    let options = ReadOptions {
        max_record_bytes: 16 * 1024,
        ..ReadOptions::default()
    };
    let mut s = StreamReader::with_options(&data[..], options);
    assert!(s.next_record().unwrap().is_some());
    let e = s.next_record().unwrap_err();
    assert_eq!(e.offset, 8);
    assert!(matches!(
        e.problem,
        tracekit_fxt::read::Problem::RecordTooLarge { .. }
    ));
}
