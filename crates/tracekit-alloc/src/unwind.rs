//! Capturing the return addresses of a sampled allocation.
//!
//! Two unwinders:
//!
//! * **Frame pointers** (x86-64 `rbp`, AArch64 `x29`): each frame starts with
//!   the caller's frame pointer followed by the return address. The walk is
//!   bounded: every frame pointer must lie inside the thread's stack, be
//!   aligned, and be above the previous one, and the depth is capped, so a
//!   broken chain ends the walk instead of faulting. About 1 ns per frame.
//! * **DWARF CFI** through libgcc's `_Unwind_Backtrace` (always linked by
//!   std on Linux): works without frame pointers but costs about 100-200 ns
//!   per frame, which is paid only on sampled allocations.
//!
//! Rust does not keep frame pointers by default on x86-64 Linux; build with
//! `RUSTFLAGS="-C force-frame-pointers=yes"` to get the fast walk. Which one is
//! used is decided once per process by [`probe`], which walks a known chain of
//! three functions of this crate and checks the walk finds them; the variable
//! `TRACEKIT_ALLOC_UNWIND=fp|dwarf` overrides it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::thread;

/// Most frames kept per backtrace (the innermost ones).
pub(crate) const MAX_FRAMES: usize = 1024;

/// Codes below this are never return addresses (the first page is never
/// mapped): a backtrace cut at [`MAX_FRAMES`] ends, where its outermost frame
/// would be, with one that counts the frames left out (this one's place
/// included), at most `CUT_LIMIT - 1` ("or more").
pub(crate) const CUT_LIMIT: usize = 4096;

/// The frames a cut backtrace left out, if `code` is its mark.
pub(crate) fn cut_frames(code: u64) -> Option<u64> {
    (code > 0 && code < CUT_LIMIT as u64).then_some(code)
}

const UNDECIDED: u8 = 0;
const FRAME_POINTERS: u8 = 1;
const DWARF: u8 = 2;

static METHOD: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The unwinder in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwinder {
    /// Walking the frame-pointer chain.
    FramePointers,
    /// libgcc's DWARF unwinder.
    Dwarf,
}

/// Decides the unwinder (once); cheap afterwards.
pub(crate) fn unwinder() -> Unwinder {
    let mut m = METHOD.load(Ordering::Relaxed);
    if m == UNDECIDED {
        m = match std::env::var("TRACEKIT_ALLOC_UNWIND").as_deref() {
            Ok("fp") => FRAME_POINTERS,
            Ok("dwarf") => DWARF,
            _ => {
                if probe() {
                    FRAME_POINTERS
                } else {
                    DWARF
                }
            }
        };
        METHOD.store(m, Ordering::Relaxed);
    }
    if m == FRAME_POINTERS {
        Unwinder::FramePointers
    } else {
        Unwinder::Dwarf
    }
}

/// Captures the current thread's return addresses, innermost first, into
/// `out`; returns how many were written. A stack deeper than `out` ends with
/// the mark of a cut ([`cut_frames`]) in the last place.
#[inline(never)]
pub(crate) fn capture(out: &mut [usize]) -> usize {
    let (n, left) = walk(out);
    if left > 0 && n > 0 {
        out[n - 1] = (left + 1).min(CUT_LIMIT - 1);
    }
    n
}

/// The walk of [`capture`]: the frames written, and how many more the stack
/// has (counted up to [`CUT_LIMIT`]).
fn walk(out: &mut [usize]) -> (usize, usize) {
    match unwinder() {
        Unwinder::FramePointers => {
            let (lo, hi) = stack_bounds();
            // SAFETY: `[lo, hi)` is this thread's stack as pthreads reports
            // it, or `(0, 0)`, which reads nothing. The register read is the
            // frame pointer of this live frame (`capture` is never inlined)
            // when frame pointers are kept, which `probe` checked for this
            // crate's code: from it up to `hi` the stack is mapped, and only
            // this thread writes it. (Forcing the walk with
            // `TRACEKIT_ALLOC_UNWIND=fp` in a build without frame pointers
            // leaves `fp` anywhere in `[lo, hi)`, the thread's own stack.)
            unsafe { walk_frame_pointers(current_frame_pointer(), lo, hi, out) }
        }
        Unwinder::Dwarf => dwarf_backtrace(out),
    }
}

