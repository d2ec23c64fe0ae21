//! The integration tests of `tracekit-perf`, one binary: a module per subject.

#[path = "integration/perf_data_robustness.rs"]
mod perf_data_robustness;
