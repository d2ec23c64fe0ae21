//! Edges of tracing, each checked on a child process running the `edges`
//! example: whatever goes wrong with the trace, the traced program runs on
//! with its output and exit status intact, and the tracer says so once on
//! stderr.

use super::common;

use std::path::Path;
use std::process::{Command, Output};

fn run(binary: &Path, mode: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary);
    cmd.arg(mode)
        .env_remove("MEMTRACE")
        .env_remove("MEMTRACE_RATE")
        .env_remove("RUST_BACKTRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the edges example")
}

/// The tracer's lines on stderr.
fn tracer_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("tracekit-alloc: "))
        .map(str::to_owned)
        .collect()
}

/// The program exited 0 and printed its last line.
fn assert_ran_to_the_end(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}, stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.ends_with("edges: done\n"), "stdout {stdout:?}");
}

fn one_warning(out: &Output, needles: &[&str]) {
    let lines = tracer_lines(out);
    assert_eq!(lines.len(), 1, "tracer lines: {lines:?}");
    for n in needles {
        assert!(lines[0].contains(n), "{:?} lacks {n:?}", lines[0]);
    }
}

#[test]
fn invalid_rate_warns_and_runs_untraced() {
    let scratch = tracekit_testutil::scratch();
    let trace = scratch.join("bad-rate.ctf");
    let out = run(
        &common::example("edges"),
        "work",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "potato"),
        ],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["MEMTRACE_RATE=\"potato\"", "runs untraced"]);
    assert!(!trace.exists(), "no trace is started");
}

#[test]
fn unwritable_path_warns_and_runs_untraced() {
    let out = run(
        &common::example("edges"),
        "work",
        &[("MEMTRACE", "/nonexistent-tracekit-dir/trace.ctf")],
    );
    assert_ran_to_the_end(&out);
    one_warning(
        &out,
        &[
            "cannot open trace file /nonexistent-tracekit-dir/trace.ctf",
            "runs untraced",
        ],
    );
}

#[test]
fn dev_full_warns_and_runs_untraced() {
    let out = run(
        &common::example("edges"),
        "work",
        &[("MEMTRACE", "/dev/full"), ("MEMTRACE_RATE", "1.0")],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["/dev/full", "No space left on device"]);
}

#[test]
fn disk_full_while_tracing_warns_once_and_keeps_what_was_written() {
    let scratch = tracekit_testutil::scratch();
    let trace = scratch.join("disk-full.ctf");
    let out = run(
        &common::example("edges"),
        "disk-full",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    assert_ran_to_the_end(&out);
    one_warning(&out, &["No space left on device", "tracing stopped"]);
    // What the flush before the disk filled wrote is a valid trace.
    let t = common::read_trace(&trace);
    assert_eq!(t.allocs.iter().filter(|a| a.length == 4321).count(), 10);
}

#[test]
fn panic_with_abort_leaves_a_trace_with_the_last_events() {
    let scratch = tracekit_testutil::scratch();
    let trace = scratch.join("panic-abort.ctf");
    let out = run(
        &common::example_plain_abort("edges"),
        "panic",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("edges: deliberate panic"),
        "the previous hook ran: {stderr}"
    );
    // Allocated microseconds before the panic, long before the periodic
    // flush: only the panic hook can have written them.
    let t = common::read_trace(&trace);
    assert_eq!(t.warnings, 0);
    let marked: Vec<_> = t.allocs.iter().filter(|a| a.length == 4321).collect();
    assert_eq!(marked.len(), 10);
    for a in marked {
        let names: Vec<String> = a
            .backtrace
            .iter()
            .flat_map(|c| t.locations.get(c).into_iter().flatten())
            .map(|l| l.defname.to_str_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n == "edges::marker_blocks"),
            "backtrace {names:?}"
        );
    }
}

