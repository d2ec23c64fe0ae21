//! The integration tests of `tracekit-fxt`, one binary: a module per subject.

#[path = "integration/check_matrix.rs"]
mod check_matrix;
#[path = "integration/corpus.rs"]
mod corpus;
#[path = "integration/fuzz_regressions.rs"]
mod fuzz_regressions;
#[path = "integration/golden.rs"]
mod golden;
#[path = "integration/pyfxt.rs"]
mod pyfxt;
#[path = "integration/roundtrip.rs"]
mod roundtrip;
#[path = "integration/write.rs"]
mod write;
