//! `tracekit memtrace top|timeline|flamegraph|to-fxt|diff` end to end, on the memtrace
//! corpus. Expected totals come from the reference reader's dumps, parsed here
//! independently of tracekit's reader. Skipped when `TRACEKIT_CORPUS` is unset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::dump;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use tracekit_testutil::scratch;

use crate::{TRACEKIT, diff_line, folded_weights};

#[test]
fn top_json_totals_equal_the_dump() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (path, d) in &rows {
        let p = path.to_str().unwrap();
        let j: Value =
            serde_json::from_str(&TRACEKIT.ok(&["memtrace", "top", p, "--json"])).unwrap();
        let e = d.totals();
        let t = &j["totals"];
        let name = path.display();
        assert_eq!(t["allocs"], e.allocs, "{name}");
        assert_eq!(t["samples"], e.samples, "{name}");
        assert_eq!(t["minor_samples"], e.by_source[0], "{name}");
        assert_eq!(t["major_samples"], e.by_source[1], "{name}");
        assert_eq!(t["external_samples"], e.by_source[2], "{name}");
        assert_eq!(
            t["live_end_samples"],
            e.samples - e.collected_samples,
            "{name}"
        );
        assert_eq!(
            t["live_end_allocs"],
            e.allocs - e.collected_allocs,
            "{name}"
        );
        let bps = d.bytes_per_sample();
        let bytes = t["bytes"].as_f64().unwrap();
        assert!((bytes - e.samples as f64 * bps).abs() <= 0.5, "{name}");
        for (k, v) in [
            ("minor_bytes", 0),
            ("major_bytes", 1),
            ("external_bytes", 2),
        ] {
            let b = t[k].as_f64().unwrap();
            assert!((b - e.by_source[v] as f64 * bps).abs() <= 0.5, "{name} {k}");
        }
        // Sites (shown and summarised) add up to the totals.
        let mut samples = j["others"]["samples"].as_u64().unwrap();
        for s in j["sites"].as_array().unwrap() {
            samples += s["samples"].as_u64().unwrap();
        }
        assert_eq!(samples, e.samples, "{name}");
        assert_eq!(j["peak"]["samples"], d.peak().0, "{name}");
        assert_eq!(j["peak"]["exact"], true, "{name}");
    }
}

#[test]
fn top_at_and_peak() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (path, d) in &rows {
        let p = path.to_str().unwrap();
        let end = d.events.iter().map(|e| e.dt()).max().unwrap_or(0);
        let at = format!("{}us", end / 3);
        let j: Value =
            serde_json::from_str(&TRACEKIT.ok(&["memtrace", "top", p, "--json", "--at", &at]))
                .unwrap();
        assert_eq!(
            j["totals"]["live_at_samples"],
            d.live_at(end / 3),
            "{}",
            path.display()
        );
        assert_eq!(j["rank"], "live_at");
        let j: Value = serde_json::from_str(
            &TRACEKIT.ok(&["memtrace", "top", p, "--json", "--peak", "--limit", "0"]),
        )
        .unwrap();
        let (peak, peak_t) = d.peak();
        assert_eq!(j["totals"]["live_at_samples"], peak, "{}", path.display());
        assert_eq!(j["at_peak"], true);
        if peak > 0 {
            assert_eq!(j["at_s"].as_f64().unwrap(), peak_t as f64 / 1e6);
        }
        assert_eq!(j["others"]["sites"], 0);
    }
}

