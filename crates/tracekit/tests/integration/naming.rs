//! What a Rust user sees of a program traced by tracekit-alloc: the
//! `heapdemo` program of `tracekit-alloc-demo` (closures, generic
//! iterators, `vec!` of a non-zero value, direct and indirect recursion),
//! every word sampled. Its sites are named (never `??`), closures under
//! their functions, without generic arguments; its stacks start at its
//! `main` and fold their recursion; one frame has one name in the command
//! line's, the view's, pprof's and SQL's answers; `top --by backtrace` shows
//! each backtrace once, from `main` to its site; `sql top-sites` names sites
//! as `memtrace top` does; and `go tool pprof` reads `to-pprof`'s profile with
//! `top`'s totals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::TRACEKIT;

/// The trace of `heapdemo` with every word sampled, made once.
fn trace() -> &'static Path {
    static TRACE: OnceLock<(tracekit_testutil::Scratch, PathBuf)> = OnceLock::new();
    let (_, path) = TRACE.get_or_init(|| traced("heapdemo"));
    path
}

/// The trace of the demo program `name` with every word sampled, in a
/// folder of its own.
fn traced(name: &str) -> (tracekit_testutil::Scratch, PathBuf) {
    let dir = tracekit_testutil::scratch();
    let path = dir.path().join(format!("{name}.ctf"));
    let out = Command::new(tracekit_testutil::demo_program(name))
        .env("MEMTRACE", &path)
        .env("MEMTRACE_RATE", "1")
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{name}: done\n")
    );
    (dir, path)
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&TRACEKIT.ok(args)).unwrap()
}

fn memtrace(args: &[&str]) -> String {
    let mut all = vec!["memtrace"];
    all.extend_from_slice(args);
    all.push(trace().to_str().unwrap());
    TRACEKIT.ok(&all)
}

fn site_names(top: &Value) -> Vec<String> {
    top["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn functions_are_named_closures_under_their_function_without_generics() {
    let t = trace().to_str().unwrap();
    let top = json(&["memtrace", "top", "--by", "function", "--json", t]);
    let names = site_names(&top);
    assert_eq!(
        names[..4],
        [
            "heapdemo::churn::{closure#0}",
            "heapdemo::ping",
            "heapdemo::nest",
            "heapdemo::tables"
        ],
        "{names:?}"
    );
    assert!(names.contains(&"heapdemo::tables::{closure#0}".to_owned()));
    // A closure bound to a name and called in place, inlined: nothing but
    // its place in the code says whose it is.
    assert!(
        names.contains(&"heapdemo::churn_with_closure::{closure#0}".to_owned()),
        "{names:?}"
    );
    for n in &names {
        assert!(!n.contains("??") && !n.contains('<'), "{n}");
        // The program's own: none of the tracer's allocations (starting its
        // thread, reading /proc) is sampled.
        assert!(n.starts_with("heapdemo::"), "{n}");
    }
    // Every frame of every stack is named, none with a closure's type.
    let stacks = memtrace(&["flamegraph", "--all-frames"]);
    for frame in stacks
        .lines()
        .flat_map(|l| l.rsplit_once(' ').unwrap().0.split(';'))
    {
        assert!(
            !frame.starts_with("??") && !frame.contains("{closure_env"),
            "{frame}"
        );
    }
    // Generic arguments are there when asked for.
    let full = memtrace(&["flamegraph", "--full-names"]);
    assert!(full.contains("from_elem<u64>"), "{full}");
    assert!(!memtrace(&["flamegraph"]).contains("from_elem<"));
}

#[test]
fn stacks_start_at_main_and_fold_their_recursion() {
    let stacks = memtrace(&["flamegraph"]);
    let lines: Vec<&str> = stacks.lines().collect();
    assert!(lines.len() > 5);
    for l in &lines {
        assert!(l.starts_with("heapdemo::main;"), "{l}");
        // Folded: no function twice on a stack.
        let frames: Vec<&str> = l.rsplit_once(' ').unwrap().0.split(';').collect();
        let mut distinct = frames.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), frames.len(), "{l}");
    }
    // `ping` calls `pong` calls `ping` ... calls `vec!`: the innermost `ping`
    // joins the outermost, and the allocation is its.
    assert!(
        stacks.contains("heapdemo::main;heapdemo::ping;from_elem"),
        "{stacks}"
    );
    assert!(
        stacks.contains("heapdemo::main;heapdemo::nest;from_elem"),
        "{stacks}"
    );
    // Everything, when asked.
    let all = memtrace(&["flamegraph", "--all-frames", "--no-collapse-recursion"]);
    assert!(all.lines().all(|l| !l.starts_with("heapdemo::main;")));
    assert!(all.contains("heapdemo::nest;heapdemo::nest;heapdemo::nest;"));
    // The recursion deeper than a screen is folded by default, kept when asked.
    let kept = memtrace(&["flamegraph", "--no-collapse-recursion"]);
    assert!(kept.lines().all(|l| l.starts_with("heapdemo::main;")));
    assert!(kept.contains("heapdemo::ping;heapdemo::pong;heapdemo::ping;"));
    // Hot paths write a recursive run once, with its count.
    let hot = memtrace(&["hot-paths", "--no-collapse-recursion"]);
    assert!(hot.contains("heapdemo::main > heapdemo::nest ×"), "{hot}");
    assert!(hot.contains("(heapdemo::ping > heapdemo::pong) ×"), "{hot}");
}