/// Reads the frame pointer register of the calling function.
#[inline(always)]
fn current_frame_pointer() -> usize {
    let fp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register into a local; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register into a local; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = 0;
    }
    fp
}

/// The current thread's stack as `[lo, hi)`, cached per thread; `(0, 0)` when
/// unknown (the walk then records nothing).
fn stack_bounds() -> (usize, usize) {
    let mut l = thread::local();
    if l.stack == (0, 0) {
        l.stack = query_stack_bounds().unwrap_or((0, 0));
        thread::set_local(l);
    }
    l.stack
}

fn query_stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before use and
    // destroyed once; the out-pointers are valid locals. For the main thread
    // glibc may read /proc/self/maps and allocate: this runs inside the
    // tracer's reentrancy guard, so that allocation is not traced.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return None;
        }
        let lo = addr as usize;
        Some((lo, lo.checked_add(size)?))
    }
}

/// Walks a frame-pointer chain starting at frame pointer `fp`, reading only
/// words inside `[lo, hi)`. Each frame is two words: the caller's frame
/// pointer, then the return address. Returns the frames written to `out`
/// and how many more the chain has past them (counted up to [`CUT_LIMIT`]).
///
/// # Safety
///
/// The walk reads aligned words at `fp` and above, only inside `[lo, hi)`,
/// following links that go strictly up. So every aligned word from
/// `max(fp, lo)` up to `hi` must be readable for the whole call and not
/// written by another thread meanwhile. That holds when `fp` is a frame
/// pointer of the calling thread, taken in a frame that is still live, and
/// `[lo, hi)` is the calling thread's stack: the stack from a live frame up
/// to its top is mapped and only this thread writes it. Empty bounds
/// (`lo >= hi`, such as the `(0, 0)` of unknown ones) read nothing, whatever
/// `fp` is.
pub(crate) unsafe fn walk_frame_pointers(
    mut fp: usize,
    lo: usize,
    hi: usize,
    out: &mut [usize],
) -> (usize, usize) {
    let word = std::mem::size_of::<usize>();
    let (mut n, mut more) = (0, 0);
    while more < CUT_LIMIT {
        // Both words of the frame record must be inside the stack.
        if fp < lo || !fp.is_multiple_of(word) || hi.saturating_sub(fp) < 2 * word {
            break;
        }
        // SAFETY: `fp` and `fp + word` are aligned and inside `[lo, hi)`
        // (checked just above: `lo <= fp` and `fp + 2 * word <= hi`), and
        // `fp` is the starting frame pointer or above it (each link goes
        // strictly up), so the caller's contract makes both words readable.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (p.read(), p.add(1).read())
        };
        if ret == 0 {
            break;
        }
        match out.get_mut(n) {
            Some(slot) => {
                *slot = ret;
                n += 1;
            }
            None => more += 1,
        }
        // The chain must go strictly up the stack, or it loops.
        if next <= fp {
            break;
        }
        fp = next;
    }
    (n, more)
}

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

type UnwindReasonCode = i32;
const URC_NO_REASON: UnwindReasonCode = 0;
const URC_END_OF_STACK: UnwindReasonCode = 5;

type TraceFn = extern "C" fn(ctx: *mut UnwindContext, arg: *mut c_void) -> UnwindReasonCode;

// SAFETY: these are the Itanium C++ ABI's unwinder entry points, which the
// platform's libgcc_s (or LLVM's libunwind) exports with exactly these C
// signatures; `UnwindContext` is only ever handled behind a pointer the
// unwinder itself passes to the callback.
unsafe extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> UnwindReasonCode;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

