//! Inputs the tracer reads from the system (ELF program headers of mapped
//! files, `/proc/self/maps` lines) and its own raw record queues never make
//! it panic, whatever the bytes: proptest feeds arbitrary data to the
//! internal parsers through the crate's hidden `__fuzz` entry points.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn elf_program_headers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        tracekit_alloc::__fuzz::elf(&bytes);
    }

    #[test]
    fn elf_with_a_valid_prefix_never_panics(
        phoff in prop_oneof![0u64..600, (u64::MAX - 600)..=u64::MAX], entsize in 0u16..80, count in 0u16..20,
        tail in proptest::collection::vec(any::<u8>(), 0..700),
    ) {
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[32..40].copy_from_slice(&phoff.to_le_bytes());
        b[54..56].copy_from_slice(&entsize.to_le_bytes());
        b[56..58].copy_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&tail);
        tracekit_alloc::__fuzz::elf(&b);
    }

    #[test]
    fn maps_lines_never_panic(line in ".{0,120}") {
        tracekit_alloc::__fuzz::maps_line(&line);
    }

    #[test]
    fn queue_records_never_panic(words in proptest::collection::vec(any::<u64>(), 0..64)) {
        tracekit_alloc::__fuzz::records(&words);
    }
}
