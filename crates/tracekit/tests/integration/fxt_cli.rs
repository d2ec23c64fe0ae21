//! `tracekit fxt ...` end to end: dump snapshots, check verdicts and exit codes, copy,
//! to-json, top, slices and stats on the corpus.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use tracekit_testutil::scratch;

use crate::TRACEKIT;

/// Runs `tracekit fxt ARGS FILE` in FILE's folder, so that messages name the file
/// as the user typed it, wherever the corpus is.
fn fxt(args: &[&str], file: &Path) -> Output {
    let mut all = vec!["fxt"];
    all.extend_from_slice(args);
    all.push(file.file_name().unwrap().to_str().unwrap());
    TRACEKIT.run_in(file.parent().unwrap(), &all)
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

#[test]
fn dump_snapshots() {
    for name in [
        "jst_tracing_demo.fxt",
        "synthetic_all_records.fxt",
        "ocaml_trace_fuchsia_t2_second.fxt",
    ] {
        let Some(path) = tracekit_testutil::corpus_path(Path::new("fxt").join(name)) else {
            return;
        };
        let out = fxt(&["dump"], &path);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let snapshot = format!("{}--- stderr ---\n{}", text(&out.stdout), text(&out.stderr));
        insta::assert_snapshot!(format!("dump_{name}"), snapshot);
    }
}

#[test]
fn dump_limit_and_bad_input() {
    let tmp = scratch();
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        return;
    };
    let out = fxt(&["dump", "-n", "3"], &path);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).lines().count(), 3);

    // A trace cut off inside a record: every record before it is dumped, and the
    // cut is a warning naming the file, as memtrace does for a truncated packet.
    let bad = tmp.join("bad.fxt");
    let mut data = std::fs::read(&path).unwrap();
    data.truncate(1001);
    std::fs::write(&bad, &data).unwrap();
    let whole = text(&fxt(&["dump"], &path).stdout);
    let out = fxt(&["dump"], &bad);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.starts_with("warning: bad.fxt: at byte "), "{err}");
    assert!(err.contains("cut short"), "{err}");
    assert_eq!(err.lines().count(), 1);
    // What was dumped is the whole dump up to the record the cut falls in.
    let dumped_text = text(&out.stdout);
    let dumped: Vec<&str> = dumped_text.lines().collect();
    let whole: Vec<&str> = whole.lines().collect();
    let offset = |l: &str| u64::from_str_radix(&l[2..10], 16).unwrap();
    let n = dumped.len();
    assert!(n > 10);
    assert_eq!(dumped[..], whole[..n]);
    assert!(
        offset(whole[n]) < 1001,
        "the next record starts before the cut"
    );
    assert!(offset(whole[n + 1]) >= 1001, "and is the one it cuts");
}

#[test]
fn check_verdicts() {
    let tmp = scratch();
    let Some(golden) = tracekit_testutil::corpus_path("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let out = fxt(&["check"], &golden);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("check_jst_tracing_demo", text(&out.stdout));

    // The writer's default output passes.
    let clean = tmp.join("clean.fxt");
    let mut w =
        tracekit_fxt::write::Writer::new(tracekit_fxt::write::VecDestination::new()).unwrap();
    let t = w
        .set_thread_slot(
            0,
            tracekit_fxt::format::Koid(1),
            tracekit_fxt::format::Koid(2),
        )
        .unwrap();
    let proc_name = w.intern("proc").unwrap();
    w.set_process_name(tracekit_fxt::format::Koid(1), proc_name)
        .unwrap();
    let name = w.intern("work").unwrap();
    w.set_thread_name(
        tracekit_fxt::format::Koid(1),
        tracekit_fxt::format::Koid(2),
        name,
    )
    .unwrap();
    w.duration_begin(t, name, name, 1, &[]).unwrap();
    w.duration_end(t, name, name, 2, &[]).unwrap();
    std::fs::write(&clean, w.finish().unwrap().into_vec()).unwrap();
    let out = fxt(&["check"], &clean);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).starts_with("clean:"));
}

#[test]
fn copy_and_to_json() {
    let tmp = scratch();
    let Some(golden) = tracekit_testutil::corpus_path("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let copied = tmp.join("golden-copy.fxt");
    let out = TRACEKIT
        .command()
        .args(["fxt", "copy"])
        .arg(&golden)
        .arg(&copied)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(&copied).unwrap(),
        std::fs::read(&golden).unwrap()
    );

    let json_path = tmp.join("golden.json");
    let out = TRACEKIT
        .command()
        .args(["fxt", "to-json"])
        .arg(&golden)
        .arg(&json_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    // 18 events plus the process and thread names.
    assert_eq!(events.len(), 20);
    let phases: String = events.iter().map(|e| e["ph"].as_str().unwrap()).collect();
    assert_eq!(phases, "MMXXbsibBtEnnfCeeCCC");
    assert_eq!(events[0]["args"]["name"], "myproc");
    assert_eq!(events[1]["args"]["name"], "mythread");
    assert_eq!(events[1]["pid"], 1);
    let complete = &events[2];
    assert_eq!(complete["ts"], 10.0);
    assert_eq!(complete["dur"], 4990.0);
    assert_eq!(complete["args"]["my_funct"], "stuff");
    assert_eq!(events[10]["args"]["myproc"], -1.0);
}

#[test]
fn stats_snapshot() {
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        return;
    };
    let out = fxt(&["stats"], &path);
    assert!(out.status.success());
    insta::assert_snapshot!("stats_magic_trace_sample", text(&out.stdout));
    let out = fxt(&["stats", "--json"], &path);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["event_types"]["duration_begin"], 17296);
    assert_eq!(v["last_ns"], 329913);
}

