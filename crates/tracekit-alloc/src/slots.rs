//! Domain slots: the per-domain queues of raw sampled events.
//!
//! Each thread that samples claims a slot, and the slot's index is the
//! memtrace domain its events are written under, so in the trace one domain
//! is one thread (while at most [`MAX_SLOTS`] threads sample at once; beyond
//! that, threads share slots). A sampled allocation is queued as a raw
//! record (the return addresses, not yet symbolized) on its thread's slot; the
//! free of a sampled block is queued on the slot of the thread that allocated
//! it, so that each object's collect follows its alloc in one domain's
//! stream. The background thread (or, under heavy backlog, a sampling thread
//! itself) drains the queues into the memtrace writer.
//!
//! Raw record layout, in `u64` words:
//!
//! | word | alloc record | collect record |
//! | ---- | ------------ | -------------- |
//! | 0 | `KIND_ALLOC \| nframes << 8 \| generation << 32` | `KIND_COLLECT \| generation << 32` |
//! | 1 | sample key | sample key |
//! | 2 | time (µs since the epoch) | time |
//! | 3 | length in words | |
//! | 4 | nsamples | |
//! | 5.. | `nframes` return addresses, innermost first | |

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Number of domain slots (and so the largest number of domains in a trace).
pub(crate) const MAX_SLOTS: usize = 64;

/// Queue length (words) at which the background thread is woken early.
const SOFT_LIMIT: usize = 64 * 1024;

/// Queue length (words) at which a sampling thread drains the queues itself
/// rather than let them grow without bound.
const HARD_LIMIT: usize = 1024 * 1024;

pub(crate) const KIND_ALLOC: u64 = 1;
pub(crate) const KIND_COLLECT: u64 = 2;

/// Index of a domain slot, `< MAX_SLOTS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotId(u8);

impl SlotId {
    /// The slot with index `i` (taken modulo the slot count).
    pub(crate) fn new(i: usize) -> SlotId {
        SlotId((i % MAX_SLOTS) as u8)
    }

    /// The slot's index, which is also its memtrace domain.
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// A slot's queue.
pub(crate) struct Queue {
    /// Raw records (see the module docs).
    pub(crate) records: Vec<u64>,
    /// Timestamp of the last record, to keep the domain's clock monotone.
    last_time: i64,
}

struct Slot {
    queue: Mutex<Queue>,
    /// Number of live threads holding this slot.
    holders: AtomicU32,
}

static SLOTS: [Slot; MAX_SLOTS] = [const {
    Slot {
        queue: Mutex::new(Queue {
            records: Vec::new(),
            last_time: 0,
        }),
        holders: AtomicU32::new(0),
    }
}; MAX_SLOTS];

/// Round-robin counter for threads that find no free slot.
static OVERFLOW: AtomicUsize = AtomicUsize::new(0);

/// Claims the lowest free slot, or shares one when all are taken.
pub(crate) fn claim() -> SlotId {
    for (i, slot) in SLOTS.iter().enumerate() {
        if slot
            .holders
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return SlotId::new(i);
        }
    }
    let i = OVERFLOW.fetch_add(1, Ordering::Relaxed) % MAX_SLOTS;
    SLOTS[i].holders.fetch_add(1, Ordering::AcqRel);
    SlotId::new(i)
}

/// Gives back a slot claimed with [`claim`].
pub(crate) fn release(slot: SlotId) {
    SLOTS[slot.index()].holders.fetch_sub(1, Ordering::AcqRel);
}

/// A slot for a thread that can no longer claim one (late in its exit).
pub(crate) fn shared_fallback() -> SlotId {
    SlotId::new(OVERFLOW.fetch_add(1, Ordering::Relaxed))
}

/// Locks a slot's queue. A panic cannot happen while a queue is locked, but
/// a poisoned lock is still usable: the queue is plain data.
pub(crate) fn lock(slot: SlotId) -> MutexGuard<'static, Queue> {
    SLOTS[slot.index()]
        .queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

impl Queue {
    /// A timestamp for the next record: now, but never before the last one.
    fn stamp(&mut self) -> i64 {
        let t = crate::clock::now_us().max(self.last_time);
        self.last_time = t;
        t
    }

    /// Empties the queue and resets its clock (at a session start).
    pub(crate) fn reset(&mut self) {
        self.records.clear();
        self.last_time = 0;
    }
}

/// What the caller should do after queuing a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backlog {
    /// Nothing.
    Fine,
    /// Wake the background thread early.
    Wake,
    /// Drain the queues on this thread.
    Drain,
}

fn backlog(len: usize) -> Backlog {
    if len >= HARD_LIMIT {
        Backlog::Drain
    } else if len >= SOFT_LIMIT {
        Backlog::Wake
    } else {
        Backlog::Fine
    }
}

