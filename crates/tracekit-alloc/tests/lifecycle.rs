//! Process and thread life cycle: each scenario runs in a forked child that
//! traces itself (this parent never traces, so its children may), and the
//! parent checks the trace the child left.
//!
//! * killed with SIGKILL: events a few flush intervals old are in the trace
//!   (without the periodic flush nothing would be);
//! * `exit` while threads still allocate: the exit hook leaves a valid trace;
//! * a panic in `main`: the trace is flushed at exit;
//! * a caught panic: the panic hook flushes, and tracing goes on;
//! * thread-local destructors that allocate and free sampled blocks while
//!   their thread exits;
//! * `trace_if_requested`'s environment handling, and a locked trace file.

mod common;

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

#[inline(never)]
fn words(n: usize) -> Vec<u64> {
    black_box(vec![3u64; n])
}

/// Runs `child` in a forked process; returns its wait status.
fn in_child(child: impl FnOnce()) -> i32 {
    // SAFETY: this process is single-threaded here (the test has no harness
    // threads and never starts tracing), so the child may do anything.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        child();
        // SAFETY: leaves the child without running the parent's exit path.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just created.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    status
}

fn count_len(path: &Path, len: u64) -> (usize, usize) {
    let t = common::read_trace(path);
    let allocs: Vec<_> = t.allocs.iter().filter(|a| a.length == len).collect();
    (allocs.len(), allocs.iter().filter(|a| a.collected).count())
}

