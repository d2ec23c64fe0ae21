//! The integration tests of `tracekit-export`, one binary: a module per subject.

#[path = "integration/readme_schema.rs"]
mod readme_schema;