/// Queues an alloc record. `frames` are return addresses, innermost first.
pub(crate) fn push_alloc(
    slot: SlotId,
    generation: u32,
    key: u64,
    words: u64,
    nsamples: u64,
    frames: &[usize],
) -> Backlog {
    let mut q = lock(slot);
    let t = q.stamp();
    let head = KIND_ALLOC | (frames.len() as u64 & 0xFF_FFFF) << 8 | u64::from(generation) << 32;
    q.records
        .extend_from_slice(&[head, key, t as u64, words, nsamples]);
    q.records.extend(frames.iter().map(|&f| f as u64));
    backlog(q.records.len())
}

/// Queues a collect record on the slot that holds the allocation.
pub(crate) fn push_collect(slot: SlotId, generation: u32, key: u64) -> Backlog {
    let mut q = lock(slot);
    let t = q.stamp();
    let head = KIND_COLLECT | u64::from(generation) << 32;
    q.records.extend_from_slice(&[head, key, t as u64]);
    backlog(q.records.len())
}

/// Swaps every non-empty queue with `spare` in turn and hands the records to
/// `f` (outside the slot's lock).
pub(crate) fn drain(spare: &mut Vec<u64>, mut f: impl FnMut(SlotId, &[u64])) {
    for i in 0..MAX_SLOTS {
        let slot = SlotId::new(i);
        {
            let mut q = lock(slot);
            if q.records.is_empty() {
                continue;
            }
            std::mem::swap(&mut q.records, spare);
        }
        f(slot, spare);
        spare.clear();
        // Do not keep a burst's worth of memory around for ever.
        if spare.capacity() > 4 * SOFT_LIMIT {
            spare.shrink_to(SOFT_LIMIT);
        }
    }
}

/// Empties every queue (at a session start).
pub(crate) fn reset_all() {
    for i in 0..MAX_SLOTS {
        lock(SlotId::new(i)).reset();
    }
}

/// One decoded raw record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    Alloc {
        generation: u32,
        key: u64,
        time: i64,
        words: u64,
        nsamples: u64,
        frames: &'a [u64],
    },
    Collect {
        generation: u32,
        key: u64,
        time: i64,
    },
}

/// Iterates over the records of a drained queue. The records are written only
/// by this module, but a malformed tail still just ends the iteration.
pub(crate) fn records(mut words: &[u64]) -> impl Iterator<Item = Record<'_>> {
    std::iter::from_fn(move || {
        let head = *words.first()?;
        let generation = (head >> 32) as u32;
        match head & 0xFF {
            KIND_ALLOC => {
                let nframes = ((head >> 8) & 0xFF_FFFF) as usize;
                let end = 5usize.checked_add(nframes)?;
                let rec = words.get(..end)?;
                words = &words[end..];
                Some(Record::Alloc {
                    generation,
                    key: rec[1],
                    time: rec[2] as i64,
                    words: rec[3],
                    nsamples: rec[4],
                    frames: &rec[5..],
                })
            }
            KIND_COLLECT => {
                let rec = words.get(..3)?;
                words = &words[3..];
                Some(Record::Collect {
                    generation,
                    key: rec[1],
                    time: rec[2] as i64,
                })
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_queue() {
        // Slot 63 is not used by anything else in the unit tests.
        let slot = SlotId::new(63);
        lock(slot).reset();
        push_alloc(slot, 3, 41, 5, 2, &[0x1000, 0x2000, 0x3000]);
        push_collect(slot, 3, 41);
        push_alloc(slot, 4, 42, 1, 1, &[]);
        let mut spare = Vec::new();
        let mut seen = Vec::new();
        drain(&mut spare, |s, words| {
            if s == slot {
                seen.extend(records(words).map(|r| match r {
                    Record::Alloc {
                        generation,
                        key,
                        words,
                        nsamples,
                        frames,
                        ..
                    } => {
                        format!("alloc g{generation} k{key} w{words} n{nsamples} {frames:x?}")
                    }
                    Record::Collect {
                        generation, key, ..
                    } => format!("collect g{generation} k{key}"),
                }));
            }
        });
        assert_eq!(
            seen,
            [
                "alloc g3 k41 w5 n2 [1000, 2000, 3000]",
                "collect g3 k41",
                "alloc g4 k42 w1 n1 []"
            ]
        );
    }

    #[test]
    fn timestamps_never_decrease_within_a_slot() {
        let slot = SlotId::new(62);
        let mut q = lock(slot);
        q.reset();
        q.last_time = i64::MAX - 5;
        assert_eq!(q.stamp(), i64::MAX - 5);
        q.reset();
    }

    #[test]
    fn truncated_records_end_the_iteration() {
        let words = [KIND_ALLOC | 4 << 8, 1, 2, 3, 4, 5];
        assert_eq!(records(&words).count(), 0);
        assert_eq!(records(&[99]).count(), 0);
    }
}
