//! The integration tests of `tracekit-fxt`, one binary: a module per subject.

mod check_matrix;
mod corpus;
mod fuzz_regressions;
mod golden;
mod pyfxt;
mod roundtrip;
mod write;
