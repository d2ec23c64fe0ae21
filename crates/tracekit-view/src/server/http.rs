//! HTTP: hyper's HTTP/1.1 on a one-thread tokio runtime reads requests and
//! writes answers. A request is handed to the router as an [`Asked`] (what
//! the guard and the router look at), and answered with a [`Reply`], at once
//! or once a worker has made it; nothing here waits on a query but the
//! request that asked it.

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::Serving;
use super::guard::Guard;

/// What the guard and the router look at in a request.
#[derive(Default)]
pub(crate) struct Asked {
    pub(crate) get: bool,
    pub(crate) url: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) origin: Option<String>,
    pub(crate) authorization: Option<String>,
}

impl Asked {
    fn of<B>(request: &Request<B>) -> Asked {
        let text =
            |v: &hyper::header::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        let headers = request.headers();
        Asked {
            get: request.method() == Method::GET,
            url: request.uri().path_and_query().map_or_else(
                || request.uri().path().to_string(),
                |p| p.as_str().to_string(),
            ),
            hosts: headers
                .get_all(hyper::header::HOST)
                .iter()
                .map(text)
                .collect(),
            origin: headers.get(hyper::header::ORIGIN).map(text),
            authorization: headers.get(hyper::header::AUTHORIZATION).map(text),
        }
    }
}

/// A response: status, content type, body. The body is shared, not copied,
/// between the cache, the requests that wait for one query, and the assets.
#[derive(Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(body.into()),
        }
    }

    pub(crate) fn json(body: impl Into<Bytes>) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json",
            body: body.into(),
        }
    }

    /// The HTTP response.
    fn response(self) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(self.body));
        *response.status_mut() = hyper::StatusCode::from_u16(self.status)
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in [
            (hyper::header::CONTENT_TYPE, self.content_type),
            (hyper::header::CACHE_CONTROL, "no-store"),
            (hyper::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (hyper::header::REFERRER_POLICY, "no-referrer"),
            (
                hyper::header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
            ),
        ] {
            headers.insert(name, hyper::header::HeaderValue::from_static(value));
        }
        response
    }
}

/// The runtime that reads requests: one thread.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
}

/// Accepts connections on `listener` and answers their requests until `stop`
/// is set. A connection that sends no complete request head for `idle` is
/// closed.
pub(crate) async fn accept(
    listener: TcpListener,
    served: Arc<dyn Serving>,
    guard: Arc<Guard>,
    idle: Duration,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    while !stop.load(Ordering::Relaxed) {
        let Ok(accepted) =
            tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
        else {
            continue;
        };
        // A failed accept (the peer gave up, too many files open) is
        // that connection's, not the server's.
        let Ok((stream, _)) = accepted else { continue };
        let (served, guard) = (Arc::clone(&served), Arc::clone(&guard));
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                handle(request, Arc::clone(&served), Arc::clone(&guard))
            });
            // A connection that fails or times out is closed; the
            // others go on.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    Ok(())
}

/// Answers a request: at once, or once a worker has answered its query.
async fn handle(
    request: Request<Incoming>,
    served: Arc<dyn Serving>,
    guard: Arc<Guard>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = match served.reply(&Asked::of(&request), &guard) {
        Ok(reply) => reply,
        // Queued when the server stopped: dropped with its worker.
        Err(answer) => answer
            .await
            .unwrap_or_else(|_| Reply::text(500, "the query failed")),
    };
    Ok(reply.response())
}
