//! The integration tests of `tracekit-export`, one binary: a module per subject.

mod readme_schema;
