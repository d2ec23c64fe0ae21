//! The answers: those made lately (the cache), the queries in flight with
//! the requests that wait for them, and the queries not yet started, a
//! queue per endpoint. As tracing-appender keeps the handle a program writes
//! to apart from the worker that writes, the thread that reads requests
//! holds only the handle, [`Answers`]: it gives an answer already made or
//! queues the query, and never makes one. The [`Workers`], threads of their
//! own, take the queries in turn and hand their answers back through it.
//!
//! The memory of queries in flight is bounded by the workers (as many as the
//! machine has cores), not by the requests; a query asked again while it runs
//! waits for that run rather than starting another; the queues take turns,
//! so that a run of flame graphs does not hold up a `top`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hyper::body::Bytes;
use tokio::sync::oneshot;

use super::Serving;
use super::http::Reply;
use crate::api::Api;

/// What a request asks: an endpoint and its query.
pub(crate) type Key<A> = (<A as Api>::Endpoint, <A as Api>::Query);

/// Where a query's answer goes: the request that waits for it.
type Waiter = oneshot::Sender<Reply>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A kind's answers: the handle the requests and the workers share.
pub(crate) struct Answers<A: Api> {
    api: A,
    /// Answers made, and queries in flight with the requests that wait for
    /// them: one lock, so that a request finds its answer in one or the other.
    kept: Mutex<Kept<A>>,
    /// Queries not yet started, a queue per endpoint.
    queued: Mutex<Queues<A>>,
    ready: Condvar,
}

struct Kept<A: Api> {
    cache: Cache<Key<A>>,
    /// The growth of a followed trace the cached answers are of ([`Api::followed`]).
    generation: u64,
    /// For each query being answered, the requests that asked it again.
    in_flight: HashMap<Key<A>, Vec<Waiter>>,
}

impl<A: Api> Answers<A> {
    pub(crate) fn new(api: A) -> Answers<A> {
        Answers {
            api,
            kept: Mutex::new(Kept {
                cache: Cache::new(),
                generation: 0,
                in_flight: HashMap::new(),
            }),
            queued: Mutex::new(Queues {
                queues: HashMap::new(),
                last: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// The kind served.
    pub(crate) fn api(&self) -> &A {
        &self.api
    }

    /// The answer to `key`, made now (on the caller's thread).
    pub(crate) fn ask(&self, key: &Key<A>) -> Reply {
        match self.api.answer(key.0, &key.1) {
            Ok(body) => Reply::json(body),
            Err(e) => Reply::text(A::status(&e), e.to_string()),
        }
    }

    /// The answer to `key` if it was made already; else the query is queued
    /// (or joins the same query in flight) and the answer will come.
    pub(crate) fn queue(&self, key: Key<A>) -> Result<Reply, oneshot::Receiver<Reply>> {
        let mut kept = lock(&self.kept);
        let generation = self.generation();
        if kept.generation != generation {
            // Of a followed trace that grew: every answer kept is of less of it.
            kept.cache = Cache::new();
            kept.generation = generation;
        }
        if let Some(body) = kept.cache.get(&key) {
            return Ok(Reply::json(body));
        }
        let (waiter, answer) = oneshot::channel();
        if let Some(waiting) = kept.in_flight.get_mut(&key) {
            waiting.push(waiter);
            return Err(answer);
        }
        kept.in_flight.insert(key.clone(), Vec::new());
        drop(kept);
        lock(&self.queued).push(key, waiter);
        self.ready.notify_one();
        Err(answer)
    }

    /// The next query queued, waiting a little for one if there is none.
    fn next(&self) -> Option<(Key<A>, Waiter)> {
        let mut queued = lock(&self.queued);
        match queued.pop() {
            Some(next) => Some(next),
            None => {
                let (mut queued, _) = self
                    .ready
                    .wait_timeout(queued, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner());
                queued.pop()
            }
        }
    }

    /// Answers the query `key` with `ask`, to `waiter` and to the requests
    /// that joined it, and keeps the answer. A query that panics is answered
    /// 500 and the worker serves on: left in flight, it would hold every
    /// later request of the same query.
    /// An answer made while a guarded cache file was cut short
    /// ([`tracekit_io::guard::faults`] moved) may hold its zeros: it is
    /// made again, which the kind makes without that file.
    fn answer(&self, key: Key<A>, waiter: Waiter, ask: impl Fn(&Key<A>) -> Reply) {
        let once = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ask(&key)))
                .unwrap_or_else(|_| Reply::text(500, "the query failed"))
        };
        let faults = tracekit_io::guard::faults();
        let generation = self.generation();
        let mut reply = once();
        if tracekit_io::guard::faults() != faults {
            reply = once();
        }
        let waiting = {
            let mut kept = lock(&self.kept);
            // An answer begun before a followed trace grew is given, not kept.
            if reply.status == 200 && self.generation() == generation {
                let key_bytes = A::query_bytes(&key.1);
                kept.cache.put(key.clone(), reply.body.clone(), key_bytes);
            }
            kept.in_flight.remove(&key).unwrap_or_default()
        };
        // A request whose connection closed no longer waits.
        for other in waiting {
            let _ = other.send(reply.clone());
        }
        let _ = waiter.send(reply);
    }

    /// How many times the trace served has grown (0 for a trace read whole).
    fn generation(&self) -> u64 {
        self.api.followed().map_or(0, |(g, _)| g)
    }

    /// A worker: answers queued queries until `stop` is set.
    pub(crate) fn work(&self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if let Some((key, waiter)) = self.next() {
                self.answer(key, waiter, |key| self.ask(key));
            }
        }
    }

