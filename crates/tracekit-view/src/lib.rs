//! `tracekit memtrace view`: a memtrace trace's analyses in the browser.
//!
//! The viewer is a small HTTP server ([`server`]) that answers, as JSON, the
//! same queries as the `tracekit memtrace` subcommands ([`api`]), and a
//! single-page app, compiled into the binary, that draws them: the trace's
//! info, the memory graph, the filter, the top sites, the flame graph and the
//! comparison with another trace.
#![deny(missing_docs)]

pub mod api;
pub mod browser;
pub mod server;

pub use api::{ApiError, Endpoint, Trace, answer};
pub use server::{BindError, Served, Viewer};
