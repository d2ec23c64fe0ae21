//! The viewer's HTTP server: the page's assets, compiled into the binary, and
//! the answers under `/api/` of the kind of trace served, through its
//! [`Api`]: [`crate::memtrace`]'s or [`crate::timeline`]'s. The page at `/`
//! is the one for the kind of trace served.
//!
//! It is four parts: the guard ([`guard`]: token, Host, Origin), the routes
//! ([`routes`]: the page's files, the endpoints), the answers ([`answers`]:
//! the cache, the queries in flight, the queues and the workers) and HTTP
//! ([`http`]: hyper on one thread).
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
//! - Malformed parameters get 400 and the kind's message (for a memtrace
//!   trace, the option parser's).
//! - Nothing waits behind a slow query. One thread (hyper's HTTP/1.1 on a
//!   one-thread tokio runtime) reads requests and writes answers; it answers
//!   the page, the answers made when the trace was loaded, refusals and
//!   answers already made at once. The queries go to a queue per endpoint,
//!   served in turn by as many workers as the machine has cores, so that the
//!   memory of queries in flight is bounded by the cores, not by the
//!   requests; a query asked again while it runs waits for that run rather
//!   than starting another. The workers, and the thread that builds what
//!   makes later answers cheaper, run at a lower priority
//!   ([`tracekit_io::priority`]): with every core busy, the thread that
//!   answers at once and the browser still get one.
//! - A connection that sends no complete request head for [`IDLE`] is closed,
//!   so idle or stalled connections do not accumulate.

mod answers;
mod guard;
mod http;
mod routes;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::api::Api;
use crate::memtrace::{Memtrace, Trace};
use crate::timeline::TimelineTrace;
use answers::{Answers, Workers};
use guard::{Guard, new_token};
use http::{Asked, Reply};
use routes::{Routed, route};

/// How long a connection may take to send a request's head, stay idle
/// between requests, or leave an answer unread, before it is closed.
pub const IDLE: Duration = Duration::from_secs(30);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {message}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The system's reason.
    pub message: String,
}

/// What a viewer serves: a trace of one kind, and the answers it has given
/// lately.
pub struct Served(Arc<dyn Serving>);

impl Served {
    /// Serves `trace`, and `compare` to compare it with (`--compare`).
    pub fn new(trace: Trace, compare: Option<Trace>) -> Served {
        Served::of(Memtrace::new(trace, compare))
    }

    /// Serves a timeline.
    pub fn timeline(timeline: TimelineTrace) -> Served {
        Served::of(timeline)
    }

    /// Serves `api`.
    pub fn of<A: Api>(api: A) -> Served {
        Served(Arc::new(Answers::new(api)))
    }
}

/// A kind's answers as the server drives them, whatever the kind.
trait Serving: Send + Sync {
    /// The reply to `asked`: at once, or to come once a worker has made it.
    fn reply(&self, asked: &Asked, guard: &Guard) -> Result<Reply, oneshot::Receiver<Reply>>;
    /// A worker: answers queued queries until `stop` is set.
    fn work(&self, stop: &AtomicBool);
    /// Wakes the workers that wait for a query.
    fn wake_all(&self);
    /// [`Api::prepare`].
    fn prepare(&self);
}

impl<A: Api> Serving for Answers<A> {
    fn reply(&self, asked: &Asked, guard: &Guard) -> Result<Reply, oneshot::Receiver<Reply>> {
        match route(asked, guard, self) {
            Routed::Reply(reply) => Ok(reply),
            Routed::Query(key) => self.queue(key),
        }
    }

    fn work(&self, stop: &AtomicBool) {
        Answers::work(self, stop);
    }

    fn wake_all(&self) {
        Answers::wake_all(self);
    }

    fn prepare(&self) {
        self.api().prepare();
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
        self.guard.token()
    }

    /// The page's address, with the token.
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => format!("127.0.0.1:{}", self.addr.port()),
            IpAddr::V6(ip) if ip.is_unspecified() => format!("[::1]:{}", self.addr.port()),
            _ => self.addr.to_string(),
        };
        format!("http://{host}/?token={}", self.guard.token())
    }

    /// Answers requests until `stop` is set. Fails only if the runtime that
    /// reads the requests cannot start.
    pub fn serve(self, served: Arc<Served>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        let runtime = http::runtime()?;
        let serving = Arc::clone(&served.0);
        // What makes later answers cheaper (a memtrace trace's tables) is
        // made beside the serving, not before it: the page answers at once.
        let preparing = Arc::clone(&serving);
        std::thread::spawn(move || {
            tracekit_io::priority::batch();
            preparing.prepare()
        });
        let workers = Workers::start(&serving, &stop);
        let guard = Arc::new(self.guard);
        let listening = runtime.block_on(http::accept(
            self.listener,
            Arc::clone(&serving),
            guard,
            self.idle,
            &stop,
        ));
        // Queries still queued are dropped: their connections close with the
        // runtime.
        stop.store(true, Ordering::Relaxed);
        serving.wake_all();
        drop(runtime);
        workers.join();
        listening
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod testing {
    //! What the server's tests share: a small memtrace trace served, and
    //! requests made and answered without a connection.

    use super::*;
    use tracekit_columns::TraceBytes;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    pub(crate) const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    /// A synthetic trace of 500 allocations, served.
    pub(crate) fn memtrace() -> Answers<Memtrace> {
        let config = SynthConfig {
            allocs: 500,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let trace = Trace::new("t.ctf".into(), TraceBytes::new(bytes)).unwrap();
        trace.read_info();
        Answers::new(Memtrace::new(trace, None))
    }

    /// The status and body of a request, its query answered at once.
    pub(crate) fn status<A: Api>(asked: &Asked, guard: &Guard, s: &Answers<A>) -> (u16, String) {
        let reply = match route(asked, guard, s) {
            Routed::Reply(r) => r,
            Routed::Query(key) => s.ask(&key),
        };
        (
            reply.status,
            String::from_utf8_lossy(&reply.body).into_owned(),
        )
    }

    /// A function that asks `s` for a URL with the token, as a page on
    /// `127.0.0.1:1` would: the status and body of the reply.
    pub(crate) fn asker<'a, A: Api>(
        guard: &'a Guard,
        s: &'a Answers<A>,
    ) -> impl Fn(&str) -> (u16, String) + 'a {
        move |url| {
            let sep = if url.contains('?') { '&' } else { '?' };
            let asked = get(&format!("{url}{sep}token={TOKEN}"), "127.0.0.1:1");
            status(&asked, guard, s)
        }
    }

    pub(crate) fn get(url: &str, host: &str) -> Asked {
        Asked {
            get: true,
            url: url.to_string(),
            hosts: vec![host.to_string()],
            ..Asked::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::testing::memtrace;
    use super::*;
    use std::io::Read;

    #[test]
    fn a_served_trace_is_decoded_into_its_tables_beside_the_serving() {
        let viewer = Viewer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let s = Arc::new(memtrace());
        let tables = |s: &Answers<Memtrace>| {
            s.api()
                .trace()
                .and_then(|t| t.tables())
                .map(|t| t.allocations())
        };
        assert!(tables(&s).is_none());
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let served = Arc::new(Served(Arc::clone(&s) as Arc<dyn Serving>));
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || viewer.serve(served, stop))
        };
        let started = std::time::Instant::now();
        while tables(&s).is_none() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tables(&s), Some(500));
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
            let served = Arc::new(Served(Arc::new(memtrace())));
            std::thread::spawn(move || viewer.serve(served, stop))
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
}
