//! The integration tests of `tracekit-tracing`, one binary: a module per subject.

mod async_tasks;
mod lifecycle;
mod readback;
