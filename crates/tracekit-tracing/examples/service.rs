//! A tokio service seen whole: its spans traced by the tracing layer and its
//! heap by tracekit-alloc, each span's slice carrying what was allocated
//! inside it (arguments `allocated_bytes` and `allocations`).
//!
//! ```sh
//! TRACEKIT_FXT=service.fxt MEMTRACE=service.ctf MEMTRACE_RATE=1 \
//!     cargo run --release -p tracekit-tracing --example service
//! tracekit fxt top --by allocated service.fxt
//! ```
//!
//! Three tasks on two worker threads each handle four requests. A `request`
//! span allocates a 256-byte reply of its own and holds two nested spans:
//! `load`, which allocates [`load_bytes`], and `parse`, which allocates
//! [`PARSE_BYTES`]. At `MEMTRACE_RATE=1` (every word sampled) those are the
//! figures the trace shows, to the byte.
//!
//! `SERVICE_PACE_MS=N` makes each task wait N ms between its requests, so that
//! the service runs long enough to be watched while it writes its traces:
//!
//! ```sh
//! TRACEKIT_FXT=service.fxt TRACEKIT_FXT_FLUSH_MS=100 SERVICE_PACE_MS=200 \
//!     cargo run --release -p tracekit-tracing --example service &
//! tracekit view --follow service.fxt
//! ```

use std::hint::black_box;

use tracing::{Instrument, info_span};

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

/// Tasks spawned.
pub const TASKS: u64 = 3;
/// Requests each task handles.
pub const REQUESTS: u64 = 4;
/// Bytes a `request` span allocates itself (its reply).
pub const REPLY_BYTES: u64 = 256;
/// Bytes `parse` allocates.
pub const PARSE_BYTES: u64 = 8000;

/// Bytes `load` allocates for request `n` of task `task`.
pub fn load_bytes(task: u64, n: u64) -> u64 {
    4096 * (task + 1) + 64 * n
}

#[allow(dead_code)]
fn main() {
    tracekit_alloc::trace_if_requested();
    let guard = tracekit_tracing::init_if_requested();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let pace = std::env::var("SERVICE_PACE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_millis);
    runtime.block_on(serve(pace));
    drop(runtime);
    drop(guard);
}

/// The service: [`TASKS`] tasks of [`REQUESTS`] requests each, `pace` apart
/// (none: one after the other).
pub async fn serve(pace: Option<std::time::Duration>) {
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            tokio::spawn(
                async move {
                    for n in 0..REQUESTS {
                        request(task, n);
                        match pace {
                            Some(p) => tokio::time::sleep(p).await,
                            None => tokio::task::yield_now().await,
                        }
                    }
                }
                .instrument(info_span!("task", task)),
            )
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// One request: its spans are made before it is entered, so that what the
/// span machinery allocates to make them is not inside it.
fn request(task: u64, n: u64) {
    let span = info_span!("request", task, n);
    let load = info_span!(parent: &span, "load");
    let parse = info_span!(parent: &span, "parse");
    span.in_scope(|| {
        let reply = Box::new([0u8; REPLY_BYTES as usize]);
        load.in_scope(|| black_box(vec![1u8; load_bytes(task, n) as usize]));
        parse.in_scope(|| black_box(Vec::<u64>::with_capacity(PARSE_BYTES as usize / 8)));
        black_box(reply);
    });
}
