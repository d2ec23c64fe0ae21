//! The integration tests of `tracekit-tracing`, one binary: a module per subject.

#[path = "integration/async_tasks.rs"]
mod async_tasks;
#[path = "integration/dependencies.rs"]
mod dependencies;
#[path = "integration/lifecycle.rs"]
mod lifecycle;
#[path = "integration/readback.rs"]
mod readback;
