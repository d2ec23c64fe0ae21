//! The viewer's HTTP server: the page's assets, compiled into the binary, and
//! the answers under `/api/`: [`crate::api`]'s for a memtrace trace,
//! [`crate::timeline`]'s for a timeline. The page at `/` is the one for the
//! kind of trace served.
//!
//! What it will serve, and to whom:
//! - `GET` only. The paths are a fixed list: the page (`/`), its script and
//!   style, and `/api/<endpoint>`. Nothing in a request names a file.
//! - The trace is its user's: the server makes a random token when it starts
//!   and prints it in the page's URL (`/?token=...`, as Jupyter and samply do).
//!   Every `/api/` request must carry it, as a `token` query parameter or an
//!   `Authorization: Bearer` header (the page sends the header); without it the
//!   answer is 401, with another 403. The page and its assets hold no data and
//!   need no token. Another user of the machine can reach the port, not the
//!   trace.
//! - A request whose `Host` header is not the address the server is bound to
//!   (or `localhost`, `127.0.0.1` or `[::1]` with its port, or without a port
//!   on port 80) is refused with 403: a page on another site that makes the
//!   browser resolve its own name to 127.0.0.1 (DNS rebinding) sends its own
//!   name as the Host. A request with two Host headers is a 400.
//! - A request with an `Origin` header of another site is refused with 403.
//! - Malformed arguments get 400 and the option parser's message.
//! - Nothing waits behind a slow query. One thread (hyper's HTTP/1.1 on a
//!   one-thread tokio runtime) reads requests and writes answers; it answers
//!   the page, `/api/info`, refusals and answers already made at once. The
//!   queries go to a queue per endpoint, served in turn by as many workers as
//!   the machine has cores, so that the memory of queries in flight is bounded
//!   by the cores, not by the requests; a query asked again while it runs
//!   waits for that run rather than starting another.
//! - A connection that sends no complete request head for [`IDLE`] is closed,
//!   so idle or stalled connections do not accumulate.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use crate::api::{self, ApiError, Endpoint, Trace};
use crate::timeline::{TimelineEndpoint, TimelineTrace};

/// The page's files, by path: the page, its style and its ES modules (no build
/// step: the browser loads the modules as written).
const ASSETS: [(&str, &str, &str); 15] = {
    const HTML: &str = "text/html; charset=utf-8";
    const JS: &str = "text/javascript; charset=utf-8";
    const CSS: &str = "text/css; charset=utf-8";
    [
        ("/index.html", HTML, include_str!("../assets/index.html")),
        (
            "/timeline.html",
            HTML,
            include_str!("../assets/timeline.html"),
        ),
        ("/common.css", CSS, include_str!("../assets/common.css")),
        ("/app.css", CSS, include_str!("../assets/app.css")),
        ("/timeline.css", CSS, include_str!("../assets/timeline.css")),
        ("/timeline.js", JS, include_str!("../assets/timeline.js")),
        ("/canvas.js", JS, include_str!("../assets/canvas.js")),
        ("/app.js", JS, include_str!("../assets/app.js")),
        ("/api.js", JS, include_str!("../assets/api.js")),
        ("/dom.js", JS, include_str!("../assets/dom.js")),
        ("/filter.js", JS, include_str!("../assets/filter.js")),
        ("/flame.js", JS, include_str!("../assets/flame.js")),
        ("/graph.js", JS, include_str!("../assets/graph.js")),
        ("/state.js", JS, include_str!("../assets/state.js")),
        ("/tables.js", JS, include_str!("../assets/tables.js")),
    ]
};

/// How long a connection may take to send a request's head, or stay idle
/// between requests, before it is closed.
pub const IDLE: Duration = Duration::from_secs(30);

/// Where a query's answer goes: the request that waits for it.
type Waiter = oneshot::Sender<Reply>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {message}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The system's reason.
    pub message: String,
}

/// What a viewer serves.
enum Content {
    /// A memtrace trace, and one to compare it with.
    Memtrace {
        trace: Box<Trace>,
        compare: Option<Box<Trace>>,
    },
    /// A timeline of slices.
    Timeline(Box<TimelineTrace>),
}

/// Which endpoint a query is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Route {
    Memtrace(Endpoint),
    Timeline(TimelineEndpoint),
}

