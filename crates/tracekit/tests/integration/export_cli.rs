//! `tracekit export` end to end on the corpora: each memtrace trace's tables hold
//! exactly the reference reader's events (counts from its dumps, parsed here
//! independently of tracekit's reader), the estimated bytes summed per site equal
//! `memtrace top --json`, FXT slices match what `fxt stats` counts; a damaged trace
//! leaves nothing behind, a wrong input is named, and exporting again replaces
//! rather than duplicates. The Parquet files are read back with the `parquet` crate.
//! Skipped when `TRACEKIT_CORPUS` is unset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::dump;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use arrow_array::{
    Array, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

use crate::TRACEKIT;

/// Every row of a Parquet file, in one batch.
fn read(path: &Path) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    arrow_select::concat::concat_batches(&schema, &batches).unwrap()
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> &'a T {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("column {name} has another type"))
}

/// Exports `trace` into `dir`; its trace id.
fn export(trace: &Path, dir: &Path) -> String {
    let out = TRACEKIT.ok(&[
        "export",
        trace.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    j[0]["trace_id"].as_str().unwrap().to_string()
}

fn table(dir: &Path, table: &str, id: &str) -> RecordBatch {
    read(&dir.join(table).join(format!("{id}.parquet")))
}

#[test]
fn memtrace_tables_hold_the_reference_events_and_top_sums_per_site() {
    let Some(corpus) = tracekit_testutil::corpus_path("memtrace") else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    for (trace, expected) in dump::manifest(&corpus) {
        let d = dump::load(&expected);
        if d.errored {
            continue;
        }
        let name = trace.display().to_string();
        let id = export(&trace, dir.path());
        let allocs = table(dir.path(), "allocations", &id);
        let e = d.totals();
        assert_eq!(allocs.num_rows() as u64, e.allocs, "{name}");
        let nsamples = col::<Int64Array>(&allocs, "nsamples");
        assert_eq!(
            nsamples.iter().map(|v| v.unwrap() as u64).sum::<u64>(),
            e.samples,
            "{name}"
        );
        let collected = col::<Int64Array>(&allocs, "collect_time_us");
        assert_eq!(
            (collected.len() - collected.null_count()) as u64,
            e.collected_allocs,
            "{name}"
        );
        // Objects promoted while live (a synthetic trace promotes some twice, or
        // after their collection).
        let mut live = std::collections::HashSet::new();
        let mut promoted_objects = std::collections::HashSet::new();
        for ev in &d.events {
            match ev {
                dump::DumpEvent::Alloc { id, .. } => {
                    live.insert(*id);
                    promoted_objects.remove(id);
                }
                dump::DumpEvent::Promote { id, .. } if live.contains(id) => {
                    promoted_objects.insert(*id);
                }
                dump::DumpEvent::Collect { id, .. } => {
                    live.remove(id);
                }
                _ => {}
            }
        }
        let promoted = col::<BooleanArray>(&allocs, "promoted");
        assert_eq!(promoted.true_count(), promoted_objects.len(), "{name}");

        let traces = table(dir.path(), "traces", &id);
        assert_eq!(traces.num_rows(), 1);
        assert_eq!(
            col::<StringArray>(&traces, "executable").value(0),
            d.executable_name
        );
        let bps = col::<Float64Array>(&traces, "bytes_per_sample").value(0);
        assert_eq!(bps, d.bytes_per_sample(), "{name}");

        // Sites: the location at position 0 of each allocation's backtrace.
        let bts = table(dir.path(), "backtraces", &id);
        let locs = table(dir.path(), "locations", &id);
        let labels: HashMap<i64, &str> = col::<Int64Array>(&locs, "location_id")
            .iter()
            .zip(col::<StringArray>(&locs, "label").iter())
            .map(|(i, l)| (i.unwrap(), l.unwrap()))
            .collect();
        let mut site_of: HashMap<i64, &str> = HashMap::new();
        let (bt_ids, pos, loc) = (
            col::<Int64Array>(&bts, "backtrace_id"),
            col::<Int32Array>(&bts, "position"),
            col::<Int64Array>(&bts, "location_id"),
        );
        for i in 0..bts.num_rows() {
            if pos.value(i) == 0 {
                assert!(
                    site_of
                        .insert(bt_ids.value(i), labels[&loc.value(i)])
                        .is_none()
                );
            }
        }
        let mut samples: BTreeMap<&str, u64> = BTreeMap::new();
        let bt = col::<Int64Array>(&allocs, "backtrace_id");
        for i in 0..allocs.num_rows() {
            let site = site_of
                .get(&bt.value(i))
                .copied()
                .unwrap_or("[empty backtrace]");
            *samples.entry(site).or_default() += nsamples.value(i) as u64;
        }
        let top: Value = serde_json::from_str(&TRACEKIT.ok(&[
            "memtrace",
            "top",
            trace.to_str().unwrap(),
            "--json",
            "--limit",
            "0",
        ]))
        .unwrap();
        let mut expected_bytes = BTreeMap::new();
        for s in top["sites"].as_array().unwrap() {
            expected_bytes.insert(
                s["site"].as_str().unwrap().to_string(),
                s["bytes"].as_u64().unwrap(),
            );
        }
        let got: BTreeMap<String, u64> = samples
            .iter()
            .map(|(s, n)| (s.to_string(), (*n as f64 * bps).round() as u64))
            .collect();
        let differ: Vec<_> = got
            .iter()
            .filter(|(k, v)| expected_bytes.get(*k) != Some(v))
            .map(|(k, v)| (k, v, expected_bytes.get(k)))
            .take(5)
            .collect();
        let missing: Vec<_> = expected_bytes
            .keys()
            .filter(|k| !got.contains_key(*k))
            .take(5)
            .collect();
        assert!(
            differ.is_empty() && missing.is_empty(),
            "{name}: {differ:?}, missing {missing:?}"
        );
    }
}

#[test]
fn fxt_slices_instants_and_counters_match_the_records() {
    let Some(fxt) = tracekit_testutil::corpus_path("fxt") else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    for name in [
        "magic_trace_sample.fxt",
        "jst_tracing_demo.fxt",
        "synthetic_all_records.fxt",
    ] {
        let trace = fxt.join(name);
        assert!(trace.exists(), "{} is missing", trace.display());
        let id = export(&trace, dir.path());
        let stats: Value = serde_json::from_str(&TRACEKIT.ok(&[
            "fxt",
            "stats",
            trace.to_str().unwrap(),
            "--json",
        ]))
        .unwrap();
        let events = &stats["event_types"];
        let n = |k: &str| events[k].as_u64().unwrap_or(0);
        let slices = table(dir.path(), "slices", &id);
        // Every begin is a slice (open ones too), every complete and async pair one.
        assert_eq!(
            slices.num_rows() as u64,
            n("duration_begin") + n("duration_complete") + n("async_begin"),
            "{name}"
        );
        let instants = table(dir.path(), "instants", &id);
        assert_eq!(instants.num_rows() as u64, n("instant"), "{name}");
        // Depths nest: a slice at depth d > 0 lies inside one at d - 1 on its thread.
        let (tid, depth, start, dur) = (
            col::<Int64Array>(&slices, "tid"),
            col::<Int32Array>(&slices, "depth"),
            col::<Int64Array>(&slices, "start_ns"),
            col::<Int64Array>(&slices, "duration_ns"),
        );
        for i in 0..slices.num_rows() {
            if depth.is_null(i) || depth.value(i) == 0 || dur.is_null(i) {
                continue;
            }
            let inside = (0..slices.num_rows()).any(|j| {
                tid.value(j) == tid.value(i)
                    && !depth.is_null(j)
                    && depth.value(j) == depth.value(i) - 1
                    && start.value(j) <= start.value(i)
                    && (dur.is_null(j)
                        || start.value(j) + dur.value(j) >= start.value(i) + dur.value(i))
            });
            assert!(inside, "{name}: slice {i} has no parent");
        }
        for a in col::<StringArray>(&slices, "args").iter() {
            let v: Value = serde_json::from_str(a.unwrap()).unwrap();
            assert!(v.is_object());
        }
        // The same slices as `fxt slices` lists, from the same timeline.
        let listed: Value = serde_json::from_str(&TRACEKIT.ok(&[
            "fxt",
            "slices",
            trace.to_str().unwrap(),
            "--json",
            "--limit",
            "0",
        ]))
        .unwrap();
        let names = col::<StringArray>(&slices, "name");
        let mut exported: Vec<(String, i64, Option<i64>, Option<i32>)> = (0..slices.num_rows())
            .map(|i| {
                (
                    names.value(i).to_string(),
                    start.value(i),
                    (!dur.is_null(i)).then(|| dur.value(i)),
                    (!depth.is_null(i)).then(|| depth.value(i)),
                )
            })
            .collect();
        let mut expected: Vec<(String, i64, Option<i64>, Option<i32>)> = listed["slices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_string(),
                    s["start_ns"].as_i64().unwrap(),
                    s["duration_ns"].as_i64(),
                    (s["kind"] == "thread").then(|| s["depth"].as_i64().unwrap() as i32),
                )
            })
            .collect();
        exported.sort();
        expected.sort();
        assert_eq!(exported, expected, "{name}");
    }
}

