//! The integration tests of `tracekit-callstack`, one binary: a module per subject.

#[path = "integration/corpus.rs"]
mod corpus;
#[path = "integration/fxt_output.rs"]
mod fxt_output;
#[path = "integration/pipelined.rs"]
mod pipelined;
#[path = "integration/writer_rules.rs"]
mod writer_rules;
