//! The README's async example (`examples/tasks.rs`: a producer and four handler
//! tasks on tokio's multi-threaded runtime) traced, with the guard dropped inside
//! the runtime while its workers are alive: the file is complete (every request's
//! slices, instants, follows-from flows and async tracks, balanced), passes
//! tracekit's checker and reads in PyPI `fxt`.

#![allow(clippy::unwrap_used)]

#[path = "../../examples/tasks.rs"]
mod tasks;

use std::collections::{BTreeMap, BTreeSet};

use tracekit_fxt::format::{ArgValue, EventKind};
use tracekit_fxt::read::{ReadOptions, Reader, Record};
use tracing_subscriber::prelude::*;

#[test]
fn an_async_program_with_several_tasks_reads_back() {
    // Dropping the guard inside the runtime once waited for the parked workers to
    // exit, which they do only after the runtime returns: a hang, not a failure.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(120));
        eprintln!("the traced async program did not finish in 120 s");
        std::process::exit(1);
    });
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join("tasks.fxt");
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&path).unwrap();
    tracing_subscriber::registry().with(layer).init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async move {
        tasks::serve().await;
        drop(guard);
    });
    drop(runtime);

    let bytes = std::fs::read(&path).unwrap();
    let report = tracekit_fxt::check::check(&bytes);
    assert!(report.is_clean(), "{report:?}");

    let mut r = Reader::with_options(&bytes[..], ReadOptions::strict());
    let mut open: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut begins: BTreeMap<String, u64> = BTreeMap::new();
    let (mut flows_begun, mut flows_ended) = (BTreeSet::new(), BTreeSet::new());
    let (mut async_begun, mut async_ended) = (BTreeSet::new(), BTreeSet::new());
    let mut statuses: BTreeMap<u64, u64> = BTreeMap::new();
    let mut request_ids = BTreeSet::new();
    let mut threads = BTreeMap::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::KernelObject(o) => {
                threads.insert(o.koid.0, o.name.to_string());
            }
            Record::Event(e) => {
                let thread = e.thread.thread.0;
                let name = e.name.to_string();
                match e.kind {
                    EventKind::DurationBegin => {
                        open.entry(thread).or_default().push(name.clone());
                        *begins.entry(name.clone()).or_default() += 1;
                        if name == "request" {
                            for a in e.args.iter() {
                                if a.name == "id"
                                    && let ArgValue::UInt32(id) = a.value
                                {
                                    request_ids.insert(id);
                                }
                            }
                        }
                    }
                    EventKind::DurationEnd => {
                        let top = open.entry(thread).or_default().pop();
                        assert_eq!(top.as_deref(), Some(&*name), "thread {thread}");
                    }
                    EventKind::FlowBegin { id } => assert!(flows_begun.insert(id)),
                    EventKind::FlowEnd { id } => assert!(flows_ended.insert(id)),
                    EventKind::AsyncBegin { id } => assert!(async_begun.insert(id)),
                    EventKind::AsyncEnd { id } => assert!(async_ended.insert(id)),
                    EventKind::Instant => {
                        assert_eq!(name, "replied");
                        for a in e.args.iter() {
                            if a.name == "status"
                                && let ArgValue::UInt32(s) = a.value
                            {
                                *statuses.entry(u64::from(s)).or_default() += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // Every slice ended, on the thread it began on.
    assert!(open.values().all(Vec::is_empty), "{open:?}");
    // Every request, handled once: its span entered at least once, its lookup and
    // parse once, its reply with the status its id gives.
    let n = tasks::REQUESTS;
    assert_eq!(request_ids.len() as u64, n);
    assert!(begins["request"] >= n, "{begins:?}");
    assert_eq!(begins["parse"], n);
    assert!(begins["lookup"] >= n);
    assert_eq!(begins["accept"], n);
    assert!(begins["handler"] >= tasks::HANDLERS, "{begins:?}");
    let not_found = (0..n).filter(|id| id.is_multiple_of(5)).count() as u64;
    assert_eq!(
        statuses,
        BTreeMap::from([(200, n - not_found), (404, not_found)])
    );
    // A follows-from flow from each accept to its request, every one ended.
    assert_eq!(flows_begun.len() as u64, n);
    assert_eq!(flows_begun, flows_ended);
    // Spans that resumed on another worker have their async track, each closed.
    assert_eq!(async_begun, async_ended);
    eprintln!(
        "{} spans moved between workers; threads {:?}",
        async_begun.len(),
        threads.values().collect::<Vec<_>>()
    );
    assert!(
        threads.values().any(|t| t == "tokio-rt-worker"),
        "{threads:?}"
    );
    if let Some((slices, _)) = tracekit_testutil::pyfxt_slices(&path) {
        assert_eq!(slices, begins.values().sum::<u64>());
    }
}
