//! Constants of the on-disk format shared by the reader and the writer, and
//! the packet header's layout. The whole format, section by section, is in
//! `docs/memtrace-format.md` at the repository root.
//!
//! A trace is a bare concatenation of CTF-style packets, all integers
//! little-endian. Every packet starts with this header:
//!
//! | offset v1/v2 | offset v3 | size | field |
//! | --- | --- | --- | --- |
//! | 0 | 0 | u32 | magic `0xc1fc1fc1` |
//! | 4 | 4 | u32 | packet size in **bits**, header included |
//! | 8 | 8 | i64 | time_begin (µs since the epoch) |
//! | 16 | 16 | i64 | time_end |
//! | 24 | 24 | u32 | flush duration (always 0) |
//! | 28 | 28 | u16 | format version |
//! | 30 | 30 | i64 | pid |
//! | – | 38 | u16 | domain (v3 only) |
//! | 38 | 40 | u16 | cache verifier: bucket index (`0xffff` = none) |
//! | 40 | 42 | u16 | cache verifier: predicted bucket |
//! | 42 | 44 | i64 | cache verifier: cached code |
//! | 50 | 52 | i64 | alloc_id_begin |
//! | 58 | 60 | i64 | alloc_id_end (exclusive) |
//!
//! The header is 66 bytes in v1 and v2, 68 in v3. Each event then starts with
//! a u32 whose top 7 bits (25–31) are the event code and whose low 25 bits are
//! the low bits of its timestamp.

// Each side uses its own part of these (the reader no packet size limit, the
// writer no version check); built with one side only, the rest goes unused.
#![cfg_attr(not(all(feature = "read", feature = "write")), allow(dead_code))]

pub(crate) const MAGIC: u32 = 0xc1fc_1fc1;

/// The newest format version.
pub(crate) const CURRENT_VERSION: u16 = 3;

/// Header size of v1/v2 packets; v3 adds a u16 domain.
pub(crate) const HEADER_SIZE_V2: usize = 66;
/// Header size of v3 packets.
pub(crate) const HEADER_SIZE_V3: usize = 68;

pub(crate) const fn header_size(version: u16) -> usize {
    if version >= 3 {
        HEADER_SIZE_V3
    } else {
        HEADER_SIZE_V2
    }
}

/// The writer's packet buffer, header included. Below 64 KiB so that a
/// packet goes out in one `write(2)`.
pub(crate) const MAX_PACKET_SIZE: usize = 1 << 15;

pub(crate) const EVENT_TIME_BITS: u32 = 25;
pub(crate) const EVENT_TIME_MASK: i64 = (1 << EVENT_TIME_BITS) - 1;
/// A packet never spans more than this (µs), less than 2^25 µs, so the low
/// 25 bits of an event's time identify it within its packet.
pub(crate) const PACKET_MAX_TIME: i64 = 30_000_000;

pub(crate) const EV_TRACE_INFO: u8 = 0;
pub(crate) const EV_LOCATION: u8 = 1;
pub(crate) const EV_ALLOC: u8 = 2;
pub(crate) const EV_PROMOTE: u8 = 3;
pub(crate) const EV_COLLECT: u8 = 4;
/// Short allocs have codes 101..=116 for lengths 1..=16.
pub(crate) const EV_SHORT_ALLOC_BASE: u8 = 100;

/// Buckets of the per-domain backtrace cache.
pub(crate) const CACHE_SIZE: usize = 1 << 14;
pub(crate) const CACHE_MASK: usize = CACHE_SIZE - 1;

/// Largest encoded location event body (before the writer falls back to
/// `Location.unknown`) and largest encoded backtrace.
pub(crate) const LOCATION_MAX_LENGTH: usize = 4096;
pub(crate) const BACKTRACE_MAX_LENGTH: usize = 4096;

/// Upper bound on one event's size; the writer flushes when less is free.
pub(crate) const MAX_EVENT_SIZE: usize = 100 + LOCATION_MAX_LENGTH;

/// Entries in each move-to-front table (file names, and per file the
/// definition names); index 31 means "new name follows".
pub(crate) const MTF_LENGTH: usize = 31;

/// One move-to-front table of names, each with a value (per file, its table of
/// definition names). The reader's and the writer's moves are in their
/// `location` modules.
#[derive(Clone, Debug)]
pub(crate) struct Mtf<T> {
    pub(crate) slots: [Option<(crate::types::Name, T)>; MTF_LENGTH],
}

impl<T> Default for Mtf<T> {
    fn default() -> Self {
        Mtf {
            slots: std::array::from_fn(|_| None),
        }
    }
}

/// OCaml's `max_int` on 64-bit hosts.
pub(crate) const OCAML_MAX_INT: i64 = (1 << 62) - 1;

/// OCaml `Int64.to_int`: keep the low 63 bits, sign-extended.
#[inline(always)]
pub(crate) const fn ocaml_int(v: i64) -> i64 {
    (v << 1) >> 1
}
