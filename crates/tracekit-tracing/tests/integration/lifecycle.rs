//! The trace's file through a program's life: 8 threads of a million spans each
//! come out balanced; the guard writes what threads that are alive but idle hold
//! (and does not wait for them to exit); a child process that panics leaves a
//! complete, readable file; one killed with SIGKILL leaves a readable file that
//! lost at most a buffer per thread. The children are this test binary run again
//! with `TRACEKIT_TRACING_CHILD` set.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use tracekit_fxt::format::EventKind;
use tracekit_fxt::read::{ReadOptions, Reader, Record};
use tracing_subscriber::prelude::*;

const CHILD: &str = "TRACEKIT_TRACING_CHILD";

/// Threads of the killed child that trace `IDLE_SPANS` spans each and then wait.
const IDLE_THREADS: usize = 3;
const IDLE_SPANS: u64 = 20_000;

/// A thread's buffer (64 KiB) holds at most this many spans: a span is two records
/// of at least two words each.
const SPANS_PER_BUFFER: u64 = 64 * 1024 / 32;

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
    let dir = tracekit_testutil::scratch();
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
            // Threads that trace a known number of spans and then stay alive, idle,
            // holding their partial buffers; the writer thread is given time to
            // write the full ones.
            let (done, all_done) = std::sync::mpsc::channel();
            for t in 0..IDLE_THREADS {
                let done = done.clone();
                std::thread::Builder::new()
                    .name(format!("idle-{t}"))
                    .spawn(move || {
                        for i in 0..IDLE_SPANS {
                            let s = tracing::info_span!("idle", i = i);
                            let _e = s.enter();
                        }
                        done.send(()).unwrap();
                        loop {
                            std::thread::park();
                        }
                    })
                    .unwrap();
            }
            for _ in 0..IDLE_THREADS {
                all_done.recv().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            println!("ready");
            loop {
                std::thread::park();
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
            "lifecycle::child_process",
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
    let dir = tracekit_testutil::scratch();
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
    let dir = tracekit_testutil::scratch();
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
    // Each idle thread lost at most its partial buffer, and lost no span in part.
    let idle: Vec<_> = b.values().filter(|v| v.2 == 1 && v.0 > 1000).collect();
    assert_eq!(idle.len(), IDLE_THREADS, "{b:?}");
    for &&(begins, ends, _) in &idle {
        assert_eq!(begins, ends, "{b:?}");
        assert!(
            IDLE_SPANS - begins < SPANS_PER_BUFFER,
            "lost {} spans of a thread, more than a buffer: {b:?}",
            IDLE_SPANS - begins
        );
    }
}

#[test]
fn the_guard_writes_what_idle_threads_hold_without_waiting_for_them() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("idle.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // A worker traces a few spans (far less than a buffer) and then waits, alive,
    // as an async runtime's workers do when `main` drops the guard.
    let (ready, is_ready) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let d = dispatch.clone();
    let worker = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for i in 0..100u64 {
                let s = tracing::info_span!("idle worker", i = i);
                let _e = s.enter();
            }
        });
        ready.send(()).unwrap();
        released.recv().unwrap();
    });
    is_ready.recv().unwrap();
    drop(dispatch);
    let (dropped, is_dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(guard);
        dropped.send(()).unwrap();
    });
    let waited = is_dropped.recv_timeout(std::time::Duration::from_secs(10));
    assert!(
        waited.is_ok(),
        "dropping the guard waited for the idle thread"
    );
    let b = balance(&std::fs::read(&path).unwrap());
    assert!(b.values().any(|v| *v == (100, 100, 1)), "{b:?}");
    release.send(()).unwrap();
    worker.join().unwrap();
}
