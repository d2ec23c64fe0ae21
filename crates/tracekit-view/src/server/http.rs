//! HTTP: hyper's HTTP/1.1 on a one-thread tokio runtime reads requests and
//! writes answers. A request is handed to the router as an [`Asked`] (what
//! the guard and the router look at), and answered with a [`Reply`], at once
//! or once a worker has made it; nothing here waits on a query but the
//! request that asked it.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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
            let stream = WriteDeadline::new(stream, idle);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    Ok(())
}

/// A connection whose writes fail once one has waited `limit` for a client
/// that does not read: the connection is closed and its answer's memory let
/// go, rather than held for as long as the client stays.
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Since when a write has waited, as a timer.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            limit,
            waiting: None,
        }
    }

    /// What a write that the client is not taking returns: pending until
    /// `limit` has passed since it began to wait, then an error.
    fn wait<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let timer = (self.waiting).get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client does not read its answer",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, b) {
            Poll::Pending => this.wait(cx),
            done => {
                this.waiting = None;
                done
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.wait(cx),
            done => {
                this.waiting = None;
                done
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A client that stops reading: the server's write fails after the
    /// limit instead of waiting for as long as the client stays.
    #[test]
    fn a_write_the_client_does_not_take_fails_after_the_limit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let mut w = WriteDeadline::new(server, Duration::from_millis(200));
            let chunk = vec![0u8; 1 << 16];
            let started = std::time::Instant::now();
            let mut written = 0usize;
            let e = loop {
                let wrote = std::future::poll_fn(|cx| Pin::new(&mut w).poll_write(cx, &chunk));
                match wrote.await {
                    Ok(n) => written += n,
                    Err(e) => break e,
                }
                assert!(written < 1 << 30, "the socket took a gigabyte");
            };
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert!(written > 0);
            assert!(started.elapsed() >= Duration::from_millis(200));
            assert!(started.elapsed() < Duration::from_secs(20));
            drop(client);
        });
    }
}
