//! An async program with several tasks on tokio's multi-threaded runtime, traced
//! as FXT:
//!
//! ```sh
//! TRACEKIT_FXT=tasks.fxt cargo run --release -p tracekit-tracing --example tasks
//! ```
//!
//! then open `tasks.fxt` with `tracekit view tasks.fxt`, or in Perfetto
//! (ui.perfetto.dev). A producer accepts
//! requests and queues them; four handler tasks take them, parse them (a
//! synchronous span), wait on a simulated lookup and reply. Each worker thread is a
//! track of slices; a request's span that resumed on another worker after an
//! `.await` is also drawn as one async track across threads; the arrows from each
//! `accept` to its request's first slice are follows-from links. The guard is
//! dropped inside the runtime, while its workers are alive and parked: their last
//! records are written all the same.

use std::time::Duration;

use tokio::sync::{Mutex, mpsc};
use tracing::{Instrument, info, info_span, instrument};

/// Requests the producer makes.
pub const REQUESTS: u64 = 40;
/// Handler tasks.
pub const HANDLERS: u64 = 4;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
#[allow(dead_code)]
async fn main() {
    let _guard = tracekit_tracing::init_if_requested();
    serve().await;
}

/// A request: its id, its body, and the span it is handled in.
struct Request {
    id: u64,
    body: String,
    span: tracing::Span,
}

/// The program: a producer and `HANDLERS` handler tasks over a queue.
pub async fn serve() {
    let (tx, rx) = mpsc::channel::<Request>(8);
    let rx = std::sync::Arc::new(Mutex::new(rx));
    let handlers: Vec<_> = (0..HANDLERS)
        .map(|worker| {
            let rx = rx.clone();
            tokio::spawn(
                async move {
                    loop {
                        let next = rx.lock().await.recv().await;
                        let Some(request) = next else { break };
                        let span = request.span.clone();
                        handle(request).instrument(span).await;
                    }
                }
                .instrument(info_span!("handler", worker)),
            )
        })
        .collect();
    produce(tx).await;
    for h in handlers {
        let _ = h.await;
    }
}

#[instrument(skip_all)]
async fn produce(tx: mpsc::Sender<Request>) {
    for id in 0..REQUESTS {
        let accept = info_span!("accept", id);
        let span = accept.in_scope(|| {
            let span = info_span!("request", id, status = tracing::field::Empty);
            span.follows_from(&accept);
            span
        });
        let body = format!("GET /item/{}", id % 7);
        if tx.send(Request { id, body, span }).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_micros(300)).await;
    }
}

async fn handle(request: Request) {
    let words = parse(&request.body);
    let found = lookup(request.id).await;
    tokio::task::yield_now().await;
    let status = if found { 200u64 } else { 404 };
    request.span.record("status", status);
    info!(words, status, path = request.body.as_str(), "replied");
}

#[instrument(skip_all, fields(len = body.len()))]
fn parse(body: &str) -> u64 {
    // Some work to see.
    let mut h = 0u64;
    for _ in 0..2_000 {
        for b in body.bytes() {
            h = h.wrapping_mul(31).wrapping_add(u64::from(b));
        }
    }
    std::hint::black_box(h);
    body.split_whitespace().count() as u64
}

#[instrument]
async fn lookup(id: u64) -> bool {
    tokio::time::sleep(Duration::from_millis(1 + id % 3)).await;
    !id.is_multiple_of(5)
}