#[test]
fn top_counts_every_slice_stats_counts() {
    let names = [
        "magic_trace_sample.fxt",
        "jst_tracing_demo.fxt",
        "synthetic_all_records.fxt",
        "ocaml_trace_fuchsia_t2_second.fxt",
    ];
    for name in names {
        let Some(path) = tracekit_testutil::corpus_path(Path::new("fxt").join(name)) else {
            return;
        };
        let json = |args: &[&str]| -> serde_json::Value {
            let out = fxt(args, &path);
            assert!(out.status.success(), "{name}: {}", text(&out.stderr));
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let stats = json(&["stats", "--json"]);
        let n = |k: &str| stats["event_types"][k].as_u64().unwrap_or(0);
        // Every begin is a slice (open ones too), every complete and async begin one.
        let expected = n("duration_begin") + n("duration_complete") + n("async_begin");
        let top = json(&["top", "--json", "--limit", "0"]);
        assert_eq!(top["slices"], expected, "{name}");
        let rows = top["names"].as_array().unwrap();
        assert_eq!(rows.len() as u64, top["distinct_names"].as_u64().unwrap());
        let counted: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
        assert_eq!(counted, expected, "{name}");
        for r in rows {
            let (total, own, max) = (&r["total_ns"], &r["self_ns"], &r["max_ns"]);
            assert!(
                own.as_u64() <= total.as_u64() && max.as_u64() <= total.as_u64(),
                "{r}"
            );
        }
        // A range over the whole trace counts the same.
        let whole = json(&["top", "--json", "--between", "0", "1h"]);
        assert_eq!(whole["slices"], top["slices"], "{name}");
    }
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        return;
    };
    // One thread, koid 2: every slice; another: none.
    let out = fxt(&["top", "--json", "--thread", "2"], &path);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["slices"], 17_296);
    let out = fxt(&["top", "--json", "--thread", "3"], &path);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["slices"], 0);
    // The first 100 µs hold fewer.
    let out = fxt(&["top", "--json", "--between", "0", "100us"], &path);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(0 < v["slices"].as_u64().unwrap() && v["slices"].as_u64().unwrap() < 17_296);
    let out = fxt(&["top", "--limit", "5"], &path);
    assert!(out.status.success());
    insta::assert_snapshot!("top_magic_trace_sample", text(&out.stdout));
    let out = fxt(&["top", "--between", "2ms", "1ms"], &path);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--between: 2.00 ms is after 1.00 ms"));
}

