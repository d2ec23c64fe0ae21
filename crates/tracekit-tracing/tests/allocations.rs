//! Allocations per span, checked to the byte: the example service
//! (`examples/service.rs`: tokio tasks, nested spans, known allocations per
//! span) traced in one process by tracekit-alloc at rate 1 (every word
//! sampled) and by the layer. Each `request`, `load` and `parse` slice carries
//! the bytes allocated inside it, and tracekit's timeline, which `fxt top
//! --by allocated` and the view read, sums them by name, its children's
//! taken out for self. A test binary of its own: the service's tracer is its
//! global allocator, and its subscriber the process's.
#![allow(clippy::unwrap_used)]

#[path = "../examples/service.rs"]
mod service;

use tracekit_timeline::report::{TopOrder, TopQuery};
use tracing_subscriber::prelude::*;

#[test]
fn each_span_carries_what_was_allocated_inside_it() {
    let dir = tracekit_testutil::scratch();
    let (fxt, ctf) = (
        dir.path().join("service.fxt"),
        dir.path().join("service.ctf"),
    );
    let heap = tracekit_alloc::start_tracing(&ctf, 1.0).unwrap();
    let (layer, guard) = tracekit_tracing::FxtLayer::file(&fxt).unwrap();
    tracing_subscriber::registry().with(layer).init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(service::serve(None));
    drop(runtime);
    drop(guard);
    heap.stop().unwrap();

    let bytes = std::fs::read(&fxt).unwrap();
    let reader = &mut tracekit_fxt::read::Reader::new(&bytes[..]);
    let timeline = tracekit_timeline::Timeline::build(reader, &mut |_| {});
    // Every slice of a load, a parse and a request, one by one.
    let mut loads = Vec::new();
    let (mut parses, mut requests) = (0, 0);
    for track in timeline.tracks() {
        for lane in &track.lanes {
            for i in 0..lane.len() {
                let s = lane.get(i).unwrap();
                let of = tracekit_timeline::allocated::of_args(&timeline, s.args);
                match timeline.string(s.name) {
                    "load" => loads.push(of.unwrap()),
                    "parse" => {
                        assert_eq!(of, Some((service::PARSE_BYTES, 1)));
                        parses += 1;
                    }
                    "request" => {
                        let args = timeline.args(s.args);
                        let field = |k: &str| -> u64 {
                            let v: serde_json::Value = serde_json::from_str(args).unwrap();
                            v[k].as_u64().unwrap()
                        };
                        let (task, n) = (field("task"), field("n"));
                        let inside = service::REPLY_BYTES
                            + service::load_bytes(task, n)
                            + service::PARSE_BYTES;
                        assert_eq!(of, Some((inside, 3)), "request {task}/{n}: {args}");
                        requests += 1;
                    }
                    _ => {}
                }
            }
        }
    }
    let mut expected: Vec<(u64, u64)> = (0..service::TASKS)
        .flat_map(|t| (0..service::REQUESTS).map(move |n| (service::load_bytes(t, n), 1)))
        .collect();
    expected.sort_unstable();
    loads.sort_unstable();
    assert_eq!(loads, expected);
    let all = service::TASKS * service::REQUESTS;
    assert_eq!((parses, requests), (all, all));

    // By name: a request's own bytes are its reply's.
    let top = TopQuery {
        by: TopOrder::Allocated,
        ..TopQuery::default()
    }
    .run(&timeline);
    let row = |name: &str| {
        let n = top
            .names
            .iter()
            .find(|n| n.name == name && n.kind == "thread");
        n.unwrap().allocated.unwrap()
    };
    let load_total: u64 = expected.iter().map(|l| l.0).sum();
    let request = row("request");
    assert_eq!(
        request.bytes,
        all * (service::REPLY_BYTES + service::PARSE_BYTES) + load_total
    );
    assert_eq!(request.self_bytes, all * service::REPLY_BYTES);
    assert_eq!(
        (request.allocations, request.self_allocations),
        (3 * all, all)
    );
    assert_eq!(row("load").bytes, load_total);
    assert_eq!(row("load").self_bytes, load_total);
    assert_eq!(row("parse").bytes, all * service::PARSE_BYTES);
    // Ranked by bytes: the tasks (every request inside) first, then requests.
    let order: Vec<&str> = top.names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(order[..2], ["task", "request"], "{order:?}");
}