/// Every route, in the order the workers' queues take turns.
const ROUTES: [Route; Endpoint::ALL.len() + TimelineEndpoint::ALL.len()] = {
    let mut routes =
        [Route::Memtrace(Endpoint::Info); Endpoint::ALL.len() + TimelineEndpoint::ALL.len()];
    let mut i = 0;
    while i < Endpoint::ALL.len() {
        routes[i] = Route::Memtrace(Endpoint::ALL[i]);
        i += 1;
    }
    let mut j = 0;
    while j < TimelineEndpoint::ALL.len() {
        routes[i + j] = Route::Timeline(TimelineEndpoint::ALL[j]);
        j += 1;
    }
    routes
};

/// The traces a viewer serves, and the answers it has given lately.
pub struct Served {
    content: Content,
    /// Answers made, and queries in flight with the requests that wait for
    /// them: one lock, so that a request finds its answer in one or the other.
    answers: Mutex<Answers>,
    /// Queries not yet started, a queue per endpoint.
    queued: Mutex<Queues>,
    ready: Condvar,
}

impl Served {
    /// Serves `trace`, and `compare` to compare it with (`--compare`).
    pub fn new(trace: Trace, compare: Option<Trace>) -> Served {
        Served::of(Content::Memtrace {
            trace: Box::new(trace),
            compare: compare.map(Box::new),
        })
    }

    /// Serves a timeline.
    pub fn timeline(timeline: TimelineTrace) -> Served {
        Served::of(Content::Timeline(Box::new(timeline)))
    }

    fn of(content: Content) -> Served {
        Served {
            content,
            answers: Mutex::new(Answers::default()),
            queued: Mutex::new(Queues::default()),
            ready: Condvar::new(),
        }
    }

    /// The memtrace traces served, if any: the trace, then the compared one.
    fn memtrace(&self) -> impl Iterator<Item = &Trace> {
        let (trace, compare) = match &self.content {
            Content::Memtrace { trace, compare } => (Some(&**trace), compare.as_deref()),
            Content::Timeline(_) => (None, None),
        };
        trace.into_iter().chain(compare)
    }

    /// The answer to `key`, made now (on the caller's thread).
    fn ask(&self, key: &Key) -> Reply {
        let answered = match (&self.content, key.0) {
            (Content::Memtrace { trace, compare }, Route::Memtrace(e)) => {
                api::answer(trace, compare.as_deref(), e, &key.1)
            }
            (Content::Timeline(t), Route::Timeline(e)) => {
                let params: Vec<(String, String)> = key
                    .1
                    .chunks_exact(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect();
                t.answer(e, &params)
            }
            _ => return Reply::text(404, "not found"),
        };
        match answered {
            Ok(body) => Reply::json(body),
            Err(e @ (ApiError::BadArguments(_) | ApiError::NothingToCompare)) => {
                Reply::text(400, e.to_string())
            }
            Err(e @ ApiError::Unreadable(_)) => Reply::text(500, e.to_string()),
        }
    }
}

#[derive(Default)]
struct Answers {
    cache: Cache,
    /// For each query being answered, the requests that asked it again.
    in_flight: HashMap<Key, Vec<Waiter>>,
}

/// Queries waiting for a worker: one queue per endpoint, served in turn, so
/// that a run of flame graphs does not hold up a `top`.
#[derive(Default)]
struct Queues {
    queues: HashMap<Route, VecDeque<(Key, Waiter)>>,
    /// The endpoint served last.
    last: usize,
}

impl Queues {
    fn push(&mut self, key: Key, waiter: Waiter) {
        self.queues
            .entry(key.0)
            .or_default()
            .push_back((key, waiter));
    }

    /// The next query, from the first non-empty queue after the last served.
    fn pop(&mut self) -> Option<(Key, Waiter)> {
        let n = ROUTES.len();
        for step in 1..=n {
            let i = (self.last + step) % n;
            if let Some(next) = self
                .queues
                .get_mut(&ROUTES[i])
                .and_then(VecDeque::pop_front)
            {
                self.last = i;
                return Some(next);
            }
        }
        None
    }
}

/// The latest answers, by endpoint and arguments: going back to a filter, or
/// to a tab, is then immediate. Bounded by their total size.
#[derive(Default)]
struct Cache {
    entries: VecDeque<(Key, Bytes)>,
    bytes: usize,
}

/// What a request asks: an endpoint and its arguments (for a timeline's,
/// each parameter's name and value, one after the other).
type Key = (Route, Vec<String>);

/// Most bytes of answers the cache keeps.
const CACHE_BYTES: usize = 64 << 20;

impl Cache {
    fn get(&mut self, key: &Key) -> Option<Bytes> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        let entry = self.entries.remove(i)?;
        let answer = entry.1.clone();
        self.entries.push_front(entry);
        Some(answer)
    }

