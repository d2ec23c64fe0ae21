//! The binary alone resolves every shared dependency with the features the whole
//! workspace's tests resolve (see the unused dependencies in `Cargo.toml`): otherwise
//! `cargo run --release` after `cargo test --workspace --release`, the README's two
//! commands, compiles arrow, DataFusion and what else differs a second time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `package version` -> features, as `cargo tree` resolves them for `args`.
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .current_dir(tracekit_testutil::workspace_root())
        .args(["tree", "--offline", "--locked", "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .args(args)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        // A package shown before is marked " (*)".
        let line = line.strip_suffix(" (*)").unwrap_or(line);
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // "name vX.Y.Z (path)" or "name vX.Y.Z": the name and version.
        let package: Vec<&str> = package.split_whitespace().take(2).collect();
        let entry = all.entry(package.join(" ")).or_default();
        entry.extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(String::from),
        );
    }
    all
}

#[test]
fn the_binary_builds_its_dependencies_with_the_tests_features() {
    let run = features(&["-p", "tracekit", "--edges", "normal,build"]);
    let tests = features(&["--workspace", "--edges", "normal,build,dev"]);
    let differ: Vec<String> = run
        .iter()
        .filter_map(|(package, f)| {
            let t = tests.get(package)?;
            (t != f).then(|| {
                let only_tests: Vec<&String> = t.difference(f).collect();
                let only_run: Vec<&String> = f.difference(t).collect();
                format!("{package}: tests add {only_tests:?}, the binary adds {only_run:?}")
            })
        })
        .collect();
    assert!(
        differ.is_empty(),
        "the binary's dependencies resolve other features than the tests' (add them to \
         crates/tracekit/Cargo.toml):\n{}",
        differ.join("\n")
    );
    assert!(run.len() > 100, "{} packages", run.len());
}
