//! Damaged perf.data files given to the direct reader: each is an
//! `Error::PerfData` whose offset lies within the file (or reads cleanly), never a
//! panic, a hang or an allocation the file does not justify.
//!
//! `tests/data/crash_*.data` are inputs that crashed the reader (found by the
//! `perf_data` fuzz target, or built by hand where noted), minimized;
//! `tests/data/recording_dwarf.data` is a real recording (`perf record -e
//! cpu-clock:u -F 2000 --timestamp --call-graph dwarf,1024` of a small C program),
//! truncated and bit-flipped here.
#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use tracekit_callstack::event::{Event, SampleData};
use tracekit_columns::Spill;
use tracekit_perf::Error;
use tracekit_perf::data::{PerfData, ReadOptions, ReadStats};
use tracekit_symbols::DebugDirs;

fn data_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(data_file(name)).unwrap()
}

/// Reads `bytes` through, touching every frame; the frames seen and the result.
fn read(bytes: &[u8]) -> (usize, tracekit_perf::Result<ReadStats>) {
    let options = ReadOptions {
        kernel_symbols: false,
        debug_dirs: DebugDirs::none(),
        name_cache: None,
        spill: Spill::memory(),
    };
    let size = bytes.len() as u64;
    let mut frames = 0;
    let result =
        PerfData::from_reader(Cursor::new(bytes), "test.data".into(), size).and_then(|f| {
            f.samples(
                &options,
                |_| {},
                |event| {
                    if let Event::Sample(s) = event
                        && let SampleData::Callstack(stack) = &s.data
                    {
                        frames += stack.len();
                    }
                },
            )
        });
    (frames, result)
}

/// The message of the `Error::PerfData` that reading `bytes` ends in, checking
/// that its offset lies within the file.
fn damaged(bytes: &[u8]) -> String {
    match read(bytes).1 {
        Err(Error::PerfData {
            offset, message, ..
        }) => {
            assert!(
                offset <= bytes.len() as u64,
                "offset {offset} past the file's {} bytes ({message})",
                bytes.len()
            );
            message
        }
        other => panic!("expected a perf.data error, got {other:?}"),
    }
}

/// Reading `bytes` either succeeds or ends in one of the reader's typed errors,
/// with an offset within the file.
fn no_panic(bytes: &[u8], what: &str) {
    match read(bytes).1 {
        Ok(_) | Err(Error::PerfDataIntelPt { .. } | Error::PerfDataArch { .. }) => {}
        Err(Error::PerfData {
            offset, message, ..
        }) => assert!(
            offset <= bytes.len() as u64,
            "{what}: offset {offset} past the file's {} bytes ({message})",
            bytes.len()
        ),
        Err(e) => panic!("{what}: not a perf.data error: {e}"),
    }
}

/// A truncated recording's header claims sections past the end: the error's
/// offset was where a seek past the end had left the reader (54256 in a 104-byte
/// file); it is now the header field that claims them.
#[test]
fn truncated_header_reports_an_offset_within_the_file() {
    let message = damaged(&bytes("crash_offset_past_end.data"));
    assert!(message.contains("section"), "{message}");
    assert!(message.contains("past the file's 104 bytes"), "{message}");
}

/// A feature section of 2^60-odd bytes: linux-perf-data allocated it before reading.
#[test]
fn feature_section_larger_than_the_file() {
    let message = damaged(&bytes("crash_feature_section_size.data"));
    assert!(message.contains("feature section"), "{message}");
}

/// An `EVENT_DESC` section counting ~10^9 events: linux-perf-data reserved room
/// for them all (capacity overflow or out of memory).
#[test]
fn event_description_count_past_its_section() {
    let message = damaged(&bytes("crash_event_desc_count.data"));
    assert!(message.contains("event description"), "{message}");
}

