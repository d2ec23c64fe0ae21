//! The viewer's HTTP server: the page's assets, compiled into the binary, and
//! the [`crate::api`] answers under `/api/`.
//!
//! What it will serve, and to whom:
//! - `GET` only. The paths are a fixed list: the page (`/`), its script and
//!   style, and `/api/<endpoint>`. Nothing in a request names a file.
//! - A request whose `Host` header is not the address the server is bound to
//!   (or `localhost`, `127.0.0.1` or `[::1]` with its port) is refused with
//!   403: a page on another site that makes the browser resolve its own name
//!   to 127.0.0.1 (DNS rebinding) sends its own name as the Host.
//! - Malformed arguments get 400 and the option parser's message.
//! - Requests are answered by several threads, so one slow query does not
//!   hold up the others.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiny_http::{Header, Method, Request, Response};

use crate::api::{self, ApiError, Endpoint, Trace};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// How many requests are answered at once.
const WORKERS: usize = 4;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {message}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The system's reason.
    pub message: String,
}

/// The traces a viewer serves, and the answers it has given lately.
pub struct Served {
    trace: Trace,
    compare: Option<Trace>,
    cache: Mutex<Cache>,
}

impl Served {
    /// Serves `trace`, and `compare` to compare it with (`--compare`).
    pub fn new(trace: Trace, compare: Option<Trace>) -> Served {
        Served {
            trace,
            compare,
            cache: Mutex::new(Cache::default()),
        }
    }
}

/// The latest answers, by endpoint and arguments: going back to a filter, or
/// to a tab, is then immediate. Bounded by their total size.
#[derive(Default)]
struct Cache {
    entries: VecDeque<(Key, Arc<String>)>,
    bytes: usize,
}

/// What a request asks: an endpoint and its arguments.
type Key = (Endpoint, Vec<String>);

/// Most bytes of answers the cache keeps.
const CACHE_BYTES: usize = 64 << 20;

impl Cache {
    fn get(&mut self, key: &Key) -> Option<Arc<String>> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        let entry = self.entries.remove(i)?;
        let answer = Arc::clone(&entry.1);
        self.entries.push_front(entry);
        Some(answer)
    }

    fn put(&mut self, key: Key, answer: Arc<String>) {
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
    http: Arc<tiny_http::Server>,
    addr: SocketAddr,
    hosts: Vec<String>,
}

impl Viewer {
    /// Listens on `addr` (port 0: a free port).
    pub fn bind(addr: SocketAddr) -> Result<Viewer, BindError> {
        let http = tiny_http::Server::http(addr).map_err(|e| BindError {
            addr,
            message: e.to_string(),
        })?;
        let addr = http.server_addr().to_ip().unwrap_or(addr);
        Ok(Viewer {
            http: Arc::new(http),
            hosts: allowed_hosts(addr),
            addr,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's address.
    pub fn url(&self) -> String {
        match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                format!("http://127.0.0.1:{}/", self.addr.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                format!("http://[::1]:{}/", self.addr.port())
            }
            _ => format!("http://{}/", self.addr),
        }
    }

    /// Answers requests until `stop` is set.
    pub fn serve(self, served: Arc<Served>, stop: Arc<AtomicBool>) {
        let hosts = Arc::new(self.hosts);
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (http, served, stop, hosts) = (
                    Arc::clone(&self.http),
                    Arc::clone(&served),
                    Arc::clone(&stop),
                    Arc::clone(&hosts),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match http.recv_timeout(Duration::from_millis(100)) {
                            Ok(Some(request)) => respond(request, &served, &hosts),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            // A worker that panicked has already lost its request; the others
            // served on.
            let _ = w.join();
        }
    }
}

/// The Host headers a request may carry.
fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    let own = match addr.ip() {
        IpAddr::V4(ip) => format!("{ip}:{port}"),
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    };
    if !hosts.contains(&own) {
        hosts.push(own);
    }
    hosts
}

/// A response: status, content type, body.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
}

impl Reply {
    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }
}

