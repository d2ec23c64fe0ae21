//! The integration tests of `tracekit-perf`, one binary: a module per subject.

mod perf_data_robustness;