#[test]
fn a_damaged_trace_leaves_nothing_and_a_wrong_input_is_named() {
    let Some(traces) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    let out = dir.path().join("ds");
    // Cut in the middle of the trace info: the reader cannot start.
    let bytes = std::fs::read(traces.join("mixed_v3.ctf")).unwrap();
    let cut = dir.path().join("cut.ctf");
    std::fs::write(&cut, &bytes[..40]).unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a trace\n").unwrap();
    let good = traces.join("bigarrays_v2.ctf");
    let o = TRACEKIT.run(&[
        "export",
        cut.to_str().unwrap(),
        text.to_str().unwrap(),
        good.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("exporting {}", cut.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}: not a memtrace trace, an FXT trace or a perf.data file",
            text.display()
        )),
        "{err}"
    );
    assert!(err.contains("2 of 3 traces not exported"), "{err}");
    // The message names what was exported after all.
    assert!(
        err.contains(&format!(
            "exported into {}: {} (trace ",
            out.display(),
            good.display()
        )),
        "{err}"
    );
    // The good trace is there, complete; nothing else, no temporary folder.
    let mut left: Vec<PathBuf> = walk(&out);
    left.sort();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(
        left.iter()
            .all(|p| p.extension().is_some_and(|e| e == "parquet"))
    );
}

