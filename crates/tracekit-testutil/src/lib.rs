//! What the workspace's tests and benches share: where they find their outside
//! inputs (the conformance corpus, `TRACEKIT_CORPUS`, and the independent
//! readers), the one way they run a binary under test ([`Program`]), the
//! one scratch folder a test writes into ([`scratch`]), and a trace that a
//! writer is still appending to ([`Growing`]); the heap a test's thread holds
//! at its highest ([`heap`]).
//!
//! Cargo runs each test binary in its own crate's folder, so a relative
//! `TRACEKIT_CORPUS=../shared/corpus` would mean something different in every
//! crate. Every test resolves it here, against the workspace root, which is
//! where the README's test command is run.

pub mod heap;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace root (the folder of the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives at `<root>/crates/tracekit-testutil`.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(Path::parent)
        .unwrap_or(here)
        .to_path_buf()
}

/// `path` as given, if absolute, or else relative to the workspace root.
pub fn from_root(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace_root().join(path)
    }
}

/// The corpus folder named by `TRACEKIT_CORPUS`, or `None` when the variable is
/// unset or empty. Tests ask [`corpus_path`], which also says why they skip.
///
/// # Panics
///
/// When the variable is set and the folder does not exist: a conformance run
/// that silently reads nothing would pass without checking anything.
pub fn corpus() -> Option<PathBuf> {
    let raw = std::env::var_os("TRACEKIT_CORPUS").filter(|v| !v.is_empty())?;
    let dir = from_root(&raw);
    assert!(
        dir.is_dir(),
        "TRACEKIT_CORPUS={} is set but {} is not a folder (relative paths are resolved against the workspace root {})",
        Path::new(&raw).display(),
        dir.display(),
        workspace_root().display()
    );
    Some(dir)
}

/// `sub` inside the corpus (a folder such as `memtrace`, or a file): the one way
/// a test reaches the corpus. `None` when `TRACEKIT_CORPUS` is unset, and then
/// it says on standard error, naming the test, that the test skips what needs
/// the corpus.
///
/// # Panics
///
/// When running under CI (`CI` set) and `TRACEKIT_CORPUS` is unset: CI must
/// check the corpus, and a test that skips it there would pass without checking
/// anything. When the corpus is set and `sub` is missing from it.
pub fn corpus_path(sub: impl AsRef<Path>) -> Option<PathBuf> {
    let Some(root) = corpus() else {
        let test = test_name();
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: CI is set but TRACEKIT_CORPUS is not: the corpus tests must run, not skip"
        );
        eprintln!("{test}: TRACEKIT_CORPUS is not set: skipping what needs the corpus");
        return None;
    };
    let path = root.join(sub.as_ref());
    assert!(
        path.exists(),
        "TRACEKIT_CORPUS is set but {} is missing",
        path.display()
    );
    Some(path)
}

/// The bytes of the file `sub` inside the corpus, or `None` as [`corpus_path`].
///
/// # Panics
///
/// As [`corpus_path`], and when the file cannot be read.
pub fn corpus_bytes(sub: impl AsRef<Path>) -> Option<Vec<u8>> {
    let path = corpus_path(sub)?;
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// The running test's name: the test harness names each test's thread after
/// it (a test binary without the harness runs on `main`).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string()
}

/// A Python interpreter with PyPI `fxt` 0.3.0 installed: `TRACEKIT_PYFXT`, or
/// else the virtual environment `.ci/run` makes at `target/pyfxt-venv`.
/// `None` when neither exists (the cross-checks then skip, saying so).
///
/// # Panics
///
/// When running under CI (`CI` set) and there is none: CI must run the
/// cross-checks, not skip them.
pub fn pyfxt() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TRACEKIT_PYFXT").filter(|v| !v.is_empty()) {
        let p = from_root(p);
        assert!(
            p.exists(),
            "TRACEKIT_PYFXT is set but {} does not exist",
            p.display()
        );
        return Some(p);
    }
    let venv = workspace_root().join("target/pyfxt-venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but there is no PyPI fxt reader: TRACEKIT_PYFXT is unset and {} is missing",
        venv.display()
    );
    eprintln!(
        "no PyPI fxt reader (TRACEKIT_PYFXT unset, {} missing): skipping the cross-check",
        venv.display()
    );
    None
}

/// The Python interpreter with PyPI `pyspark` and `pyarrow` (independent Parquet
/// readers for the export and SQL tests): `target/pyspark-venv`, which `.ci/run`
/// makes; `None` when it is missing (the cross-checks then skip, saying so).
///
/// # Panics
///
/// When running under CI (`CI` set) and there is none.
pub fn pyspark() -> Option<PathBuf> {
    let venv = workspace_root().join("target/pyspark-venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but there is no pyspark/pyarrow interpreter: {} is missing",
        venv.display()
    );
    eprintln!(
        "no pyspark/pyarrow interpreter ({} missing): skipping the cross-check",
        venv.display()
    );
    None
}

