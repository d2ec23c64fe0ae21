//! Peak memory of the analyses that key on whole backtraces (`flamegraph`, `top --by
//! backtrace`), against `top`'s, on a generated trace with hundreds of thousands of
//! distinct backtraces. Their memory must grow with the trie of distinct backtraces
//! (a node per new frame), not with a string or a copy per backtrace: a string per
//! backtrace costs `flamegraph` 6.6x and `top --by backtrace` 32x `top`'s memory on a
//! 1 M-allocation sample trace, and a weight per backtrace rather than per site
//! costs a flame graph's pass 2.7x.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Stdio;

use tracekit_testutil::scratch;

use crate::TRACEKIT;

/// Runs tracekit with `args` and returns its peak resident set size in KiB.
// The child is reaped by `wait4`, which std's `Child` does not know of.
#[allow(clippy::zombie_processes)]
fn peak_rss_kib(args: &[&str]) -> i64 {
    let child = TRACEKIT
        .command()
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .expect("run tracekit");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unwaited child; `status` and `usage` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "tracekit {args:?}: {status}"
    );
    usage.ru_maxrss
}

#[test]
fn backtrace_keyed_analyses_stay_within_bounds_of_top() {
    let dir = scratch();
    let trace: PathBuf = dir.join("sample.ctf");
    let t = trace.to_str().unwrap();
    peak_rss_kib(&["memtrace", "sample", t, "--allocs", "1000000"]);
    let top = peak_rss_kib(&["memtrace", "top", t]);
    // A flame graph keeps one weight per distinct backtrace; `top --by backtrace`
    // every count (88 bytes), which is most of its memory (2.5x top's here).
    for (args, bound) in [
        (&["memtrace", "flamegraph", t][..], 2),
        (
            &["memtrace", "flamegraph", "--frames", "location", t][..],
            2,
        ),
        (&["memtrace", "top", "--by", "backtrace", t][..], 3),
    ] {
        let rss = peak_rss_kib(args);
        eprintln!("{args:?}: {rss} KiB, top: {top} KiB");
        assert!(
            rss <= bound * top,
            "{args:?}: {rss} KiB against top's {top} KiB"
        );
    }
}
