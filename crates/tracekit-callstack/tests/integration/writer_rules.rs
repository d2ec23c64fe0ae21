//! State-machine rules the corpus does not exercise: system
//! calls and interrupts without a trace-state change, kernel-only scope, TSX
//! transactions, several threads, decode errors without a timestamp, scope warnings,
//! branches the reference thought impossible, snapshot hits, inlined frames in samples,
//! OCaml exception unwinding without trap tables, perf's default layout, threads
//! grouped under their real pid, and sample-accurate timing of sampled stacks.

#![allow(clippy::unwrap_used)]

use tracekit_callstack::event::{Address, Time};
use tracekit_callstack::script::{Parsed, Records, parse_record};
use tracekit_callstack::sink::{Output, RecordingSink};
use tracekit_callstack::transcript::{self, TranscriptOptions};
use tracekit_callstack::writer::{Config, Hit, SampleTiming, TraceScope, TraceWriter, Warning};

/// A branch line: `T` in ns, flags, source and destination as `SYM@HEXADDR`.
fn br(tid: u32, t: u64, flags: &str, src: &str, dst: &str) -> String {
    let loc = |s: &str| {
        let (sym, addr) = s.split_once('@').unwrap();
        if sym.is_empty() {
            format!("{addr} [unknown] (x.so)")
        } else {
            format!("{addr} {sym}+0x0 (x.so)")
        }
    };
    format!(
        "{tid}/{tid} 1.{t:09}:   1 branches:uk:   {flags:<16} {} => {}\n",
        loc(src),
        loc(dst)
    )
}

fn run(text: &str, scope: TraceScope) -> (Vec<String>, Vec<String>) {
    let t = transcript::run(
        text,
        &TranscriptOptions {
            scope,
            echo: false,
            ..TranscriptOptions::default()
        },
    );
    assert!(t.unparsed.is_empty(), "{:?}", t.unparsed);
    (t.stdout.lines().map(String::from).collect(), t.stderr)
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Asserts that the transcript `out` has exactly the line `line`.
#[track_caller]
fn assert_has_line(out: &[String], line: &str) {
    assert!(out.iter().any(|l| l == line), "{line:?} not in {out:?}");
}

#[test]
fn syscall_and_sysret_switch_stacks() {
    let text = [
        br(1, 0, "call", "main@400000", "work@401000"),
        br(
            1,
            10,
            "syscall",
            "work@401010",
            "entry_SYSCALL_64@ffffffff81000000",
        ),
        br(
            1,
            20,
            "call",
            "entry_SYSCALL_64@ffffffff81000010",
            "do_syscall_64@ffffffff81001000",
        ),
        br(
            1,
            30,
            "return",
            "do_syscall_64@ffffffff81001010",
            "entry_SYSCALL_64@ffffffff81000020",
        ),
        br(
            1,
            40,
            "sysret",
            "entry_SYSCALL_64@ffffffff81000030",
            "work@401012",
        ),
        br(1, 50, "return", "work@401020", "main@400010"),
    ]
    .concat();
    let (out, warnings) = run(&text, TraceScope::UserAndKernel);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        out,
        lines(&[
            "->     10ns BEGIN entry_SYSCALL_64",
            "->     20ns BEGIN do_syscall_64",
            "->     30ns END   do_syscall_64",
            "->     40ns END   entry_SYSCALL_64",
            // Written at the end: the deferred start events (main, found when work
            // returned into it, and the call at time zero), then the last timestamp.
            "->      0ns BEGIN main [inferred start time]",
            "->      0ns BEGIN work",
            "->     50ns END   work",
            "->     50ns END   main",
        ])
    );
    // The same system call in a user-space-only trace is a scope violation.
    let (_, warnings) = run(&text, TraceScope::User);
    assert!(warnings.iter().any(|w| w.starts_with(
        "(\"BUG: assumptions violated, saw an unexpected event for this trace mode\" (trace_scope Userspace)"
    )), "{warnings:?}");
}

