//! Traces the bundled workload program (`tracekit-alloc-demo`) and checks the trace against the
//! ground truth the workload counts itself: the estimated bytes (allocated
//! overall and live at exit) within 5 %, and the top allocation sites in the
//! workload's own functions and lines.

use super::common;

use std::collections::HashMap;
use std::process::Command;

/// Gives thousands of samples of the live set (about 40 MB live at exit:
/// ~10 000 samples, so one standard deviation is about 1 %).
const RATE: &str = "2e-3";

fn field(json: &str, name: &str) -> f64 {
    let key = format!("\"{name}\": ");
    let start = json
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {json}"))
        + key.len();
    let rest = &json[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("bad {name} in {json}"))
}

#[test]
fn default_build() {
    // Rust omits frame pointers by default: the DWARF unwinder is used.
    check(&common::example("workload"), "dwarf", "workload.ctf");
}

#[test]
fn frame_pointer_build() {
    // Built with -C force-frame-pointers=yes: the frame-pointer walk is used.
    check(
        &common::example_with_frame_pointers("workload"),
        "fp",
        "workload-fp.ctf",
    );
}

fn check(binary: &std::path::Path, unwinder: &str, trace_name: &str) {
    let scratch = tracekit_testutil::scratch();
    let trace_path = scratch.join(trace_name);
    let out = Command::new(binary)
        .env("MEMTRACE", &trace_path)
        .env("MEMTRACE_RATE", RATE)
        .output()
        .expect("run workload");
    assert!(
        out.status.success(),
        "workload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let allocated = field(&json, "allocated_bytes");
    let live = field(&json, "live_bytes_at_exit");

    let trace = common::read_trace(&trace_path);
    assert_eq!(trace.warnings, 0);
    assert_eq!(trace.info.sample_rate, 2e-3);
    assert_eq!(trace.info.word_size, 64);
    let params = trace.info.ocaml_runtime_params.to_str_lossy().into_owned();
    assert!(
        params.contains(&format!(" unwinder={unwinder} ")),
        "runtime params {params:?}"
    );
    // The session's clock, for joining other tracers of the process on it.
    let offset: i64 = params
        .split_once("monotonic_offset_us=")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("runtime params {params:?}"));
    assert!(offset > 0, "wall clock minus monotonic clock: {offset}");
    let est_allocated = trace.estimate(|_| true);
    let est_live = trace.estimate(|a| !a.collected);
    let err_allocated = (est_allocated - allocated) / allocated;
    let err_live = (est_live - live) / live;
    println!("{unwinder}: ground truth: {json}");
    println!(
        "samples: {} allocs, {} collects; allocated {est_allocated:.0} ({:+.2}%), live at exit {est_live:.0} ({:+.2}%)",
        trace.allocs.len(),
        trace.collects,
        100.0 * err_allocated,
        100.0 * err_live
    );
    assert!(
        trace.allocs.len() > 10_000,
        "too few samples: {}",
        trace.allocs.len()
    );
    assert!(
        err_allocated.abs() < 0.05,
        "allocated estimate off by {:.2}%",
        100.0 * err_allocated
    );
    assert!(
        err_live.abs() < 0.05,
        "live-at-exit estimate off by {:.2}%",
        100.0 * err_live
    );

    // Several threads: the workers' allocations are in their own domains.
    let domains: std::collections::BTreeSet<u16> = trace.allocs.iter().map(|a| a.domain).collect();
    assert!(domains.len() >= 5, "domains {domains:?}");

    // Top sites: the innermost frame in the workload's source, by estimated
    // bytes. Every sample must have one, and the top ones must be the
    // workload's allocating functions, at lines inside those functions.
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tracekit-alloc-demo/src/bin/workload.rs"
    ))
    .expect("workload source");
    let mut sites: HashMap<(String, u32), u64> = HashMap::new();
    let mut without_site = 0;
    for a in &trace.allocs {
        match trace.innermost_in(a, "bin/workload.rs") {
            Some(site) => *sites.entry(site).or_default() += a.nsamples,
            None => without_site += a.nsamples,
        }
    }
    let total: u64 = trace.allocs.iter().map(|a| a.nsamples).sum();
    assert!(
        (without_site as f64) < 0.01 * total as f64,
        "{without_site} of {total} samples have no workload frame"
    );
    let mut top: Vec<_> = sites.into_iter().collect();
    top.sort_by_key(|s| std::cmp::Reverse(s.1));
    println!("top sites (innermost workload frame, estimated MB):");
    for ((f, line), n) in top.iter().take(8) {
        let mb = *n as f64 * 8.0 / 2e-3 / 1e6;
        println!("  {mb:8.1} MB  {f} at workload.rs:{line}");
    }
    let expected = [
        "workload::scratch_buffers",
        "workload::grow_series",
        "workload::build_log_lines",
        "workload::count_words",
        "workload::build_index",
        "workload::insert_node",
    ];
    for ((f, line), _) in top.iter().take(5) {
        let name = f.rsplit("::").next().unwrap_or(f);
        assert!(
            expected.iter().any(|e| e.ends_with(&format!("::{name}"))),
            "unexpected top site {f}"
        );
        // The line must be inside that function's body in the source.
        let start = source
            .lines()
            .position(|l| l.starts_with(&format!("fn {name}(")))
            .unwrap_or_else(|| panic!("fn {name} not in source")) as u32
            + 1;
        let end = source
            .lines()
            .enumerate()
            .skip(start as usize)
            .find(|(_, l)| *l == "}")
            .map(|(i, _)| i as u32 + 1)
            .unwrap_or(u32::MAX);
        assert!(
            (start..=end).contains(line),
            "{f} at line {line}, outside {start}..={end}"
        );
    }
}
