//! Where the workspace's tests and benches find their outside inputs: the
//! conformance corpus (`TRACEKIT_CORPUS`) and the independent PyPI `fxt` reader
//! (`TRACEKIT_PYFXT`).
//!
//! Cargo runs each test binary in its own crate's folder, so a relative
//! `TRACEKIT_CORPUS=../shared/corpus` would mean something different in every
//! crate. Every test resolves it here, against the workspace root, which is
//! where the README's test command is run.

use std::path::{Path, PathBuf};

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
/// unset or empty (conformance tests then skip, saying so).
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

/// `sub` inside the corpus (a folder such as `memtrace`, or a file), or `None`
/// when `TRACEKIT_CORPUS` is unset.
///
/// # Panics
///
/// When the corpus is set and `sub` is missing from it.
pub fn corpus_path(sub: impl AsRef<Path>) -> Option<PathBuf> {
    let path = corpus()?.join(sub.as_ref());
    assert!(
        path.exists(),
        "TRACEKIT_CORPUS is set but {} is missing",
        path.display()
    );
    Some(path)
}

/// Prints why a test is skipping: the corpus is not configured.
pub fn skip_without_corpus(test: &str) {
    eprintln!("{test}: TRACEKIT_CORPUS is not set: skipping");
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

/// Runs the program `bin` with `args` and waits for it.
pub fn run(bin: &str, args: &[&str]) -> std::process::Output {
    match std::process::Command::new(bin).args(args).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {bin}: {e}"),
    }
}

/// Runs the program `bin` with `args`, which must succeed; its standard output.
pub fn run_ok(bin: &str, args: &[&str]) -> String {
    let out = run(bin, args);
    assert!(
        out.status.success(),
        "{bin} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match String::from_utf8(out.stdout) {
        Ok(s) => s,
        Err(e) => panic!("{bin} {args:?} printed no UTF-8: {e}"),
    }
}

/// Defines `tracekit(args) -> Output` and `ok(args) -> String` ([`run`] and
/// [`run_ok`]) for the `tracekit` binary of the calling crate's tests.
#[macro_export]
macro_rules! tracekit_cli {
    () => {
        /// Runs the `tracekit` binary under test with `args`.
        #[allow(dead_code)]
        fn tracekit(args: &[&str]) -> std::process::Output {
            $crate::run(env!("CARGO_BIN_EXE_tracekit"), args)
        }

        /// Runs the `tracekit` binary under test, which must succeed; its output.
        #[allow(dead_code)]
        fn ok(args: &[&str]) -> String {
            $crate::run_ok(env!("CARGO_BIN_EXE_tracekit"), args)
        }
    };
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
/// have built it, or may hold one built from older sources).
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