#[test]
fn hardware_interrupt_and_iret_nest() {
    let text = [
        br(1, 0, "call", "main@400000", "work@401000"),
        br(1, 10, "hw int", "work@401010", "asm_irq@ffffffff81000000"),
        br(1, 20, "iret", "asm_irq@ffffffff81000010", "work@401010"),
        br(1, 30, "jmp", "work@401020", "tail@402000"),
    ]
    .concat();
    let (out, warnings) = run(&text, TraceScope::UserAndKernel);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        out,
        lines(&[
            "->     10ns BEGIN asm_irq",
            "->     20ns END   asm_irq",
            "->      0ns BEGIN work",
            "->     30ns END   work",
            "->     30ns BEGIN tail",
            "->     30ns END   tail",
        ])
    );
}

#[test]
fn kernel_only_scope_restarts_on_trace_start() {
    let text = [
        br(1, 0, "tr strt", "@0", "irq_handler@ffffffff81000000"),
        br(
            1,
            10,
            "call",
            "irq_handler@ffffffff81000010",
            "helper@ffffffff81001000",
        ),
        br(1, 20, "tr end  iret", "helper@ffffffff81001010", "@0"),
        br(1, 30, "tr strt", "@0", "other@ffffffff81002000"),
        br(
            1,
            40,
            "call",
            "other@ffffffff81002010",
            "helper@ffffffff81001000",
        ),
    ]
    .concat();
    let (out, warnings) = run(&text, TraceScope::Kernel);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_has_line(&out, "->     20ns BEGIN [untraced]");
    assert_has_line(&out, "->     30ns END   [untraced]");
    assert_has_line(&out, "->     40ns BEGIN helper");
}

#[test]
fn transactions_commit_or_abort() {
    let committed = [
        br(1, 0, "call", "main@400000", "f@401000"),
        br(1, 10, "call (x)", "f@401010", "g@402000"),
        br(1, 20, "return (x)", "g@402010", "f@401012"),
        br(1, 30, "return", "f@401020", "main@400010"),
    ]
    .concat();
    let (out, _) = run(&committed, TraceScope::User);
    assert_has_line(&out, "->     10ns BEGIN g");

    let aborted = [
        br(1, 0, "call", "main@400000", "f@401000"),
        br(1, 10, "call (x)", "f@401010", "g@402000"),
        br(1, 20, "tx abrt", "g@402010", "f@401030"),
        br(1, 30, "return", "f@401040", "main@400010"),
    ]
    .concat();
    let (out, _) = run(&aborted, TraceScope::User);
    assert!(!out.iter().any(|l| l.ends_with(" g")), "{out:?}");

    let errored = [
        br(1, 0, "call", "main@400000", "f@401000"),
        br(1, 10, "call (x)", "f@401010", "g@402000"),
        " instruction trace error type 1 cpu 0 pid 1 tid 1 ip 0 code 8: Lost trace data\n"
            .to_string(),
    ]
    .concat();
    let (out, warnings) = run(&errored, TraceScope::User);
    assert_eq!(
        warnings,
        lines(&[
            "Warning: error received during transaction, dropping all transaction events",
            "Warning: perf reported an error decoding the trace: 'Lost trace data'",
        ])
    );
    // The error has no timestamp: it happens at the last processed event's time (the
    // queued event at 10 ns was dropped, so 0 ns).
    assert_has_line(&out, "->      0ns BEGIN [decode error: Lost trace data]");
    assert!(!out.iter().any(|l| l.ends_with(" g")), "{out:?}");
}

#[test]
fn impossible_branches_warn_once_and_go_on() {
    let text = [
        br(1, 0, "call", "main@400000", "f@401000"),
        br(1, 10, "tr end", "f@401010", "@0"),
        br(1, 20, "tr strt call", "@0", "f@401020"),
        br(1, 30, "tr strt return", "@0", "f@401030"),
        br(1, 40, "return", "f@401040", "main@400010"),
    ]
    .concat();
    let (out, warnings) = run(&text, TraceScope::User);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("Warning: unexpected branch, handled as a trace start"));
    assert_has_line(&out, "->     20ns END   [untraced]");
}

