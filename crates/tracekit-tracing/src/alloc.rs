//! Allocations per span: what the program allocated while a span was entered.
//!
//! With `tracekit-alloc` tracing the program's heap (its `Tracer` the global
//! allocator, a session active), a span's entry reads the thread's sampled
//! allocations ([`tracekit_alloc::thread_sampled`]) and its exit reads them
//! again; the slice's end record carries the difference as two arguments:
//!
//! | argument | type | what |
//! |---|---|---|
//! | `allocated_bytes` | `uint64` (`uint32` when it fits) | bytes allocated on the thread while the span was entered, its children's included, as memtrace estimates them (samples times the bytes a sample stands for: exact at `MEMTRACE_RATE=1`) |
//! | `allocations` | `uint64` (`uint32` when it fits) | allocations sampled meanwhile (every one at rate 1) |
//!
//! A slice during which nothing was sampled has neither. The allocator keeps
//! its counts on its sampled path only and the layer reads a thread local at
//! entry and exit, so neither fast path learns of the other; without the
//! `alloc` feature the marks are empty and cost nothing.
//!
//! What the layer itself allocates in its callbacks (a new span's fields, a
//! thread's first strings, a cache entry) is left out: each callback counts
//! its own allocations ([`Own`]) and a mark is the thread's allocations less
//! those, so a span's figures are the program's.

/// The memtrace domain of the calling thread's sampled allocations, while
/// tracekit-alloc traces the heap: written with the thread's record, so that
/// a viewer joins each thread to its heap.
pub(crate) fn thread_domain() -> Option<u16> {
    #[cfg(feature = "alloc")]
    {
        tracekit_alloc::thread_domain()
    }
    #[cfg(not(feature = "alloc"))]
    {
        None
    }
}

/// A reading of the thread's sampled allocations, taken at a span's entry.
#[cfg(feature = "alloc")]
pub(crate) type Mark = tracekit_alloc::ThreadSampled;
/// Without the `alloc` feature, nothing.
#[cfg(not(feature = "alloc"))]
pub(crate) type Mark = ();

#[cfg(feature = "alloc")]
thread_local! {
    /// What the layer's callbacks allocated on this thread so far.
    static OWN: std::cell::Cell<Mark> = const {
        std::cell::Cell::new(tracekit_alloc::ThreadSampled { samples: 0, allocations: 0 })
    };
}

/// While it lives, the thread's allocations are the layer's own: made at the
/// start of a callback, dropped at its end.
pub(crate) struct Own(Mark);

impl Own {
    /// Starts counting the layer's own allocations.
    #[inline]
    pub(crate) fn start() -> Own {
        #[cfg(feature = "alloc")]
        {
            Own(tracekit_alloc::thread_sampled())
        }
        #[cfg(not(feature = "alloc"))]
        {
            Own(())
        }
    }

    /// The thread's mark as the callback began: its allocations then, less
    /// the layer's own before.
    #[inline]
    pub(crate) fn mark(&self) -> Mark {
        #[cfg(feature = "alloc")]
        {
            self.0.since(OWN.with(std::cell::Cell::get))
        }
    }
}

impl Drop for Own {
    #[inline]
    fn drop(&mut self) {
        #[cfg(feature = "alloc")]
        {
            let d = tracekit_alloc::thread_sampled().since(self.0);
            if d.allocations != 0 {
                let _ = OWN.try_with(|own| {
                    let o = own.get();
                    own.set(tracekit_alloc::ThreadSampled {
                        samples: o.samples.wrapping_add(d.samples),
                        allocations: o.allocations.wrapping_add(d.allocations),
                    });
                });
            }
        }
    }
}

/// What the thread allocated from mark `start` to mark `now` (both of this
/// thread): estimated bytes and allocations; `None` when nothing was sampled
/// between.
#[inline]
pub(crate) fn between(start: Mark, now: Mark) -> Option<(u64, u64)> {
    #[cfg(feature = "alloc")]
    {
        let d = now.since(start);
        if d.allocations == 0 {
            return None;
        }
        let per_sample = tracekit_alloc::bytes_per_sample()?;
        Some((
            (d.samples as f64 * per_sample).round() as u64,
            d.allocations,
        ))
    }
    #[cfg(not(feature = "alloc"))]
    {
        let ((), ()) = (start, now);
        None
    }
}
