//! The integration tests of `tracekit-analysis`, one binary: a module per subject.

mod corpus;
#[path = "dump/mod.rs"]
mod dump;
mod site_skip;
mod tables;
