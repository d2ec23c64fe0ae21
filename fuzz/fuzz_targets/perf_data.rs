//! Any bytes given to the direct perf.data reader (`PerfData::from_reader`, then
//! `samples`): no panic, no hang, bounded memory. A damaged file is an
//! `Error::PerfData` whose offset lies within the file (or one of the typed
//! refusals: Intel PT, a DWARF recording of another architecture); the events
//! of a file that reads are all touched. Kernel symbols and separate debug files
//! are off, so that nothing depends on this machine's `/proc/kallsyms` or debug
//! packages (which would also make each run some fifty times slower); the objects a
//! recording names are still read for symbols and unwinding.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use tracekit_callstack::event::{Event, SampleData};
use tracekit_perf::Error;
use tracekit_perf::data::{PerfData, ReadOptions};
use tracekit_symbols::DebugDirs;

fuzz_target!(|data: &[u8]| {
    let size = data.len() as u64;
    let check = |e: Error| match e {
        Error::PerfData { offset, .. } => {
            assert!(
                offset <= size,
                "error offset {offset} past the file's {size} bytes"
            )
        }
        Error::PerfDataIntelPt { .. } | Error::PerfDataArch { .. } => {}
        other => panic!("not a perf.data error: {other}"),
    };
    let file = match PerfData::from_reader(Cursor::new(data), "fuzz".into(), size) {
        Ok(f) => f,
        Err(e) => return check(e),
    };
    let options = ReadOptions {
        kernel_symbols: false,
        debug_dirs: DebugDirs::none(),
        name_cache: None,
    };
    let mut last = 0;
    let mut frames = 0usize;
    let read = file.samples(
        &options,
        |bytes| {
            assert!(
                bytes <= size,
                "progress {bytes} past the file's {size} bytes"
            );
            last = bytes;
        },
        |event| {
            if let Event::Sample(s) = event
                && let SampleData::Callstack(stack) = &s.data
            {
                frames += stack.len();
                for l in stack {
                    std::hint::black_box(format!("{:?}", l.symbol));
                }
            }
        },
    );
    match read {
        Ok(stats) => {
            assert_eq!(stats.bytes, size);
            assert!(stats.samples <= stats.records);
        }
        Err(e) => check(e),
    }
    std::hint::black_box((last, frames));
});
