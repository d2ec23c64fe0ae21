//! The timeline against the corpus's FXT traces, read independently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "integration/bounded.rs"]
mod bounded;
#[path = "integration/corpus.rs"]
mod corpus;