/// The reply to a `method` request for `url` with `host` as its Host header.
fn route(method: &str, url: &str, host: Option<&str>, served: &Served, hosts: &[String]) -> Reply {
    match host {
        Some(h) if hosts.iter().any(|a| a.eq_ignore_ascii_case(h)) => {}
        _ => return Reply::text(403, "refused: the Host header is not this server's address"),
    }
    if method != "GET" {
        return Reply::text(405, "only GET");
    }
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let asset = |content_type, body: &str| Reply {
        status: 200,
        content_type,
        body: body.to_string(),
    };
    match path {
        "/" | "/index.html" => asset("text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => asset("text/javascript; charset=utf-8", APP_JS),
        "/app.css" => asset("text/css; charset=utf-8", APP_CSS),
        "/api/features" => Reply {
            status: 200,
            content_type: "application/json",
            body: format!("{{\"compare\": {}}}", served.compare.is_some()),
        },
        _ => match path.strip_prefix("/api/").and_then(Endpoint::from_name) {
            Some(endpoint) => api_reply(endpoint, query, served),
            None => Reply::text(404, "not found"),
        },
    }
}

fn api_reply(endpoint: Endpoint, query: &str, served: &Served) -> Reply {
    let mut args = Vec::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key != "arg" {
            return Reply::text(
                400,
                format!("unknown parameter {key:?}: arguments are arg=..."),
            );
        }
        args.push(value.into_owned());
    }
    let key = (endpoint, args);
    let cached = served
        .cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key);
    let answer = match cached {
        Some(a) => Ok(a),
        None => api::answer(&served.trace, served.compare.as_ref(), endpoint, &key.1).map(|a| {
            let a = Arc::new(a);
            let mut cache = served.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.put(key, Arc::clone(&a));
            a
        }),
    };
    match answer {
        Ok(body) => Reply {
            status: 200,
            content_type: "application/json",
            body: Arc::unwrap_or_clone(body),
        },
        Err(e @ (ApiError::BadArguments(_) | ApiError::NothingToCompare)) => {
            Reply::text(400, e.to_string())
        }
        Err(e @ ApiError::Unreadable(_)) => Reply::text(500, e.to_string()),
    }
}

fn respond(request: Request, served: &Served, hosts: &[String]) {
    let host = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Host"))
        .map(|h| h.value.as_str().to_string());
    let method = match request.method() {
        Method::Get => "GET",
        _ => "OTHER",
    };
    let reply = route(method, request.url(), host.as_deref(), served, hosts);
    let mut response = Response::from_string(reply.body).with_status_code(reply.status);
    for (name, value) in [
        ("Content-Type", reply.content_type),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        (
            "Content-Security-Policy",
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
        ),
    ] {
        if let Ok(h) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    }
    // The browser may have gone away; nothing to do about it.
    let _ = request.respond(response);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_analysis::trace_bytes::TraceBytes;
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
        let key = |n: usize| (Endpoint::Top, vec![n.to_string()]);
        let big = Arc::new("x".repeat(CACHE_BYTES / 8));
        for n in 0..12 {
            c.put(key(n), Arc::clone(&big));
        }
        assert!(c.bytes <= CACHE_BYTES);
        assert_eq!(c.entries.len(), 8);
        assert!(c.get(&key(3)).is_none(), "the oldest went first");
        assert!(c.get(&key(4)).is_some());
        // Used again, 4 is now the newest: the next puts evict 5, not 4.
        c.put(key(12), Arc::clone(&big));
        assert!(c.get(&key(4)).is_some());
        assert!(c.get(&key(5)).is_none());
        // An answer too large to keep is not kept.
        c.put(key(13), Arc::new("y".repeat(CACHE_BYTES / 2)));
        assert!(c.get(&key(13)).is_none());
    }

    #[test]
    fn only_this_servers_names_are_hosts() {
        let hosts = allowed_hosts("127.0.0.1:8123".parse().unwrap());
        let s = served();
        let status = |host: Option<&str>| route("GET", "/api/info", host, &s, &hosts).status;
        for ok in [
            "127.0.0.1:8123",
            "localhost:8123",
            "LOCALHOST:8123",
            "[::1]:8123",
        ] {
            assert_eq!(status(Some(ok)), 200, "{ok}");
        }
        for refused in [
            None,
            Some("localhost"),
            Some("localhost:80"),
            Some("evil.example:8123"),
            Some("127.0.0.1:8124"),
        ] {
            assert_eq!(status(refused), 403, "{refused:?}");
        }
        let lan = allowed_hosts("192.168.1.7:9000".parse().unwrap());
        assert!(lan.contains(&"192.168.1.7:9000".to_string()));
    }

    #[test]
    fn requests_are_routed_or_refused() {
        let hosts = allowed_hosts("127.0.0.1:1".parse().unwrap());
        let s = served();
        let get = |url: &str| route("GET", url, Some("127.0.0.1:1"), &s, &hosts);
        assert_eq!(get("/").content_type, "text/html; charset=utf-8");
        assert_eq!(get("/app.js").status, 200);
        assert_eq!(get("/api/top?arg=--limit&arg=3").status, 200);
        assert_eq!(get("/api/top?arg=--limit&arg=three").status, 400);
        assert_eq!(get("/api/top?limit=3").status, 400);
        assert_eq!(get("/api/diff").status, 400);
        assert_eq!(get("/api/info?arg=x").status, 400);
        assert_eq!(get("/Cargo.toml").status, 404);
        assert_eq!(
            route("POST", "/", Some("127.0.0.1:1"), &s, &hosts).status,
            405
        );
        assert_eq!(get("/api/features").body, "{\"compare\": false}");
    }
}
