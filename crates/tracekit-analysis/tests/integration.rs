//! The integration tests of `tracekit-analysis`, one binary: a module per subject.

#[path = "integration/bounded.rs"]
mod bounded;
#[path = "integration/corpus.rs"]
mod corpus;
#[path = "dump/mod.rs"]
mod dump;
#[path = "integration/growing.rs"]
mod growing;
#[path = "integration/site_skip.rs"]
mod site_skip;
#[path = "integration/tables.rs"]
mod tables;
#[path = "integration/trace_tables.rs"]
mod trace_tables;
