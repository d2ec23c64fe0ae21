//! `tracekit sql` end to end on exports of the memtrace corpus: the shipped queries
//! agree with `memtrace top` and `memtrace diff`, traces can be queried without an
//! explicit export, and two independent readers see the same files: PyPI `pyarrow`
//! reads every table with the documented schema, and Spark (PyPI `pyspark`, local
//! mode) answers the "top sites across traces" query with the same rows as
//! `tracekit sql`. The Python cross-checks use `target/pyspark-venv` (made by
//! `.ci/run`) and skip without it. Skipped when `TRACEKIT_CORPUS` is unset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::TRACEKIT;

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&TRACEKIT.ok(args)).unwrap()
}

/// Traces with allocations at sites they share (the lists_hashtbl copies) and
/// others of their own.
const TRACES: [&str; 4] = [
    "lists_hashtbl_v2.ctf",
    "lists_hashtbl_v3copy.ctf",
    "mixed_v3.ctf",
    "bigarrays_v2.ctf",
];

fn export(files: &[PathBuf], dir: &Path) {
    let mut args = vec!["export".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend([
        "-o".to_string(),
        dir.display().to_string(),
        "-q".to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    TRACEKIT.ok(&args);
}

/// `site -> bytes` of `memtrace top --json --limit 0` over `trace`.
fn top_bytes(trace: &Path) -> BTreeMap<String, u64> {
    let top = json(&[
        "memtrace",
        "top",
        trace.to_str().unwrap(),
        "--json",
        "--limit",
        "0",
    ]);
    top["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["site"] != "[empty backtrace]")
        .map(|s| {
            (
                s["site"].as_str().unwrap().to_string(),
                s["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn top_sites_across_traces_is_the_sum_of_each_trace_s_top() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let files: Vec<PathBuf> = TRACES.iter().map(|t| dir.join(t)).collect();
    let mut expected: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for f in &files {
        for (site, bytes) in top_bytes(f) {
            let e = expected.entry(site).or_default();
            e.0 += bytes;
            e.1 += 1;
        }
    }
    // The traces themselves, their tables in memory.
    let mut args = vec!["sql", "top-sites", "--json"];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let rows = json(&args);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 20);
    let mut ranked: Vec<(&String, &(u64, u64))> = expected.iter().collect();
    ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    for (row, (site, (bytes, traces))) in rows.iter().zip(ranked) {
        assert_eq!(row["site"], **site);
        assert_eq!(row["bytes"], *bytes, "{site}");
        assert_eq!(row["traces"], *traces, "{site}");
    }
}

#[test]
fn a_query_over_two_traces_equals_memtrace_diff() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let (a, b) = (dir.join("lists_hashtbl_v2.ctf"), dir.join("mixed_v3.ctf"));
    let tmp = tracekit_testutil::scratch();
    let (da, db) = (tmp.path().join("before"), tmp.path().join("after"));
    export(std::slice::from_ref(&a), &da);
    export(std::slice::from_ref(&b), &db);
    let diff = json(&[
        "memtrace",
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        "--limit",
        "0",
    ]);
    let mut expected = BTreeMap::new();
    for s in diff["sites"].as_array().unwrap() {
        let site = s["site"].as_str().unwrap().to_string();
        if site != "[empty backtrace]" {
            expected.insert(
                site,
                (
                    s["allocated_bytes_a"].as_u64().unwrap(),
                    s["allocated_bytes_b"].as_u64().unwrap(),
                ),
            );
        }
    }
    // Every site, both sides, as the shipped query computes them (without its limit).
    let named = tracekit_sql::named("share-growth").unwrap();
    let datasets = [
        tracekit_sql::Dataset::parse(&format!("before={}", da.display())),
        tracekit_sql::Dataset::parse(&format!("after={}", db.display())),
    ];
    let sql = named.render(&datasets).unwrap().replace("LIMIT 20", "");
    // Without its comment line, which the command line would take for an option.
    let sql: String = sql.lines().skip(1).collect::<Vec<_>>().join("\n");
    let over_a = format!("before={}", da.display());
    let over_b = format!("after={}", db.display());
    let rows = json(&["sql", &sql, "--over", &over_a, "--over", &over_b, "--json"]);
    let got: BTreeMap<String, (u64, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["site"].as_str().unwrap().to_string(),
                (
                    r["bytes_a"].as_u64().unwrap(),
                    r["bytes_b"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(got, expected);
    // The named query itself: its 20 rows, by growth of share.
    let rows = json(&[
        "sql",
        "share-growth",
        "--over",
        &over_a,
        "--over",
        &over_b,
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 20);
    let change: Vec<f64> = rows
        .iter()
        .map(|r| r["share_change"].as_f64().unwrap())
        .collect();
    assert!(change.windows(2).all(|w| w[0] >= w[1]), "{change:?}");
    // mixed_v3's sites are all new: the first grew from nothing.
    assert_eq!(rows[0]["bytes_a"], 0);
}

#[test]
fn live_at_end_per_executable_equals_top_s_live_bytes() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let files: Vec<PathBuf> = TRACES.iter().map(|t| dir.join(t)).collect();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for f in &files {
        let top = json(&["memtrace", "top", f.to_str().unwrap(), "--json"]);
        let info = json(&["memtrace", "info", f.to_str().unwrap(), "--json"]);
        let exe = info["executable_name"].as_str().unwrap().to_string();
        *expected.entry(exe).or_default() += top["totals"]["live_end_bytes"].as_u64().unwrap();
    }
    let tmp = tracekit_testutil::scratch();
    export(&files, tmp.path());
    let over = tmp.path().display().to_string();
    let rows = json(&["sql", "live-at-end", "--over", &over, "--json"]);
    let got: BTreeMap<String, u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["executable"].as_str().unwrap().to_string(),
                r["live_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    expected.retain(|_, v| *v > 0);
    assert_eq!(got, expected);
}

/// The tables of memtrace and FXT traces.
const TABLES: &[&str] = &[
    "traces",
    "allocations",
    "backtraces",
    "locations",
    "slices",
    "instants",
    "counters",
];

/// A query's JSON rows in a fixed order (rows that tie in an `ORDER BY` may come
/// in any).
fn sorted_rows(answer: Value) -> Vec<String> {
    let mut rows: Vec<String> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    rows.sort();
    rows
}

#[test]
fn traces_queried_in_memory_answer_as_their_export_and_write_no_file() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let Some(fxt) = tracekit_testutil::corpus_path("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let files = [dir.join("mixed_v3.ctf"), dir.join("bigarrays_v2.ctf"), fxt];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let tmp = tracekit_testutil::scratch();
    let exported = tmp.path().join("exported");
    export(&files, &exported);
    // Any temporary file would land here.
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let over = format!("traces={}", exported.display());
    for table in TABLES {
        let sql = format!("SELECT * FROM {table}");
        let mut args = vec!["sql", sql.as_str(), "--json"];
        args.extend(names.iter().map(String::as_str));
        let out = TRACEKIT
            .command()
            .args(&args)
            .env("TMPDIR", &scratch)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let in_memory = sorted_rows(serde_json::from_slice(&out.stdout).unwrap());
        let from_files = sorted_rows(json(&["sql", &sql, "--json", "--over", &over]));
        assert!(!in_memory.is_empty(), "{table}");
        assert_eq!(in_memory, from_files, "{table}");
    }
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}

#[test]
fn answers_print_as_a_table_csv_or_json_and_errors_are_named() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let trace = dir.join("mixed_v3.ctf");
    let t = trace.to_str().unwrap();
    let sql = "SELECT count(*) AS allocations, sum(nsamples) AS samples FROM allocations";
    let table = TRACEKIT.ok(&["sql", sql, t]);
    assert!(table.contains("| allocations | samples |"), "{table}");
    assert!(table.contains("| 2282        | 15507   |"), "{table}");
    assert!(table.ends_with("(1 rows)\n"), "{table}");
    assert_eq!(
        TRACEKIT.ok(&["sql", sql, t, "--csv"]),
        "allocations,samples\n2282,15507\n"
    );
    assert_eq!(
        json(&["sql", sql, t, "--json"]),
        serde_json::json!([{"allocations": 2282, "samples": 15507}])
    );
    // SQL opening with a `--` comment is the query, not an option; options still
    // come before it.
    let commented = format!("-- how many?\n{sql}");
    assert_eq!(
        TRACEKIT.ok(&["sql", "--csv", &commented, t]),
        "allocations,samples\n2282,15507\n"
    );
    let list = TRACEKIT.ok(&["sql", "--list"]);
    for q in tracekit_sql::NAMED {
        assert!(list.contains(q.name), "{list}");
    }
    let bad = TRACEKIT.run(&["sql", "SELECT nope FROM allocations", t]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nope"));
    let tmp = tracekit_testutil::scratch();
    let empty = tmp.path().display().to_string();
    let none = TRACEKIT.run(&["sql", sql, "--over", &empty]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no exported tables there"));
    let two = TRACEKIT.run(&["sql", "share-growth", t]);
    assert!(String::from_utf8_lossy(&two.stderr).contains("give two"));
}

/// The footer's metadata length in Parquet `bytes`.
fn metadata_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize
}

#[test]
fn a_damaged_parquet_file_is_named_and_never_a_panic() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let tmp = tracekit_testutil::scratch();
    let out = tmp.path().join("fleet");
    export(&[dir.join("mixed_v3.ctf")], &out);
    let files: Vec<PathBuf> = std::fs::read_dir(out.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let file = &files[0];
    let intact = std::fs::read(file).unwrap();
    let n = intact.len();
    let meta = n - 8 - metadata_len(&intact);
    let with_len = |len: u32| {
        let mut b = intact.clone();
        b[n - 8..n - 4].copy_from_slice(&len.to_le_bytes());
        b
    };
    let flipped = |at: usize| {
        let mut b = intact.clone();
        b[at] ^= 0xff;
        b
    };
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("cut short", intact[..n - 3].to_vec()),
        ("cut in half", intact[..n / 2].to_vec()),
        ("footer length past the file", with_len(u32::MAX)),
        (
            "footer length short of the metadata",
            with_len((n - meta - 8 - 7) as u32),
        ),
        (
            "footer length past the metadata",
            with_len((n - meta - 8 + 9) as u32),
        ),
        ("metadata's first byte flipped", flipped(meta)),
        ("metadata's last byte flipped", flipped(n - 9)),
    ];
    let over = out.display().to_string();
    for (what, bytes) in damages {
        std::fs::write(file, &bytes).unwrap();
        let o = TRACEKIT.run(&["sql", "SELECT count(*) FROM traces", "--over", &over]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.starts_with(&format!("error: {}: ", file.display())),
            "{what}: {err}"
        );
        assert!(!err.contains("panicked"), "{what}: {err}");
    }
}

fn python(script: &str, args: &[&str]) -> Option<String> {
    let python = tracekit_testutil::pyspark()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/spark")
        .join(script);
    let o = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8(o.stdout).unwrap())
}

#[test]
fn pyarrow_reads_every_table_with_the_documented_schema() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let tmp = tracekit_testutil::scratch();
    let mut files: Vec<PathBuf> = TRACES.iter().map(|t| dir.join(t)).collect();
    if let Some(fxt) = tracekit_testutil::corpus_path("fxt/jst_tracing_demo.fxt") {
        files.push(fxt);
    }
    files.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tracekit-perf/tests/data/recording_dwarf.data"),
    );
    export(&files, tmp.path());
    let Some(out) = python("schema.py", &[tmp.path().to_str().unwrap()]) else {
        return;
    };
    let seen: Value = serde_json::from_str(&out).unwrap();
    for table in tracekit_export::schema::TABLES {
        let columns: Vec<Value> = table
            .columns
            .iter()
            .map(|c| {
                let ty = match c.ty {
                    tracekit_export::schema::Type::String => "string",
                    tracekit_export::schema::Type::Int32 => "int32",
                    tracekit_export::schema::Type::Int64 => "int64",
                    tracekit_export::schema::Type::Double => "double",
                    tracekit_export::schema::Type::Boolean => "bool",
                };
                serde_json::json!([c.name, ty, c.nullable])
            })
            .collect();
        assert_eq!(seen[table.name], Value::Array(columns), "{}", table.name);
    }
    assert_eq!(seen["rows"]["traces"], files.len());
}

#[test]
fn spark_answers_top_sites_with_the_same_rows() {
    let Some(dir) = tracekit_testutil::corpus_path("memtrace/traces") else {
        return;
    };
    let tmp = tracekit_testutil::scratch();
    let files: Vec<PathBuf> = TRACES.iter().map(|t| dir.join(t)).collect();
    export(&files, tmp.path());
    let query = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracekit-sql/queries/top-sites.sql");
    let over = tmp.path().display().to_string();
    let Some(spark) = python("run_query.py", &[query.to_str().unwrap(), &over]) else {
        return;
    };
    let spark: Value = serde_json::from_str(&spark).unwrap();
    let ours = json(&["sql", "top-sites", "--over", &over, "--json"]);
    assert_eq!(spark.as_array().unwrap().len(), 20);
    assert_eq!(spark, ours);
}
