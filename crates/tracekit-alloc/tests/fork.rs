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
    // SAFETY: fork(2) has no preconditions of its own; the care is for the
    // child of a process with other threads (the tracer's writer), which
    // inherits only this thread. The child runs only what stays sound there:
    // allocating and freeing (glibc's malloc makes its locks usable in the
    // child, and the tracer's atfork handler stops tracing in it, which this
    // test checks), the tracer's own calls, and `exit` or `_exit`; it never
    // returns into the parent's code.
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
    let scratch = tracekit_testutil::scratch();
    let path = scratch.join("fork.ctf");
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
            tracekit_alloc::start_tracing(scratch.join("child.ctf"), 1.0),
            Err(tracekit_alloc::Error::ForkedChild)
        ));
        std::process::exit(0);
    });
    // A child that leaves with _exit.
    fork_child(|| {
        let v = words(CHILD);
        drop(v);
        // SAFETY: `_exit` ends the child at once and runs nothing of the
        // parent's (no exit handlers, no destructors), as a fork-exec failure
        // path does.
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
    println!("1 passed, 0 failed");
}
