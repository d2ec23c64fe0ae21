//! A memtrace trace's answers, before and after its tables are decoded.

use super::*;
use std::sync::Mutex;
use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

/// A synthetic trace of `config`, served.
fn synthetic(config: SynthConfig) -> Trace {
    let bytes = write_synthetic(Vec::new(), &config).unwrap();
    Trace::new("t".into(), TraceBytes::new(bytes)).unwrap()
}

/// `endpoint`'s answer to `args` about `trace` (nothing compared), parsed.
fn ask_json(trace: &Trace, endpoint: Endpoint, args: &[&str]) -> serde_json::Value {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    serde_json::from_str(&answer(trace, None, endpoint, &args).unwrap()).unwrap()
}

#[test]
fn functions_are_weighed_as_the_flame_graphs_stacks_say() {
    let trace = synthetic(SynthConfig {
        allocs: 3000,
        recursive: true,
        ..SynthConfig::default()
    });
    let ask = |e: Endpoint, args: &[&str]| ask_json(&trace, e, args);
    let stacks = ask(Endpoint::Flamegraph, &["--peak"]);
    let mut want: std::collections::HashMap<String, (u64, u64)> = Default::default();
    for s in stacks["stacks"].as_array().unwrap() {
        let frames: Vec<&str> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let w = s["weight"].as_u64().unwrap();
        let distinct: std::collections::HashSet<&str> = frames.iter().copied().collect();
        for f in distinct {
            want.entry(f.to_string()).or_default().0 += w;
        }
        if let Some(leaf) = frames.last() {
            want.entry(leaf.to_string()).or_default().1 += w;
        }
    }
    for sort in ["total", "self"] {
        let got = ask(
            Endpoint::Functions,
            &["--peak", "--sort", sort, "--limit", "0"],
        );
        let rows = got["functions"].as_array().unwrap();
        assert_eq!(rows.len(), want.len());
        assert_eq!(got["count"].as_u64(), Some(want.len() as u64));
        let mut last = u64::MAX;
        for r in rows {
            let name = r["name"].as_str().unwrap();
            let (total, own) = (r["total"].as_u64().unwrap(), r["self"].as_u64().unwrap());
            assert_eq!(want[name], (total, own), "{name}");
            let key = if sort == "self" { own } else { total };
            assert!(key <= last, "sorted by {sort}");
            last = key;
        }
    }
    let top = ask(Endpoint::Functions, &["--peak", "--limit", "5"]);
    assert_eq!(top["functions"].as_array().unwrap().len(), 5);
    assert!(
        answer(
            &trace,
            None,
            Endpoint::Functions,
            &["--sort".into(), "x".into()]
        )
        .is_err()
    );
}

#[test]
fn answers_are_the_same_before_and_after_decoding_and_read_no_page_after() {
    let config = SynthConfig {
        allocs: 1000,
        ..SynthConfig::default()
    };
    let bytes = write_synthetic(Vec::new(), &config).unwrap();
    let calls: Arc<Mutex<Vec<std::ops::Range<usize>>>> = Arc::default();
    let seen = Arc::clone(&calls);
    let b = TraceBytes::new(bytes).on_release(move |r| seen.lock().unwrap().push(r));
    let trace = Trace::new("t".into(), b).unwrap();
    assert!(calls.lock().unwrap().is_empty(), "its header alone read");
    trace.read_info();
    assert_eq!(calls.lock().unwrap().len(), 1, "after reading the info");
    let asked: [(Endpoint, &[&str]); 4] = [
        (Endpoint::Top, &["--by", "function", "--between", "0", "1"]),
        (Endpoint::Timeline, &["--never-collected"]),
        (Endpoint::FlameTree, &["--peak"]),
        (Endpoint::HotPaths, &["--function", "nope"]),
    ];
    let ask = |e: Endpoint, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        answer(&trace, None, e, &args).unwrap()
    };
    let before: Vec<String> = asked.iter().map(|(e, a)| ask(*e, a)).collect();
    assert!(trace.tables().is_none());
    // A pass over the bytes lets go of them when done.
    assert_eq!(calls.lock().unwrap().last(), Some(&(0..usize::MAX)));
    let mut positions = Vec::new();
    trace.decode(&mut |p| positions.push(p));
    assert!(!positions.is_empty(), "the decoding reports its progress");
    assert_eq!(trace.tables().map(|t| t.allocations()), Some(1000));
    let released = calls.lock().unwrap().len();
    // The flame tree of the same options is kept: ask another first.
    ask(Endpoint::FlameTree, &[]);
    let after: Vec<String> = asked.iter().map(|(e, a)| ask(*e, a)).collect();
    assert_eq!(before, after);
    assert_eq!(
        calls.lock().unwrap().len(),
        released,
        "answers read no page"
    );
}

