//! `tracekit view`: a trace in the browser.
//!
//! The viewer is a small HTTP server ([`server`]) that answers, as JSON, the
//! same queries as tracekit's subcommands, and a page, compiled into the
//! binary, that draws them. Each kind of trace it serves is an [`Api`]: its
//! endpoints, their named parameters, answers and errors. There are two:
//! - a memtrace trace ([`memtrace`]): the trace's info, the memory graph, the
//!   filter, the top sites, the flame graph and the comparison with another
//!   trace;
//! - a timeline of slices ([`timeline`]: FXT, or perf data decoded into it):
//!   its threads as tracks of nested slices, drawn at any zoom from answers
//!   bounded by the pixels shown.
#![deny(missing_docs)]

pub mod api;
pub mod browser;
mod follow;
pub mod json;
pub mod memtrace;
pub mod server;
pub mod timeline;

pub use api::Api;
pub use memtrace::{Decoder, Memtrace, Trace};
pub use server::{BindError, Served, Viewer};
pub use timeline::{TimelineEndpoint, TimelineTrace};
