//! The integration tests of `tracekit-callstack`, one binary: a module per subject.

mod corpus;
mod fxt_output;
mod pipelined;
mod writer_rules;
