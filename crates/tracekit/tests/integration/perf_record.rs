//! `tracekit perf record` on a small C program with a known call structure
//! (`main -> outer -> middle -> leaf`, and `main -> side`), then the decoded FXT
//! stacks are checked against it. Skips, saying so, only where perf cannot record.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracekit_fxt::format::EventKind;
use tracekit_fxt::read::{Reader, Record};
use tracekit_testutil::scratch;

use crate::TRACEKIT;

const PROGRAM: &str = r#"
#include <stdlib.h>
/* -O0 so that every function, leaves included, keeps a frame pointer: perf unwinds
   cpu-clock samples through the frame-pointer chain. */
volatile unsigned long sink;
__attribute__((noinline)) void leaf(void) { for (unsigned long i = 0; i < 200000; i++) sink += i; }
__attribute__((noinline)) void middle(void) { leaf(); sink++; leaf(); }
__attribute__((noinline)) void outer(void) { middle(); sink++; }
__attribute__((noinline)) void side(void) { for (unsigned long i = 0; i < 100000; i++) sink ^= i; }
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  for (int r = 0; r < rounds; r++) { outer(); side(); }
  return argc > 2 ? atoi(argv[2]) : 0;
}
"#;

/// Whether perf can record cpu-clock samples here at all.
fn perf_can_record(dir: &Path) -> bool {
    let out = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock:u", "-o"])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!(
                "SKIPPED: perf cannot record here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("SKIPPED: perf is not installed ({e}); `apt-get install linux-perf`");
            false
        }
    }
}

fn build_program(dir: &Path) -> PathBuf {
    let src = dir.join("calls.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("calls");
    let status = Command::new("cc")
        .args(["-O0", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) to build the test program");
    assert!(status.success());
    exe
}

/// For every slice that begins, its name and the names of the slices open under it,
/// replaying the events in timestamp order as a viewer does (the writer emits frames
/// inferred to start at time zero last).
fn slices_with_parents(fxt: &[u8]) -> Vec<(String, Vec<String>)> {
    let mut r = Reader::new(fxt);
    let mut events = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Event(e) = rec {
            let begin = match e.kind {
                EventKind::DurationBegin => true,
                EventKind::DurationEnd => false,
                _ => continue,
            };
            events.push((e.ticks, e.thread.thread.0, begin, e.name.to_string()));
        }
    }
    events.sort_by_key(|&(t, ..)| t);
    let mut stacks: HashMap<u64, Vec<String>> = HashMap::new();
    let mut out = Vec::new();
    for (_, thread, begin, name) in events {
        let stack = stacks.entry(thread).or_default();
        if begin {
            out.push((name.clone(), stack.clone()));
            stack.push(name);
        } else {
            assert_eq!(stack.pop().as_deref(), Some(name.as_str()), "ends nest");
        }
    }
    for s in stacks.values() {
        assert!(s.is_empty(), "unclosed slices: {s:?}");
    }
    out
}

/// Checks that `name` slices sit under `parent`. Frame-pointer unwinding misses the
/// caller when a sample lands in a function's prologue or epilogue (before `push rbp`,
/// after `pop rbp`), which then appears under its grandparent `or_else`; that happens
/// for a few samples in a thousand, so up to 2% (and nothing else) are tolerated.
fn check_parent(
    slices: &[(String, Vec<String>)],
    name: &str,
    parent: &str,
    or_else: &str,
) -> usize {
    let parents: Vec<Option<&str>> = slices
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, p)| p.last().map(String::as_str))
        .collect();
    let right = parents.iter().filter(|p| **p == Some(parent)).count();
    let skipped = parents.iter().filter(|p| **p == Some(or_else)).count();
    assert_eq!(
        right + skipped,
        parents.len(),
        "{name} under {parent}: {parents:?}"
    );
    assert!(
        skipped * 50 <= parents.len(),
        "{name}: {skipped} of {} under {or_else}",
        parents.len()
    );
    parents.len()
}