#[test]
fn top_filters() {
    let Some(t) = tracekit_testutil::corpus_path("memtrace/traces/mixed_v3.ctf") else {
        return;
    };
    let d = dump::load(
        &tracekit_testutil::corpus_path("memtrace")
            .unwrap()
            .join("expected/mixed_v3.dump.txt.gz"),
    );
    let p = t.to_str().unwrap();
    let sum = |f: &dyn Fn(&dump::DumpEvent) -> bool| -> u64 {
        d.events
            .iter()
            .filter(|e| f(e))
            .map(|e| match e {
                dump::DumpEvent::Alloc { nsamples, .. } => *nsamples,
                _ => 0,
            })
            .sum()
    };
    let run = |extra: &[&str]| -> Value {
        let mut args = vec!["memtrace", "top", p, "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&TRACEKIT.ok(&args)).unwrap()
    };
    let j = run(&["--source", "major"]);
    let expect = sum(&|e| matches!(e, dump::DumpEvent::Alloc { source: 1, .. }));
    assert_eq!(j["totals"]["samples"], expect);
    let j = run(&["--min-size", "64KiB"]);
    let expect = sum(&|e| matches!(e, dump::DumpEvent::Alloc { len, .. } if len * 8 >= 65536));
    assert_eq!(j["totals"]["samples"], expect);
    let j = run(&["--location", "ext_alloc"]);
    let expect = sum(
        &|e| matches!(e, dump::DumpEvent::Alloc { backtrace, .. } if backtrace.contains("ext_alloc")),
    );
    assert_eq!(j["totals"]["samples"], expect);
    let j = run(&["--between", "5ms", "10ms"]);
    let expect =
        sum(&|e| matches!(e, dump::DumpEvent::Alloc { dt, .. } if (5000..=10000).contains(dt)));
    assert_eq!(j["totals"]["samples"], expect);
    let j = run(&["--domain", "1"]);
    assert_eq!(j["totals"]["samples"], 0);
    let j = run(&["--by", "function", "--limit", "2"]);
    assert_eq!(j["sites"].as_array().unwrap().len(), 2);
    assert_eq!(j["by"], "function");
}

#[test]
fn flamegraph_folded_sums_to_the_total() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (path, d) in rows.iter().take(4) {
        let p = path.to_str().unwrap();
        let e = d.totals();
        let sum = |text: &str| -> u64 {
            text.lines()
                .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
                .sum()
        };
        let samples = TRACEKIT.ok(&["memtrace", "flamegraph", p, "--samples"]);
        assert_eq!(sum(&samples), e.samples, "{}", path.display());
        let bytes = TRACEKIT.ok(&["memtrace", "flamegraph", p]);
        let expect = (e.samples as f64 * d.bytes_per_sample()).round() as u64;
        assert_eq!(sum(&bytes), expect, "{}", path.display());
        let live = TRACEKIT.ok(&["memtrace", "flamegraph", p, "--live-end", "--samples"]);
        assert_eq!(sum(&live), e.samples - e.collected_samples);
    }
}

#[test]
fn flamegraph_and_timeline_svg() {
    let tmp = scratch();
    let Some(t) = tracekit_testutil::corpus_path("memtrace/traces/lists_hashtbl_v2.ctf") else {
        return;
    };
    let p = t.to_str().unwrap();
    let svg = tmp.join("fg.svg");
    let out = TRACEKIT.ok(&[
        "memtrace",
        "flamegraph",
        p,
        "--svg",
        svg.to_str().unwrap(),
        "--peak",
    ]);
    assert!(out.starts_with("wrote "), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("function flameZoom"));
    let plot = tmp.join("tl.svg");
    let out = TRACEKIT.ok(&["memtrace", "timeline", p, "--plot", plot.to_str().unwrap()]);
    assert!(out.contains("peak 5.38 MiB at 0.081311s"), "{out}");
    let text = std::fs::read_to_string(&plot).unwrap();
    assert!(text.contains("live heap (estimated) [MiB]"));
    let bad = TRACEKIT.run(&["memtrace", "timeline", p, "--plot", "out.png"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("only SVG output is supported"));
}

#[test]
fn timeline_csv_ends_at_live_end() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (path, d) in &rows {
        let csv = TRACEKIT.ok(&[
            "memtrace",
            "timeline",
            path.to_str().unwrap(),
            "--points",
            "50",
        ]);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(&header[..3], ["time_s", "live_bytes", "allocated_bytes"]);
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert!(rows.len() <= 50);
        let e = d.totals();
        let allocated: u64 = rows.iter().map(|r| r[6].parse::<u64>().unwrap()).sum();
        assert_eq!(allocated, e.samples, "{}", path.display());
        if let Some(last) = rows.last() {
            assert_eq!(
                last[5].parse::<u64>().unwrap(),
                e.samples - e.collected_samples
            );
        }
    }
}