    /// Wakes the workers that wait for a query (to see `stop`).
    pub(crate) fn wake_all(&self) {
        self.ready.notify_all();
    }
}

/// Queries waiting for a worker: one queue per endpoint, served in turn.
struct Queues<A: Api> {
    queues: HashMap<A::Endpoint, VecDeque<(Key<A>, Waiter)>>,
    /// The index in [`Api::ENDPOINTS`] of the endpoint served last.
    last: usize,
}

impl<A: Api> Queues<A> {
    fn push(&mut self, key: Key<A>, waiter: Waiter) {
        self.queues
            .entry(key.0)
            .or_default()
            .push_back((key, waiter));
    }

    /// The next query, from the first non-empty queue after the last served.
    fn pop(&mut self) -> Option<(Key<A>, Waiter)> {
        let n = A::ENDPOINTS.len();
        for step in 1..=n {
            let i = (self.last + step) % n;
            if let Some(next) = self
                .queues
                .get_mut(&A::ENDPOINTS[i].1)
                .and_then(VecDeque::pop_front)
            {
                self.last = i;
                return Some(next);
            }
        }
        None
    }
}

/// The latest answers, by key: going back to a filter, or to a tab, is then
/// immediate. Bounded by the bytes of their keys and answers together, and
/// by their number (a key is looked for entry by entry).
struct Cache<K> {
    entries: VecDeque<(K, Bytes, usize)>,
    bytes: usize,
}

/// Most bytes of keys and answers the cache keeps.
const CACHE_BYTES: usize = 64 << 20;

/// Most answers the cache keeps.
const CACHE_ENTRIES: usize = 4096;

/// What an entry costs beyond its key's and answer's bytes.
const ENTRY_BYTES: usize = 64;

impl<K: PartialEq> Cache<K> {
    fn new() -> Cache<K> {
        Cache {
            entries: VecDeque::new(),
            bytes: 0,
        }
    }

    fn get(&mut self, key: &K) -> Option<Bytes> {
        let i = self.entries.iter().position(|(k, _, _)| k == key)?;
        let entry = self.entries.remove(i)?;
        let answer = entry.1.clone();
        self.entries.push_front(entry);
        Some(answer)
    }

    /// Keeps `answer` to `key`, whose own bytes are `key_bytes`.
    fn put(&mut self, key: K, answer: Bytes, key_bytes: usize) {
        let weight = answer.len() + key_bytes + ENTRY_BYTES;
        if weight > CACHE_BYTES / 4 {
            return;
        }
        self.bytes += weight;
        self.entries.push_front((key, answer, weight));
        while self.bytes > CACHE_BYTES || self.entries.len() > CACHE_ENTRIES {
            match self.entries.pop_back() {
                Some((_, _, w)) => self.bytes -= w,
                None => break,
            }
        }
    }
}

/// The workers: as many threads as the machine has cores, each answering
/// queued queries until the server stops.
pub(crate) struct Workers(Vec<std::thread::JoinHandle<()>>);

impl Workers {
    /// Starts the workers of `served`, which stop once `stop` is set.
    pub(crate) fn start(served: &Arc<dyn Serving>, stop: &Arc<AtomicBool>) -> Workers {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Workers(
            (0..cores)
                .map(|_| {
                    let (served, stop) = (Arc::clone(served), Arc::clone(stop));
                    std::thread::spawn(move || {
                        tracekit_io::priority::batch();
                        served.work(&stop)
                    })
                })
                .collect(),
        )
    }

