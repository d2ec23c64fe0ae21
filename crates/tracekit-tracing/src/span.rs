//! What the layer keeps per span: its fields and their encoded FXT arguments (in
//! the span's extensions), its bookkeeping across threads, and a thread's cached
//! copy for entering it again without a registry lookup.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use tracekit_fxt::format::StringRef;
use tracekit_fxt::write::{EncodedArgs, EventHeader};

use crate::fields::Value;

/// A span's fields as arguments (by field index), kept in its extensions.
#[derive(Default)]
pub(crate) struct SpanArgs {
    pub(crate) args: Vec<(usize, Value)>,
    /// The level and `args`, encoded for the span's begin records.
    pub(crate) encoded: EncodedArgs,
    /// What threads read and write while they only hold the extensions' read lock,
    /// and what their caches of entered spans check.
    pub(crate) state: Arc<SpanState>,
}

/// A span's bookkeeping across threads, in atomics so that entering takes the
/// extensions' read lock only, or no lock at all for a span in the thread's cache.
#[derive(Default)]
pub(crate) struct SpanState {
    /// The thread it was first entered on (0: none yet), and when, for the async
    /// track.
    pub(crate) first_thread: AtomicU64,
    pub(crate) first_enter: AtomicU64,
    pub(crate) moved: AtomicBool,
    /// Flows from spans it follows, ended at its next entry (`has_flows` says
    /// whether there are any without taking the lock).
    pub(crate) flows: Mutex<Vec<u64>>,
    pub(crate) has_flows: AtomicBool,
    /// Counts `record`s: a cached copy of the encoded arguments older than this
    /// is stale.
    pub(crate) version: AtomicU64,
    /// Some thread keeps it in its cache (counted in `Shared::cached`).
    pub(crate) cached: AtomicBool,
    /// Closed: a cache entry for its id is stale, since the registry reuses ids.
    pub(crate) closed: AtomicBool,
}

/// A span this thread entered before: what its begin record needs, so that
/// entering it again looks nothing up in the registry.
pub(crate) struct CachedSpan {
    pub(crate) id: u64,
    pub(crate) state: Arc<SpanState>,
    /// `state.version` when `encoded` was copied.
    pub(crate) version: u64,
    pub(crate) name: StringRef<'static>,
    pub(crate) category: StringRef<'static>,
    /// The callsite's headers (see [`Callsite`](crate::local::Callsite)).
    pub(crate) begin: Option<EventHeader<()>>,
    pub(crate) end: Option<EventHeader<()>>,
    pub(crate) encoded: EncodedArgs,
}

/// Entries of a thread's cache of entered spans, direct-mapped by the id's low
/// bits (the registry's slot within its page).
pub(crate) const SPAN_CACHE: usize = 256;
