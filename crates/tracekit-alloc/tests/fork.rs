//! Fork: tracing at rate 1 (every allocation sampled) across `fork`. The
//! child's allocations and frees must not reach the trace, whether the child
//! exits normally (running the exit hook) or with `_exit`; the parent's
//! allocations before and after the fork must.

mod common;

#[global_allocator]
static A: tracekit_alloc::Tracer<std::alloc::System> =
    tracekit_alloc::Tracer::new(std::alloc::System);

const BEFORE: usize = 1111;
const CHILD: usize = 2222;
const AFTER: usize = 3333;

#[inline(never)]
fn words(n: usize) -> Vec<u64> {
    std::hint::black_box(vec![7u64; n])
}

fn fork_child(mut child: impl FnMut()) {
    // SAFETY: fork has no preconditions; the child only allocates, frees and
    // exits, all of which the tracer supports after fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        child();
        unreachable!("the child exits");
    }
    let mut status = 0;
    // SAFETY: waits for the child just created; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
}

fn main() {
    let path = common::temp_path("fork.ctf");
    let guard = tracekit_alloc::start_tracing(&path, 1.0).expect("start tracing");
    let before = words(BEFORE);
    // Let the background thread write something first, so that the child
    // inherits a writer with a history.
    std::thread::sleep(std::time::Duration::from_millis(1200));

    // A child that exits normally: the exit hook must not flush.
    let mut keep = Some(before);
    fork_child(|| {
        let v = words(CHILD);
        drop(keep.take()); // frees a block the parent sampled
        drop(v);
        assert!(!tracekit_alloc::currently_tracing());
        assert!(matches!(
            tracekit_alloc::start_tracing(common::temp_path("child.ctf"), 1.0),
            Err(tracekit_alloc::Error::ForkedChild)
        ));
        std::process::exit(0);
    });
    // A child that leaves with _exit.
    fork_child(|| {
        let v = words(CHILD);
        drop(v);
        // SAFETY: ends the child at once, as a fork-exec failure path would.
        unsafe { libc::_exit(0) };
    });
    let before = keep.expect("the parent's block is untouched");
    let after = words(AFTER);
    assert!(tracekit_alloc::currently_tracing());
    guard.stop().expect("stop tracing");

    let trace = common::read_trace(&path);
    assert_eq!(trace.warnings, 0, "no packet from another pid");
    let find = |n: usize| {
        trace
            .allocs
            .iter()
            .filter(|a| a.length == n as u64)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        find(BEFORE).len(),
        1,
        "the parent's allocation before the fork"
    );
    assert!(!find(BEFORE)[0].collected, "freed only in the child");
    assert_eq!(
        find(AFTER).len(),
        1,
        "the parent's allocation after the fork"
    );
    assert!(
        find(CHILD).is_empty(),
        "the children's allocations stay out"
    );
    assert_eq!(trace.info.pid, i64::from(std::process::id() as i32));
    drop((before, after));
    let _ = std::fs::remove_file(&path);
    println!("1 passed, 0 failed");
}
