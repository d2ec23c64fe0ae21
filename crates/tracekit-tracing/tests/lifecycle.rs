//! The trace's file through a program's life: 8 threads of a million spans each
//! come out balanced; a child process that panics leaves a complete, readable
//! file; one killed with SIGKILL leaves a readable file that lost at most a
//! buffer per thread. The children are this test binary run again with
//! `TRACEKIT_TRACING_CHILD` set.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use tracekit_fxt::format::EventKind;
use tracekit_fxt::read::{ReadOptions, Reader, Record};
use tracing_subscriber::prelude::*;

const CHILD: &str = "TRACEKIT_TRACING_CHILD";

/// Per thread koid: (begins, ends, deepest nesting), checking that ends nest and,
/// reading strictly, that the file holds only whole records.
fn balance(bytes: &[u8]) -> HashMap<u64, (u64, u64, usize)> {
    let mut r = Reader::with_options(bytes, ReadOptions::strict());
    let mut open: HashMap<u64, Vec<String>> = HashMap::new();
    let mut out: HashMap<u64, (u64, u64, usize)> = HashMap::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Event(e) = rec {
            let t = e.thread.thread.0;
            let stack = open.entry(t).or_default();
            let entry = out.entry(t).or_default();
            match e.kind {
                EventKind::DurationBegin => {
                    stack.push(e.name.to_string());
                    entry.0 += 1;
                    entry.2 = entry.2.max(stack.len());
                }
                EventKind::DurationEnd => {
                    assert_eq!(stack.pop().as_deref(), Some(&*e.name.to_string()));
                    entry.1 += 1;
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn eight_threads_of_a_million_spans_balance() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stress.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    let outer = tracing::info_span!("outer");
                    let _o = outer.enter();
                    for i in 0..1_000_000u64 {
                        let s = tracing::info_span!("work", i = i);
                        let _e = s.enter();
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(dispatch);
    drop(guard);
    let bytes = std::fs::read(&path).unwrap();
    let b = balance(&bytes);
    assert_eq!(b.len(), 8, "{b:?}");
    for (thread, (begins, ends, depth)) in b {
        assert_eq!(
            (begins, ends, depth),
            (1_000_001, 1_000_001, 2),
            "thread {thread}"
        );
    }
}

/// The child: spans on three threads, then what `CHILD` says.
fn child(path: &Path, how: &str) {
    // Dropped last, as the panic unwinds (the other child never gets there).
    let (layer, _guard) = tracekit_tracing::FxtLayer::file(path).unwrap();
    tracing_subscriber::registry().with(layer).init();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                for i in 0..1000u64 {
                    let s = tracing::info_span!("worker", i = i);
                    let _e = s.enter();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let outer = tracing::info_span!("outer");
    let _o = outer.enter();
    match how {
        "panic" => {
            let s = tracing::info_span!("about to panic");
            let _e = s.enter();
            tracing::error!("panicking now");
            panic!("the child panics on purpose");
        }
        _ => {
            // Say how far we got, then keep tracing until killed.
            println!("ready");
            let mut i = 0u64;
            loop {
                let s = tracing::info_span!("until killed", i = i);
                let _e = s.enter();
                i += 1;
                if i.is_multiple_of(100_000) {
                    std::thread::yield_now();
                }
            }
        }
    }
}

#[test]
fn child_process() {
    if let (Some(how), Some(path)) = (
        std::env::var_os(CHILD),
        std::env::var_os("TRACEKIT_TRACING_FILE"),
    ) {
        child(Path::new(&path), &how.to_string_lossy());
    }
}

fn spawn_child(how: &str, path: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, how)
        .env("TRACEKIT_TRACING_FILE", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_child_that_panics_leaves_a_complete_trace() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("panic.fxt");
    let out = spawn_child("panic", &path).wait_with_output().unwrap();
    assert!(!out.status.success(), "the child panicked");
    let bytes = std::fs::read(&path).unwrap();
    let report = tracekit_fxt::check::check(&bytes);
    assert!(report.is_clean(), "{report:?}");
    // Everything before the panic is there: the workers' spans, the panicking
    // thread's two spans (ended as the panic unwinds them, before the guard, the
    // last thing dropped, flushes) and its last event.
    let b = balance(&bytes);
    let mut workers = 0;
    for (begins, ends, _) in b.values() {
        if *begins == 1000 {
            assert_eq!(*ends, 1000);
            workers += 1;
        }
    }
    assert_eq!(workers, 2, "{b:?}");
    let main = b.values().find(|v| v.0 == 2).copied();
    assert_eq!(main, Some((2, 2, 2)), "{b:?}");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("panicking now"));
}

#[test]
fn a_child_killed_outright_leaves_a_readable_trace() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.fxt");
    let mut child = spawn_child("kill", &path);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.find(|l| l.as_ref().is_ok_and(|l| l.contains("ready")));
    assert!(ready.is_some(), "the child never got ready");
    // Let it write a few buffers, then kill it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // Only whole records: every one reads.
    let b = balance(&bytes);
    // The workers exited before the kill: their buffers were handed over whole.
    let done = b.values().filter(|v| v.0 == 1000 && v.1 == 1000).count();
    assert_eq!(done, 2, "{b:?}");
    // The main thread's full buffers are there; at most its last one is lost.
    let main = b.values().map(|v| v.0).max().unwrap();
    assert!(main > 1000, "{b:?}");
}