/// What PyPI `fxt` sees in the FXT file at `path`: its slices (spans, nested ones
/// included) and its processes' names, sorted; `None` when there is no PyPI fxt
/// reader (see [`pyfxt`]).
///
/// # Panics
///
/// When the reader fails on the file, or stops at an unexpected end of it.
pub fn pyfxt_slices(path: &std::path::Path) -> Option<(u64, Vec<String>)> {
    let python = pyfxt()?;
    let script = "import sys\n\
from fxt.reader import parse_records\n\
from fxt.transform import transform_records_to_spans\n\
res = parse_records(open(sys.argv[1], 'rb'))\n\
assert not res.had_unexpected_eof, res.eof_error\n\
recs = [r for p in res.records_by_provider.values() for r in p.records]\n\
spans = transform_records_to_spans(recs)\n\
def count(s): return 1 + sum(count(c) for c in s.children)\n\
n = sum(count(s) for p in spans.values() for t in p.threads.values() for s in t.spans)\n\
names = sorted(p.name for p in spans.values())\n\
print(n, ','.join(names))\n";
    let o = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .expect("the PyPI fxt interpreter runs");
    assert!(
        o.status.success(),
        "PyPI fxt failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (n, names) = out.trim().split_once(' ').unwrap_or((out.trim(), ""));
    let n = n.parse().expect("a count of slices");
    Some((
        n,
        names
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
    ))
}

/// A program under test, as the tests run it: cargo names its path at compile
/// time (`env!("CARGO_BIN_EXE_<name>")`), so the test binary declares it once,
/// `const TRACEKIT: Program = Program::new(env!("CARGO_BIN_EXE_tracekit"));`,
/// and every test runs it through that.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    path: &'static str,
}

impl Program {
    /// The program at `path`.
    pub const fn new(path: &'static str) -> Self {
        Self { path }
    }

    /// A command for the program, to add arguments, a folder, standard input or
    /// pipes to before it runs.
    pub fn command(self) -> Command {
        Command::new(self.path)
    }

    /// Runs the program with `args`, standard input closed, and waits for it.
    pub fn run(self, args: &[&str]) -> Output {
        self.output(self.command().args(args))
    }

    /// Runs the program with `args`, which must succeed; its standard output.
    pub fn ok(self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}",
            self.path,
            stderr(&out)
        );
        match String::from_utf8(out.stdout) {
            Ok(s) => s,
            Err(e) => panic!("{} {args:?} printed no UTF-8: {e}", self.path),
        }
    }

    /// Runs the program with `args` in the folder `dir` (so that messages name
    /// files as the user typed them), standard input closed.
    pub fn run_in(self, dir: &Path, args: &[&str]) -> Output {
        self.output(self.command().current_dir(dir).args(args))
    }

    /// Runs the program with `args` in the folder `dir`, which must succeed.
    pub fn ok_in(self, dir: &Path, args: &[&str]) -> Output {
        let out = self.run_in(dir, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    }

    fn output(self, command: &mut Command) -> Output {
        match command.stdin(Stdio::null()).output() {
            Ok(out) => out,
            Err(e) => panic!("cannot run {}: {e}", self.path),
        }
    }
}

/// What a run printed on standard output (lossily decoded).
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a run printed on standard error (lossily decoded).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh, empty folder for one test, removed (with what the test wrote in
/// it) when the value is dropped, unless the test is failing: a failed test's
/// folder is kept, and its path said, so that its files can be looked at. Keep
/// the value alive while anything, a child process included, still uses the
/// folder. Its name starts with the test's name, so that a folder left behind
/// says whose it was.
///
/// # Panics
///
/// When the system's temporary folder cannot hold a new folder.
pub fn scratch() -> Scratch {
    let name = test_name();
    // The test function's own name, shortened: paths made in the folder must
    // stay short (a Unix socket's, or one that replaces a shorter one in place).
    let test: String = name
        .rsplit("::")
        .next()
        .unwrap_or(&name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    match tempfile::Builder::new()
        .prefix(&format!("tracekit-{test}-"))
        .tempdir()
    {
        Ok(dir) => Scratch(dir),
        Err(e) => panic!("cannot make a scratch folder for {name}: {e}"),
    }
}

/// A test's scratch folder (see [`scratch`]); it is the folder's path
/// (`dir.join("a.ctf")`, `&dir` where a `&Path` is wanted).
#[derive(Debug)]
pub struct Scratch(tempfile::TempDir);

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.disable_cleanup(true);
            eprintln!("kept the failed test's folder {}", self.0.path().display());
        }
    }
}