/// A data section whose offset plus size overflows: an add-overflow panic in
/// linux-perf-data. (Its attribute section, also past the end, is reported first.)
#[test]
fn data_section_end_overflows() {
    let message = damaged(&bytes("crash_data_section_overflow.data"));
    assert!(
        message.contains("ends past the file's 188 bytes"),
        "{message}"
    );
}

/// A `SAMPLE` record whose call-chain count times 8 overflows: a multiply-overflow
/// panic in linux-perf-event-reader.
#[test]
fn callchain_count_past_its_record() {
    let message = damaged(&bytes("crash_callchain_overflow.data"));
    assert!(message.contains("call chain"), "{message}");
}

/// An `MMAP2` record with a build id of more than 20 bytes: an `assert!` in
/// linux-perf-event-reader.
#[test]
fn mmap2_build_id_longer_than_20_bytes() {
    let message = damaged(&bytes("crash_mmap2_build_id.data"));
    assert!(message.contains("build id"), "{message}");
}

/// Built by hand: a header attribute size of 0, which linux-perf-data divides by.
#[test]
fn attribute_size_zero() {
    let message = damaged(&bytes("crash_attr_size_zero.data"));
    assert!(message.contains("attribute size of 0"), "{message}");
}

/// Built by hand: an `AUXTRACE` record claiming 2^40 bytes of trace data, for
/// which linux-perf-data sized a buffer before reading.
#[test]
fn auxtrace_data_past_the_data_section() {
    let message = damaged(&bytes("crash_auxtrace_size.data"));
    assert!(message.contains("AUXTRACE"), "{message}");
}

#[test]
fn recording_reads_whole() {
    let data = bytes("recording_dwarf.data");
    let (frames, result) = read(&data);
    let stats = result.unwrap();
    assert!(stats.samples > 0, "{stats:?}");
    assert!(
        frames >= stats.samples as usize,
        "{frames} frames, {stats:?}"
    );
}

/// The recording cut at many lengths (every byte of the header and the first
/// records, then every 61st), and with bits flipped (one to eight at a time).
#[test]
fn truncated_and_bit_flipped_recording() {
    let data = bytes("recording_dwarf.data");
    let cuts = (0..data.len().min(2048)).chain((2048..data.len()).step_by(61));
    for cut in cuts {
        no_panic(&data[..cut], &format!("cut at {cut}"));
    }
    // xorshift64: the same flips on every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..1500 {
        let mut flipped = data.clone();
        let flips = 1 + round % 8;
        for _ in 0..flips {
            let at = (next() % data.len() as u64) as usize;
            flipped[at] ^= 1 << (next() % 8);
        }
        no_panic(&flipped, &format!("round {round}, {flips} flips"));
    }
}

/// A mapping that names a FIFO: opening it to read symbols or unwinding sections
/// blocked until a writer came (and a device such as `/dev/zero` was read without
/// end). Such files are not read now.
#[test]
fn mapping_of_a_fifo_is_not_opened() {
    let dir = tracekit_testutil::scratch();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: mkfifo failed");
        return;
    }
    let mut data = bytes("recording_dwarf.data");
    // The recorded program's path, in its MMAP2 records, becomes the FIFO's.
    let program = b"/tmp/tracekit-perf-test-seed/a-program-whose-long-path-leaves-room-for-other-paths-in-tests\0";
    let fifo = fifo.to_str().unwrap().as_bytes();
    assert!(fifo.len() < program.len(), "{}", fifo.len());
    let mut replaced = 0;
    let mut at = 0;
    while let Some(i) = data[at..].windows(program.len()).position(|w| w == program) {
        let start = at + i;
        data[start..start + program.len()].fill(0);
        data[start..start + fifo.len()].copy_from_slice(fifo);
        replaced += 1;
        at = start + program.len();
    }
    assert!(replaced > 0);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (_, result) = read(&data);
        tx.send(result.map(|s| s.samples).map_err(|e| e.to_string()))
            .unwrap();
    });
    let samples = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the reader blocked on the FIFO")
        .unwrap();
    assert!(samples > 0);
}