    fn put(&mut self, key: Key, answer: Bytes) {
        if answer.len() > CACHE_BYTES / 4 {
            return;
        }
        self.bytes += answer.len();
        self.entries.push_front((key, answer));
        while self.bytes > CACHE_BYTES {
            match self.entries.pop_back() {
                Some((_, a)) => self.bytes -= a.len(),
                None => break,
            }
        }
    }
}

/// A listening viewer.
pub struct Viewer {
    listener: TcpListener,
    addr: SocketAddr,
    guard: Guard,
    idle: Duration,
}

impl Viewer {
    /// Listens on `addr` (port 0: a free port), with a new random token.
    pub fn bind(addr: SocketAddr) -> Result<Viewer, BindError> {
        let failed = |message: String| BindError { addr, message };
        let token =
            new_token().map_err(|e| failed(format!("cannot make the page's token: {e}")))?;
        let listener = TcpListener::bind(addr).map_err(|e| failed(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        Ok(Viewer {
            listener,
            guard: Guard::new(addr, token),
            addr,
            idle: IDLE,
        })
    }

    /// Closes connections idle for `idle` (default [`IDLE`]).
    pub fn idle_timeout(mut self, idle: Duration) -> Viewer {
        self.idle = idle;
        self
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token every API request must carry.
    pub fn token(&self) -> &str {
        &self.guard.token
    }

    /// The page's address, with the token.
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => format!("127.0.0.1:{}", self.addr.port()),
            IpAddr::V6(ip) if ip.is_unspecified() => format!("[::1]:{}", self.addr.port()),
            _ => self.addr.to_string(),
        };
        format!("http://{host}/?token={}", self.guard.token)
    }

    /// Answers requests until `stop` is set. Fails only if the runtime that
    /// reads the requests cannot start.
    pub fn serve(self, served: Arc<Served>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        // The traces are decoded into their tables beside the serving: until
        // that is done, answers are passes over the bytes. A decoding that
        // fails leaves the passes to answer.
        let decoding = Arc::clone(&served);
        std::thread::spawn(move || {
            for trace in decoding.memtrace() {
                let decode = || trace.decode(&mut |_| {});
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).is_err() {
                    return;
                }
            }
        });
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let workers: Vec<_> = (0..cores)
            .map(|_| {
                let (served, stop) = (Arc::clone(&served), Arc::clone(&stop));
                std::thread::spawn(move || work(&served, &stop))
            })
            .collect();
        let guard = Arc::new(self.guard);
        let idle = self.idle;
        let listening = runtime.block_on(async {
            self.listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
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
        });
        // Queries still queued are dropped: their connections close with the
        // runtime.
        stop.store(true, Ordering::Relaxed);
        served.ready.notify_all();
        drop(runtime);
        for w in workers {
            // Workers catch the panics of queries; nothing else in them can.
            let _ = w.join();
        }
        listening
    }
}

/// A token of 128 random bits, in hex.
fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Answers a request: at once, or once a worker has answered its query.
async fn handle(
    request: Request<Incoming>,
    served: Arc<Served>,
    guard: Arc<Guard>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let asked = Asked::of(&request);
    let reply = match classify(&asked, &guard, &served) {
        Routed::Reply(reply) => reply,
        Routed::Query(key) => match queue(key, &served) {
            Ok(reply) => reply,
            // Queued when the server stopped: dropped with its worker.
            Err(answer) => answer
                .await
                .unwrap_or_else(|_| Reply::text(500, "the query failed")),
        },
    };
    Ok(reply.response())
}

/// The answer to `key` if it was made already; else the query is queued (or
/// joins the same query in flight) and the answer will come.
fn queue(key: Key, served: &Served) -> Result<Reply, oneshot::Receiver<Reply>> {
    let mut answers = lock(&served.answers);
    if let Some(body) = answers.cache.get(&key) {
        return Ok(Reply::json(body));
    }
    let (waiter, answer) = oneshot::channel();
    if let Some(waiting) = answers.in_flight.get_mut(&key) {
        waiting.push(waiter);
        return Err(answer);
    }
    answers.in_flight.insert(key.clone(), Vec::new());
    drop(answers);
    lock(&served.queued).push(key, waiter);
    served.ready.notify_one();
    Err(answer)
}