fn check_call_structure(fxt: &[u8]) {
    let slices = slices_with_parents(fxt);
    let leaves = check_parent(&slices, "leaf", "middle", "outer");
    assert!(leaves >= 10, "too few leaf samples: {leaves}");
    assert!(check_parent(&slices, "middle", "outer", "main") > 0);
    check_parent(&slices, "outer", "main", "__libc_start_call_main");
    assert!(check_parent(&slices, "side", "main", "__libc_start_call_main") > 0);
    // Leaves with their caller present sit on the whole known chain.
    for (n, p) in &slices {
        if n == "leaf" && p.last().map(String::as_str) == Some("middle") {
            let k = p.len();
            assert!(k >= 3 && p[k - 3..] == ["main", "outer", "middle"], "{p:?}");
        }
    }
}

#[test]
fn records_a_program_and_recovers_its_call_structure() {
    let dir = scratch();
    if !perf_can_record(&dir) {
        return;
    }
    let exe = build_program(&dir);
    let out_dir = dir.join("trace");
    let o = TRACEKIT
        .command()
        .args(["perf", "record", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    if Path::new("/sys/bus/event_source/devices/intel_pt").exists() {
        assert!(stderr.contains("Intel PT"), "{stderr}");
    } else {
        assert!(stderr.contains("no Intel PT"), "{stderr}");
        assert!(stderr.contains("sampling cpu-clock"), "{stderr}");
    }
    let fxt = std::fs::read(out_dir.join("trace.fxt")).unwrap();
    check_call_structure(&fxt);
}

#[test]
fn attaches_to_a_running_process() {
    let dir = scratch();
    if !perf_can_record(&dir) {
        return;
    }
    let exe = build_program(&dir);
    let mut child = Command::new(&exe).arg("100000").spawn().unwrap();
    let out_dir = dir.join("trace");
    let o = TRACEKIT
        .command()
        .args(["perf", "record", "--sampling", "-o"])
        .arg(&out_dir)
        .args(["--pid", &child.id().to_string(), "--duration", "0.5"])
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let fxt = std::fs::read(out_dir.join("trace.fxt")).unwrap();
    check_call_structure(&fxt);
}

#[test]
fn a_failing_program_s_status_is_passed_on_and_its_recording_kept() {
    let dir = scratch();
    if !perf_can_record(&dir) {
        return;
    }
    let exe = build_program(&dir);
    let out_dir = dir.join("trace");
    // A previous recording in the folder is replaced only by a finished one.
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("perf.data"), "previous").unwrap();
    let o = TRACEKIT
        .command()
        .args(["perf", "record", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&exe)
        .args(["100", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("perf record exited with"), "{stderr}");
    // What was recorded is decoded all the same.
    let fxt = std::fs::read(out_dir.join("trace.fxt")).unwrap();
    check_call_structure(&fxt);
    assert_ne!(
        std::fs::read(out_dir.join("perf.data")).unwrap(),
        b"previous"
    );
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary files left: {names:?}");
}

// ---- perf.data read directly: recorded programs against `perf script` -----------------

/// Two named worker threads and the main thread, all running
/// `outer -> middle -> leaf_a | leaf_b`, with short sleeps (idle time).
const THREADS_C: &str = include_str!("threads.c");

/// The same shape in Rust, built without frame pointers: only DWARF unwinding
/// recovers its stacks.
const THREADS_RS: &str = r#"
use std::hint::black_box;
#[inline(never)] fn leaf_a(n: u64) -> u64 { let mut s = 0; for i in 0..n { s = black_box(s + i * 7); } s }
#[inline(never)] fn leaf_b(n: u64) -> u64 { let mut s = 0; for i in 0..n { s = black_box(s ^ i * 13); } s }
#[inline(never)] fn middle(k: u64) -> u64 { (if k & 1 == 1 { leaf_a(20000) } else { leaf_b(30000) }) + leaf_a(5000) }
#[inline(never)] fn outer(rounds: u64) -> u64 {
    let mut s = 0;
    for r in 0..rounds { s += middle(r); if r % 2000 == 0 { std::thread::sleep(std::time::Duration::from_millis(3)); } }
    s
}
fn main() {
    let workers: Vec<_> = (0..2)
        .map(|i| std::thread::Builder::new().name(format!("worker-{i}")).spawn(move || outer(12000)).unwrap())
        .collect();
    let mut s = outer(12000);
    for w in workers { s += w.join().unwrap(); }
    println!("{s}");
}
"#;

/// A sample as `perf script` prints it: thread, time (ns) and call chain, leaf first.
struct ScriptSample {
    pid: u64,
    tid: u64,
    time: u64,
    chain: Vec<u64>,
}

/// `perf script -F pid,tid,time,ip --ns` of `data`.
fn script_samples(data: &Path) -> Vec<ScriptSample> {
    let o = Command::new("perf")
        .args(["script", "-F", "pid,tid,time,ip", "--ns", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let mut out = Vec::new();
    for rec in text.split("\n\n").filter(|r| !r.trim().is_empty()) {
        let mut lines = rec.lines();
        let head = lines.next().unwrap().trim();
        let (ids, time) = head.split_once(' ').unwrap();
        let (pid, tid) = ids.split_once('/').unwrap();
        let (secs, ns) = time.trim().trim_end_matches(':').split_once('.').unwrap();
        out.push(ScriptSample {
            pid: pid.parse().unwrap(),
            tid: tid.parse().unwrap(),
            time: secs.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap(),
            // perf prints the functions inlined at an address (DWARF recordings) as
            // lines of their own marked `(inlined)`, before the real frame.
            chain: lines
                .filter(|l| !l.contains("(inlined)"))
                .map(|l| u64::from_str_radix(l.trim(), 16).unwrap())
                .collect(),
        });
    }
    out
}

/// A slice of a decoded trace: thread, begin, end, the `address` argument, name,
/// and whether it is an inlined frame.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Slice {
    thread: u64,
    /// Position of its begin record in the file (outer frames begin first).
    seq: usize,
    begin: u64,
    end: u64,
    address: u64,
    name: String,
    inlined: bool,
}

/// The slices of an FXT trace, and its threads as (process koid, thread koid, name).
fn trace_slices(fxt: &[u8]) -> (Vec<Slice>, Vec<(u64, u64, String)>) {
    use tracekit_fxt::format::ArgValue;
    let mut r = Reader::new(fxt);
    let mut open: HashMap<u64, Vec<Slice>> = HashMap::new();
    let mut slices = Vec::new();
    let mut threads = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::KernelObject(o) => {
                if let Some(p) = o.process() {
                    threads.push((p.0, o.koid.0, o.name.to_string()));
                }
            }
            Record::Event(e) => {
                let thread = e.thread.thread.0;
                match e.kind {
                    EventKind::DurationBegin => {
                        let address = match e.args.get("address") {
                            Some(ArgValue::Pointer(p)) => p,
                            other => panic!("no address: {other:?}"),
                        };
                        let seq = slices.len() + open.values().map(Vec::len).sum::<usize>();
                        open.entry(thread).or_default().push(Slice {
                            thread,
                            seq,
                            begin: e.ticks,
                            end: u64::MAX,
                            address,
                            name: e.name.to_string(),
                            inlined: e.args.get("inlined").is_some(),
                        });
                    }
                    EventKind::DurationEnd => {
                        let mut s = open.get_mut(&thread).and_then(Vec::pop).unwrap();
                        assert_eq!(s.name, e.name.to_string(), "ends nest");
                        s.end = e.ticks;
                        slices.push(s);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "every slice ends");
    slices.sort_by_key(|s| (s.thread, s.begin, s.seq));
    (slices, threads)
}

/// How `perf script`'s samples compare with a timeline: the share whose user call
/// chain is exactly the addresses of the (non-inlined) slices open at the sample's
/// time, outermost first, and the share that differ only by frames the timeline has
/// and perf's chain lacks (same outermost and innermost frames; perf's own DWARF
/// unwinder skips some frames, see `a_dwarf_recording...`). The first few other
/// misses are printed.
fn stack_match(samples: &[ScriptSample], slices: &[Slice]) -> (f64, f64) {
    let origin = samples.iter().map(|s| s.time).min().unwrap();
    let mut by_thread: HashMap<u64, Vec<&Slice>> = HashMap::new();
    for s in slices.iter().filter(|s| !s.inlined) {
        by_thread.entry(s.thread).or_default().push(s);
    }
    let (mut exact, mut fewer) = (0, 0);
    let mut shown = 0;
    for sample in samples {
        let t = sample.time - origin;
        // Sorted by begin, outer before inner at equal begins: nesting order.
        let open: Vec<u64> = by_thread
            .get(&sample.tid)
            .map(|v| {
                v.iter()
                    .filter(|s| s.begin <= t && t < s.end)
                    .map(|s| s.address)
                    .collect()
            })
            .unwrap_or_default();
        let want: Vec<u64> = sample
            .chain
            .iter()
            .rev()
            .copied()
            .filter(|&a| (a as i64) >= 0)
            .collect();
        let mut rest = open.iter();
        let subsequence = want.iter().all(|w| rest.any(|o| o == w));
        if open == want {
            exact += 1;
        } else if subsequence && open.first() == want.first() && open.last() == want.last() {
            fewer += 1;
        } else if shown < 5 {
            shown += 1;
            eprintln!(
                "miss at {t} on {}: trace {open:x?}, perf script {want:x?}",
                sample.tid
            );
        }
    }
    let n = samples.len() as f64;
    (exact as f64 / n, fewer as f64 / n)
}

/// Records `exe` with `call_graph`, decodes the recording directly and through
/// `perf script`, and checks both against `perf script`'s own samples.
fn check_recording(dir: &Path, exe: &Path, call_graph: &str, comm: &str) {
    let data = dir.join("perf.data");
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "--timestamp",
            "-e",
            "cpu-clock:u",
            "-F",
            "4000",
        ])
        .args(["--call-graph", call_graph, "-o"])
        .arg(&data)
        .arg("--")
        .arg(exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Names kept across runs go to a cache of this test's own.
    let cache = dir.join("cache");
    let decode_reporting = |extra: &[&str], out: &str| {
        let o = TRACEKIT
            .command()
            .env("XDG_CACHE_HOME", &cache)
            .args(["perf", "decode"])
            .arg(&data)
            .args(extra)
            .arg("-o")
            .arg(dir.join(out))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{stderr}");
        (std::fs::read(dir.join(out)).unwrap(), stderr)
    };
    let decode = |extra: &[&str], out: &str| decode_reporting(extra, out).0;
    let (direct, first) = decode_reporting(&[], "direct.fxt");
    let via_script = decode(&["--via-perf-script"], "script.fxt");

    // A second decode names the addresses from the names kept by the first, and
    // writes the same trace; so does one that keeps no names.
    assert!(!first.contains("from the cache"), "{first}");
    assert!(cache.join("tracekit/names").read_dir().unwrap().count() > 0);
    let (again, second) = decode_reporting(&[], "again.fxt");
    assert!(second.contains("from the cache"), "{second}");
    assert!(again == direct, "the cached names made another trace");
    assert!(decode(&["--no-cache"], "uncached.fxt") == direct);
    let samples = script_samples(&data);
    assert!(samples.len() > 300, "too few samples: {}", samples.len());
    let (slices, threads) = trace_slices(&direct);

    // Each sample's call chain is what the timeline has open at its instant: exactly
    // so with frame pointers (perf and tracekit follow the same chain); with DWARF,
    // perf's unwinder drops frames that framehop finds (glibc's
    // `__libc_start_main_impl` between `_start` and `__libc_start_call_main`, one
    // `_dl_start` frame in the loader), which is the only difference allowed.
    let (exact, fewer) = stack_match(&samples, &slices);
    eprintln!(
        "{call_graph}: {:.2}% of {} samples' call chains are exactly the slices open at their time, \
         {:.2}% the same but for frames perf's chain lacks",
        exact * 100.0,
        samples.len(),
        fewer * 100.0
    );
    if call_graph == "fp" {
        assert!(exact >= 0.995, "{exact}");
    } else {
        assert!(exact + fewer >= 0.995, "{exact} + {fewer}");
    }

    // The perf script path gives perf script's own stacks, and with frame pointers
    // the same slices as the direct reader (addresses; perf's names may differ from
    // DWARF's, and it prints no inlined frames by default).
    let (script_slices, _) = trace_slices(&via_script);
    let (exact, _) = stack_match(&samples, &script_slices);
    eprintln!(
        "{call_graph}: through perf script, {:.2}% exactly",
        exact * 100.0
    );
    assert!(exact >= 0.995, "{exact}");
    if call_graph == "fp" {
        let key = |s: &Slice| (s.thread, s.begin, s.end, s.address);
        let a: Vec<_> = slices.iter().filter(|s| !s.inlined).map(key).collect();
        let b: Vec<_> = script_slices.iter().map(key).collect();
        assert_eq!(a, b);
        check_flamegraph(dir, &data, samples.len());
    }

    // Threads sit under their real process, with their real ids and names.
    let pid = samples[0].pid;
    let tids: std::collections::BTreeSet<u64> = samples.iter().map(|s| s.tid).collect();
    let ours: std::collections::BTreeSet<u64> = threads.iter().map(|t| t.1).collect();
    assert_eq!(tids, ours, "{threads:?}");
    assert!(threads.iter().all(|t| t.0 == pid), "{threads:?}");
    let names: std::collections::BTreeSet<&str> = threads.iter().map(|t| t.2.as_str()).collect();
    assert_eq!(
        names,
        [comm, "worker-0", "worker-1"].into_iter().collect(),
        "{threads:?}"
    );
}

/// `perf flamegraph` of a frame-pointer recording: the same folded stacks read
/// directly and through `perf script`, one count per sample, threads apart with
/// `--per-thread`, and an SVG that draws the program's functions.
fn check_flamegraph(dir: &Path, data: &Path, samples: usize) {
    let fold = |extra: &[&str]| {
        let o = TRACEKIT
            .command()
            .args(["perf", "flamegraph", "-q"])
            .arg(data)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let direct = fold(&[]);
    let via_script = fold(&["--via-perf-script"]);
    // The program's own stacks are the same both ways. Elsewhere names may differ:
    // perf names an address without a mapping `[unknown @ ADDR ([unknown])]`, and of
    // two symbols at one address in glibc may pick the other alias.
    let own = |folded: &str| -> Vec<String> {
        folded
            .lines()
            .filter(|l| l.contains(";outer;"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(own(&direct), own(&via_script));
    for folded in [&direct, &via_script] {
        let total: usize = folded
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<usize>().unwrap())
            .sum();
        assert_eq!(total, samples);
    }
    assert!(direct.contains("outer;middle;leaf_a "), "{direct}");
    let per_thread = fold(&["--per-thread"]);
    assert!(
        per_thread.lines().any(|l| l.starts_with("worker-1 [")),
        "{per_thread}"
    );
    let svg = dir.join("flame.svg");
    let o = TRACEKIT
        .command()
        .args(["perf", "flamegraph", "-q"])
        .arg(data)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let image = std::fs::read_to_string(&svg).unwrap();
    assert!(
        image.starts_with("<?xml") || image.starts_with("<svg"),
        "{}",
        &image[..40]
    );
    assert!(image.contains("leaf_b"));
}

#[test]
fn a_frame_pointer_recording_reads_directly_as_perf_script_sees_it() {
    let dir = scratch();
    if !perf_can_record(&dir) {
        return;
    }
    let src = dir.join("threads.c");
    std::fs::write(&src, THREADS_C).unwrap();
    let exe = dir.join("threads");
    let status = Command::new("cc")
        .args(["-O0", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    check_recording(&dir, &exe, "fp", "threads");
}

#[test]
fn a_dwarf_recording_of_rust_without_frame_pointers_reads_directly() {
    let dir = scratch();
    if !perf_can_record(&dir) {
        return;
    }
    let src = dir.join("threads.rs");
    std::fs::write(&src, THREADS_RS).unwrap();
    let exe = dir.join("threads_rs");
    let status = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args([
            "-C",
            "opt-level=2",
            "-g",
            "-C",
            "force-frame-pointers=no",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("rustc");
    assert!(status.success());
    check_recording(&dir, &exe, "dwarf,8192", "threads_rs");
}
