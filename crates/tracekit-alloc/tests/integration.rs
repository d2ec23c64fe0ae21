//! The integration tests of `tracekit-alloc`, one binary: a module per subject.

#[path = "common/mod.rs"]
mod common;
#[path = "integration/dependencies.rs"]
mod dependencies;
#[path = "integration/edges.rs"]
mod edges;
#[path = "integration/robustness.rs"]
mod robustness;
#[path = "integration/workload.rs"]
mod workload;
