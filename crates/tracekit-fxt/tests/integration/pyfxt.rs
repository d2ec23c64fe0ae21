//! Cross-check against an independent reader, PyPI `fxt` 0.3.0: `copy` of every
//! corpus file must parse with it into the same records as our reader sees in the
//! original, and originals it accepts must parse into what our reader sees.
//!
//! Needs `TRACEKIT_PYFXT` (a python with `fxt` 0.3.0 installed; `.ci/run` makes one)
//! and `TRACEKIT_CORPUS`; skips only when `TRACEKIT_PYFXT` is unset.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};
use tracekit_fxt::format::{ArgValue, EventKind};
use tracekit_fxt::read::{Args, Reader, Record, Str, Thread};
use tracekit_fxt::write::{VecDestination, Writer};

const FILES: [&str; 5] = [
    "jst_tracing_demo.fxt",
    "magic_trace_sample.fxt",
    "ocaml_trace_fuchsia_t2_first.fxt",
    "ocaml_trace_fuchsia_t2_second.fxt",
    "synthetic_all_records.fxt",
];

/// Originals PyPI fxt rejects ("non-metadata record before any provider section").
const REJECTED_ORIGINALS: [&str; 2] = [
    "ocaml_trace_fuchsia_t2_first.fxt",
    "ocaml_trace_fuchsia_t2_second.fxt",
];

