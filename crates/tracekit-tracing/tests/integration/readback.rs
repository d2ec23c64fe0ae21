//! A program with nested spans on several threads, events with fields, a span that
//! records a field later, and a task span entered on two threads: its trace reads
//! back (through tracekit-fxt's reader) as exactly the expected slices, instants,
//! arguments and async track, passes tracekit's strict checker, and PyPI `fxt` sees
//! the same slices.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use tracekit_fxt::format::{ArgValue, EventKind};
use tracekit_fxt::read::{Reader, Record};
use tracing_subscriber::prelude::*;

/// One event as read back: kind, name, category and arguments as `name=value`.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    kind: String,
    name: String,
    category: String,
    args: Vec<String>,
}

fn read_back(bytes: &[u8]) -> (BTreeMap<u64, Vec<Seen>>, BTreeMap<u64, String>) {
    let mut r = Reader::new(bytes);
    let mut by_thread: BTreeMap<u64, Vec<Seen>> = BTreeMap::new();
    let mut names = BTreeMap::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::KernelObject(o) => {
                names.insert(o.koid.0, o.name.to_string());
            }
            Record::Event(e) => {
                let kind = match e.kind {
                    EventKind::DurationBegin => "B".to_string(),
                    EventKind::DurationEnd => "E".to_string(),
                    EventKind::Instant => "I".to_string(),
                    EventKind::AsyncBegin { .. } => "AB".to_string(),
                    EventKind::AsyncEnd { .. } => "AE".to_string(),
                    EventKind::FlowBegin { id } => format!("FB{id}"),
                    EventKind::FlowEnd { id } => format!("FE{id}"),
                    other => format!("{other:?}"),
                };
                let args = e
                    .args
                    .iter()
                    .map(|a| {
                        let v = match a.value {
                            ArgValue::Int32(v) => v.to_string(),
                            ArgValue::Int64(v) => v.to_string(),
                            ArgValue::UInt32(v) => format!("{v}u"),
                            ArgValue::UInt64(v) => format!("{v}u"),
                            ArgValue::Double(v) => format!("{v}f"),
                            ArgValue::Bool(v) => v.to_string(),
                            ArgValue::String(s) => format!("{s:?}"),
                            other => format!("{other:?}"),
                        };
                        format!("{}={v}", a.name)
                    })
                    .collect();
                by_thread.entry(e.thread.thread.0).or_default().push(Seen {
                    kind,
                    name: e.name.to_string(),
                    category: e.category.to_string(),
                    args,
                });
            }
            _ => {}
        }
    }
    (by_thread, names)
}

fn seen(kind: &str, name: &str, args: &[&str]) -> Seen {
    Seen {
        kind: kind.to_string(),
        name: name.to_string(),
        category: "readback".to_string(),
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

#[tracing::instrument(target = "readback", level = "info", skip_all, fields(n = n, who = who))]
fn outer(n: i64, who: &str) {
    let span = tracing::span!(target: "readback", tracing::Level::DEBUG, "inner", ratio = 0.5, flag = true, big = u64::MAX, late = tracing::field::Empty);
    let _g = span.enter();
    span.record("late", 7u64);
    tracing::warn!(target: "readback", x = 5, neg = -3_000_000_000i64, "hello {}", who);
}

#[test]
fn spans_events_and_a_task_across_threads_read_back() {
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("t.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));

    let task = tracing::dispatcher::with_default(
        &dispatch,
        || tracing::span!(target: "readback", tracing::Level::INFO, "task", id = 42),
    );
    let mut handles = Vec::new();
    for (i, who) in ["a", "b"].into_iter().enumerate() {
        let dispatch = dispatch.clone();
        let task = task.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("worker-{who}"))
                .spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        outer(i as i64 + 1, who);
                        // The task runs a while on each thread, one after the other.
                        std::thread::sleep(std::time::Duration::from_millis(20 * i as u64));
                        let _g = task.enter();
                    });
                    current_tid()
                })
                .unwrap(),
        );
    }
    let tids: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    tracing::dispatcher::with_default(&dispatch, || drop(task));
    drop(dispatch);
    drop(guard);

    let bytes = std::fs::read(&path).unwrap();
    let (by_thread, names) = read_back(&bytes);
    for (i, (who, tid)) in ["a", "b"].iter().zip(&tids).enumerate() {
        assert_eq!(names[tid], format!("worker-{who}"));
        let events = &by_thread[tid];
        let n = format!("n={}", i + 1);
        let who_arg = format!("who={who:?}");
        let mut expected = vec![
            seen("B", "outer", &["level=\"INFO\"", &n, &who_arg]),
            seen(
                "B",
                "inner",
                &[
                    "level=\"DEBUG\"",
                    "ratio=0.5f",
                    "flag=true",
                    &format!("big={}u", u64::MAX),
                    // Declared empty, recorded later: null on the begin record.
                    "late=Null",
                ],
            ),
            seen(
                "I",
                &format!("hello {who}"),
                &["level=\"WARN\"", "x=5", "neg=-3000000000"],
            ),
            // Recorded while entered: on the end record.
            seen("E", "inner", &["late=7u"]),
            seen("E", "outer", &[]),
        ];
        if i == 1 {
            // Entered on a second thread: the task gets its async track, begun at
            // its first entry; no span is entered around it (`within` 0).
            expected.push(seen(
                "AB",
                "task",
                &["level=\"INFO\"", "id=42", "within=0u"],
            ));
        }
        expected.push(seen("B", "task", &["level=\"INFO\"", "id=42"]));
        expected.push(seen("E", "task", &[]));
        assert_eq!(events, &expected, "thread {who}");
    }
    // Closed on the main thread.
    let main = &by_thread[&current_tid()];
    assert_eq!(main, &[seen("AE", "task", &[])]);
    let report = tracekit_fxt::check::check(&bytes);
    assert!(report.is_clean(), "{report:?}");
    // PyPI `fxt` reads it too and sees every slice.
    if let Some((slices, _)) = tracekit_testutil::pyfxt_slices(&path) {
        let begins = by_thread
            .values()
            .map(|v| v.iter().filter(|s| s.kind == "B").count())
            .sum::<usize>();
        assert_eq!(slices, begins as u64);
    }
}

