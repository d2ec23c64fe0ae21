//! The integration tests of `tracekit-memtrace`, one binary: a module per subject.

#[path = "integration/backtrace_prediction.rs"]
mod backtrace_prediction;
#[path = "common/mod.rs"]
mod common;
#[path = "integration/copy_property.rs"]
mod copy_property;
#[path = "integration/corpus.rs"]
mod corpus;
#[path = "integration/damage.rs"]
mod damage;
#[path = "integration/fuzz_regressions.rs"]
mod fuzz_regressions;
#[path = "integration/roundtrip.rs"]
mod roundtrip;
#[path = "integration/stream.rs"]
mod stream;
#[path = "integration/writer.rs"]
mod writer;