/// A server's tables are bounded whatever the trace: `--limit 0` ("all")
/// and limits past the bound are refused; a curve's points are bounded too.
#[test]
fn limits_and_points_past_their_bounds_are_refused() {
    let bytes = write_synthetic(Vec::new(), &SynthConfig::default()).unwrap();
    let trace = Trace::new("t".into(), TraceBytes::new(bytes)).unwrap();
    let ask = |e: Endpoint, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        answer(&trace, None, e, &args)
    };
    for e in [Endpoint::Top, Endpoint::HotPaths] {
        for n in ["0", "10001"] {
            let refused = ask(e, &["--limit", n]);
            assert!(
                matches!(&refused, Err(Error::BadArguments(m)) if m.contains("between 1 and")),
                "{e:?} {n}: {refused:?}"
            );
        }
        assert!(ask(e, &["--limit", "10000"]).is_ok(), "{e:?}");
    }
    for n in ["0", "100001", "4294967295"] {
        let refused = ask(Endpoint::Timeline, &["--points", n]);
        assert!(matches!(refused, Err(Error::BadArguments(_))), "{n}");
    }
}

/// The `info` answer waits for its pass over the trace, which the server
/// makes beside the serving: asked before, it is a 503.
#[test]
fn the_info_is_asked_again_until_the_trace_is_read() {
    let config = SynthConfig {
        allocs: 100,
        ..SynthConfig::default()
    };
    let bytes = write_synthetic(Vec::new(), &config).unwrap();
    let trace = Trace::new("t".into(), TraceBytes::new(bytes)).unwrap();
    let served = Memtrace::new(trace, None);
    let info = served.answer(Endpoint::Info, &Vec::new());
    assert_eq!(info, Err(Error::Reading));
    assert_eq!(Memtrace::status(&Error::Reading), 503);
    served.prepare();
    let info: serde_json::Value =
        serde_json::from_str(&served.answer(Endpoint::Info, &Vec::new()).unwrap()).unwrap();
    assert_eq!(info["allocs"], 100, "{info}");
}

