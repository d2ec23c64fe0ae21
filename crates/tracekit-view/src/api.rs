//! The shape every kind of trace is served in: its endpoints (the names
//! under `/api/`), the query a request's named parameters make, the answer
//! (JSON text) and the errors. The server knows no kind: it guards, routes,
//! queues and keeps answers through this trait alone. [`crate::memtrace`]
//! and [`crate::timeline`] implement it.
//!
//! A request's parameters reach a kind as named parameters, in the order
//! asked (`?from=0&to=1000`), without the `token`. The kind checks them and
//! makes its [`Api::Query`], the key its answers are kept by: two requests
//! that ask one thing in two spellings share one answer.

use std::fmt::Debug;
use std::hash::Hash;

/// A request's named parameters, name and value, in the order asked.
pub type Params = Vec<(String, String)>;

/// Most rows a table answer lists, for every kind: "all" is not asked of a
/// server, whose answers are bounded whatever the trace.
pub const MAX_ROWS: usize = 10_000;

/// A kind of trace as the server serves it.
pub trait Api: Send + Sync + 'static {
    /// One of its endpoints.
    type Endpoint: Copy + Eq + Hash + Debug + Send + Sync + 'static;
    /// A request's parameters, checked, in the form its answer is kept by.
    type Query: Clone + Eq + Hash + Debug + Send + Sync + 'static;
    /// Why a request has no answer.
    type Error: std::error::Error;

    /// The kind's name, as `/api/features` gives it.
    const KIND: &'static str;

    /// The path of the kind's page, served at `/`.
    const PAGE: &'static str;

    /// Every endpoint and its name under `/api/`, in the order the workers'
    /// queues take turns.
    const ENDPOINTS: &'static [(&'static str, Self::Endpoint)];

    /// Whether `endpoint`'s answers were made when the trace was loaded:
    /// they are given at once, by the thread that reads requests, rather
    /// than queued for a worker.
    fn is_ready(endpoint: Self::Endpoint) -> bool;

    /// The HTTP status a refusal is answered with.
    fn status(error: &Self::Error) -> u16;

    /// The query `params` ask of `endpoint`. Cheap: it checks the
    /// parameters' names and forms, and makes no answer.
    fn query(&self, endpoint: Self::Endpoint, params: Params) -> Result<Self::Query, Self::Error>;

    /// The bytes `query` holds, as the answer cache weighs its keys.
    fn query_bytes(query: &Self::Query) -> usize;

    /// The answer of `endpoint` to `query`, JSON.
    fn answer(&self, endpoint: Self::Endpoint, query: &Self::Query) -> Result<String, Self::Error>;

    /// Whether a second trace is served to compare with.
    fn compares(&self) -> bool {
        false
    }

    /// Of a trace followed while a program writes it: how many times its
    /// data has grown (answers made before the last growth are not given
    /// again), and whether its writer may still write more. `None` for a
    /// trace read whole.
    fn followed(&self) -> Option<(u64, bool)> {
        None
    }

    /// Work that makes later answers cheaper, run on a thread of its own
    /// beside the serving; answers are right before it is done too.
    fn prepare(&self) {}
}

/// The endpoint of `A` named `name` (the path after `/api/`).
pub fn endpoint<A: Api>(name: &str) -> Option<A::Endpoint> {
    A::ENDPOINTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, e)| e)
}