fn pyfxt(python: &str, file: &Path) -> Result<Value, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pyfxt_dump.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(file)
        .output()
        .map_err(|e| format!("running {python}: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

fn s(x: Str<'_>) -> Value {
    json!(x.to_string())
}

fn thread(t: Thread) -> Value {
    json!({"process_id": t.process.0, "thread_id": t.thread.0, "type": "Thread"})
}

fn args(a: Args<'_>) -> Value {
    // A dict on the Python side: later duplicates win.
    let mut m = Map::new();
    for a in a.iter() {
        let v = match a.value {
            ArgValue::Null => Value::Null,
            ArgValue::Int32(x) => json!(x),
            ArgValue::UInt32(x) => json!(x),
            ArgValue::Int64(x) => json!(x),
            ArgValue::UInt64(x) | ArgValue::Pointer(x) => json!(x),
            ArgValue::Koid(k) => json!(k.0),
            ArgValue::Double(x) => json!({"f64": x.to_bits()}),
            ArgValue::String(x) => s(x),
            ArgValue::Bool(b) => json!(b),
            ArgValue::Blob(_) => panic!("PyPI fxt rejects blob arguments"),
        };
        m.insert(a.name.to_string(), v);
    }
    Value::Object(m)
}

fn bytes(b: &[u8]) -> Value {
    json!({"bytes": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
}

/// Our reader's view of `data`, in PyPI fxt's model.
fn ours(data: &[u8]) -> Value {
    let mut r = Reader::new(data);
    let mut providers: BTreeMap<u32, (String, Vec<Value>, Vec<Value>)> = BTreeMap::new();
    while let Some(raw) = r.next_raw().unwrap() {
        let pid = r.provider().id;
        let rec = r.resolve(raw);
        let ns = |t| r.ticks_to_ns(t);
        let v = match rec {
            Record::ProviderInfo { id, name } => {
                providers.entry(id).or_default().0 = Str(name).to_string();
                continue;
            }
            Record::ProviderEvent { id, event } => {
                providers.entry(id).or_default().2.push(json!(event.0));
                continue;
            }
            Record::Event(e) => {
                let (ty, extra) = match e.kind {
                    EventKind::Instant => ("InstantEventRecord", None),
                    EventKind::Counter { id } => {
                        ("CounterEventRecord", Some(("counter_id", json!(id))))
                    }
                    EventKind::DurationBegin => ("DurationBeginEventRecord", None),
                    EventKind::DurationEnd => ("DurationEndEventRecord", None),
                    EventKind::DurationComplete { end_ticks } => (
                        "DurationCompleteEventRecord",
                        // PyPI fxt's `duration_ns` holds the end timestamp.
                        Some(("duration_ns", json!(ns(end_ticks)))),
                    ),
                    EventKind::AsyncBegin { id } => {
                        ("AsyncBeginEventRecord", Some(("correlation_id", json!(id))))
                    }
                    EventKind::AsyncInstant { id } => (
                        "AsyncInstantEventRecord",
                        Some(("correlation_id", json!(id))),
                    ),
                    EventKind::AsyncEnd { id } => {
                        ("AsyncEndEventRecord", Some(("correlation_id", json!(id))))
                    }
                    EventKind::FlowBegin { id } => {
                        ("FlowBeginEventRecord", Some(("correlation_id", json!(id))))
                    }
                    EventKind::FlowStep { id } => {
                        ("FlowStepEventRecord", Some(("correlation_id", json!(id))))
                    }
                    EventKind::FlowEnd { id } => {
                        ("FlowEndEventRecord", Some(("correlation_id", json!(id))))
                    }
                };
                let mut v = json!({
                    "type": ty, "timestamp_ns": ns(e.ticks), "category": s(e.category),
                    "name": s(e.name), "thread": thread(e.thread), "args": args(e.args),
                });
                if let Some((k, x)) = extra {
                    v[k] = x;
                }
                v
            }
            Record::Blob(b) => json!({
                "type": "BlobRecord", "name": s(b.name), "type_": b.blob_type.0,
                "payload": bytes(b.payload),
            }),
            Record::UserspaceObject(o) => json!({
                "type": "UserspaceObjectRecord", "name": s(o.name),
                "process_id": o.process.process.0, "pointer": o.pointer, "args": args(o.args),
            }),
            Record::KernelObject(o) => json!({
                "type": "KernelObjectRecord", "type_": o.object_type.0, "id": o.koid.0,
                "name": s(o.name), "args": args(o.args),
            }),
            Record::ContextSwitch(c) => json!({
                "type": "ContextSwitchRecord", "timestamp_ns": ns(c.ticks), "cpu_id": c.cpu,
                "outgoing_thread_id": c.outgoing_tid.0, "outgoing_thread_state": c.outgoing_state.0,
                "incoming_thread_id": c.incoming_tid.0, "args": args(c.args),
            }),
            Record::ThreadWakeup(c) => json!({
                "type": "ThreadWakeupRecord", "timestamp_ns": ns(c.ticks), "cpu_id": c.cpu,
                "waking_thread_id": c.waking_tid.0, "args": args(c.args),
            }),
            Record::Log(l) => json!({
                "type": "LogRecord", "timestamp_ns": ns(l.ticks), "thread": thread(l.thread),
                "message": s(Str(l.message)),
            }),
            Record::LargeBlob(b) => match b.meta {
                Some(m) => json!({
                    "type": "LargeBlobWithMetadataRecord", "timestamp_ns": ns(m.ticks),
                    "category": s(b.category), "name": s(b.name), "thread": thread(m.thread),
                    "args": args(m.args), "payload": bytes(b.payload),
                }),
                None => json!({
                    "type": "LargeBlobNoMetadataRecord", "category": s(b.category),
                    "name": s(b.name), "payload": bytes(b.payload),
                }),
            },
            _ => continue,
        };
        providers.entry(pid).or_default().1.push(v);
    }
    normalize(&Value::Object(
        providers
            .into_iter()
            .map(|(id, (name, records, events))| {
                (
                    id.to_string(),
                    json!({"name": name, "records": records, "events": events}),
                )
            })
            .collect(),
    ))
}

/// Names the `type` field of blobs and kernel objects `object_type` and drops
/// providers without content.
fn normalize(v: &Value) -> Value {
    let mut out = Map::new();
    for (id, p) in v.as_object().unwrap() {
        let records: Vec<Value> = p["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                let o = r.as_object_mut().unwrap();
                if let Some(t) = o.remove("type_") {
                    o.insert("object_type".into(), t);
                }
                r
            })
            .collect();
        let empty = records.is_empty()
            && p["events"].as_array().unwrap().is_empty()
            && p["name"].as_str().unwrap().is_empty();
        if !empty {
            out.insert(
                id.clone(),
                json!({"name": p["name"], "events": p["events"], "records": records}),
            );
        }
    }
    Value::Object(out)
}

fn first_mismatch(a: &Value, b: &Value) -> String {
    for (id, pa) in a.as_object().unwrap() {
        let Some(pb) = b.get(id) else {
            return format!("provider {id} missing");
        };
        if pa["name"] != pb["name"] || pa["events"] != pb["events"] {
            return format!(
                "provider {id}: {} / {} vs {} / {}",
                pa["name"], pa["events"], pb["name"], pb["events"]
            );
        }
        let (ra, rb) = (
            pa["records"].as_array().unwrap(),
            pb["records"].as_array().unwrap(),
        );
        for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
            if x != y {
                return format!("provider {id} record {i}:\n ours {x}\n fxt  {y}");
            }
        }
        if ra.len() != rb.len() {
            return format!("provider {id}: {} vs {} records", ra.len(), rb.len());
        }
    }
    format!(
        "providers {:?} vs {:?}",
        a.as_object().map(|o| o.keys().collect::<Vec<_>>()),
        b.as_object().map(|o| o.keys().collect::<Vec<_>>())
    )
}

#[test]
fn pyfxt_parses_every_copy_into_the_original_records() {
    let Some(python) = tracekit_testutil::pyfxt() else {
        return;
    };
    let python = python.to_string_lossy().into_owned();
    let Some(corpus) = tracekit_testutil::corpus_path("fxt") else {
        return;
    };
    let tmp = tracekit_testutil::scratch();
    for name in FILES {
        let data = std::fs::read(corpus.join(name)).unwrap();
        let expected = ours(&data);
        assert!(
            !expected.as_object().unwrap().is_empty(),
            "{name}: nothing to compare"
        );

        let mut w = Writer::without_header(VecDestination::new()).unwrap();
        tracekit_fxt::copy::copy(&data, &mut w).unwrap();
        let copied = w.finish().unwrap().into_vec();
        let out = tmp.join(name);
        std::fs::write(&out, &copied).unwrap();
        let theirs = normalize(
            &pyfxt(&python, &out)
                .unwrap_or_else(|e| panic!("{name}: PyPI fxt rejects the copy: {e}")),
        );
        assert!(
            expected == theirs,
            "{name} copy: {}",
            first_mismatch(&expected, &theirs)
        );
        // Our reader also reads the copy as the original.
        assert_eq!(ours(&copied), expected, "{name}: our reader on the copy");

        let original = pyfxt(&python, &corpus.join(name));
        if REJECTED_ORIGINALS.contains(&name) {
            assert!(
                original.is_err(),
                "{name}: expected PyPI fxt to reject the original"
            );
        } else {
            let theirs = normalize(&original.unwrap());
            assert!(
                expected == theirs,
                "{name} original: {}",
                first_mismatch(&expected, &theirs)
            );
        }
        eprintln!(
            "{name}: PyPI fxt agrees ({} providers)",
            expected.as_object().unwrap().len()
        );
    }
}
