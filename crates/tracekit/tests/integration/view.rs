//! `tracekit memtrace view` and `tracekit view` end to end: the server started
//! as a user starts it, asked over HTTP. Its JSON endpoints answer what the
//! subcommands print with `--json` for the same options, on every corpus trace
//! (memtrace traces, FXT traces and `perf script` text); it refuses foreign
//! Host headers, malformed arguments and paths outside its own; Ctrl-C stops it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::TRACEKIT;

/// A running `tracekit memtrace view`, stopped (with SIGINT) when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
    token: String,
    /// What it has written to stderr so far.
    said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    pub(crate) fn start(args: &[&Path]) -> Server {
        Server::spawn(args, None)
    }

    /// A server whose trace tables are kept under `cache` (`XDG_CACHE_HOME`).
    fn start_cached(args: &[&Path], cache: &Path) -> Server {
        Server::spawn(args, Some(cache))
    }

    /// A server keeping its tables under `cache`, or none.
    fn spawn(args: &[&Path], cache: Option<&Path>) -> Server {
        Server::spawn_as(&["memtrace", "view"], args, cache)
    }

    /// `tracekit COMMAND...` serving `args` (a trace, and one to compare it
    /// with), keeping what it builds under `cache`, or nothing.
    fn spawn_as(command: &[&str], args: &[&Path], cache: Option<&Path>) -> Server {
        let mut cmd = TRACEKIT.command();
        cmd.args(command);
        match cache {
            Some(dir) => cmd.env("XDG_CACHE_HOME", dir),
            None => cmd.arg("--no-cache"),
        };
        let mut args = args.iter();
        cmd.arg(args.next().unwrap());
        if let Some(other) = args.next() {
            cmd.arg("--compare").arg(other);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tracekit");
        let said: std::sync::Arc<std::sync::Mutex<String>> = std::sync::Arc::default();
        let mut stderr = child.stderr.take().unwrap();
        let into = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                into.lock().unwrap().push_str(&text);
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "serving NAME at http://127.0.0.1:PORT/?token=TOKEN (Ctrl-C stops)"
        let (port, token) = line
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split_once("/?token="))
            .and_then(|(p, t)| Some((p.parse().ok()?, t.split(' ').next()?.to_string())))
            .unwrap_or_else(|| panic!("no URL in {line:?}"));
        Server {
            child,
            port,
            token,
            said,
        }
    }

    /// Waits until it has said `text` on stderr.
    fn wait_to_say(&self, text: &str) {
        let started = std::time::Instant::now();
        while !self.said.lock().unwrap().contains(text) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "never said {text:?}: {}",
                self.said.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Status and body of `GET path` with `host` as the Host header (default: the
    /// server's own address) and the server's token.
    fn get_as(&self, path: &str, host: Option<&str>) -> (u16, String) {
        let own = format!("127.0.0.1:{}", self.port);
        let host = format!("Host: {}", host.unwrap_or(&own));
        let token = format!("Authorization: Bearer {}", self.token);
        self.request(path, &[&host, &token])
    }

    /// Status and body of `GET path` with `headers` alone.
    fn request(&self, path: &str, headers: &[&str]) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!("GET {path} HTTP/1.1\r\n");
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        write!(s, "{head}Connection: close\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("no header end");
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let body = &raw[split + 4..];
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        // The server answers with a length, or in chunks for long bodies.
        let body = if head.contains("transfer-encoding: chunked") {
            dechunk(body)
        } else {
            body.to_vec()
        };
        (
            status,
            String::from_utf8(body).expect("the body is not UTF-8"),
        )
    }

    /// Status and body of `GET path`, asked again while the server answers
    /// 503 (a timeline still being built, a memtrace trace's info still
    /// being read), as the page does.
    fn get(&self, path: &str) -> (u16, String) {
        let started = std::time::Instant::now();
        loop {
            let (status, body) = self.get_as(path, None);
            if status != 503 || started.elapsed() > std::time::Duration::from_secs(120) {
                return (status, body);
            }
            assert!(
                body.starts_with("building the timeline: ") || body == "reading the trace",
                "{body}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub(crate) fn json(&self, endpoint: &str, args: &[&str]) -> Value {
        let query: Vec<String> = args.iter().map(|a| format!("arg={}", encode(a))).collect();
        let (status, body) = self.get(&format!("/api/{endpoint}?{}", query.join("&")));
        assert_eq!(status, 200, "{endpoint} {args:?}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) takes two integers and touches no memory of ours; the
        // pid is our own child's, not yet waited for (that comes next), so it
        // cannot name another process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        if !std::thread::panicking() {
            assert!(status.success(), "view after Ctrl-C: {status}");
        }
    }
}

fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = s.windows(2).position(|w| w == b"\r\n") {
        let len = std::str::from_utf8(&s[..eol]).unwrap();
        let n = usize::from_str_radix(len.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        let rest = &s[eol + 2..];
        out.extend_from_slice(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn cli_json(args: &[&str]) -> Value {
    let out = TRACEKIT.command().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn corpus_traces() -> Option<Vec<PathBuf>> {
    let dir = tracekit_testutil::corpus_path("memtrace/traces")?;
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ctf"))
        .collect();
    traces.sort();
    assert!(
        traces.len() >= 8,
        "corpus traces missing in {}",
        dir.display()
    );
    Some(traces)
}

/// Every slice counted: `tracekit view` of an FXT trace answers what `fxt
/// stats`, `fxt top` and `fxt slices` print with `--json`, built or read back
/// from its cache; of `perf script` text, what they print of the FXT `perf
/// decode` writes.
#[test]
fn a_timeline_answers_what_the_fxt_subcommands_print() {
    let Some(dir) = tracekit_testutil::corpus_path("fxt") else {
        return;
    };
    let scratch = tracekit_testutil::scratch();
    let text = tracekit_testutil::corpus_path("magic-trace/c_demo_sampling.perf").unwrap();
    let decoded = scratch.path().join("c_demo.fxt");
    let status = TRACEKIT
        .command()
        .args(["-q", "perf", "decode"])
        .arg(&text)
        .arg("-o")
        .arg(&decoded)
        .status()
        .unwrap();
    assert!(status.success());
    let mut cases: Vec<(PathBuf, PathBuf)> = ["magic_trace_sample.fxt", "jst_tracing_demo.fxt"]
        .iter()
        .map(|n| (dir.join(n), dir.join(n)))
        .collect();
    cases.push((text, decoded));
    let cache = scratch.path().join("cache");
    for (served, fxt) in &cases {
        let fxt = fxt.to_str().unwrap();
        for start in ["built", "read back"] {
            let server = Server::spawn_as(&["view"], &[served], Some(&cache));
            let ask = |path: &str| {
                let (status, body) = server.get(path);
                assert_eq!(status, 200, "{path}: {body}");
                serde_json::from_str::<Value>(&body).unwrap()
            };
            let what = format!("{} ({start})", served.display());
            assert_eq!(
                ask("/api/stats"),
                cli_json(&["fxt", "stats", "--json", fxt]),
                "{what}"
            );
            assert_eq!(
                ask("/api/top?limit=10000"),
                cli_json(&["fxt", "top", "--json", "--limit", "10000", fxt]),
                "{what}"
            );
            assert_eq!(
                ask("/api/slices?limit=10000&between=0,1ms"),
                cli_json(&[
                    "fxt",
                    "slices",
                    "--json",
                    "--limit",
                    "10000",
                    "--between",
                    "0",
                    "1ms",
                    fxt
                ]),
                "{what}"
            );
            let (status, page) = server.get("/");
            assert!(status == 200 && page.contains("/timeline.js"), "{what}");
        }
    }
    let kept: Vec<_> = std::fs::read_dir(cache.join("tracekit/tables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        kept.iter().filter(|n| n.ends_with(".timeline")).count(),
        3,
        "{kept:?}"
    );
}

/// A timeline's URL comes before its build; a build that fails says why,
/// answers the page 500 meanwhile, and ends the command with an error.
#[test]
fn a_timeline_whose_build_fails_ends_the_command_with_its_reason() {
    let scratch = tracekit_testutil::scratch();
    let bad = scratch.path().join("bad.data");
    let mut bytes = b"PERFILE2".to_vec();
    bytes.extend([0xee; 200]);
    std::fs::write(&bad, bytes).unwrap();
    let mut child = TRACEKIT
        .command()
        .args(["view", "--no-cache"])
        .arg(&bad)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    assert!(out.starts_with("serving "), "{out}");
    assert!(
        err.contains("error: ") && err.contains("not a readable perf.data file"),
        "{err}"
    );
}

#[test]
fn endpoints_answer_what_the_subcommands_print() {
    let Some(traces) = corpus_traces() else {
        return;
    };
    let queries: &[(&str, &[&str])] = &[
        ("top", &[]),
        ("top", &["--by", "function", "--limit", "5"]),
        ("top", &["--peak", "--source", "major"]),
        ("top", &["--between", "0s", "0.05s", "--min-size", "64"]),
        ("timeline", &["--points", "450"]),
        ("timeline", &["--location", "a"]),
        ("top", &["--never-collected", "--lifetime", "0s", "1000s"]),
        (
            "timeline",
            &["--live-between", "0.01s", "0.02s", "--forbid", "a"],
        ),
        ("flamegraph", &[]),
        ("flamegraph", &["--live-end", "--frames", "location"]),
        ("flamegraph", &["--hide-function", "a", "--hide", "b"]),
        ("hot-paths", &[]),
        (
            "hot-paths",
            &[
                "--frequency",
                "0.02",
                "--tolerance",
                "0",
                "--limit",
                "10000",
            ],
        ),
    ];
    for t in &traces {
        let server = Server::start(&[t]);
        let path = t.to_str().unwrap();
        let info = server.json("info", &[]);
        let same = info == cli_json(&["memtrace", "info", "--json", path]);
        assert!(same, "{path}: info differs from the CLI's");
        for (endpoint, args) in queries {
            let mut cli = vec!["memtrace", endpoint, "--json"];
            cli.extend_from_slice(args);
            cli.push(path);
            // Compared without printing them: they can be megabytes.
            let same = server.json(endpoint, args) == cli_json(&cli);
            assert!(same, "{path}: {endpoint} {args:?} differs from the CLI's");
        }
        assert_eq!(server.get("/api/diff").0, 400, "no --compare");
        flametree_agrees_with_flamegraph(&server, path);
        other_trees_agree_with_flamegraph(&server, path);
    }
}

/// The page's flame tree: its total is the flame graph's, each node's total is
/// its own weight plus its shown callees' (when none was left out), and a focus
/// leads to the node whose total is the sum of the stacks through it.
fn flametree_agrees_with_flamegraph(server: &Server, path: &str) {
    let folded = cli_json(&["memtrace", "flamegraph", "--json", path]);
    let stacks = folded["stacks"].as_array().unwrap();
    let tree = server.json("flametree", &["--min-share", "0"]);
    assert_eq!(tree["total"], folded["total"], "{path}");
    let nodes = tree["nodes"].as_array().unwrap();
    if tree["truncated"] == false {
        assert_eq!(nodes.len(), distinct_prefixes(stacks) + 1, "{path}");
        let mut sums = vec![0u64; nodes.len()];
        for (i, n) in nodes.iter().enumerate().rev() {
            let total = n["total"].as_u64().unwrap();
            assert_eq!(
                total,
                n["self"].as_u64().unwrap() + sums[i],
                "{path}: node {i}"
            );
            if let Some(p) = n["parent"].as_i64().filter(|&p| p >= 0) {
                sums[p as usize] += total;
            }
        }
    }
    // Focus on the first frame of the heaviest stack.
    let Some(first) = stacks
        .iter()
        .max_by_key(|s| s["weight"].as_u64())
        .and_then(|s| s["frames"][0].as_str())
    else {
        return;
    };
    let focused = server.json("flametree", &["--focus", first, "--focus", "no such frame"]);
    assert_eq!(focused["focus"], serde_json::json!([first]), "{path}");
    let through: u64 = stacks
        .iter()
        .filter(|s| s["frames"][0].as_str() == Some(first))
        .map(|s| s["weight"].as_u64().unwrap())
        .sum();
    assert_eq!(
        focused["nodes"][0]["total"].as_u64(),
        Some(through),
        "{path}"
    );
}

/// The page's other trees: the stacks reversed (the caller table), a call
/// sequence's callees and callers (the flame graph's focus), one level at a
/// time (the tables' expansion).
fn other_trees_agree_with_flamegraph(server: &Server, path: &str) {
    let folded = cli_json(&["memtrace", "flamegraph", "--json", path]);
    let stacks: Vec<(Vec<String>, u64)> = folded["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let frames = s["frames"].as_array().unwrap();
            let frames = frames.iter().map(|f| f.as_str().unwrap().to_string());
            (frames.collect(), s["weight"].as_u64().unwrap())
        })
        .collect();
    let inverted = server.json("flametree", &["--invert", "--min-share", "0"]);
    assert_eq!(inverted["total"], folded["total"], "{path}");
    let reversed: Vec<Value> = stacks
        .iter()
        .map(|(f, _)| serde_json::json!({"frames": f.iter().rev().collect::<Vec<_>>()}))
        .collect();
    if inverted["truncated"] == false {
        let nodes = inverted["nodes"].as_array().unwrap().len();
        assert_eq!(nodes, distinct_prefixes(&reversed) + 1, "{path}");
    }
    let shallow = server.json("flametree", &["--depth", "1", "--min-share", "0"]);
    for n in shallow["nodes"].as_array().unwrap() {
        assert!(
            n["parent"].as_i64().unwrap() <= 0,
            "{path}: deeper than asked"
        );
    }
    // A fragment: the two innermost frames of the heaviest stack.
    let Some((frames, _)) = stacks
        .iter()
        .filter(|(f, _)| f.len() >= 2)
        .max_by_key(|s| s.1)
    else {
        return;
    };
    let fragment = &frames[frames.len() - 2..];
    let through: u64 = stacks
        .iter()
        .filter(|(f, _)| f.windows(2).any(|w| w == fragment))
        .map(|s| s.1)
        .sum();
    let args = [
        "--fragment",
        &fragment[0],
        "--fragment",
        &fragment[1],
        "--min-share",
        "0",
    ];
    let focus = server.json("flametree", &args);
    assert_eq!(focus["fragment"], serde_json::json!(fragment), "{path}");
    assert_eq!(focus["nodes"][0]["total"].as_u64(), Some(through), "{path}");
    assert_eq!(
        focus["callers"][0]["total"].as_u64(),
        Some(through),
        "{path}"
    );
}

/// Distinct non-empty frame prefixes of the folded stacks: the tree's nodes.
fn distinct_prefixes(stacks: &[Value]) -> usize {
    let mut seen = std::collections::HashSet::new();
    for s in stacks {
        let frames: Vec<&str> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        for k in 1..=frames.len() {
            seen.insert(frames[..k].join("\u{1}"));
        }
    }
    seen.len()
}

#[test]
fn compare_answers_what_diff_prints() {
    let Some(traces) = corpus_traces() else {
        return;
    };
    let (a, b) = (&traces[0], &traces[traces.len() - 1]);
    let server = Server::start(&[b, a]);
    for args in [&[][..], &["--by", "function", "--limit", "3"]] {
        let mut cli = vec!["memtrace", "diff", "--json"];
        cli.extend_from_slice(args);
        cli.extend([a.to_str().unwrap(), b.to_str().unwrap()]);
        let same = server.json("diff", args) == cli_json(&cli);
        assert!(same, "diff {args:?} differs from the CLI's");
    }
}

#[test]
fn the_server_refuses_what_it_does_not_serve() {
    let dir = tracekit_testutil::scratch();
    let trace = dir.path().join("t.ctf");
    let out = TRACEKIT
        .command()
        .args([
            "memtrace",
            "sample",
            trace.to_str().unwrap(),
            "--allocs",
            "2000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let server = Server::start(&[&trace]);
    // The info read (503 until then), so that the requests below that ask
    // for it once are answered.
    assert_eq!(server.get("/api/info").0, 200);
    let (status, page) = server.get("/");
    assert_eq!(status, 200);
    assert!(page.contains("<script type=\"module\" src=\"/app.js\">"));
    assert_eq!(server.get("/app.js").0, 200);
    // DNS rebinding: a foreign name for our address.
    let (status, body) = server.get_as("/api/info", Some("evil.example:80"));
    assert_eq!((status, body.contains("Host")), (403, true), "{body}");
    assert_eq!(
        server
            .get_as("/", Some(&format!("localhost:{}", server.port)))
            .0,
        200
    );
    // Private: the API answers only with the token, the page without it.
    let host = format!("Host: 127.0.0.1:{}", server.port);
    let (status, body) = server.request("/api/info", &[&host]);
    assert_eq!((status, body.contains("token")), (401, true), "{body}");
    let wrong = format!("Authorization: Bearer {}0", server.token);
    assert_eq!(server.request("/api/info", &[&host, &wrong]).0, 403);
    let query = format!("/api/info?token={}", server.token);
    assert_eq!(server.request(&query, &[&host]).0, 200);
    assert_eq!(server.request("/", &[&host]).0, 200);
    // Only one Host, and no other site's pages.
    assert_eq!(server.request(&query, &[&host, &host]).0, 400);
    let foreign = "Origin: http://evil.example";
    assert_eq!(server.request(&query, &[&host, foreign]).0, 403);
    // Malformed arguments: 400 and the option parser's words.
    let (status, body) = server.get("/api/top?arg=--by&arg=nonsense");
    assert_eq!(status, 400);
    assert!(body.contains("nonsense"), "{body}");
    assert_eq!(server.get("/api/top?arg=--between&arg=2s&arg=1s").0, 400);
    assert_eq!(server.get("/api/top?file=/etc/passwd").0, 400);
    assert_eq!(server.get("/api/top?arg=/etc/passwd").0, 400);
    assert_eq!(server.get("/api/flametree?arg=--min-share&arg=2").0, 400);
    assert_eq!(server.get("/api/nothing").0, 404);
    assert_eq!(server.get("/../../etc/passwd").0, 404);
    assert_eq!(server.get("/%2e%2e/Cargo.toml").0, 404);
    // Still answering after all that.
    assert_eq!(
        server.json("top", &["--limit", "1"])["sites"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn slow_queries_hold_up_neither_the_info_nor_the_page() {
    let dir = tracekit_testutil::scratch();
    let trace = dir.path().join("t.ctf");
    let out = TRACEKIT
        .command()
        .args(["memtrace", "sample", "-o"])
        .arg(&trace)
        .args(["--allocs", "400000", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let server = std::sync::Arc::new(Server::start(&[&trace]));
    let info = |server: &Server| {
        let t = std::time::Instant::now();
        assert_eq!(server.get("/api/info").0, 200);
        assert_eq!(server.get("/").0, 200);
        t.elapsed()
    };
    // Before the slow queries: how long the info takes on an idle server.
    let idle = info(&server);
    // Eight queries that each read the whole trace (distinct, so that none
    // waits for another's answer): more than the workers can run at once.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slow: Vec<_> = (0..8)
        .map(|i| {
            let (server, done) = (std::sync::Arc::clone(&server), std::sync::Arc::clone(&done));
            std::thread::spawn(move || {
                let limit = (i + 1).to_string();
                let answer = server.json("top", &["--by", "backtrace", "--limit", &limit]);
                assert_eq!(answer["sites"].as_array().unwrap().len(), i + 1);
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let busy = info(&server);
    let finished_by_then = done.load(std::sync::atomic::Ordering::SeqCst);
    for s in slow {
        s.join().unwrap();
    }
    assert!(
        finished_by_then < 8,
        "the slow queries were not slow enough to test anything"
    );
    assert!(
        busy < std::time::Duration::from_millis(200) + idle * 4,
        "info and the page took {busy:?} behind the queries ({idle:?} idle)"
    );
}

/// The one file of the tables cache under `cache`, once a server has written it.
fn cached_file(cache: &Path) -> PathBuf {
    let dir = cache.join("tracekit/tables");
    let started = std::time::Instant::now();
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        if let [one] = &files[..]
            && one.extension().is_some_and(|e| e == "tables")
        {
            return one.clone();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no tables in {}: {files:?}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_tables_are_kept_reused_and_remade_when_the_trace_changes() {
    let Some(traces) = corpus_traces() else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    let cache = dir.path().join("cache");
    let trace = dir.path().join("t.ctf");
    let pick = |name: &str| traces.iter().find(|p| p.ends_with(name)).unwrap().clone();
    std::fs::copy(pick("lists_hashtbl_v2.ctf"), &trace).unwrap();
    let top = |s: &Server| s.json("top", &["--by", "function"]);
    let cli_top = |trace: &Path| {
        cli_json(&[
            "memtrace",
            "top",
            "--by",
            "function",
            "--json",
            trace.to_str().unwrap(),
        ])
    };
    let first = {
        let s = Server::start_cached(&[&trace], &cache);
        let file = cached_file(&cache);
        (top(&s), file)
    };
    let written = std::fs::metadata(&first.1).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    {
        let s = Server::start_cached(&[&trace], &cache);
        // Read back: the same answers, the file not written again.
        assert_eq!(top(&s), first.0);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(
            std::fs::metadata(&first.1).unwrap().modified().unwrap(),
            written
        );
    }
    std::fs::copy(pick("mixed_v3.ctf"), &trace).unwrap();
    {
        let s = Server::start_cached(&[&trace], &cache);
        let started = std::time::Instant::now();
        while std::fs::metadata(&first.1).unwrap().modified().unwrap() == written {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "not remade"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(top(&s), cli_top(&trace));
    }
    // A cache that cannot be written: the viewer serves all the same.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, b"a file, not a folder").unwrap();
    let s = Server::start_cached(&[&trace], &blocked);
    assert_eq!(top(&s), cli_top(&trace));
}

/// Whether the server's process maps `file`.
#[cfg(target_os = "linux")]
fn maps(server: &Server, file: &Path) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.child.id()));
    maps.is_ok_and(|m| m.contains(file.to_str().unwrap()))
}

/// Waits until the server maps `file`, its cache read back.
#[cfg(target_os = "linux")]
fn wait_for_map(server: &Server, file: &Path) {
    let started = std::time::Instant::now();
    while !maps(server, file) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{} never mapped",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A cache file cut short while the server reads it does not end the
/// server: a memtrace trace is answered by passes over the trace instead,
/// with the same answers; a timeline says that it must be built again.
#[cfg(target_os = "linux")]
#[test]
fn a_cache_file_cut_short_while_served_is_survived() {
    let dir = tracekit_testutil::scratch();
    let (ctf, fxt) = (dir.path().join("t.ctf"), dir.path().join("t.fxt"));
    let made = |args: &[&str], out: &Path| {
        let status = TRACEKIT
            .command()
            .arg("-q")
            .args(args)
            .arg("-o")
            .arg(out)
            .status()
            .unwrap();
        assert!(status.success());
    };
    made(&["memtrace", "sample", "--allocs", "200000"], &ctf);
    made(
        &["fxt", "sample", "--slices", "300000", "--threads", "2"],
        &fxt,
    );
    let top = |s: &Server| s.json("top", &["--by", "function", "--limit", "20"]);
    let cut = |file: &Path| {
        let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
        f.set_len(4096).unwrap();
    };

    let cache = dir.path().join("memtrace-cache");
    let before = {
        let s = Server::start_cached(&[&ctf], &cache);
        cached_file(&cache);
        top(&s)
    };
    let tables = cached_file(&cache);
    assert!(std::fs::metadata(&tables).unwrap().len() > 1 << 20);
    let s = Server::start_cached(&[&ctf], &cache);
    s.wait_to_say("tables are read back");
    wait_for_map(&s, &tables);
    cut(&tables);
    assert_eq!(top(&s), before, "answered from the trace instead");
    assert_eq!(s.get("/api/info").0, 200);
    drop(s);

    let cache = dir.path().join("timeline-cache");
    let window = "/api/window?from=0&to=1000000&px=800";
    {
        let s = Server::spawn_as(&["view"], &[&fxt], Some(&cache));
        assert_eq!(s.get(window).0, 200);
    }
    let timeline = std::fs::read_dir(cache.join("tracekit/tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "timeline"))
        .unwrap();
    assert!(std::fs::metadata(&timeline).unwrap().len() > 1 << 20);
    let s = Server::spawn_as(&["view"], &[&fxt], Some(&cache));
    s.wait_to_say("timeline is read back");
    wait_for_map(&s, &timeline);
    assert_eq!(s.get("/api/tracks").0, 200);
    cut(&timeline);
    let (status, body) = s.get("/api/window?from=0&to=2000000&px=900");
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("cut short"), "{body}");
    // The server goes on.
    assert_eq!(s.get("/api/features").0, 200);
}

/// `--heap` joins a memtrace trace to the FXT trace of the same program's
/// spans: asked of a memtrace trace, or given a heap that is not there, the
/// view says so before serving, naming the file.
#[test]
fn a_heap_is_refused_before_serving_where_it_cannot_join() {
    let dir = tracekit_testutil::scratch();
    let ctf = dir.path().join("heap.ctf");
    let fxt = dir.path().join("spans.fxt");
    TRACEKIT.ok(&["memtrace", "sample", "-q", "-o", ctf.to_str().unwrap()]);
    TRACEKIT.ok(&[
        "fxt",
        "sample",
        "-q",
        "-o",
        fxt.to_str().unwrap(),
        "--slices",
        "100",
    ]);
    let (c, f) = (ctf.to_str().unwrap(), fxt.to_str().unwrap());
    let out = TRACEKIT.run(&["view", c, "--heap", c]);
    assert!(!out.status.success());
    let said = tracekit_testutil::stderr(&out);
    assert!(
        said.contains("--heap joins a memtrace trace") && said.contains(c),
        "{said}"
    );
    let missing = dir.path().join("missing.ctf");
    let out = TRACEKIT.run(&["view", f, "--heap", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    let said = tracekit_testutil::stderr(&out);
    assert!(said.contains("missing.ctf"), "{said}");
}

/// The JSON of `GET path` on `server`, which must answer 200.
fn ask_json(server: &Server, path: &str) -> Value {
    let (status, body) = server.get(path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Waits, up to `limit`, until `done` holds of `server`; how long it took.
fn until(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> std::time::Duration {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "not within {limit:?}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    started.elapsed()
}

/// `tracekit view --follow` of the trace `whole` as a program writes it to
/// another file in pieces cut anywhere (mid-record, as a buffered writer
/// flushes): the page's answers grow with the file, `summary` (the endpoint
/// that counts the trace) equals `expected` within a second of the last write,
/// the server says when the writer is done, and then answers every one of
/// `same` as a fresh view of the same file does. Returns the latency.
fn follow_while_written(
    whole: &Path,
    summary: &str,
    expected: &Value,
    count: &dyn Fn(&Value) -> u64,
    same: &[&str],
) -> std::time::Duration {
    let bytes = std::fs::read(whole).unwrap();
    let live = whole.with_file_name(format!(
        "live.{}",
        whole.extension().unwrap().to_str().unwrap()
    ));
    let mut writer = std::fs::File::create(&live).unwrap();
    const PIECE: usize = 4099;
    let mut pieces = bytes.chunks(PIECE);
    // The server waits for the first bytes, which tell the kind.
    writer.write_all(pieces.next().unwrap()).unwrap();
    let server = Server::spawn_as(&["view", "--follow"], &[&live], None);
    let features = || ask_json(&server, "/api/features");
    assert_eq!(features()["followed"]["writing"], true);
    let halfway = bytes.len() / 2 / PIECE;
    for (i, piece) in pieces.enumerate() {
        writer.write_all(piece).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        if i == halfway {
            // Part of the trace, already served while the rest is written.
            let mut partial = Value::Null;
            until(std::time::Duration::from_secs(10), || {
                partial = ask_json(&server, summary);
                count(&partial) > 0
            });
            assert!(count(&partial) < count(expected), "{partial}");
            // An answer kept now is not given once the trace has grown.
            for path in same {
                ask_json(&server, path);
            }
        }
    }
    // Every record within a second of the last write, the writer still there.
    let latency = until(std::time::Duration::from_secs(1), || {
        ask_json(&server, summary) == *expected
    });
    eprintln!(
        "followed {}: whole within {latency:?} of the last write",
        whole.display()
    );
    assert_eq!(features()["followed"]["writing"], true);
    drop(writer);
    until(std::time::Duration::from_secs(5), || {
        features()["followed"]["writing"] == false
    });
    let fresh = Server::spawn_as(&["view"], &[&live], None);
    for path in std::iter::once(&summary).chain(same) {
        assert_eq!(ask_json(&server, path), ask_json(&fresh, path), "{path}");
    }
    latency
}

/// `tracekit view --follow` of an FXT trace: see [`follow_while_written`].
#[test]
fn a_timeline_followed_while_written_ends_as_a_fresh_view_of_it() {
    let scratch = tracekit_testutil::scratch();
    let whole = scratch.path().join("whole.fxt");
    let status = TRACEKIT
        .command()
        .args([
            "-q",
            "fxt",
            "sample",
            "--slices",
            "30000",
            "--threads",
            "3",
            "-o",
        ])
        .arg(&whole)
        .status()
        .unwrap();
    assert!(status.success());
    let expected = cli_json(&["fxt", "stats", "--json", whole.to_str().unwrap()]);
    let records = |s: &Value| s["records"].as_u64().unwrap();
    follow_while_written(
        &whole,
        "/api/stats",
        &expected,
        &records,
        &[
            "/api/tracks",
            "/api/top?limit=10000",
            "/api/window?from=0&to=1000000000&px=800",
        ],
    );
}

/// `tracekit view --follow` of a memtrace trace: see [`follow_while_written`].
#[test]
fn a_memtrace_trace_followed_while_written_ends_as_a_fresh_view_of_it() {
    let scratch = tracekit_testutil::scratch();
    let whole = scratch.path().join("whole.ctf");
    let status = TRACEKIT
        .command()
        .args(["-q", "memtrace", "sample", "--allocs", "40000", "-o"])
        .arg(&whole)
        .status()
        .unwrap();
    assert!(status.success());
    let mut expected = cli_json(&["memtrace", "info", "--json", whole.to_str().unwrap()]);
    // The answers name the file served.
    expected["file"] = Value::String(whole.with_file_name("live.ctf").display().to_string());
    let events = |s: &Value| s["events"].as_u64().unwrap();
    follow_while_written(
        &whole,
        "/api/info",
        &expected,
        &events,
        &[
            "/api/top?limit=10000",
            "/api/timeline?points=500",
            "/api/flametree?min-share=0",
        ],
    );
}

/// `tracekit view --follow` started before the program that writes the file:
/// it waits for the file to be made, then serves it; a file whose folder is
/// not there is an error at once.
#[test]
fn a_followed_file_not_made_yet_is_waited_for() {
    let scratch = tracekit_testutil::scratch();
    let whole = scratch.path().join("whole.fxt");
    let status = TRACEKIT
        .command()
        .args(["-q", "fxt", "sample", "--slices", "2000", "-o"])
        .arg(&whole)
        .status()
        .unwrap();
    assert!(status.success());
    let later = scratch.path().join("later.fxt");
    let (from, to) = (whole.clone(), later.clone());
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::copy(from, to).unwrap();
    });
    // Returns once the server prints its URL, after the file is made.
    let server = Server::spawn_as(&["view", "--follow"], &[&later], None);
    writer.join().unwrap();
    server.wait_to_say("to be made");
    let expected = cli_json(&["fxt", "stats", "--json", whole.to_str().unwrap()]);
    until(std::time::Duration::from_secs(10), || {
        ask_json(&server, "/api/stats") == expected
    });
    let nowhere = scratch.path().join("no-such-folder/t.fxt");
    let out = TRACEKIT
        .command()
        .args(["view", "--follow"])
        .arg(&nowhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no-such-folder/t.fxt"), "{said}");
}