fn current_tid() -> u64 {
    // SAFETY: gettid has no preconditions.
    u64::try_from(unsafe { libc::gettid() }).unwrap()
}

#[test]
fn follows_from_is_a_flow_from_the_link_to_the_follower() {
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("flow.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let consumer = tracing::dispatcher::with_default(&dispatch, || {
        let producer = tracing::info_span!(target: "readback", "producer");
        let _p = producer.enter();
        let consumer = tracing::info_span!(target: "readback", "consumer");
        consumer.follows_from(&producer);
        consumer
    });
    let d = dispatch.clone();
    let tid = std::thread::spawn(move || {
        // The span moves in, so that it is freed, and its parent closed, while this
        // dispatcher is the default: freed outside, the registry closes the parent
        // through whatever the default is then (another test's global one).
        tracing::dispatcher::with_default(&d, move || {
            let _c = consumer.enter();
        });
        current_tid()
    })
    .join()
    .unwrap();
    drop(dispatch);
    drop(guard);
    let (by_thread, _) = read_back(&std::fs::read(&path).unwrap());
    let level = ["level=\"INFO\""];
    assert_eq!(
        by_thread[&current_tid()],
        [
            seen("B", "producer", &level),
            seen("FB1", "producer", &[]),
            seen("E", "producer", &[]),
        ]
    );
    assert_eq!(
        by_thread[&tid],
        [
            seen("B", "consumer", &level),
            seen("FE1", "consumer", &[]),
            seen("E", "consumer", &[]),
        ]
    );
}

/// The begin records of `name` on the calling thread, as read back.
fn begins_named(path: &std::path::Path, name: &str) -> Vec<Seen> {
    let (by_thread, _) = read_back(&std::fs::read(path).unwrap());
    by_thread
        .get(&current_tid())
        .into_iter()
        .flatten()
        .filter(|s| s.kind == "B" && s.name == name)
        .cloned()
        .collect()
}

#[test]
fn a_span_entered_again_shows_the_values_recorded_since() {
    // Entered more than once, a span's begin record comes from the thread's cache;
    // a value recorded between entries must still show on the next one.
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("again.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let span = tracing::info_span!(target: "readback", "poll", n = tracing::field::Empty);
        for _ in 0..3 {
            let _e = span.enter();
        }
        span.record("n", 5u64);
        let _e = span.enter();
    });
    drop(dispatch);
    drop(guard);
    let null = seen("B", "poll", &["level=\"INFO\"", "n=Null"]);
    let five = seen("B", "poll", &["level=\"INFO\"", "n=5u"]);
    let begins = begins_named(&path, "poll");
    assert_eq!(begins, [null.clone(), null.clone(), null, five]);
}

#[test]
fn a_reused_span_id_is_not_taken_for_the_closed_span() {
    // The registry hands a closed span's id out again (here, within a few new
    // spans); a thread's cache of entered spans must not take the new span for the
    // old one.
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("reused.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let reused = tracing::dispatcher::with_default(&dispatch, || {
        let old = tracing::info_span!(target: "readback", "old", n = 1);
        let id = old.id().unwrap();
        for _ in 0..2 {
            let _e = old.enter();
        }
        drop(old);
        for _ in 0..(1u32 << 22) {
            let new = tracing::info_span!(target: "readback", "new", n = 2);
            if new.id().as_ref() == Some(&id) {
                let _e = new.enter();
                return true;
            }
        }
        false
    });
    drop(dispatch);
    drop(guard);
    assert!(reused, "the registry never gave the id out again");
    assert_eq!(
        begins_named(&path, "new"),
        [seen("B", "new", &["level=\"INFO\"", "n=2"])]
    );
}

#[derive(Debug)]
enum State {
    Running,
}

#[test]
fn repeated_string_values_are_interned() {
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("interned.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let long = "a value longer than the interned ones, which rarely repeat in practice";
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..1000 {
            tracing::info!(target: "readback", state = ?State::Running, long, "polling the queue");
        }
    });
    drop(dispatch);
    drop(guard);
    let bytes = std::fs::read(&path).unwrap();
    let times = |s: &str| {
        bytes
            .windows(s.len())
            .filter(|w| *w == s.as_bytes())
            .count()
    };
    // Inline the first time, then one string record, then refs.
    assert_eq!(times("polling the queue"), 2);
    assert_eq!(times("Running"), 2);
    assert_eq!(times(long), 1000);
    let (by_thread, _) = read_back(&bytes);
    let instants = &by_thread[&current_tid()];
    assert_eq!(instants.len(), 1000);
    let expected = seen(
        "I",
        "polling the queue",
        &[
            "level=\"INFO\"",
            "state=\"Running\"",
            &format!("long={long:?}"),
        ],
    );
    assert!(instants.iter().all(|i| *i == expected), "{instants:?}");
    assert!(tracekit_fxt::check::check(&bytes).is_clean());
}