/// A worker: answers queued queries until `stop` is set.
fn work(served: &Served, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let next = {
            let mut queued = lock(&served.queued);
            match queued.pop() {
                Some(next) => Some(next),
                None => {
                    let (mut queued, _) = served
                        .ready
                        .wait_timeout(queued, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner());
                    queued.pop()
                }
            }
        };
        if let Some((key, waiter)) = next {
            answer(served, key, waiter, |key| served.ask(key));
        }
    }
}

/// Answers the query `key` with `ask`, to `waiter` and to the requests that
/// joined it, and keeps the answer. A query that panics is answered 500 and
/// the worker serves on: left in flight, it would hold every later request of
/// the same query.
fn answer(served: &Served, key: Key, waiter: Waiter, ask: impl FnOnce(&Key) -> Reply) {
    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ask(&key)))
        .unwrap_or_else(|_| Reply::text(500, "the query failed"));
    let waiting = {
        let mut answers = lock(&served.answers);
        if reply.status == 200 {
            answers.cache.put(key.clone(), reply.body.clone());
        }
        answers.in_flight.remove(&key).unwrap_or_default()
    };
    // A request whose connection closed no longer waits.
    for other in waiting {
        let _ = other.send(reply.clone());
    }
    let _ = waiter.send(reply);
}

/// Who may ask: the Host headers and origins of this server, and its token.
struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: String,
}

impl Guard {
    fn new(addr: SocketAddr, token: String) -> Guard {
        let port = addr.port();
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "[::1]".to_string(),
        ];
        let own = match addr.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        if !names.contains(&own) {
            names.push(own);
        }
        let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
        // A browser leaves the default port out of the Host header.
        if port == 80 {
            hosts.extend(names);
        }
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Guard {
            hosts,
            origins,
            token,
        }
    }

    fn is_host(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    fn is_origin(&self, origin: &str) -> bool {
        self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }

    /// Whether `given` is the token, compared in a time that does not depend on
    /// where they differ.
    fn is_token(&self, given: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }
}

/// What the guard and the router look at in a request.
#[derive(Default)]
struct Asked {
    get: bool,
    url: String,
    hosts: Vec<String>,
    origin: Option<String>,
    authorization: Option<String>,
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
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Bytes,
}