#[test]
fn threads_get_their_own_tracks() {
    let text = [
        br(7, 0, "call", "main@400000", "a@401000"),
        br(8, 5, "call", "main@400000", "b@402000"),
        br(7, 10, "return", "a@401010", "main@400010"),
        br(8, 15, "return", "b@402010", "main@400010"),
    ]
    .concat();
    let mut w = TraceWriter::new(
        RecordingSink::default(),
        Config::default(),
        Time(1_000_000_000),
    );
    for r in Records::new(&text) {
        if let Ok(Parsed::Event(e)) = parse_record(&r, 0) {
            w.write_event(&e, true);
        }
    }
    let sink = w.finish();
    let processes: Vec<&str> = sink
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Process { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(processes, ["[pid=7]", "[pid=8]"]);
    let track_of = |want: &str| {
        sink.outputs.iter().find_map(|o| match o {
            Output::Begin { track, name, .. } if name == want => Some(*track),
            _ => None,
        })
    };
    assert_ne!(track_of("a"), track_of("b"));
}

#[test]
fn snapshot_hits_get_a_track() {
    let mut w = TraceWriter::new(RecordingSink::default(), Config::default(), Time(100));
    w.write_hits(
        &[
            Hit {
                symbol: "magic_trace_stop_indicator".into(),
                time: Time(500),
                tid: 3,
                ip: Address(0x4000),
                passed_time: Some(Time(200)),
                passed_value: Some(42),
            },
            Hit {
                symbol: "other".into(),
                time: Time(600),
                tid: 3,
                ip: Address(0x5000),
                passed_time: Some(Time(200)),
                passed_value: None,
            },
        ],
        "magic_trace_stop_indicator",
    );
    let sink = w.finish();
    assert!(
        matches!(&sink.outputs[0], Output::Process { name, .. } if name == "Snapshot symbol hits")
    );
    let completes: Vec<_> = sink
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Complete {
                start,
                end,
                name,
                args,
                ..
            } => Some((start.0, end.0, name.clone(), args.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        completes[0].0, 100,
        "the passed start time begins the stop indicator's slice"
    );
    assert_eq!(completes[0].1, 400);
    assert_eq!(completes[0].2, "hit magic_trace_stop_indicator");
    assert!(completes[0].3.contains(&"arg=42".to_string()));
    assert_eq!(
        (completes[1].0, completes[1].1),
        (500, 500),
        "other symbols are instants"
    );
}

#[test]
fn samples_replace_changed_inlined_frames() {
    let text = "\
1/1 1.000000000: 1 cycles:u:
\t  401005 inner_a+0x5 (inlined)
\t  401005 outer+0x5 (/x)
\t  400100 main+0x10 (/x)

1/1 1.000000100: 1 cycles:u:
\t  401005 inner_b+0x5 (inlined)
\t  401005 outer+0x5 (/x)
\t  400100 main+0x10 (/x)
";
    let (out, _) = run(text, TraceScope::User);
    assert_has_line(&out, "->    100ns END   inner_a");
    assert_has_line(&out, "->    100ns BEGIN inner_b");
    // The frames below, at the same addresses and not inlined, carry on.
    assert_eq!(
        out.iter().filter(|l| l.ends_with("BEGIN outer")).count(),
        1,
        "{out:?}"
    );
}

#[test]
fn ocaml_exceptions_unwind_without_trap_tables() {
    // main -> f -> g -> caml_raise_exn; two frames are found while unwinding.
    let text = [
        br(1, 0, "call", "main@400000", "f@401000"),
        br(1, 10, "call", "f@401010", "g@402000"),
        br(1, 20, "call", "g@402010", "caml_raise_exn@403000"),
        br(
            1,
            30,
            "call",
            "caml_raise_exn@403010",
            "caml_next_frame_descriptor@404000",
        ),
        br(
            1,
            40,
            "return",
            "caml_next_frame_descriptor@404010",
            "caml_raise_exn@403020",
        ),
        br(
            1,
            50,
            "call",
            "caml_raise_exn@403030",
            "caml_next_frame_descriptor@404000",
        ),
        br(
            1,
            60,
            "return",
            "caml_next_frame_descriptor@404010",
            "caml_raise_exn@403040",
        ),
        br(
            1,
            70,
            "call",
            "caml_raise_exn@403050",
            "caml_next_frame_descriptor@404000",
        ),
        br(
            1,
            80,
            "return",
            "caml_next_frame_descriptor@404010",
            "caml_raise_exn@403060",
        ),
        br(1, 90, "return", "caml_raise_exn@403070", "main@400020"),
        br(1, 100, "call", "main@400030", "h@405000"),
    ]
    .concat();
    let (out, _) = run(&text, TraceScope::User);
    // Three frame descriptors were read while unwinding: returning from caml_raise_exn
    // pops 3 - 1 = 2 frames (caml_raise_exn and g), and the return itself pops f,
    // landing in main, where the exception was caught.
    let at_90: Vec<&String> = out
        .iter()
        .filter(|l| l.starts_with("->     90ns"))
        .collect();
    assert_eq!(
        at_90,
        [
            "->     90ns END   caml_raise_exn",
            "->     90ns END   g",
            "->     90ns END   f",
        ],
        "{out:?}"
    );
}

/// Runs sampled-stack text through a writer with `timing` (base time 1 s).
fn sampled(text: &str, timing: SampleTiming, scope: TraceScope) -> (Vec<Output>, Vec<Warning>) {
    let config = Config {
        scope,
        sample_timing: timing,
        ..Config::default()
    };
    let mut w = TraceWriter::new(RecordingSink::default(), config, Time(1_000_000_000));
    for r in Records::new(text) {
        match parse_record(&r, 0) {
            Ok(Parsed::Event(e)) => w.write_event(&e, true),
            other => panic!("{other:?}"),
        }
    }
    let warnings = w.drain_warnings().collect();
    (w.finish().outputs, warnings)
}

/// The begin/end outputs as `TIME BEGIN|END NAME`.
fn slices(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Begin { time, name, .. } => Some(format!("{} BEGIN {name}", time.0)),
            Output::End { time, name, .. } => Some(format!("{} END {name}", time.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn default_layout_groups_threads_by_command() {
    let text = "\
my prog  4242 1.000000000:     100000 cpu-clock:u:
\t  401005 leaf+0x5 (/x)
\t  400100 main+0x10 (/x)

my prog  4243 1.000000000:     100000 cpu-clock:u:
\t  400100 main+0x10 (/x)

my prog  4242 1.000100000:     100000 task-clock:u:
\t  401009 leaf+0x9 (/x)
\t  400100 main+0x10 (/x)
";
    let (out, warnings) = sampled(text, SampleTiming::default(), TraceScope::User);
    assert_eq!(warnings, [Warning::GroupedByCommand]);
    let processes: Vec<_> = out
        .iter()
        .filter(|o| matches!(o, Output::Process { .. }))
        .collect();
    assert!(
        matches!(processes[..], [Output::Process { name, pid: None, .. }] if name == "my prog"),
        "{processes:?}"
    );
    let threads: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Thread { name, tid, .. } => Some((name.as_str(), *tid)),
            _ => None,
        })
        .collect();
    assert_eq!(threads, [("my prog", Some(4242)), ("my prog", Some(4243))]);
    let begins = out
        .iter()
        .filter(|o| matches!(o, Output::Begin { name, .. } if name == "leaf"))
        .count();
    assert_eq!(
        begins, 2,
        "the leaf's address changed, so its slice restarts"
    );
}

#[test]
fn threads_are_grouped_under_their_real_pid() {
    let text = "\
app 10/10 1.000000000:     1 cpu-clock:u:
\t  400100 main+0x10 (/x)

worker 10/11 1.000000000:     1 cpu-clock:u:
\t  400200 work+0x10 (/x)

other 20/20 1.000000000:     1 cpu-clock:u:
\t  400100 main+0x10 (/y)
";
    let (out, warnings) = sampled(text, SampleTiming::default(), TraceScope::User);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut pid_of = std::collections::HashMap::new();
    let mut threads = Vec::new();
    for o in &out {
        match o {
            Output::Process { process, name, pid } => {
                pid_of.insert(*process, (name.clone(), *pid));
            }
            Output::Thread {
                process, name, tid, ..
            } => threads.push((pid_of[process].clone(), name.clone(), *tid)),
            _ => {}
        }
    }
    let app = ("app".to_string(), Some(10));
    assert_eq!(
        threads,
        [
            (app.clone(), "app".to_string(), Some(10)),
            (app, "worker".to_string(), Some(11)),
            (
                ("other".to_string(), Some(20)),
                "other".to_string(),
                Some(20)
            ),
        ]
    );
}

/// Samples of one thread 100 µs apart (10 kHz): a stack that changes, one that
/// repeats, then a 10 ms pause (the thread blocked) and a last sample.
const SAMPLES: &str = "\
p 1/1 1.000000000: 1 cpu-clock:u:
\t  401000 leaf+0x0 (/x)
\t  402000 mid+0x0 (/x)
\t  403000 main+0x0 (/x)

p 1/1 1.000100000: 1 cpu-clock:u:
\t  404000 other+0x0 (/x)
\t  403000 main+0x0 (/x)

p 1/1 1.000200000: 1 cpu-clock:u:
\t  404000 other+0x0 (/x)
\t  403000 main+0x0 (/x)

p 1/1 1.010200000: 1 cpu-clock:u:
\t  ffffffff81000000 kernel_fn+0x0 ([kernel.kallsyms])
\t  403000 main+0x0 (/x)
";

#[test]
fn sampled_stacks_open_and_close_at_sample_instants() {
    let timing = SampleTiming::Accurate {
        period: Some(Time(100_000)),
    };
    let (out, _) = sampled(SAMPLES, timing, TraceScope::User);
    assert_eq!(
        slices(&out),
        [
            // The whole first stack begins at the first sample: no staircase.
            "0 BEGIN main",
            "0 BEGIN mid",
            "0 BEGIN leaf",
            // What changed changes at the next sample's instant.
            "100000 END leaf",
            "100000 END mid",
            "100000 BEGIN other",
            // Not sampled for more than two periods: closed one period after the
            // last sample, reopened at the next.
            "300000 END other",
            "300000 END main",
            // The kernel frame is out of the user scope.
            "10200000 BEGIN main",
            // The last sample lasts one period.
            "10300000 END main",
        ]
    );
}

#[test]
fn the_sampling_period_is_estimated_when_not_given() {
    // 20 samples 100 µs apart, then one 5 ms later.
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!(
            "p 1/1 1.{:09}: 1 cpu-clock:u:\n\t  403000 main+0x0 (/x)\n\n",
            i * 100_000
        ));
    }
    text.push_str("p 1/1 1.006900000: 1 cpu-clock:u:\n\t  403000 main+0x0 (/x)\n\n");
    let (out, _) = sampled(&text, SampleTiming::default(), TraceScope::User);
    assert_eq!(
        slices(&out),
        [
            "0 BEGIN main",
            "2000000 END main",
            "6900000 BEGIN main",
            "7000000 END main"
        ]
    );
}

#[test]
fn magic_trace_compat_spreads_calls_over_the_interval() {
    let (out, _) = sampled(SAMPLES, SampleTiming::MagicTrace, TraceScope::User);
    let s = slices(&out);
    // The staircase; the call at time zero is deferred to the thread's end.
    assert_eq!(s[..2], ["33333 BEGIN mid", "66666 BEGIN leaf"]);
    assert!(s.contains(&"0 BEGIN main".to_string()), "{s:?}");
}

#[test]
fn decode_error_messages() {
    let w = Warning::DecodeError {
        message: "Overflow packet".into(),
        ip: Some(Address(0x7fff_f732_7730)),
    };
    assert_eq!(
        w.to_string(),
        "Warning: perf reported an error decoding the trace: 'Overflow packet' @ IP 0x7ffff7327730."
    );
}