struct Collector<'a> {
    out: &'a mut [usize],
    n: usize,
    /// Frames past `out`.
    more: usize,
}

extern "C" fn collect_frame(ctx: *mut UnwindContext, arg: *mut c_void) -> UnwindReasonCode {
    // SAFETY: `arg` is the `&mut Collector` passed to `_Unwind_Backtrace`
    // below, alive and unaliased for the whole walk.
    let c = unsafe { &mut *(arg as *mut Collector<'_>) };
    // SAFETY: `ctx` is the live unwind context the unwinder passes in.
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if ip == 0 || c.more >= CUT_LIMIT {
        return URC_END_OF_STACK;
    }
    match c.out.get_mut(c.n) {
        Some(slot) => {
            *slot = ip;
            c.n += 1;
        }
        None => c.more += 1,
    }
    URC_NO_REASON
}

fn dwarf_backtrace(out: &mut [usize]) -> (usize, usize) {
    let mut c = Collector { out, n: 0, more: 0 };
    // SAFETY: the callback only writes through the Collector pointer, which
    // outlives the call; _Unwind_Backtrace does not retain it.
    unsafe {
        _Unwind_Backtrace(collect_frame, &mut c as *mut Collector<'_> as *mut c_void);
    }
    (c.n, c.more)
}

// The probe: three never-inlined functions whose frames a working
// frame-pointer walk must find, in order.

#[inline(never)]
fn probe_leaf(out: &mut [usize; 4]) -> usize {
    let (lo, hi) = query_stack_bounds().unwrap_or((0, 0));
    // SAFETY: `[lo, hi)` is this thread's stack as pthreads reports it, or
    // `(0, 0)`, which reads nothing; the register read is this live frame's
    // frame pointer if frame pointers are kept (what the probe finds out),
    // and otherwise some value the walk checks against `[lo, hi)`, this
    // thread's own stack.
    let (n, _) = unsafe { walk_frame_pointers(current_frame_pointer(), lo, hi, out) };
    std::hint::black_box(n)
}

#[inline(never)]
fn probe_middle(out: &mut [usize; 4]) -> usize {
    let n = probe_leaf(std::hint::black_box(out));
    std::hint::black_box(n)
}

#[inline(never)]
fn probe_outer(out: &mut [usize; 4]) -> usize {
    let n = probe_middle(std::hint::black_box(out));
    std::hint::black_box(n)
}

/// True when a frame-pointer walk from `probe_leaf` finds return addresses
/// inside `probe_middle` and then `probe_outer`.
pub(crate) fn probe() -> bool {
    let mut out = [0usize; 4];
    let n = probe_outer(&mut out);
    let within = |ret: usize, f: usize| ret > f && ret - f < 4096;
    n >= 2
        && within(out[0], probe_middle as *const () as usize)
        && within(out[1], probe_outer as *const () as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a fake stack of `frames` records chained upwards.
    fn fake_stack(frames: usize) -> (Vec<usize>, usize) {
        let mut stack = vec![0usize; frames * 2 + 4];
        let base = stack.as_ptr() as usize;
        for i in 0..frames {
            let here = 2 + i * 2;
            let next = if i + 1 < frames {
                base + (here + 2) * 8
            } else {
                0
            };
            stack[here] = next;
            stack[here + 1] = 0x1000 + i;
        }
        let first = base + 2 * 8;
        (stack, first)
    }

    #[test]
    fn walks_a_well_formed_chain() {
        let (stack, first) = fake_stack(10);
        let lo = stack.as_ptr() as usize;
        let hi = lo + stack.len() * 8;
        let mut out = [0usize; 32];
        // SAFETY: `[lo, hi)` is `stack`'s buffer, alive and unshared.
        let n = unsafe { walk_frame_pointers(first, lo, hi, &mut out) };
        // The last record points to 0 (below the stack): the walk stops there.
        assert_eq!(n, (10, 0));
        assert_eq!(out[..3], [0x1000, 0x1001, 0x1002]);
    }

    #[test]
    fn stops_at_the_depth_cap_and_counts_the_rest() {
        let (stack, first) = fake_stack(10);
        let lo = stack.as_ptr() as usize;
        let hi = lo + stack.len() * 8;
        let mut out = [0usize; 4];
        // SAFETY: `[lo, hi)` is `stack`'s buffer, alive and unshared.
        let walked = unsafe { walk_frame_pointers(first, lo, hi, &mut out) };
        assert_eq!(walked, (4, 6));
        assert_eq!(out, [0x1000, 0x1001, 0x1002, 0x1003]);
    }

    #[test]
    fn a_cut_stack_ends_with_its_mark() {
        // Deeper than the buffer: the outermost place holds the frames left
        // out, its own included, below any return address.
        #[inline(never)]
        fn deep(n: u32, out: &mut [usize]) -> usize {
            if n == 0 {
                return capture(out);
            }
            let k = deep(n - 1, std::hint::black_box(out));
            std::hint::black_box(k)
        }
        let mut out = [0usize; 8];
        let n = deep(50, &mut out);
        assert_eq!(n, 8);
        let cut = cut_frames(out[7] as u64).expect("a mark");
        assert!(cut > 40, "{cut} frames left out");
        assert!(out[..7].iter().all(|&r| cut_frames(r as u64).is_none()));
        let mut room = [0usize; MAX_FRAMES];
        let n = deep(50, &mut room);
        assert!(
            n > 50 && cut_frames(room[n - 1] as u64).is_none(),
            "not cut"
        );
    }

    #[test]
    fn never_leaves_the_bounds() {
        let (mut stack, first) = fake_stack(6);
        let lo = stack.as_ptr() as usize;
        let hi = lo + stack.len() * 8;
        let mut out = [0usize; 32];
        // A loop (points to itself), a downward link, a misaligned link and a
        // link past the top must all end the walk.
        for bad in [first, first - 16, first + 3, hi, usize::MAX - 7] {
            stack[2 + 2 * 2] = bad;
            // SAFETY: `[lo, hi)` is `stack`'s buffer, alive and unshared.
            let (n, more) = unsafe { walk_frame_pointers(first, lo, hi, &mut out) };
            assert!(n <= 3 && more == 0, "bad link {bad:#x}: walked {n}");
        }
        // SAFETY: as above; empty bounds read nothing.
        unsafe {
            assert_eq!(walk_frame_pointers(0, lo, hi, &mut out), (0, 0));
            assert_eq!(walk_frame_pointers(first, 0, 0, &mut out), (0, 0));
            // Unknown bounds, `(0, 0)`, read nothing, even from a frame
            // pointer of 0.
            assert_eq!(walk_frame_pointers(0, 0, 0, &mut out), (0, 0));
            assert_eq!(walk_frame_pointers(8, 0, 0, &mut out), (0, 0));
        }
    }

    #[test]
    fn dwarf_unwinder_finds_this_test() {
        let mut out = [0usize; 64];
        let (n, _) = dwarf_backtrace(&mut out);
        assert!(n > 3, "only {n} frames");
        let me = dwarf_unwinder_finds_this_test as *const () as usize;
        assert!(
            out[..n].iter().any(|&r| r > me && r - me < 4096),
            "{:x?}",
            &out[..n]
        );
    }

    #[test]
    fn probe_agrees_with_the_build() {
        // Whatever the build flags, the probe must not crash, and when it
        // says yes the walk must reach this test function.
        if probe() {
            let mut out = [0usize; 64];
            let (lo, hi) = query_stack_bounds().unwrap_or((0, 0));
            // SAFETY: this thread's stack and, as the probe found, this
            // frame's frame pointer.
            let (n, _) = unsafe { walk_frame_pointers(current_frame_pointer(), lo, hi, &mut out) };
            assert!(n > 1);
        }
    }
}
