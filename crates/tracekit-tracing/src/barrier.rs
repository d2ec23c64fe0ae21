//! An asymmetric fence, so that a thread's hot path can publish "I am writing my
//! buffer" with a plain store while a rare flush from another thread still sees
//! it: the flushing thread asks the kernel (`membarrier`, private expedited) to run
//! a full memory barrier on every thread of the process, which orders each
//! thread's earlier store before its later load as a locked instruction on the hot
//! path would, at a cost paid only by the flush.
//!
//! Where the kernel refuses (before Linux 4.14, or under a seccomp filter), flushes
//! reach only the calling thread's buffer; the others are written when their
//! threads exit or fill them.

use std::sync::atomic::{AtomicU8, Ordering};

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration, from the kernel's
/// `linux/membarrier.h` (the `libc` crate does not export them for glibc).
const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// 0: not asked yet; 1: available; 2: refused.
static STATE: AtomicU8 = AtomicU8::new(0);

fn membarrier(cmd: libc::c_int) -> bool {
    // SAFETY: membarrier takes two integers and a cpu id and touches no memory of
    // ours; it fails with an error code when not available.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) == 0 }
}

/// Registers the process for the heavy fence; whether it is available.
pub(crate) fn register() -> bool {
    match STATE.load(Ordering::Acquire) {
        1 => true,
        2 => false,
        _ => {
            let ok = membarrier(REGISTER_PRIVATE_EXPEDITED);
            STATE.store(if ok { 1 } else { 2 }, Ordering::Release);
            ok
        }
    }
}

/// A full memory barrier on every running thread of the process; false when the
/// kernel cannot do it (then nothing was ordered).
pub(crate) fn heavy() -> bool {
    register() && membarrier(PRIVATE_EXPEDITED)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_heavy_fence_is_available_here() {
        // Linux 4.14 and later, without seccomp filters: every machine this
        // project tests on. A refusal would silently narrow flushes.
        assert!(super::heavy());
    }
}
