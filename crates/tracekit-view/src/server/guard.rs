//! Who may ask: a request reaches the router only if its `Host` header is
//! this server's address and its `Origin`, if any, this server's; it reaches
//! a trace's answers only with the token the server made when it started.
//! See [`super`] for why each check is there.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use super::http::{Asked, Reply};

/// The Host headers and origins of this server, and its token.
pub(crate) struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: String,
}

impl Guard {
    /// The guard of a server bound to `addr`, with `token`.
    pub(crate) fn new(addr: SocketAddr, token: String) -> Guard {
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

    /// The token every API request must carry.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Lets `asked` through to the router, or refuses it: by its Host
    /// header (one, and this server's) and its Origin (none, or this
    /// server's).
    pub(crate) fn admit(&self, asked: &Asked) -> Result<(), Reply> {
        match &asked.hosts[..] {
            [host] if self.is_host(host) => {}
            [_, _, ..] => return Err(Reply::text(400, "more than one Host header")),
            _ => {
                return Err(Reply::text(
                    403,
                    "refused: the Host header is not this server's address",
                ));
            }
        }
        match &asked.origin {
            Some(origin) if !self.is_origin(origin) => Err(Reply::text(
                403,
                "refused: a request from a page of another site",
            )),
            _ => Ok(()),
        }
    }

    /// Lets a request that carries `token` through to the answers, or
    /// refuses it: 401 without a token, 403 with another.
    pub(crate) fn authorize(&self, token: Option<&str>) -> Result<(), Reply> {
        match token {
            None => Err(Reply::text(
                401,
                "the API answers only with the token in the URL the viewer printed",
            )),
            Some(t) if !self.is_token(t) => {
                Err(Reply::text(403, "refused: not this viewer's token"))
            }
            Some(_) => Ok(()),
        }
    }

    pub(crate) fn is_host(&self, host: &str) -> bool {
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

/// A token of 128 random bits, in hex.
pub(crate) fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::{TOKEN, get, memtrace, status};
    use super::*;

    #[test]
    fn only_this_servers_names_are_hosts() {
        let guard = Guard::new("127.0.0.1:8123".parse().unwrap(), TOKEN.into());
        let s = memtrace();
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
        let s = memtrace();
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
}
