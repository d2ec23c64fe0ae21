//! tracekit-alloc's parsers of system data (ELF program headers,
//! `/proc/self/maps` lines) and of its raw record queues.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tracekit_alloc::__fuzz::elf(data);
    if let Ok(s) = std::str::from_utf8(data) {
        tracekit_alloc::__fuzz::maps_line(s);
    }
    let words: Vec<u64> = data
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    tracekit_alloc::__fuzz::records(&words);
});
