//! Conformance against `$TRACEKIT_CORPUS/magic-trace`: magic-trace's own expect tests
//! (the `test/*.ml` transcript tests and the decoder tests inline in
//! `src/perf_decode.ml`). Transcript cases compare line for line after ppx_expect's
//! normalisation, decode cases compare S-expressions structurally.

use std::collections::BTreeMap;
use std::path::Path;

use tracekit_callstack::events_output::event_sexp;
use tracekit_callstack::filter::RangeFilter;
use tracekit_callstack::ocaml::OcamlExceptionInfo;
use tracekit_callstack::script::{Parsed, Records, parse_record};
use tracekit_callstack::transcript::{self, TranscriptOptions, normalize};
use tracekit_callstack::writer::SampleTiming;
use tracekit_callstack::writer::TraceScope;

fn read(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        Err(e) => panic!("corpus file {} missing: {e}", path.display()),
    }
}

fn parse_args(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Tokens of an S-expression, atoms unescaped (OCaml escapes).
fn sexp_tokens(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' | b')' => {
                out.push((b[i] as char).to_string());
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'"' => {
                let mut atom = Vec::new();
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                        match b[i] {
                            b'n' => atom.push(b'\n'),
                            b't' => atom.push(b'\t'),
                            b'r' => atom.push(b'\r'),
                            b'b' => atom.push(8),
                            d if d.is_ascii_digit() && i + 2 < b.len() => {
                                let v: u32 = std::str::from_utf8(&b[i..i + 3])
                                    .ok()
                                    .and_then(|t| t.parse().ok())
                                    .unwrap_or(0);
                                atom.push(v as u8);
                                i += 2;
                            }
                            c => atom.push(c),
                        }
                    } else {
                        atom.push(b[i]);
                    }
                    i += 1;
                }
                i += 1;
                out.push(format!("A:{}", String::from_utf8_lossy(&atom)));
            }
            _ => {
                let start = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'(' && b[i] != b')' {
                    i += 1;
                }
                out.push(format!("A:{}", &s[start..i]));
            }
        }
    }
    out
}

fn hex_list(v: Option<&String>) -> Vec<u64> {
    v.map(|s| {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).expect("hex address"))
            .collect()
    })
    .unwrap_or_default()
}

fn run_case(dir: &Path, name: &str) -> Result<(), String> {
    let args = parse_args(&read(&dir.join(format!("{name}.args"))));
    let input = read(&dir.join(format!("{name}.perf")));
    let expected = read(&dir.join(format!("{name}.expected")));
    match args.get("harness").map(String::as_str) {
        Some("decode") => {
            let recs: Vec<_> = Records::new(&input).collect();
            if recs.len() != 1 {
                return Err(format!("{} records, expected 1", recs.len()));
            }
            let got = match parse_record(&recs[0], 0) {
                Ok(Parsed::Event(e)) => format!("({})", event_sexp(&e)),
                Ok(Parsed::Ignored(_)) => "()".to_string(),
                Err(e) => return Err(format!("parse error: {e}")),
            };
            if sexp_tokens(&got) == sexp_tokens(&expected) {
                Ok(())
            } else {
                Err(format!("got      {got}\nexpected {expected}"))
            }
        }
        Some("transcript") => {
            let scope = match args["trace_scope"].as_str() {
                "user" => TraceScope::User,
                "kernel" => TraceScope::Kernel,
                "user+kernel" => TraceScope::UserAndKernel,
                other => return Err(format!("scope {other}")),
            };
            let ocaml_exception_info = (args["ocaml_eh"] == "present").then(|| {
                OcamlExceptionInfo::new(
                    &hex_list(args.get("ocaml_eh_pushtraps")),
                    &hex_list(args.get("ocaml_eh_poptraps")),
                    &hex_list(args.get("ocaml_eh_entertraps")),
                )
            });
            let opts = TranscriptOptions {
                scope,
                annotate_inferred_start_times: args["annotate_inferred_start_times"] == "true",
                echo: args["echo"] == "true",
                time_origin_first_event: args["time_origin"] == "first_event",
                ocaml_exception_info,
                filter: match args["filter"].as_str() {
                    "none" => None,
                    f => Some(RangeFilter::parse(f).ok_or("bad filter")?),
                },
                events_output: args["events_output"] == "binio_dump",
                // magic-trace's own behaviour, which its transcripts record
                // (`tracekit perf decode --magic-trace-compat`).
                sample_timing: SampleTiming::MagicTrace,
            };
            let t = transcript::run(&input, &opts);
            if !t.unparsed.is_empty() {
                return Err(format!("unparsed records: {:?}", &t.unparsed[..1]));
            }
            let got = normalize(&t.render());
            let (got_lines, got_dump, exp_lines, exp_dump) = if args["compare"] == "lines_then_sexp"
            {
                let split = |s: &str| -> (String, String) {
                    match s.find("\n((event") {
                        Some(p) => (s[..p + 1].to_string(), s[p + 1..].to_string()),
                        None => (s.to_string(), String::new()),
                    }
                };
                let (a, b) = split(&got);
                let (c, d) = split(&expected);
                (a, b, c, d)
            } else {
                (got.clone(), String::new(), expected.clone(), String::new())
            };
            if got_lines != exp_lines {
                let g: Vec<&str> = got_lines.lines().collect();
                let e: Vec<&str> = exp_lines.lines().collect();
                let i = g.iter().zip(&e).take_while(|(a, b)| a == b).count();
                return Err(format!(
                    "transcript differs at line {} (got {} lines, expected {}):\n got: {:?}\n exp: {:?}",
                    i + 1,
                    g.len(),
                    e.len(),
                    g.get(i),
                    e.get(i)
                ));
            }
            let (gd, ed) = (sexp_tokens(&got_dump), sexp_tokens(&exp_dump));
            if gd != ed {
                let i = gd.iter().zip(&ed).take_while(|(a, b)| a == b).count();
                return Err(format!(
                    "event dump differs at token {i} of {}/{}: got {:?} expected {:?}",
                    gd.len(),
                    ed.len(),
                    &gd[i.saturating_sub(20)..(i + 5).min(gd.len())],
                    &ed[i.saturating_sub(20)..(i + 5).min(ed.len())]
                ));
            }
            Ok(())
        }
        other => Err(format!("unknown harness {other:?}")),
    }
}

#[test]
fn magic_trace_corpus() {
    let Some(dir) = tracekit_testutil::corpus_path("magic-trace") else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".args"))
                .map(String::from)
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 42, "expected 42 cases in {}", dir.display());
    let mut failures = Vec::new();
    for name in &names {
        if let Err(e) = run_case(&dir, name) {
            failures.push(format!("{name}: {e}"));
        }
    }
    eprintln!(
        "magic-trace corpus: {} of {} cases pass",
        names.len() - failures.len(),
        names.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