#[test]
fn one_frame_has_one_name_everywhere() {
    let t = trace().to_str().unwrap();
    let folded = crate::folded_weights(&memtrace(&["flamegraph"]));
    let cli: BTreeSet<&str> = folded.keys().flat_map(|s| s.split(';')).collect();
    // Methods keep their type, whichever way their symbol is mangled, and
    // the closure is under its function.
    for name in [
        "alloc::raw_vec::RawVecInner::try_allocate_in",
        "alloc::vec::Vec::with_capacity",
        "heapdemo::churn_with_closure::{closure#0}",
    ] {
        assert!(cli.contains(name), "{name} in {cli:?}");
    }
    assert!(
        !cli.iter()
            .any(|n| n.starts_with("<alloc::raw_vec::RawVecInner>"))
    );

    // The view's flame graph: every node it keeps is the command line's
    // stack prefix, with the command line's weight.
    let mut prefixes: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, w) in &folded {
        let frames: Vec<&str> = stack.split(';').collect();
        for n in 1..=frames.len() {
            *prefixes.entry(frames[..n].join(";")).or_default() += w;
        }
    }
    let server = crate::view::Server::start(&[trace()]);
    let tree = server.json("flametree", &["--min-share", "0"]);
    let nodes = tree["nodes"].as_array().unwrap();
    let mut paths: Vec<String> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let name = n["name"].as_str().unwrap();
        let path = match n["parent"].as_i64().unwrap() {
            -1 => String::new(),
            0 => name.to_owned(),
            p => format!("{};{name}", paths[p as usize]),
        };
        if i > 0 {
            assert_eq!(
                prefixes.get(&path),
                Some(&n["total"].as_u64().unwrap()),
                "{path}"
            );
        }
        paths.push(path);
    }
    assert_eq!(paths.len(), prefixes.len() + 1, "the view keeps every node");
    let hot = server.json("hot-paths", &[]);
    for p in hot["paths"].as_array().unwrap() {
        for f in p["frames"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(cli.contains(f), "hot path frame {f}");
        }
    }

    // pprof: the functions are the command line's, as `go tool pprof` shows
    // them (its stacks are whole: recursion is for readers to fold).
    let whole = crate::folded_weights(&memtrace(&["flamegraph", "--no-collapse-recursion"]));
    let cli: BTreeSet<&str> = whole.keys().flat_map(|s| s.split(';')).collect();
    let dir = tracekit_testutil::scratch();
    let profile = dir.path().join("heap.pb.gz");
    memtrace(&["to-pprof", "-o", profile.to_str().unwrap()]);
    let read = tracekit_pprof::read(&std::fs::read(&profile).unwrap()).unwrap();
    let pprof: BTreeSet<&str> = read
        .function
        .iter()
        .map(|f| read.string_table[f.name as usize].as_str())
        .collect();
    assert_eq!(pprof, cli);
    if let Some(go) = tracekit_testutil::go() {
        let go_top = |profile: &Path| {
            let out = Command::new(&go)
                .args(["tool", "pprof", "-top", "-nodecount=1000"])
                .args(["-nodefraction=0", "-sample_index=alloc_space"])
                .arg(profile)
                .env("HOME", dir.path())
                .output()
                .expect("run go tool pprof");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let shown = go_top(&profile);
        for name in &cli {
            assert!(
                shown.contains(&format!("  {name}\n")),
                "go shows {name}: {shown}"
            );
        }
        // Generic arguments, when asked for, are not simplified away.
        let full = dir.path().join("full.pb.gz");
        memtrace(&["to-pprof", "--full-names", "-o", full.to_str().unwrap()]);
        let shown = go_top(&full);
        assert!(shown.contains("  from_elem<u64>\n"), "{shown}");
    }

    // SQL: each location's `name` column.
    let rows = json(&[
        "sql",
        "--json",
        "select distinct name from locations where name is not null",
        t,
    ]);
    let sql: BTreeSet<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let missing: Vec<&&str> = cli.iter().filter(|n| !sql.contains(*n)).collect();
    assert!(missing.is_empty(), "not in SQL: {missing:?}");
}

