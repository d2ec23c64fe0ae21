//! Large arrays read at random (an analysis's live table, a backtrace trie,
//! the sites of a scan, a column growing in memory): grown on transparent huge
//! pages where the kernel offers them on request
//! (`/sys/kernel/mm/transparent_hugepage/enabled` set to `madvise`), and their
//! entries asked for ahead of use ([`prefetch`]); and the memory freed after a
//! phase that allocated much given back to the system ([`give_back`]).
//!
//! Objects that die in random order make the live table tens of megabytes read at
//! random; on 4 KiB pages nearly every access also misses the TLB, and each page
//! costs a fault when first touched. On the `top` bench's sample trace a pipelined
//! pass (`top_speed ... pipelined`, alternating) took 76.5 ms without the advice and
//! 64.6 ms with it (medians); the program trace, whose live set is small, was
//! unchanged (87 ms).

/// Appends `value` to `v`, growing it as `Vec::push` would (doubling), and asks for
/// huge pages when it grows.
#[inline]
pub fn push<T>(v: &mut Vec<T>, value: T) {
    if v.len() == v.capacity() {
        grow(v, 1);
    }
    v.push(value);
}

/// Makes room for `additional` more elements in `v` (at least doubling it), asking
/// for huge pages when it grows.
#[inline]
pub fn reserve<T>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() < additional {
        grow(v, additional);
    }
}

#[cold]
#[inline(never)]
fn grow<T>(v: &mut Vec<T>, additional: usize) {
    v.reserve(additional.max(v.capacity()).max(16));
    advise(v);
}

/// Asks the kernel to back `v`'s buffer with huge pages. A hint: without transparent
/// huge page support nothing changes.
///
/// The range covers the buffer's whole 4 KiB pages, not only its aligned huge pages:
/// a large buffer is its own `mmap`, and advising part of it would split the mapping,
/// after which growing it copies instead of `mremap` (one pass of the sample trace:
/// 24–25k page faults when advising the aligned huge pages alone, 19–21k without
/// advice, 16–17k advising the whole range).
#[allow(clippy::ptr_arg)] // The capacity, not the length, is the buffer.
fn advise<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
        if bytes < HUGE {
            return;
        }
        let start = v.as_ptr() as usize & !(PAGE - 1);
        let Some(end) = (v.as_ptr() as usize)
            .checked_add(bytes)
            .and_then(|e| e.checked_next_multiple_of(PAGE))
        else {
            return;
        };
        // SAFETY: MADV_HUGEPAGE neither reads nor writes memory; it only changes how
        // the kernel backs the range, whose pages are mapped (they hold `v`'s buffer,
        // and the bytes around it on its first and last page belong to the same
        // mapping). A failure (no THP support) leaves the range as it was, so it is
        // ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Asks the processor to fetch the cache line of `value` (nothing for `None`,
/// or off x86-64): a hint, which never faults.
#[inline(always)]
pub fn prefetch<T>(value: Option<&T>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = value {
        // SAFETY: a prefetch reads nothing the program sees and cannot fault,
        // and the address is a live reference's.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (v as *const T).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Gives the memory freed so far back to the system. glibc's allocator keeps
/// what a program frees for its later allocations, so that after a phase that
/// allocated much and let it all go (naming a recording's addresses from the
/// debug information of its objects) the process would go on holding it;
/// elsewhere this does nothing.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's own
    // to the system; no memory in use is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Growing through huge-page advice keeps every element, past the sizes where the
    /// advice starts (2 MiB) and across reallocations.
    #[test]
    fn growth_keeps_the_contents() {
        let mut v: Vec<u32> = Vec::new();
        for i in 0..3_000_000u32 {
            push(&mut v, i);
        }
        reserve(&mut v, 5_000_000);
        assert!(v.capacity() >= 8_000_000);
        v.resize(8_000_000, 7);
        assert!(
            v[..3_000_000]
                .iter()
                .enumerate()
                .all(|(i, &x)| x == i as u32)
        );
        assert!(v[3_000_000..].iter().all(|&x| x == 7));
    }
}