    /// Waits for the workers to stop (`stop` set, and they woken).
    pub(crate) fn join(self) {
        for w in self.0 {
            // Workers catch the panics of queries; nothing else in them can.
            let _ = w.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::memtrace;
    use super::*;
    use crate::memtrace::{Endpoint, Memtrace};

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_cache_keeps_the_latest_answers_within_its_size() {
        let mut c = Cache::new();
        let key = |n: usize| (Endpoint::Top, vec![n.to_string()]);
        let big = Bytes::from("x".repeat(CACHE_BYTES / 8 - 100));
        for n in 0..12 {
            c.put(key(n), big.clone(), 1);
        }
        assert!(c.bytes <= CACHE_BYTES);
        assert_eq!(c.entries.len(), 8);
        assert!(c.get(&key(3)).is_none(), "the oldest went first");
        assert!(c.get(&key(4)).is_some());
        // Used again, 4 is now the newest: the next puts evict 5, not 4.
        c.put(key(12), big.clone(), 1);
        assert!(c.get(&key(4)).is_some());
        assert!(c.get(&key(5)).is_none());
        // An answer too large to keep is not kept.
        c.put(key(13), Bytes::from("y".repeat(CACHE_BYTES / 2)), 1);
        assert!(c.get(&key(13)).is_none());
    }

    /// Large keys of small answers count: the cache stays within its bytes
    /// (and its number of entries) whatever the requests ask.
    #[test]
    fn the_cache_counts_its_keys_too() {
        let mut c = Cache::new();
        let long = "k".repeat(51_000);
        for n in 0..3000 {
            let key = (Endpoint::Top, vec![format!("{long}{n}")]);
            let key_bytes = Memtrace::query_bytes(&key.1);
            c.put(key, Bytes::from("a".repeat(275)), key_bytes);
        }
        let held: usize = (c.entries.iter())
            .map(|(k, a, _)| k.1.iter().map(String::len).sum::<usize>() + a.len())
            .sum();
        assert!(held <= CACHE_BYTES, "{held}");
        assert!(c.bytes <= CACHE_BYTES);
        let mut small = Cache::new();
        for n in 0..(CACHE_ENTRIES + 100) {
            small.put((Endpoint::Top, vec![n.to_string()]), Bytes::from("a"), 1);
        }
        assert_eq!(small.entries.len(), CACHE_ENTRIES);
    }

    #[test]
    fn a_query_asked_twice_is_queued_once_and_queues_take_turns() {
        let s = memtrace();
        let top = (Endpoint::Top, args(&["--limit", "2"]));
        let first = s.queue(top.clone()).err().unwrap();
        let _second = s.queue(top).err().unwrap();
        let _third = s.queue((Endpoint::Flamegraph, vec![])).err().unwrap();
        let _fourth = s.queue((Endpoint::Top, vec![])).err().unwrap();
        let mut q = lock(&s.queued);
        let taken: Vec<(Key<Memtrace>, Waiter)> = std::iter::from_fn(|| q.pop()).collect();
        let order: Vec<Endpoint> = taken.iter().map(|(k, _)| k.0).collect();
        // Two requests of one query queue it once; the endpoints take turns.
        let (top, flame) = (Endpoint::Top, Endpoint::Flamegraph);
        assert_eq!(order, [top, flame, top]);
        drop(taken);
        // A query dropped unanswered (a worker that panicked) ends its wait.
        assert!(first.blocking_recv().is_err());
    }

    #[test]
    fn workers_answer_every_request_of_a_query_and_keep_the_answer() {
        let s = Arc::new(memtrace());
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || s.work(&stop))
        };
        let top = (Endpoint::Top, args(&["--limit", "2"]));
        let a = s.queue(top.clone()).err().unwrap();
        let b = s.queue(top.clone()).err().unwrap();
        let (a, b) = (a.blocking_recv().unwrap(), b.blocking_recv().unwrap());
        assert_eq!((a.status, &a.body), (200, &b.body));
        assert_eq!(a.body, s.ask(&top).body);
        // Asked again: the answer kept, with no worker.
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        assert_eq!(s.queue(top).ok().unwrap().body, a.body);
        assert!(lock(&s.kept).in_flight.is_empty());
    }

    #[test]
    fn a_query_that_panics_is_answered_500_to_all_who_asked_it() {
        let s = memtrace();
        let top = (Endpoint::Top, vec![]);
        let first = s.queue(top.clone()).err().unwrap();
        let second = s.queue(top.clone()).err().unwrap();
        let (key, waiter) = lock(&s.queued).pop().unwrap();
        s.answer(key, waiter, |_| panic!("a query's bug"));
        assert_eq!(first.blocking_recv().unwrap().status, 500);
        assert_eq!(second.blocking_recv().unwrap().status, 500);
        assert!(lock(&s.kept).in_flight.is_empty());
        // Nothing kept: asked again, the query runs again.
        assert!(s.queue(top).is_err());
    }
}