#[test]
fn top_by_backtrace_shows_each_backtrace_once_from_main_to_its_site() {
    let t = trace().to_str().unwrap();
    let top = json(&[
        "memtrace",
        "top",
        "--by",
        "backtrace",
        "--json",
        "--limit",
        "0",
        t,
    ]);
    let sites = top["sites"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    for s in sites {
        let site = s["site"].as_str().unwrap();
        let bt: Vec<&str> = s["backtrace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(bt[0].starts_with("heapdemo::main@"), "{bt:?}");
        assert_eq!(*bt.last().unwrap(), site, "{bt:?}");
        assert!(seen.insert(bt.clone()), "twice: {bt:?}");
    }
    // The closure's backtrace: its function, then the closure.
    let text = memtrace(&["top", "--by", "backtrace"]);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("from main to the allocation site"))
        .collect();
    let at = rows
        .iter()
        .position(|l| l.contains("> heapdemo::churn_with_closure::{closure#0}@"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        rows[at - 1].contains("> heapdemo::churn_with_closure@"),
        "{text}"
    );
    assert!(rows[at - 2].contains("heapdemo::main@"), "{text}");
    // Nothing inside the site: the next line is the next row.
    assert!(
        !rows
            .get(at + 1)
            .is_some_and(|l| l.trim_start().starts_with('>')),
        "{text}"
    );
    // Recursion is written once, with its count.
    assert!(
        rows.iter()
            .any(|l| l.contains("> heapdemo::nest@") && l.ends_with(" ×150")),
        "{text}"
    );
}

#[test]
fn sql_top_sites_names_sites_as_memtrace_top() {
    let t = trace().to_str().unwrap();
    let top = json(&["memtrace", "top", "--json", t]);
    let rows = json(&["sql", "top-sites", "--json", t]);
    let rows = rows.as_array().unwrap();
    let sites = top["sites"].as_array().unwrap();
    assert!(rows.len() >= 5);
    for (row, site) in rows.iter().zip(sites).take(5) {
        assert_eq!(row["site"], site["site"]);
        assert_eq!(row["bytes"], site["bytes"]);
        assert_eq!(row["allocations"], site["allocs"]);
    }
}

#[test]
fn go_tool_pprof_reads_the_heap_profile_with_top_s_totals() {
    let dir = tracekit_testutil::scratch();
    let profile = dir.path().join("heap.pb.gz");
    memtrace(&["to-pprof", "-o", profile.to_str().unwrap()]);
    let read = tracekit_pprof::read(&std::fs::read(&profile).unwrap()).unwrap();
    let s = |i: i64| read.string_table[i as usize].as_str();
    let types: Vec<&str> = read.sample_type.iter().map(|t| s(t.r#type)).collect();
    assert_eq!(
        types,
        [
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space"
        ]
    );
    let top = json(&["memtrace", "top", "--json", trace().to_str().unwrap()]);
    let t = &top["totals"];
    let expected = [
        t["allocs"].as_i64().unwrap(),
        t["bytes"].as_i64().unwrap(),
        t["live_end_allocs"].as_i64().unwrap(),
        t["live_end_bytes"].as_i64().unwrap(),
    ];
    assert!(expected[3] > 0, "heapdemo keeps some blocks to the end");
    let mut sums = [0i64; 4];
    for sample in &read.sample {
        for (sum, v) in sums.iter_mut().zip(&sample.value) {
            *sum += v;
        }
    }
    assert_eq!(sums, expected);
    let Some(go) = tracekit_testutil::go() else {
        return;
    };
    let out = Command::new(go)
        .args(["tool", "pprof", "-raw"])
        .arg(&profile)
        .env("HOME", dir.path())
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8_lossy(&out.stdout);
    // `go tool pprof -raw`: after "Samples:" and the types' line, one line per
    // sample, its values then `: location ids`.
    let mut go_sums = [0i64; 4];
    let samples = raw
        .split("Samples:")
        .nth(1)
        .unwrap()
        .split("Locations")
        .next()
        .unwrap();
    for line in samples.lines().skip(2) {
        let Some((values, _)) = line.split_once(':') else {
            continue;
        };
        for (sum, v) in go_sums.iter_mut().zip(values.split_whitespace()) {
            *sum += v.parse::<i64>().unwrap();
        }
    }
    assert_eq!(go_sums, expected, "{raw}");
    assert!(raw.contains("heapdemo::churn::{closure#0}"), "{raw}");
}

/// Stacks deeper than the tracer keeps (`deepstack`: 1,500 frames of
/// recursion) start at a `[truncated N frames]` root, N the frames left out;
/// a shallow stack of the same program still starts at `main`, and the cut
/// stack's site is still its innermost frame.
#[test]
fn a_cut_stack_starts_at_a_truncation_mark() {
    let (_dir, path) = traced("deepstack");
    let p = path.to_str().unwrap();
    let folded = TRACEKIT.ok(&["memtrace", "flamegraph", p]);
    let (mut cut, mut whole) = (0, 0);
    for line in folded.lines() {
        let root = line.split(';').next().unwrap();
        if line.contains("deepstack::dive") {
            let n: u64 = root
                .strip_prefix("[truncated ")
                .and_then(|r| r.strip_suffix(" frames]"))
                .unwrap_or_else(|| panic!("a cut stack starts at its mark: {root}"))
                .parse()
                .unwrap();
            // 1,500 levels and the frames above and below them, less the
            // 1,023 kept.
            assert!(
                (1500 - 1023..1500 - 1023 + 60).contains(&n),
                "{n} frames left out"
            );
            cut += 1;
        } else if line.contains("deepstack::shallow") {
            assert_eq!(root, "deepstack::main", "{line}");
            whole += 1;
        }
    }
    assert!(cut > 0 && whole > 0, "{folded}");
    let top = json(&["memtrace", "top", "--by", "function", "--json", p]);
    let sites = site_names(&top);
    assert!(sites.contains(&"deepstack::dive".to_string()), "{sites:?}");
}