#[test]
fn no_line_tables_warns_once() {
    let scratch = tracekit_testutil::scratch();
    let binary = common::example_plain_abort("edges");
    let trace = scratch.join("no-lines.ctf");
    let out = run(
        &binary,
        "work",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    assert_ran_to_the_end(&out);
    let exe = std::fs::canonicalize(&binary).expect("example path");
    one_warning(
        &out,
        &[
            &format!("{} has no line tables", exe.display()),
            "debug = \"line-tables-only\"",
            "force-frame-pointers",
        ],
    );
    // Functions are still named, from the symbol table.
    let t = common::read_trace(&trace);
    assert!(
        t.locations
            .values()
            .flatten()
            .any(|l| l.defname.to_str_lossy() == "edges::marker_blocks"),
        "no edges::marker_blocks"
    );

    // With line tables (the workspace's release profile): no warning.
    let out = run(
        &common::example("edges"),
        "work",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    assert_ran_to_the_end(&out);
    assert_eq!(tracer_lines(&out), Vec::<String>::new());
}

/// The names of the locations of codes whose allocations have `words`
/// words, as (innermost location of the code in `file`, all names of that
/// code).
fn inlined_names(t: &common::Trace, words: u64, file: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for a in t.allocs.iter().filter(|a| a.length == words) {
        for code in &a.backtrace {
            let locs = t.locations.get(code).map(Vec::as_slice).unwrap_or(&[]);
            if locs
                .iter()
                .any(|l| l.filename.to_str_lossy().ends_with(file))
            {
                out.push(
                    locs.iter()
                        .map(|l| l.defname.to_str_lossy().into_owned())
                        .collect(),
                );
            }
        }
    }
    out
}

#[test]
fn inlined_frames_keep_their_module_path() {
    let scratch = tracekit_testutil::scratch();
    let trace = scratch.join("inline.ctf");
    let out = run(
        &common::example("edges"),
        "inline",
        &[
            ("MEMTRACE", trace.to_str().expect("utf-8 path")),
            ("MEMTRACE_RATE", "1.0"),
        ],
    );
    assert_ran_to_the_end(&out);
    let t = common::read_trace(&trace);
    // `Grid::with_cells`, inlined into `build_grids`, has an out-of-line
    // copy that vouches for its full path, type and inline module included.
    let grids = inlined_names(&t, 1234, "bin/edges.rs");
    assert!(!grids.is_empty());
    assert!(
        grids.iter().any(|names| names
            .windows(2)
            .any(|w| w[0] == "edges::build_grids" && w[1] == "edges::shapes::Grid::with_cells")),
        "{grids:?}"
    );
    // `only_inlined` has no copy: its path is not in the binary, and none is
    // made up.
    let plain = inlined_names(&t, 2345, "bin/edges.rs");
    assert!(
        plain.iter().any(|names| names
            .windows(2)
            .any(|w| w[0] == "edges::build_grids" && w[1] == "only_inlined")),
        "{plain:?}"
    );
    // Code of the standard library never gets the program's path.
    for l in t.locations.values().flatten() {
        let (file, name) = (l.filename.to_str_lossy(), l.defname.to_str_lossy());
        if file.contains("/library/") {
            assert!(!name.starts_with("edges::"), "{name} at {file}");
        }
    }
}

/// Function symbols of the ELF file at `path` (its full table, or else its
/// dynamic one), as (address, size, name without `@version`).
fn function_symbols(path: &Path) -> Vec<(u64, u64, String)> {
    use object::{Object, ObjectSymbol, ObjectSymbolTable};
    let data = std::fs::read(path).expect("read ELF file");
    let file = object::File::parse(&*data).expect("parse ELF file");
    let table = file
        .symbol_table()
        .filter(|t| t.symbols().next().is_some())
        .or_else(|| file.dynamic_symbol_table())
        .expect("a symbol table");
    table
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition() && s.size() > 0)
        .filter_map(|s| {
            let name = s.name().ok()?.split('@').next()?.to_owned();
            Some((s.address(), s.size(), name))
        })
        .collect()
}

/// The separate debug file of the ELF file at `path` under /usr/lib/debug,
/// found by build id, if installed.
fn debug_file_of(path: &Path) -> Option<std::path::PathBuf> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let p = Path::new("/usr/lib/debug/.build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    p.is_file().then_some(p)
}

/// This process's libc (the child's is the same file).
fn libc_path() -> std::path::PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read maps");
    let line = maps
        .lines()
        .find(|l| l.ends_with("/libc.so.6"))
        .expect("libc is mapped");
    let path = line.split_whitespace().last().expect("path");
    std::path::PathBuf::from(path)
}

/// Runs the `threads` mode and checks the name of every code in libc
/// against the symbols of `truth`: a symbol whose extent contains the
/// address, or else `libc.so.6+0x<return address>`. Returns how many
/// codes were named each way.
fn check_libc_frames(env: &[(&str, &str)], truth: &[(u64, u64, String)]) -> (usize, usize) {
    let scratch = tracekit_testutil::scratch();
    let trace = scratch.join(format!("libc-{}.ctf", env.len()));
    let trace_s = trace.to_str().expect("utf-8 path").to_owned();
    let mut full_env = vec![("MEMTRACE", trace_s.as_str()), ("MEMTRACE_RATE", "1.0")];
    full_env.extend_from_slice(env);
    let out = run(&common::example("edges"), "threads", &full_env);
    assert_ran_to_the_end(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let range = stdout
        .lines()
        .find_map(|l| l.strip_prefix("libc "))
        .expect("libc range line");
    let mut range = range
        .split(' ')
        .map(|x| u64::from_str_radix(x, 16).expect("hex"));
    let (start, end) = (range.next().expect("start"), range.next().expect("end"));
    let t = common::read_trace(&trace);
    let (mut named, mut anonymous) = (0, 0);
    for (code, locations) in &t.locations {
        let code = code.get() as u64;
        if !(start..end).contains(&code) {
            continue;
        }
        // libc's first segment is at address 0: the return address as an
        // address of the object is its offset from the start of the mapping.
        let addr = code - start;
        let outer = locations
            .first()
            .expect("a location")
            .defname
            .to_str_lossy()
            .into_owned();
        // The call instruction, which the return address follows.
        let call = addr - 1;
        let containing: Vec<&str> = truth
            .iter()
            .filter(|(a, size, _)| *a <= call && call - *a < *size)
            .map(|(_, _, n)| n.as_str())
            .collect();
        if containing.is_empty() {
            assert_eq!(outer, format!("libc.so.6+{addr:#x}"), "code {code:#x}");
            anonymous += 1;
        } else {
            assert!(
                containing.contains(&outer.as_str()),
                "{outer} for code {code:#x}, inside {containing:?}"
            );
            named += 1;
        }
    }
    (named, anonymous)
}

#[test]
fn libc_frames_are_named_by_what_contains_them() {
    let libc = libc_path();
    // Without debug files: the dynamic symbols of stripped libc, whose
    // thread roots (`start_thread`, ...) are not exported.
    let (_, anonymous) = check_libc_frames(
        &[("TRACEKIT_ALLOC_DEBUG_DIR", "")],
        &function_symbols(&libc),
    );
    assert!(anonymous > 0, "thread roots are no exported functions");
    // With libc's debug file, when installed: its full symbol table.
    match debug_file_of(&libc) {
        Some(debug) => {
            let (named, anonymous) = check_libc_frames(&[], &function_symbols(&debug));
            assert!(
                named > 0 && anonymous == 0,
                "{named} named, {anonymous} not"
            );
        }
        None => println!(
            "no debug file for {}: that half is not checked",
            libc.display()
        ),
    }
}
