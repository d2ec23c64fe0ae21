//! Helpers shared by the integration tests: building the programs they trace
//! (`tracekit-alloc-demo`) and summarising traces with the memtrace reader.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracekit_memtrace::{Event, Info, Location, LocationCode, Reader};

/// The package holding the programs the tests trace (`src/bin/<name>.rs`): it
/// has no dev-dependencies, so building its programs in another target
/// directory (with frame pointers, say) compiles no benchmark framework.
const PROGRAMS: &str = "tracekit-alloc-demo";

/// Path of program `name` of the programs' package, built for this test's
/// profile in its target directory ([`tracekit_testutil::demo_program`]).
pub fn example(name: &str) -> PathBuf {
    tracekit_testutil::demo_program(name)
}

/// Path of program `name` built with frame pointers, in the `fp` directory
/// of this test's target directory.
pub fn example_with_frame_pointers(name: &str) -> PathBuf {
    example_built_with(name, "fp", &[("RUSTFLAGS", "-C force-frame-pointers=yes")])
}

/// Path of program `name` built as a fresh `cargo new` program is by plain
/// `cargo build --release`, without debug information, and with
/// `panic = "abort"`: in the `plain-abort` directory of this test's target
/// directory. (One build for both, to spare a shared machine a build.)
pub fn example_plain_abort(name: &str) -> PathBuf {
    let mut env = Vec::new();
    for profile in ["RELEASE", "DEV"] {
        env.push((format!("CARGO_PROFILE_{profile}_DEBUG"), "false"));
        env.push((format!("CARGO_PROFILE_{profile}_PANIC"), "abort"));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    example_built_with(name, "plain-abort", &env)
}

/// Path of program `name` built with the environment `env` (flags, profile
/// settings) in directory `dir` of this test's target directory, so that it
/// does not rebuild the main one.
pub fn example_built_with(name: &str, dir: &str, env: &[(&str, &str)]) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile> directory");
    let profile = profile_dir.file_name().expect("profile name");
    let target_dir = profile_dir.parent().expect("target directory").join(dir);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", PROGRAMS, "--bin", name])
        .arg("--target-dir")
        .arg(&target_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {PROGRAMS} --bin {name} with {env:?} failed"
    );
    target_dir.join(profile).join(name)
}

/// One allocation read back from a trace.
pub struct Sampled {
    pub obj_id: u64,
    pub domain: u16,
    pub length: u64,
    pub nsamples: u64,
    pub backtrace: Vec<LocationCode>,
    pub collected: bool,
}

/// A trace read back in full.
pub struct Trace {
    pub info: Info,
    pub allocs: Vec<Sampled>,
    pub collects: u64,
    pub locations: HashMap<LocationCode, Vec<Location>>,
    pub warnings: usize,
}

/// Reads a whole trace; panics (failing the test) on any read error or on a
/// collect of an object that was never allocated or is collected twice.
pub fn read_trace(path: &Path) -> Trace {
    let bytes = std::fs::read(path).expect("read trace");
    let mut reader = Reader::from_bytes(&bytes).expect("trace header");
    let info = reader.info().clone();
    let mut allocs: Vec<Sampled> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut collects = 0;
    let mut events = reader.events(true);
    while let Some(item) = events.next_event() {
        let (_, event) = item.expect("valid trace");
        match event {
            Event::Alloc(a) => {
                index.insert(a.obj_id.get(), allocs.len());
                allocs.push(Sampled {
                    obj_id: a.obj_id.get(),
                    domain: a.domain.get(),
                    length: a.length,
                    nsamples: a.nsamples,
                    backtrace: a.backtrace.to_vec(),
                    collected: false,
                });
            }
            Event::Collect(id, _) => {
                let i = *index
                    .get(&id.get())
                    .unwrap_or_else(|| panic!("collect of unknown object {}", id.get()));
                assert!(!allocs[i].collected, "object {} collected twice", id.get());
                allocs[i].collected = true;
                collects += 1;
            }
            Event::Promote(..) => panic!("a Rust trace has no promotions"),
        }
    }
    let warnings = events.warnings().len();
    let locations = events
        .locations()
        .iter()
        .map(|(code, locs)| (code, locs.to_vec()))
        .collect();
    Trace {
        info,
        allocs,
        collects,
        locations,
        warnings,
    }
}

impl Trace {
    /// Estimated bytes: nsamples x word bytes / rate.
    pub fn estimate(&self, filter: impl Fn(&Sampled) -> bool) -> f64 {
        let samples: u64 = self
            .allocs
            .iter()
            .filter(|a| filter(a))
            .map(|a| a.nsamples)
            .sum();
        samples as f64 * (self.info.word_size as f64 / 8.0) / self.info.sample_rate
    }

    /// The innermost location of `a`'s backtrace whose file name ends with
    /// `file`, as (function, line).
    pub fn innermost_in(&self, a: &Sampled, file: &str) -> Option<(String, u32)> {
        a.backtrace.iter().rev().find_map(|code| {
            self.locations.get(code)?.iter().rev().find_map(|l| {
                let f = l.filename.to_str_lossy();
                f.ends_with(file)
                    .then(|| (l.defname.to_str_lossy().into_owned(), l.line))
            })
        })
    }
}