/// `top --diff A B`: each name's figures are those of `top` of each trace,
/// and the rows are ranked by the size of the change.
#[test]
fn top_diff_holds_each_traces_top() {
    let tmp = scratch();
    let (a, b) = (tmp.join("a.fxt"), tmp.join("b.fxt"));
    for (seed, path) in [("1", &a), ("2", &b)] {
        let p = path.to_str().unwrap();
        TRACEKIT.ok(&[
            "fxt",
            "sample",
            "-q",
            "--slices",
            "20000",
            "--threads",
            "2",
            "--seed",
            seed,
            p,
        ]);
    }
    let json = |args: &[&str]| -> serde_json::Value {
        let out = TRACEKIT.run(args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let top = |p: &str| json(&["fxt", "top", "--json", "--limit", "0", p]);
    let (ta, tb) = (top(pa), top(pb));
    let d = json(&["fxt", "top", "--diff", pa, pb, "--json", "--limit", "0"]);
    assert_eq!(
        (&d["slices_a"], &d["slices_b"]),
        (&ta["slices"], &tb["slices"])
    );
    let rows = d["names"].as_array().unwrap();
    assert!(rows.len() > 3);
    let find = |t: &serde_json::Value, r: &serde_json::Value| {
        let names = t["names"].as_array().unwrap();
        let n = names
            .iter()
            .find(|n| n["name"] == r["name"] && n["kind"] == r["kind"]);
        n.map_or((0, 0, 0), |n| {
            let v = |k: &str| n[k].as_u64().unwrap();
            (v("count"), v("total_ns"), v("self_ns"))
        })
    };
    for r in rows {
        let v = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(
            find(&ta, r),
            (v("count_a"), v("total_ns_a"), v("self_ns_a")),
            "{r}"
        );
        assert_eq!(
            find(&tb, r),
            (v("count_b"), v("total_ns_b"), v("self_ns_b")),
            "{r}"
        );
        let change = v("total_ns_b") as i64 - v("total_ns_a") as i64;
        assert_eq!(r["total_change_ns"].as_i64(), Some(change));
    }
    let changes: Vec<u64> = rows
        .iter()
        .map(|r| r["total_change_ns"].as_i64().unwrap().unsigned_abs())
        .collect();
    assert!(changes.windows(2).all(|w| w[0] >= w[1]), "{changes:?}");
    let table = TRACEKIT.ok(&["fxt", "top", "--diff", pa, pb, "--limit", "3"]);
    assert!(table.contains("(the 3 largest changes shown)"), "{table}");
}

#[test]
fn slices_lists_every_slice_top_counts_the_earliest_first() {
    let Some(path) = tracekit_testutil::corpus_path("fxt/magic_trace_sample.fxt") else {
        return;
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let out = fxt(args, &path);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let all = json(&["slices", "--json", "--limit", "0"]);
    let top = json(&["top", "--json", "--limit", "0"]);
    assert_eq!(all["matching"], top["slices"]);
    let slices = all["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 17_296);
    let starts: Vec<u64> = slices
        .iter()
        .map(|s| s["start_ns"].as_u64().unwrap())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "the earliest first"
    );
    // Every begin of this trace carries its symbol, which is its name.
    for s in slices {
        assert_eq!(s["args"]["symbol"], s["name"], "{s}");
    }
    // A name search finds what top counts of the names it matches.
    let found = json(&["slices", "--json", "--limit", "0", "--name", "SCHED_IN"]);
    let counted: u64 = top["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["name"].as_str().unwrap().contains("sched_in"))
        .map(|n| n["count"].as_u64().unwrap())
        .sum();
    assert_eq!(found["matching"], counted);
    assert!(counted > 0);
    let first = json(&[
        "slices",
        "--json",
        "--limit",
        "0",
        "--between",
        "0",
        "100us",
    ]);
    let early = starts.iter().filter(|&&s| s < 100_000).count() as u64;
    // Those that start in it, and the ones still running into it.
    assert!(first["matching"].as_u64().unwrap() >= early);
    assert!(first["matching"].as_u64().unwrap() < 17_296);
    let Some(demo) = tracekit_testutil::corpus_path("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let out = fxt(&["slices"], &demo);
    assert!(out.status.success());
    insta::assert_snapshot!("slices_jst_tracing_demo", text(&out.stdout));
}

/// `fxt sample` writes the trace it says: as many slices as it reports on
/// its threads, nested, a clean trace for every reader, the same bytes for a
/// seed; its timeline and `top` read it as they would a recording.
#[test]
fn a_sample_is_the_trace_it_says_and_reads_everywhere() {
    let dir = scratch();
    let out = dir.path().join("s.fxt");
    let written = TRACEKIT.ok_in(
        dir.path(),
        &[
            "fxt",
            "sample",
            "-o",
            "s.fxt",
            "--slices",
            "30000",
            "--threads",
            "3",
        ],
    );
    let said = text(&written.stderr);
    assert!(said.starts_with("wrote s.fxt ("), "{said}");
    let slices: u64 = said.split(['(', ' ']).nth(3).unwrap().parse().unwrap();
    assert!((30_000..60_000).contains(&slices), "{said}");
    assert!(said.contains("on 3 threads"), "{said}");
    let stats: serde_json::Value =
        serde_json::from_str(&text(&fxt(&["stats", "--json"], &out).stdout)).unwrap();
    assert_eq!(stats["event_types"]["duration_complete"], slices);
    assert_eq!(stats["event_types"]["instant"], slices / 1000);
    assert_eq!(stats["event_types"]["counter"], slices / 500);
    let check = fxt(&["check"], &out);
    assert!(check.status.success(), "{}", text(&check.stdout));
    let top: serde_json::Value =
        serde_json::from_str(&text(&fxt(&["top", "--json", "--limit", "0"], &out).stdout)).unwrap();
    assert_eq!(top["slices"], slices);
    let names = top["names"].as_array().unwrap();
    // The driver and some of the 400 functions; recursion makes self time
    // less than total time somewhere.
    assert!(names.iter().any(|n| n["name"] == "main"));
    assert!(names.len() > 100, "{}", names.len());
    assert!(
        names
            .iter()
            .any(|n| n["self_ns"].as_u64() < n["total_ns"].as_u64())
    );
    let again = dir.path().join("t.fxt");
    TRACEKIT.ok(&[
        "fxt",
        "sample",
        "-o",
        again.to_str().unwrap(),
        "--slices",
        "30000",
        "--threads",
        "3",
        "-q",
    ]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
    if let Some((py_slices, _)) = tracekit_testutil::pyfxt_slices(&out) {
        assert_eq!(py_slices, slices, "PyPI fxt sees every slice");
    }
}