impl Reply {
    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(body.into()),
        }
    }

    fn json(body: impl Into<Bytes>) -> Reply {
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

/// Where a request goes.
enum Routed {
    /// Answered at once.
    Reply(Reply),
    /// A query, for a worker.
    Query(Key),
}

/// Checks a request and says where it goes.
fn classify(asked: &Asked, guard: &Guard, served: &Served) -> Routed {
    let refuse = |status, why: &str| Routed::Reply(Reply::text(status, why));
    match &asked.hosts[..] {
        [host] if guard.is_host(host) => {}
        [_, _, ..] => return refuse(400, "more than one Host header"),
        _ => return refuse(403, "refused: the Host header is not this server's address"),
    }
    if let Some(origin) = &asked.origin
        && !guard.is_origin(origin)
    {
        return refuse(403, "refused: a request from a page of another site");
    }
    if !asked.get {
        return refuse(405, "only GET");
    }
    let (path, query) = asked.url.split_once('?').unwrap_or((&asked.url, ""));
    let path = match (path, &served.content) {
        ("/", Content::Memtrace { .. }) => "/index.html",
        ("/", Content::Timeline(_)) => "/timeline.html",
        (path, _) => path,
    };
    if let Some(&(_, content_type, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) {
        return Routed::Reply(Reply {
            status: 200,
            content_type,
            body: Bytes::from_static(body.as_bytes()),
        });
    }
    let Some(name) = path.strip_prefix("/api/") else {
        return refuse(404, "not found");
    };
    let mut args = Vec::new();
    let mut typed = Vec::new();
    let mut token = asked
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_string);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "arg" => args.push(value.into_owned()),
            "token" => token = Some(value.into_owned()),
            _ => typed.push((key.into_owned(), value.into_owned())),
        }
    }
    match token {
        None => {
            return refuse(
                401,
                "the API answers only with the token in the URL the viewer printed",
            );
        }
        Some(t) if !guard.is_token(&t) => return refuse(403, "refused: not this viewer's token"),
        Some(_) => {}
    }
    if name == "features" {
        let (kind, compare) = match &served.content {
            Content::Memtrace { compare, .. } => ("memtrace", compare.is_some()),
            Content::Timeline(_) => ("timeline", false),
        };
        return Routed::Reply(Reply::json(format!(
            "{{\"kind\": \"{kind}\", \"compare\": {compare}}}"
        )));
    }
    if let Content::Timeline(_) = served.content {
        let Some(endpoint) = TimelineEndpoint::from_name(name) else {
            return refuse(404, "not found");
        };
        if !args.is_empty() {
            return refuse(400, "a timeline's parameters are named: ?from=0&to=1000");
        }
        let key = (
            Route::Timeline(endpoint),
            typed.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        );
        return match endpoint.is_ready() {
            true => Routed::Reply(served.ask(&key)),
            false => Routed::Query(key),
        };
    }
    let Some(endpoint) = Endpoint::from_name(name) else {
        return refuse(404, "not found");
    };
    match crate::api::typed_args(endpoint, &typed) {
        Ok(more) => args.extend(more),
        Err(e) => return refuse(400, &e.to_string()),
    }
    match endpoint {
        // The info is made when the trace is read: no query.
        Endpoint::Info => Routed::Reply(served.ask(&(Route::Memtrace(Endpoint::Info), args))),
        endpoint => Routed::Query((Route::Memtrace(endpoint), args)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_columns::TraceBytes;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    fn served() -> Served {
        let config = SynthConfig {
            allocs: 500,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        Served::new(
            Trace::new("t.ctf".into(), TraceBytes::new(bytes)).unwrap(),
            None,
        )
    }

    #[test]
    fn the_cache_keeps_the_latest_answers_within_its_size() {
        let mut c = Cache::default();
        let key = |n: usize| (Route::Memtrace(Endpoint::Top), vec![n.to_string()]);
        let big = Bytes::from("x".repeat(CACHE_BYTES / 8));
        for n in 0..12 {
            c.put(key(n), big.clone());
        }
        assert!(c.bytes <= CACHE_BYTES);
        assert_eq!(c.entries.len(), 8);
        assert!(c.get(&key(3)).is_none(), "the oldest went first");
        assert!(c.get(&key(4)).is_some());
        // Used again, 4 is now the newest: the next puts evict 5, not 4.
        c.put(key(12), big.clone());
        assert!(c.get(&key(4)).is_some());
        assert!(c.get(&key(5)).is_none());
        // An answer too large to keep is not kept.
        c.put(key(13), Bytes::from("y".repeat(CACHE_BYTES / 2)));
        assert!(c.get(&key(13)).is_none());
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    /// The status and body of a request, its query answered at once.
    fn status(asked: &Asked, guard: &Guard, s: &Served) -> (u16, String) {
        let reply = match classify(asked, guard, s) {
            Routed::Reply(r) => r,
            Routed::Query(key) => s.ask(&key),
        };
        (
            reply.status,
            String::from_utf8_lossy(&reply.body).into_owned(),
        )
    }

    fn get(url: &str, host: &str) -> Asked {
        Asked {
            get: true,
            url: url.to_string(),
            hosts: vec![host.to_string()],
            ..Asked::default()
        }
    }

    #[test]
    fn only_this_servers_names_are_hosts() {
        let guard = Guard::new("127.0.0.1:8123".parse().unwrap(), TOKEN.into());
        let s = served();
        let url = format!("/api/info?token={TOKEN}");
        let with = |hosts: &[&str]| {
            let mut a = get(&url, "");
            a.hosts = hosts.iter().map(|h| h.to_string()).collect();
            status(&a, &guard, &s).0
        };
        for ok in [
            "127.0.0.1:8123",
            "localhost:8123",
            "LOCALHOST:8123",
            "[::1]:8123",
        ] {
            assert_eq!(with(&[ok]), 200, "{ok}");
        }
        for refused in [
            &[][..],
            &["localhost"],
            &["localhost:80"],
            &["evil.example:8123"],
            &["127.0.0.1:8124"],
        ] {
            assert_eq!(with(refused), 403, "{refused:?}");
        }
        assert_eq!(with(&["127.0.0.1:8123", "127.0.0.1:8123"]), 400);
        assert_eq!(with(&["127.0.0.1:8123", "evil.example"]), 400);
        let lan = Guard::new("192.168.1.7:9000".parse().unwrap(), TOKEN.into());
        assert!(lan.is_host("192.168.1.7:9000"));
        // On port 80 a browser sends no port.
        let eighty = Guard::new("127.0.0.1:80".parse().unwrap(), TOKEN.into());
        assert!(eighty.is_host("localhost") && eighty.is_host("127.0.0.1:80"));
        assert!(!eighty.is_host("evil.example"));
    }

    #[test]
    fn the_api_answers_only_with_the_token_and_the_page_without() {
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let s = served();
        let host = "127.0.0.1:1";
        assert_eq!(status(&get("/api/info", host), &guard, &s).0, 401);
        assert_eq!(status(&get("/api/top", host), &guard, &s).0, 401);
        let wrong = "/api/info?token=0123456789abcdef0123456789abcdee";
        assert_eq!(status(&get(wrong, host), &guard, &s).0, 403);
        assert_eq!(status(&get("/api/info?token=", host), &guard, &s).0, 403);
        let query = format!("/api/info?token={TOKEN}");
        assert_eq!(status(&get(&query, host), &guard, &s).0, 200);
        let mut header = get("/api/top?arg=--limit&arg=2", host);
        header.authorization = Some(format!("Bearer {TOKEN}"));
        assert_eq!(status(&header, &guard, &s).0, 200);
        header.authorization = Some(format!("Bearer {TOKEN}x"));
        assert_eq!(status(&header, &guard, &s).0, 403);
        // The page holds no data.
        assert_eq!(status(&get("/", host), &guard, &s).0, 200);
        assert_eq!(status(&get("/app.js", host), &guard, &s).0, 200);
        // A page of another site is refused, whatever it carries.
        let mut foreign = get(&query, host);
        foreign.origin = Some("http://evil.example".into());
        assert_eq!(status(&foreign, &guard, &s).0, 403);
        foreign.origin = Some("http://127.0.0.1:1".into());
        assert_eq!(status(&foreign, &guard, &s).0, 200);
        // Tokens are made anew each time.
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn requests_are_routed_or_refused() {
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let s = served();
        let ask = |url: &str| {
            let sep = if url.contains('?') { '&' } else { '?' };
            status(
                &get(&format!("{url}{sep}token={TOKEN}"), "127.0.0.1:1"),
                &guard,
                &s,
            )
        };
        let page = classify(&get("/", "127.0.0.1:1"), &guard, &s);
        assert!(matches!(page, Routed::Reply(r) if r.content_type == "text/html; charset=utf-8"));
        assert_eq!(ask("/app.js").0, 200);
        assert_eq!(ask("/api/top?arg=--limit&arg=3").0, 200);
        assert_eq!(ask("/api/top?arg=--limit&arg=three").0, 400);
        assert_eq!(ask("/api/top?limit=three").0, 400);
        assert_eq!(ask("/api/top?nonsense=3").0, 400);
        assert!(ask("/api/top?nonsense=3").1.contains("by, "));
        assert_eq!(ask("/api/top?peak=maybe").0, 400);
        assert_eq!(ask("/api/info?limit=3").0, 400);
        assert_eq!(ask("/api/diff").0, 400);
        assert_eq!(ask("/api/info?arg=x").0, 400);
        assert_eq!(ask("/Cargo.toml").0, 404);
        assert_eq!(ask("/api/nope").0, 404);
        let mut post = get("/", "127.0.0.1:1");
        post.get = false;
        assert_eq!(status(&post, &guard, &s).0, 405);
        assert_eq!(
            ask("/api/features").1,
            "{\"kind\": \"memtrace\", \"compare\": false}"
        );
        // The info needs no worker; queries do.
        let info = get(&format!("/api/info?token={TOKEN}"), "127.0.0.1:1");
        assert!(matches!(classify(&info, &guard, &s), Routed::Reply(_)));
        let top = get(&format!("/api/top?token={TOKEN}"), "127.0.0.1:1");
        assert!(matches!(classify(&top, &guard, &s), Routed::Query(_)));
    }

    #[test]
    fn a_timeline_is_served_with_its_own_page_and_endpoints() {
        use tracekit_fxt::write::{VecDestination, Writer};
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let th = w
            .set_thread_slot(
                1,
                tracekit_fxt::format::Koid(1),
                tracekit_fxt::format::Koid(2),
            )
            .unwrap();
        let (cat, name) = (w.intern("c").unwrap(), w.intern("n").unwrap());
        w.duration_complete(th, cat, name, 10, 20, &[]).unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let mut reader = tracekit_fxt::read::Reader::new(&bytes);
        let mut counted = tracekit_fxt::stats::Counted::new(&mut reader);
        let timeline = tracekit_timeline::Timeline::build(&mut counted, &mut |_| {});
        let stats = counted.stats();
        let stats = crate::timeline::stats_json(&stats);
        let s = Served::timeline(TimelineTrace::new("t.fxt".into(), timeline, stats));
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let ask = |url: &str| {
            let sep = if url.contains('?') { '&' } else { '?' };
            status(
                &get(&format!("{url}{sep}token={TOKEN}"), "127.0.0.1:1"),
                &guard,
                &s,
            )
        };
        let page = ask("/");
        assert_eq!(page.0, 200);
        assert!(page.1.contains("/timeline.js"), "{}", page.1);
        assert!(ask("/api/features").1.contains("\"timeline\""));
        assert!(ask("/api/tracks").1.contains("\"slices\":1"));
        assert!(ask("/api/stats").1.contains("\"duration_complete\":1"));
        assert_eq!(ask("/api/window?from=0&to=10&px=10").0, 200);
        assert_eq!(ask("/api/window?px=0").0, 400);
        assert_eq!(ask("/api/window?arg=--px").0, 400);
        assert_eq!(ask("/api/info").0, 404);
        assert_eq!(ask("/api/top?limit=1").0, 200);
        // Its queries go to the workers; its first answers do not.
        let key = |url: &str| {
            classify(
                &get(&format!("{url}&token={TOKEN}"), "127.0.0.1:1"),
                &guard,
                &s,
            )
        };
        assert!(matches!(key("/api/window?px=9"), Routed::Query(_)));
        assert!(matches!(key("/api/tracks?"), Routed::Reply(_)));
        // A memtrace endpoint's route is not a timeline's.
        assert_eq!(s.ask(&(Route::Memtrace(Endpoint::Top), vec![])).status, 404);
    }

    /// Options named as parameters of their own are the query their `arg` form
    /// is: the same arguments, so the same answer.
    #[test]
    fn typed_parameters_ask_what_their_arguments_ask() {
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let s = served();
        let key = |url: &str| match classify(
            &get(&format!("{url}&token={TOKEN}"), "127.0.0.1:1"),
            &guard,
            &s,
        ) {
            Routed::Query(key) => key,
            Routed::Reply(r) => panic!("{url}: {}", String::from_utf8_lossy(&r.body)),
        };
        let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        for (typed, args) in [
            (
                "/api/top?by=function&limit=3&peak",
                argv(&["--by", "function", "--limit", "3", "--peak"]),
            ),
            (
                "/api/top?between=1ms,2ms&min_size=64&peak=false",
                argv(&["--between", "1ms", "2ms", "--min-size", "64"]),
            ),
            (
                "/api/flametree?hide=a&hide=b,c&invert=true&focus=x",
                argv(&["--hide", "a", "--hide", "b,c", "--invert", "--focus", "x"]),
            ),
            (
                "/api/timeline?arg=--points&arg=9&never-collected=1",
                argv(&["--points", "9", "--never-collected"]),
            ),
        ] {
            let (_, got) = key(typed);
            assert_eq!(got, args, "{typed}");
            let plain: Vec<String> = args.iter().map(|a| format!("arg={a}")).collect();
            let path = typed.split('?').next().unwrap();
            let (_, same) = key(&format!("{path}?{}", plain.join("&")));
            assert_eq!(got, same, "{typed}");
        }
        let typed = status(
            &get(
                &format!("/api/top?by=function&limit=2&token={TOKEN}"),
                "127.0.0.1:1",
            ),
            &guard,
            &s,
        );
        let plain = status(
            &get(
                &format!("/api/top?arg=--by&arg=function&arg=--limit&arg=2&token={TOKEN}"),
                "127.0.0.1:1",
            ),
            &guard,
            &s,
        );
        assert_eq!(typed.0, 200);
        assert_eq!(typed, plain);
    }

    #[test]
    fn a_query_asked_twice_is_queued_once_and_queues_take_turns() {
        let s = served();
        let top = (
            Route::Memtrace(Endpoint::Top),
            vec!["--limit".to_string(), "2".to_string()],
        );
        let first = queue(top.clone(), &s).err().unwrap();
        let _second = queue(top, &s).err().unwrap();
        let _third = queue((Route::Memtrace(Endpoint::Flamegraph), vec![]), &s)
            .err()
            .unwrap();
        let _fourth = queue((Route::Memtrace(Endpoint::Top), vec![]), &s)
            .err()
            .unwrap();
        let mut q = lock(&s.queued);
        let taken: Vec<(Key, Waiter)> = std::iter::from_fn(|| q.pop()).collect();
        let order: Vec<Route> = taken.iter().map(|(k, _)| k.0).collect();
        // Two requests of one query queue it once; the endpoints take turns.
        let (top, flame) = (
            Route::Memtrace(Endpoint::Top),
            Route::Memtrace(Endpoint::Flamegraph),
        );
        assert_eq!(order, [top, flame, top]);
        drop(taken);
        // A query dropped unanswered (a worker that panicked) ends its wait.
        assert!(first.blocking_recv().is_err());
    }

    #[test]
    fn workers_answer_every_request_of_a_query_and_keep_the_answer() {
        let s = Arc::new(served());
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || work(&s, &stop))
        };
        let top = (
            Route::Memtrace(Endpoint::Top),
            vec!["--limit".to_string(), "2".to_string()],
        );
        let a = queue(top.clone(), &s).err().unwrap();
        let b = queue(top.clone(), &s).err().unwrap();
        let (a, b) = (a.blocking_recv().unwrap(), b.blocking_recv().unwrap());
        assert_eq!((a.status, &a.body), (200, &b.body));
        assert_eq!(a.body, s.ask(&top).body);
        // Asked again: the answer kept, with no worker.
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        assert_eq!(queue(top, &s).ok().unwrap().body, a.body);
        assert!(lock(&s.answers).in_flight.is_empty());
    }

    #[test]
    fn a_served_trace_is_decoded_into_its_tables_beside_the_serving() {
        let viewer = Viewer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let s = Arc::new(served());
        assert!(s.memtrace().next().unwrap().tables().is_none());
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || viewer.serve(s, stop))
        };
        let started = std::time::Instant::now();
        while s.memtrace().next().unwrap().tables().is_none()
            && started.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            s.memtrace()
                .next()
                .unwrap()
                .tables()
                .map(|t| t.allocations()),
            Some(500)
        );
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    }

    #[test]
    fn idle_connections_are_closed() {
        use std::io::Write;
        let viewer = Viewer::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .idle_timeout(Duration::from_millis(200));
        let (addr, token) = (viewer.addr(), viewer.token().to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || viewer.serve(Arc::new(served()), stop))
        };
        // A connection that says nothing is closed.
        let mut idle = std::net::TcpStream::connect(addr).unwrap();
        idle.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut buf = Vec::new();
        let _ = idle.read_to_end(&mut buf);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // One that asks is answered, and closed once idle after that.
        let mut asks = std::net::TcpStream::connect(addr).unwrap();
        asks.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            asks,
            "GET /api/info HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        let mut answer = Vec::new();
        let _ = asks.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("\"events\""), "{answer}");
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    }

    #[test]
    fn every_file_of_the_page_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let served = format!("/{}", path.file_name().unwrap().to_str().unwrap());
            let body = std::fs::read_to_string(&path).unwrap();
            let asset = ASSETS.iter().find(|(p, _, _)| *p == served);
            assert_eq!(asset.map(|a| a.2), Some(body.as_str()), "{served}");
        }
    }

    #[test]
    fn a_query_that_panics_is_answered_500_to_all_who_asked_it() {
        let s = served();
        let top = (Route::Memtrace(Endpoint::Top), vec![]);
        let first = queue(top.clone(), &s).err().unwrap();
        let second = queue(top.clone(), &s).err().unwrap();
        let (key, waiter) = lock(&s.queued).pop().unwrap();
        answer(&s, key, waiter, |_| panic!("a query's bug"));
        assert_eq!(first.blocking_recv().unwrap().status, 500);
        assert_eq!(second.blocking_recv().unwrap().status, 500);
        assert!(lock(&s.answers).in_flight.is_empty());
        // Nothing kept: asked again, the query runs again.
        assert!(queue(top, &s).is_err());
    }
}