fn sigkill_loses_at_most_the_last_second() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("killed.ctf");
    let status = in_child(|| {
        let guard = tracekit_alloc::start_tracing(&path, 1.0).expect("start");
        std::mem::forget(guard);
        let keep: Vec<_> = (0..50).map(|_| words(4321)).collect();
        // The flush happens about once a second; leave room for a loaded machine.
        std::thread::sleep(Duration::from_millis(2500));
        black_box(&keep);
        // SAFETY: raising a signal has no preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    });
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
    assert_eq!(
        count_len(&path, 4321),
        (50, 0),
        "allocations 2.5 s before the kill"
    );
}

fn exit_with_threads_still_allocating() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("exit-busy.ctf");
    let status = in_child(|| {
        std::mem::forget(tracekit_alloc::start_tracing(&path, 1e-2).expect("start"));
        for t in 0..4 {
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0u64.. {
                    held.push(vec![t as u8; 16 + (i % 2000) as usize]);
                    if held.len() > 100 {
                        held.swap_remove((i % 100) as usize);
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(300));
        let _marker = words(2345);
        std::process::exit(0);
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    let t = common::read_trace(&path);
    assert_eq!(t.warnings, 0);
    let domains: std::collections::BTreeSet<_> = t.allocs.iter().map(|a| a.domain).collect();
    assert!(domains.len() >= 4, "domains {domains:?}");
    assert!(
        t.allocs.iter().any(|a| a.length == 2345),
        "the last allocation before exit"
    );
}

fn panic_in_main_flushes() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("panic.ctf");
    let status = in_child(|| {
        std::mem::forget(tracekit_alloc::start_tracing(&path, 1.0).expect("start"));
        let keep: Vec<_> = (0..50).map(|_| words(6543)).collect();
        black_box(&keep);
        // As a panic in `main` does: unwind, then leave through `exit`.
        std::panic::set_hook(Box::new(|_| {}));
        let r = std::panic::catch_unwind(|| panic!("boom"));
        assert!(r.is_err());
        std::process::exit(101);
    });
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 101);
    assert_eq!(count_len(&path, 6543), (50, 0));
}

fn caught_panic_flushes_and_tracing_goes_on() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("caught.ctf");
    let status = in_child(|| {
        // Installed first, so that the tracer's hook chains after it.
        std::panic::set_hook(Box::new(|_| {}));
        std::mem::forget(tracekit_alloc::start_tracing(&path, 1.0).expect("start"));
        let keep: Vec<_> = (0..50).map(|_| words(5432)).collect();
        black_box(&keep);
        let r = std::panic::catch_unwind(|| panic!("caught"));
        if r.is_ok() || !tracekit_alloc::currently_tracing() {
            // SAFETY: leaves the child at once, with a status the parent checks.
            unsafe { libc::_exit(3) };
        }
        // Killed long before the periodic flush: only the panic hook's flush
        // can have written the blocks.
        // SAFETY: raising a signal has no preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    });
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
        "status {status}: tracing stopped at a caught panic"
    );
    assert_eq!(count_len(&path, 5432), (50, 0));
}

struct Parting {
    sampled: Option<Vec<u64>>,
}

impl Drop for Parting {
    fn drop(&mut self) {
        // Runs during thread exit, in no particular order with the tracer's
        // own thread-local destructor.
        drop(self.sampled.take());
        black_box(words(777));
    }
}

thread_local! {
    static PARTING: std::cell::RefCell<Parting> = const { std::cell::RefCell::new(Parting { sampled: None }) };
}

fn thread_exit_destructors_allocate() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("tls.ctf");
    let status = in_child(|| {
        let guard = tracekit_alloc::start_tracing(&path, 1.0).expect("start");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    PARTING.with(|p| p.borrow_mut().sampled = Some(words(555)));
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        guard.stop().expect("stop");
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    assert_eq!(
        count_len(&path, 555),
        (8, 8),
        "blocks freed by destructors are collected"
    );
    assert_eq!(
        count_len(&path, 777).0,
        8,
        "destructors' own allocations are sampled"
    );
}

fn environment_and_locking() {
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("env.ctf");
    let status = in_child(|| {
        // SAFETY: the child is single-threaded here.
        unsafe {
            std::env::set_var("MEMTRACE", &path);
            std::env::set_var("MEMTRACE_RATE", "potato");
        }
        assert!(matches!(
            tracekit_alloc::try_trace_if_requested(),
            Err(tracekit_alloc::Error::InvalidRateVariable(_))
        ));
        // SAFETY: as above.
        unsafe { std::env::set_var("MEMTRACE_RATE", "0.5") };
        assert!(matches!(tracekit_alloc::try_trace_if_requested(), Ok(true)));
        assert!(
            std::env::var_os("MEMTRACE").is_none(),
            "children are not traced"
        );
        assert!(matches!(
            tracekit_alloc::try_trace_if_requested(),
            Ok(false)
        ));
        assert!(matches!(
            tracekit_alloc::start_tracing(scratch.join("other.ctf"), 0.5),
            Err(tracekit_alloc::Error::AlreadyTracing)
        ));
        assert!(matches!(
            tracekit_alloc::start_tracing("x.ctf", 0.0),
            Err(tracekit_alloc::Error::InvalidRate(_))
        ));
        assert!(matches!(
            tracekit_alloc::start_tracing("x.ctf", 1.5),
            Err(tracekit_alloc::Error::InvalidRate(_))
        ));
        tracekit_alloc::stop_tracing().expect("stop");
        assert!(matches!(
            tracekit_alloc::stop_tracing(),
            Err(tracekit_alloc::Error::NotTracing)
        ));
        std::process::exit(0);
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    assert_eq!(common::read_trace(&path).info.sample_rate, 0.5);

    // A file another process has locked is refused, and left intact.
    use std::os::unix::io::AsRawFd;
    let locked = scratch.join("locked.ctf");
    std::fs::write(&locked, b"precious").expect("write");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&locked)
        .expect("open");
    // SAFETY: `f` owns a valid descriptor.
    assert_eq!(unsafe { libc::lockf(f.as_raw_fd(), libc::F_TLOCK, 0) }, 0);
    let status = in_child(|| {
        let r = tracekit_alloc::start_tracing(&locked, 0.5);
        assert!(matches!(r, Err(tracekit_alloc::Error::Locked(_))), "{r:?}");
        std::process::exit(0);
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    assert_eq!(std::fs::read(&locked).expect("read"), b"precious");
}

fn main() {
    let scenarios: [(&str, fn()); 6] = [
        (
            "sigkill_loses_at_most_the_last_second",
            sigkill_loses_at_most_the_last_second,
        ),
        (
            "exit_with_threads_still_allocating",
            exit_with_threads_still_allocating,
        ),
        ("panic_in_main_flushes", panic_in_main_flushes),
        (
            "caught_panic_flushes_and_tracing_goes_on",
            caught_panic_flushes_and_tracing_goes_on,
        ),
        (
            "thread_exit_destructors_allocate",
            thread_exit_destructors_allocate,
        ),
        ("environment_and_locking", environment_and_locking),
    ];
    for (name, f) in scenarios {
        f();
        println!("test {name} ... ok");
    }
    println!("{} passed, 0 failed", scenarios.len());
}