/// A differential tree of two allocation ranges of one trace: each node's
/// weights are those of the flame graph of each range; without a baseline
/// range or a compared trace there is nothing to compare.
#[test]
fn two_ranges_of_one_trace_are_compared_node_by_node() {
    let trace = synthetic(SynthConfig {
        allocs: 4000,
        ..SynthConfig::default()
    });
    let ask = |e: Endpoint, args: &[&str]| ask_json(&trace, e, args);
    let info = ask(Endpoint::Timeline, &["--points", "2"]);
    let end = info["trace"]["duration_s"].as_f64().unwrap();
    let (half, all) = (format!("{}s", end / 2.0), format!("{end}s"));
    let stacks = |from: &str, to: &str| {
        let f = ask(Endpoint::Flamegraph, &["--between", from, to]);
        let mut weights: std::collections::HashMap<String, u64> = Default::default();
        for s in f["stacks"].as_array().unwrap() {
            let frames: Vec<&str> = (s["frames"].as_array().unwrap().iter())
                .map(|f| f.as_str().unwrap())
                .collect();
            *weights.entry(frames.join(";")).or_default() += s["weight"].as_u64().unwrap();
        }
        (f["total"].as_u64().unwrap(), weights)
    };
    let (a, b) = (stacks("0s", &half), stacks(&half, &all));
    assert!(a.0 > 0 && b.0 > 0 && a.0 != b.0);
    let args = [
        "--diff",
        "--base-between",
        "0s",
        &half,
        "--between",
        &half,
        &all,
        "--min-share",
        "0",
    ];
    let t = ask(Endpoint::FlameTree, &args);
    assert_eq!(
        (t["base_total"].as_u64(), t["total"].as_u64()),
        (Some(a.0), Some(b.0))
    );
    // Each node's own weight is its stack's in each range.
    let nodes = t["nodes"].as_array().unwrap();
    // Each node's stack: its parent's, then its name (the root's is empty).
    let mut paths: Vec<String> = Vec::new();
    for n in nodes {
        let key = match n["parent"].as_i64().unwrap() {
            p if p < 0 => String::new(),
            p => {
                let above = &paths[p as usize];
                let name = n["name"].as_str().unwrap();
                match above.is_empty() {
                    true => name.to_string(),
                    false => format!("{above};{name}"),
                }
            }
        };
        let own = |m: &std::collections::HashMap<String, u64>| m.get(&key).copied().unwrap_or(0);
        assert_eq!(n["base_self"].as_u64(), Some(own(&a.1)), "{key}");
        assert_eq!(n["self"].as_u64(), Some(own(&b.1)), "{key}");
        paths.push(key);
    }
    let f = ask(
        Endpoint::Functions,
        &["--diff", "--base-between", "0s", &half, "--limit", "0"],
    );
    assert_eq!(f["base_total"].as_u64(), Some(a.0));
    let nothing = answer(&trace, None, Endpoint::FlameTree, &["--diff".to_string()]);
    assert_eq!(nothing, Err(Error::NothingToCompare));
}

/// While a decoder reads tables likely kept, an answer waits for them
/// rather than pass over the bytes beside it (no page of the trace read by
/// the answer); a decoder that gives none, or panics, lets the waiting
/// answers pass over the bytes.
#[test]
fn answers_wait_for_tables_read_back_rather_than_pass_over_the_trace() {
    let config = SynthConfig {
        allocs: 1000,
        ..SynthConfig::default()
    };
    let bytes = write_synthetic(Vec::new(), &config).unwrap();
    let tables = Tables::from_bytes(
        &TraceBytes::new(bytes.clone()),
        &Spill::memory(),
        &mut |_| {},
    )
    .unwrap();
    for gives in [true, false] {
        let released: Arc<Mutex<usize>> = Arc::default();
        let seen = Arc::clone(&released);
        let b = TraceBytes::new(bytes.clone()).on_release(move |_| *seen.lock().unwrap() += 1);
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        let kept = Mutex::new(Some(tables.clone()));
        let decoder: Decoder = Box::new(move |_, _| {
            wait.lock().unwrap().recv().unwrap();
            match gives {
                true => kept.lock().unwrap().take(),
                false => None,
            }
        });
        let trace = Trace::new("t".into(), b).unwrap().decoded_by(decoder, true);
        std::thread::scope(|scope| {
            let asked = scope.spawn(|| ask_json(&trace, Endpoint::Top, &[]));
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!asked.is_finished(), "the answer waits");
            scope.spawn(|| trace.decode(&mut |_| {}));
            go.send(()).unwrap();
            let answer = asked.join().unwrap();
            assert!(answer["sites"].is_array());
        });
        // Answered from the tables, the trace's pages were never read.
        assert_eq!(*released.lock().unwrap() == 0, gives, "{gives}");
    }
}
