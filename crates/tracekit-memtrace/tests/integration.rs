//! The integration tests of `tracekit-memtrace`, one binary: a module per subject.

mod backtrace_prediction;
#[path = "common/mod.rs"]
mod common;
mod copy_property;
mod corpus;
mod damage;
mod fuzz_regressions;
mod roundtrip;
mod stream;
mod writer;
