//! Running the `tracekit` binary from the tests: in a folder, with standard input
//! closed, and a fresh folder per test.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `tracekit` binary under test.
pub fn tracekit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tracekit"))
}

/// Runs `tracekit ARGS` in `dir`.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    tracekit()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tracekit")
}

/// Runs `tracekit ARGS` in `dir`, which must succeed.
pub fn ok_in(dir: &Path, args: &[&str]) -> Output {
    let o = run_in(dir, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

/// What a run printed on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh folder for one test, `name` unique among the tests of this binary.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tracekit-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