#[test]
fn an_interrupt_between_traces_names_those_exported() {
    let Some(traces) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    let out = dir.path().join("ds");
    let good = traces.join("bigarrays_v2.ctf");
    // One job: the first trace is exported, then the second (standard input, held
    // open) waits for its bytes, and the interrupt comes between the two.
    let mut child = TRACEKIT
        .command()
        .args(["export", good.to_str().unwrap(), "-", "-j", "1", "-o"])
        .arg(&out)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    let start = std::time::Instant::now();
    while !out.join("traces").is_dir() {
        assert!(child.try_wait().unwrap().is_none(), "tracekit ended early");
        assert!(
            start.elapsed().as_secs() < 60,
            "the first trace never landed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: sends SIGINT to our own child, which is alive (not yet waited for).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    drop(input);
    assert_eq!(o.status.code(), Some(130));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("no output was written"), "{err}");
    assert!(
        err.contains(&format!(
            "tracekit: interrupted; written before that: the tables of {} (trace ",
            good.display()
        )),
        "{err}"
    );
    assert!(err.contains("nothing else was written"), "{err}");
    // What it names is there: the one trace's four tables, no temporary folder.
    let left = walk(&out);
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(
        left.iter()
            .all(|p| p.extension().is_some_and(|e| e == "parquet"))
    );
}

#[test]
fn exporting_again_replaces_the_trace_s_files() {
    let Some(traces) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let dir = tracekit_testutil::scratch();
    let trace = traces.join("mixed_v3.ctf");
    let a = export(&trace, dir.path());
    let first = walk(dir.path());
    let b = export(&trace, dir.path());
    assert_eq!(a, b);
    assert_eq!(walk(dir.path()), first);
    assert_eq!(table(dir.path(), "traces", &a).num_rows(), 1);
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn perf_samples_hold_the_stacks_perf_flamegraph_folds() {
    // A committed recording (user-space `cpu-clock` samples with DWARF stacks): the
    // samples table, grouped by stack, is `perf flamegraph`'s folded output.
    let recording = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tracekit-perf/tests/data/recording_dwarf.data");
    let dir = tracekit_testutil::scratch();
    let id = export(&recording, dir.path());
    let samples = table(dir.path(), "samples", &id);
    let mut folded: BTreeMap<String, u64> = BTreeMap::new();
    let (stack, leaf, depth) = (
        col::<StringArray>(&samples, "stack"),
        col::<StringArray>(&samples, "leaf"),
        col::<Int32Array>(&samples, "depth"),
    );
    for i in 0..samples.num_rows() {
        *folded.entry(stack.value(i).to_string()).or_default() += 1;
        let frames: Vec<&str> = stack.value(i).split(';').collect();
        assert_eq!(Some(leaf.value(i)), frames.last().copied());
        assert_eq!(depth.value(i) as usize, frames.len());
    }
    let expected: BTreeMap<String, u64> = TRACEKIT
        .ok(&["perf", "flamegraph", recording.to_str().unwrap()])
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(folded, expected);
    let traces = table(dir.path(), "traces", &id);
    assert_eq!(col::<StringArray>(&traces, "kind").value(0), "perf");
    assert_eq!(
        col::<Int64Array>(&traces, "events").value(0),
        samples.num_rows() as i64
    );
}
