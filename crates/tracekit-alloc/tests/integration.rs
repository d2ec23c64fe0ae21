//! The integration tests of `tracekit-alloc`, one binary: a module per subject.

#[path = "common/mod.rs"]
mod common;
mod edges;
mod robustness;
mod workload;