impl Scratch {
    /// The folder's path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

/// The features cargo resolves for `dependency` as a normal dependency of
/// `package` (whose manifest is in `manifest_dir`) built on its own: in a
/// workspace build cargo unifies features across members, so a test of what a
/// library's users compile asks `cargo tree` instead.
pub fn resolved_features(manifest_dir: &str, package: &str, dependency: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(manifest_dir).join("Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path"])
        .arg(&manifest)
        .args(["-p", package, "--edges", "normal"])
        .args(["--prefix", "none", "--format", "{p}|{f}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let line = tree
        .lines()
        .find(|l| l.starts_with(&format!("{dependency} ")))
        .unwrap_or_else(|| panic!("no {dependency} in:\n{tree}"));
    let features = line.split_once('|').map_or("", |(_, f)| f);
    let features = features.strip_suffix(" (*)").unwrap_or(features);
    features
        .split(',')
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect()
}

/// Path of program `name` of `tracekit-alloc-demo` (`src/bin/<name>.rs`, the
/// programs the tests trace), built for the same profile as the calling test
/// in the same target directory: built now when missing or older than the
/// sources of the tracer and the programs (a run filtered to one test may not
/// have built it, or may hold one built from older sources: the tracer's, the
/// programs', the symbolizer's or the trace writer's).
pub fn demo_program(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile> directory")
        .to_path_buf();
    let path = profile_dir.join(name);
    if !path.exists() || newest_demo_source() > modified(&path) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", "tracekit-alloc-demo", "--bin", name]);
        // The same target directory as the test (it may not be the default).
        if let Some(target_dir) = profile_dir.parent() {
            cmd.arg("--target-dir").arg(target_dir);
        }
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(
            status.success(),
            "cargo build -p tracekit-alloc-demo --bin {name} failed"
        );
    }
    path
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// The latest modification time of the tracer's and the demo programs' sources.
fn newest_demo_source() -> std::time::SystemTime {
    let root = workspace_root();
    [
        root.join("crates/tracekit-alloc/src"),
        root.join("crates/tracekit-alloc-demo/src/bin"),
        // The tracer names frames and writes the trace with these.
        root.join("crates/tracekit-symbols/src"),
        root.join("crates/tracekit-memtrace/src/write"),
    ]
    .iter()
    .filter_map(|d| std::fs::read_dir(d).ok())
    .flatten()
    .filter_map(|e| e.ok())
    .map(|e| modified(&e.path()))
    .max()
    .unwrap_or(std::time::UNIX_EPOCH)
}

/// Go's `go` command, whose `go tool pprof` is an independent pprof reader
/// (Debian's `golang-go`, which `.ci/run` installs); `None` when it is not on
/// the `PATH` (the cross-checks then skip, saying so).
///
/// # Panics
///
/// When running under CI (`CI` set) and there is none.
pub fn go() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but there is no `go` on the PATH (Debian: golang-go)"
        );
        eprintln!("no `go` on the PATH: skipping the go tool pprof cross-check");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_the_workspace_root() {
        let root = workspace_root();
        assert!(root.join("Cargo.toml").is_file(), "{}", root.display());
        assert!(root.join("crates/tracekit-testutil").is_dir());
        assert_eq!(from_root("a/b"), root.join("a/b"));
        assert_eq!(from_root("/abs/x"), PathBuf::from("/abs/x"));
        assert_eq!(from_root("../shared"), root.join("../shared"));
    }
}

/// A trace a writer is still appending to, as a reader following it sees it:
/// `shown` bytes of `bytes` are written, and a read at their end fails with
/// [`std::io::ErrorKind::WouldBlock`] until more are (the end of `bytes` is
/// the end of the input).
#[derive(Debug)]
pub struct Growing<B> {
    /// The whole trace.
    pub bytes: B,
    /// How much of it is written so far.
    pub shown: usize,
    read: usize,
}

impl<B: AsRef<[u8]>> Growing<B> {
    /// `bytes`, of which the first `shown` are written.
    pub fn new(bytes: B, shown: usize) -> Growing<B> {
        Growing {
            bytes,
            shown,
            read: 0,
        }
    }

    /// Writes `n` bytes more (fewer at the end).
    pub fn write(&mut self, n: usize) {
        self.shown = (self.shown + n).min(self.bytes.as_ref().len());
    }
}

impl<B: AsRef<[u8]>> std::io::Read for Growing<B> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let all = self.bytes.as_ref();
        let shown = self.shown.min(all.len());
        let have = &all[self.read.min(shown)..shown];
        if have.is_empty() && shown < all.len() {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        self.read += n;
        Ok(n)
    }
}