fn pyfxt_counters(python: &str, file: &Path) -> Value {
    let script = r#"
import json, sys
from fxt import reader
with open(sys.argv[1], 'rb') as f:
    res = reader.parse_records(f)
assert not res.had_unexpected_eof, res.eof_error
out = []
for prov in res.records_by_provider.values():
    for r in prov.records:
        if type(r).__name__ == 'CounterEventRecord' and 'bytes' in r.args:
            out.append([r.timestamp_ns, r.name, r.args['bytes']])
print(json.dumps(out))
"#;
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn to_fxt_passes_fxt_check_and_pypi_fxt() {
    let tmp = scratch();
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    let python = tracekit_testutil::pyfxt();
    for (path, d) in &rows {
        let out = tmp.join("out.fxt");
        let o = out.to_str().unwrap();
        TRACEKIT.ok(&[
            "memtrace",
            "to-fxt",
            path.to_str().unwrap(),
            "-o",
            o,
            "--big",
            "10",
            "--points",
            "100",
        ]);
        let check = TRACEKIT.ok(&["fxt", "check", o]);
        assert!(check.contains("clean"), "{}: {check}", path.display());
        let Some(python) = &python else { continue };
        let counters = pyfxt_counters(&python.to_string_lossy(), &out);
        let bps = d.bytes_per_sample();
        for c in counters.as_array().unwrap().iter().step_by(5) {
            let t_us = c[0].as_u64().unwrap() / 1000;
            let name = c[1].as_str().unwrap();
            let value = c[2].as_i64().unwrap();
            let samples = match name.strip_prefix("live heap (domain ") {
                Some(rest) => d.live_at_domain(t_us, rest.trim_end_matches(')').parse().unwrap()),
                None => d.live_at(t_us),
            };
            assert_eq!(
                value,
                (samples as f64 * bps).round() as i64,
                "{} {name} at {t_us}",
                path.display()
            );
        }
    }
}

#[test]
fn diff_of_a_trace_with_itself_is_zero() {
    let Some(t) = tracekit_testutil::corpus_path("memtrace/traces/bigarrays_v2.ctf") else {
        return;
    };
    let p = t.to_str().unwrap();
    let j: Value =
        serde_json::from_str(&TRACEKIT.ok(&["memtrace", "diff", p, p, "--json"])).unwrap();
    for s in j["sites"].as_array().unwrap() {
        assert_eq!(s["allocated_bytes_change"], 0.0);
        assert_eq!(s["live_end_bytes_change"], 0.0);
    }
    let other = tracekit_testutil::corpus_path("memtrace/traces/lists_hashtbl_v2.ctf").unwrap();
    let table = TRACEKIT.ok(&[
        "memtrace",
        "diff",
        p,
        other.to_str().unwrap(),
        "--limit",
        "3",
    ]);
    assert!(table.contains("alloc A") && table.contains("(") && table.lines().count() > 5);
}

/// Two corpus traces of different programs, to compare.
fn two_traces() -> Option<(String, String)> {
    let path = |name: &str| tracekit_testutil::corpus_path(format!("memtrace/traces/{name}"));
    let (a, b) = (path("bigarrays_v2.ctf")?, path("lists_hashtbl_v2.ctf")?);
    Some((a.display().to_string(), b.display().to_string()))
}

/// `diff --at T` and `diff --peak` weigh each site by what `top --at` and
/// `top --peak` of each trace say is live then, and rank by that change.
#[test]
fn diff_weighs_live_at_a_time_and_at_each_peak_as_top_does() {
    let Some((a, b)) = two_traces() else {
        return;
    };
    let (a, b) = (a.as_str(), b.as_str());
    let json = |args: &[&str]| -> Value { serde_json::from_str(&TRACEKIT.ok(args)).unwrap() };
    for weigh in [&["--at", "0.05s"][..], &["--peak"][..]] {
        let top = |p: &str| {
            let mut args = vec!["memtrace", "top", "--json", "--limit", "0", p];
            args.extend_from_slice(weigh);
            let t = json(&args);
            let sites = t["sites"].as_array().unwrap().iter();
            sites
                .map(|s| {
                    (
                        s["site"].as_str().unwrap().to_string(),
                        s["live_at_bytes"].as_u64().unwrap(),
                    )
                })
                .collect::<std::collections::HashMap<String, u64>>()
        };
        let (ta, tb) = (top(a), top(b));
        let mut args = vec!["memtrace", "diff", "--json", "--limit", "0", a, b];
        args.extend_from_slice(weigh);
        let d = json(&args);
        assert_eq!(d["ranked_by"], "live_at", "{weigh:?}");
        let rows = d["sites"].as_array().unwrap();
        // `top --at` lists the sites live then; the diff lists every site.
        let listed: std::collections::HashSet<&str> =
            rows.iter().map(|r| r["site"].as_str().unwrap()).collect();
        assert!(
            ta.keys()
                .chain(tb.keys())
                .all(|s| listed.contains(s.as_str()))
        );
        let mut last = u64::MAX;
        for r in rows {
            let site = r["site"].as_str().unwrap();
            let (la, lb) = (
                r["live_at_bytes_a"].as_u64().unwrap(),
                r["live_at_bytes_b"].as_u64().unwrap(),
            );
            assert_eq!(la, ta.get(site).copied().unwrap_or(0), "{site} {weigh:?}");
            assert_eq!(lb, tb.get(site).copied().unwrap_or(0), "{site} {weigh:?}");
            let change = (lb as i64 - la as i64).unsigned_abs();
            assert!(change <= last, "ranked by the change live at the time");
            last = change;
        }
    }
    let table = TRACEKIT.ok(&["memtrace", "diff", a, b, "--peak", "--limit", "3"]);
    assert!(
        table.contains("live at A's ") && table.contains("live at A"),
        "{table}"
    );
}

/// `flamegraph --diff A B`: the differential stacks are each trace's stacks,
/// side by side; the JSON's functions and the SVG agree with them.
#[test]
fn flamegraph_diff_holds_both_traces_stacks() {
    let Some((a, b)) = two_traces() else {
        return;
    };
    let (a, b) = (a.as_str(), b.as_str());
    let (sa, sb) = (
        folded_weights(&TRACEKIT.ok(&["memtrace", "flamegraph", a, "--peak"])),
        folded_weights(&TRACEKIT.ok(&["memtrace", "flamegraph", b, "--peak"])),
    );
    let diff = TRACEKIT.ok(&["memtrace", "flamegraph", "--diff", a, b, "--peak"]);
    let mut seen = 0;
    for line in diff.lines() {
        let (stack, wa, wb) = diff_line(line);
        let get = |m: &std::collections::BTreeMap<String, u64>| m.get(stack).copied().unwrap_or(0);
        assert_eq!((wa, wb), (get(&sa), get(&sb)), "{stack}");
        seen += 1;
    }
    let union: std::collections::BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
    assert_eq!(seen, union.len());
    let json: Value = serde_json::from_str(&TRACEKIT.ok(&[
        "memtrace",
        "flamegraph",
        "--diff",
        a,
        b,
        "--peak",
        "--json",
    ]))
    .unwrap();
    assert_eq!(json["total"].as_u64(), Some(sb.values().sum()));
    assert_eq!(json["base_total"].as_u64(), Some(sa.values().sum()));
    let functions = json["functions"].as_array().unwrap();
    let change = |f: &Value| f["total"].as_i64().unwrap() - f["base_total"].as_i64().unwrap();
    assert!(
        functions
            .windows(2)
            .all(|w| change(&w[0]).abs() >= change(&w[1]).abs())
    );
    let tmp = scratch();
    let svg = tmp.join("d.svg");
    let out = TRACEKIT.ok(&[
        "memtrace",
        "flamegraph",
        "--diff",
        a,
        b,
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.starts_with("wrote "), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("red grew, blue shrank") && text.contains("; A "));
}

#[test]
fn bad_input_is_a_clear_error() {
    let tmp = scratch();
    let missing = TRACEKIT.run(&["memtrace", "top", "/nonexistent/trace.ctf"]);
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.starts_with("error: cannot open /nonexistent/trace.ctf"),
        "{err}"
    );
    let junk = tmp.join("junk.ctf");
    std::fs::write(
        &junk,
        b"not a trace at all, not even close....................................",
    )
    .unwrap();
    let out = TRACEKIT.run(&["memtrace", "top", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("junk.ctf: not a memtrace trace") && err.contains("it is text"),
        "{err}"
    );
    let out = TRACEKIT.run(&["memtrace", "top", "x.ctf", "--at", "12 parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    let help = TRACEKIT.ok(&["memtrace", "top", "--help"]);
    assert!(help.contains("Sizes are estimates in bytes"));
}

#[test]
fn damaged_trace_reports_what_it_read() {
    let tmp = scratch();
    // A trace that ends inside a packet header: the analysis covers the events before
    // it, says so on stderr, and exits 1.
    let Some(t) = tracekit_testutil::corpus_path("memtrace/traces/lists_hashtbl_v2.ctf") else {
        return;
    };
    let mut data = std::fs::read(&t).unwrap();
    data.extend_from_slice(&[0xC1, 0x1F, 0xFC, 0xC1, 0, 0]);
    let cut = tmp.join("cut.ctf");
    std::fs::write(&cut, &data).unwrap();
    let out = TRACEKIT.run(&["memtrace", "top", cut.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the results cover the 17132 events before it"),
        "{stderr}"
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["totals"]["allocs"], 8103);
}

#[test]
fn site_naming_past_rust_std_frames_leaves_ocaml_traces_alone() {
    let Some(rows) = dump::corpus_rows() else {
        return;
    };
    for (path, _) in &rows {
        let p = path.to_str().unwrap();
        for by in ["leaf", "function", "backtrace"] {
            let default =
                TRACEKIT.ok(&["memtrace", "top", p, "--json", "--limit", "0", "--by", by]);
            let innermost = TRACEKIT.ok(&[
                "memtrace",
                "top",
                p,
                "--json",
                "--limit",
                "0",
                "--by",
                by,
                "--std-frames",
            ]);
            assert_eq!(default, innermost, "{} --by {by}", path.display());
        }
    }
    // A pattern that names a real OCaml function moves its allocations to the caller.
    let Some(t) = tracekit_testutil::corpus_path("memtrace/traces/lists_hashtbl_v2.ctf") else {
        return;
    };
    let p = t.to_str().unwrap();
    let before = TRACEKIT.ok(&["memtrace", "top", p, "--limit", "0", "--by", "function"]);
    assert!(before.contains("Stdlib__Buffer.create"));
    let after = TRACEKIT.ok(&[
        "memtrace",
        "top",
        p,
        "--limit",
        "0",
        "--by",
        "function",
        "--skip-frames",
        "Stdlib__Buffer.",
    ]);
    assert!(!after.contains("Stdlib__Buffer.create"), "{after}");
}
