//! The tracer is linked into the programs it traces, so it takes the memtrace
//! writer alone: its own dependency on `tracekit-memtrace` turns off the default
//! features (the reader, dumps, synthetic traces) and asks for `write` only. In
//! a workspace build cargo unifies features, so what is checked is what cargo
//! resolves for this package's normal dependencies on its own.

use std::process::Command;

/// The features `cargo tree` resolves for `tracekit-memtrace` as a normal
/// dependency of this package.
fn memtrace_features() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", "tracekit-alloc", "--edges", "normal"])
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
        .find(|l| l.starts_with("tracekit-memtrace "))
        .unwrap_or_else(|| panic!("no tracekit-memtrace in:\n{tree}"));
    let features = line.split_once('|').map_or("", |(_, f)| f);
    let features = features.strip_suffix(" (*)").unwrap_or(features);
    features
        .split(',')
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn the_tracer_takes_the_memtrace_writer_without_the_reader() {
    assert_eq!(memtrace_features(), ["write"]);
}
