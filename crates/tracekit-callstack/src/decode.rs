//! Driving the trace writer from `perf script` text fed in chunks: time base, filter
//! regions, counts of what was read and skipped. Used by `tracekit perf decode`, the
//! transcript harness and the benchmarks; the caller does the reading (file, pipe,
//! `perf script` child).
//!
//! [`Decoder::feed`] parses and writes on the calling thread. [`Decoder::feed_pipelined`]
//! gives the same output using a second thread: the text is cut at record boundaries
//! into pieces of 64 KiB (`PIECE`), a helper thread (one kept for the whole process, so
//! a call does not pay for starting a thread) parses pieces into batches of events,
//! and the calling thread runs the state machine over the batches in input order,
//! parsing a piece itself whenever the batch it needs is not ready (so the work balances
//! itself between the two cores whichever side is slower), and even parsing the piece
//! the helper is on when the helper is late (descheduled on a busy machine; after a
//! few such delays it carries on alone, as on one thread). Batch
//! vectors go back to the helper for reuse, so the steady state does not allocate.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use crate::event::{Event, Time};
use crate::filter::{RangeFilter, RegionTracker, SymbolHit, pair_hits};
use crate::resolved::Observer;
use crate::script::{ParseError, Parsed, RawRecord, RecordParser, Records};
use crate::sink::Sink;
use crate::writer::{Config, TraceWriter, Warning};

/// What was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Input bytes fed.
    pub bytes: u64,
    /// Records (a header line plus its call-chain lines).
    pub records: u64,
    /// Lines, call-chain lines included.
    pub lines: u64,
    /// Events handed to the trace writer.
    pub events: u64,
    /// Decode errors among them.
    pub decode_errors: u64,
    /// Records deliberately ignored (`psb` and other power events).
    pub ignored: u64,
    /// Records that did not parse (skipped).
    pub unparsed: u64,
    /// The first few records that did not parse.
    pub first_unparsed: Vec<ParseError>,
}

/// How many unparsed records are kept for the report.
const KEEP_UNPARSED: usize = 5;

/// What a caller of [`Decoder::feed_observed`] sees of each record on the way (the
/// transcript echoes records and prints warnings in input order), besides what the
/// writer shows an [`Observer`]. The methods do nothing by default, and [`Decoder::feed`]
/// is `feed_observed` with `()`, so the production path pays nothing for them.
pub(crate) trait RecordObserver<S: Sink>: Observer {
    /// A record parsed into `event`, before the filter and the writer see it. It may
    /// rewrite the event (the transcript moves times to its origin) and write to the
    /// sink ahead of the writer.
    fn parsed(&mut self, _rec: &RawRecord<'_>, _event: &mut Event<'_>, _sink: &mut S) {}

    /// A record that did not parse (after the decoder's own count of it).
    fn unparsed(&mut self, _error: &ParseError, _writer: &mut TraceWriter<S>) {}
}

impl<S: Sink> RecordObserver<S> for () {}

/// Feeds `perf script` text into a [`TraceWriter`].
pub struct Decoder<S: Sink> {
    writer: TraceWriter<S>,
    region: Option<RegionTracker>,
    base_known: bool,
    stats: DecodeStats,
}

impl<S: Sink> Decoder<S> {
    /// A decoder whose time base is the first timestamped event. `filter_hits` are the
    /// first-pass hits of a `-filter` (see [`HitCollector`]), if any.
    pub fn new(sink: S, config: Config, filter_hits: Option<Vec<SymbolHit>>) -> Self {
        Decoder {
            writer: TraceWriter::new(sink, config, Time::ZERO),
            region: filter_hits.map(|h| RegionTracker::new(pair_hits(h))),
            base_known: false,
            stats: DecodeStats::default(),
        }
    }

    /// The trace writer (e.g. to add hits before feeding).
    pub fn writer_mut(&mut self) -> &mut TraceWriter<S> {
        &mut self.writer
    }

    /// Keeps the writer's time base where it is (zero unless set through
    /// [`Self::writer_mut`]) instead of moving it to the first timestamped event: for
    /// callers that shift event times themselves (the transcript).
    pub(crate) fn keep_time_base(&mut self) {
        self.base_known = true;
    }

    /// Counts so far.
    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Feeds text holding only complete records (see [`crate::script::complete_prefix`]).
    /// `offset` is the text's position in the whole input, for error reports.
    pub fn feed(&mut self, text: &str, offset: u64) {
        self.feed_observed(text, offset, &mut ());
    }

    /// [`Self::feed`], showing `observer` every record on the way.
    pub(crate) fn feed_observed(
        &mut self,
        text: &str,
        offset: u64,
        observer: &mut impl RecordObserver<S>,
    ) {
        self.stats.bytes += text.len() as u64;
        let mut parser = RecordParser::new();
        for rec in Records::new(text) {
            self.stats.records += 1;
            self.stats.lines += rec.line_count() as u64;
            // Matched by reference: moving the 152-byte event out of the result
            // first would copy it.
            match &mut parser.parse(&rec, offset) {
                Ok(Parsed::Event(event)) => {
                    observer.parsed(&rec, event, self.writer.sink_mut());
                    self.event_observed(event, observer);
                }
                Ok(Parsed::Ignored(_)) => self.stats.ignored += 1,
                Err(e) => {
                    self.unparsed(*e);
                    observer.unparsed(e, &mut self.writer);
                }
            }
        }
    }

    fn unparsed(&mut self, e: ParseError) {
        self.stats.unparsed += 1;
        if self.stats.first_unparsed.len() < KEEP_UNPARSED {
            self.stats.first_unparsed.push(e);
        }
    }

    /// Like [`feed`](Self::feed), with the parsing spread over a helper thread (see the
    /// module docs); the trace written is byte for byte the same. Text of less than a
    /// few pieces, or any text when the process has a single core or the helper thread is
    /// busy with another decode, is fed on the calling thread.
    pub fn feed_pipelined(&mut self, text: &str, offset: u64) {
        if text.len() < 4 * PIECE || !several_cores() {
            return self.feed(text, offset);
        }
        self.feed_in_pieces(text, offset, PIECE);
    }

    /// [`feed_pipelined`](Self::feed_pipelined) with pieces of about `piece_size` bytes
    /// whatever the length of the text (for tests and tuning). Like it, it feeds on the
    /// calling thread when the helper thread is busy with another decode.
    pub fn feed_in_pieces(&mut self, text: &str, offset: u64, piece_size: usize) {
        let Some(helper) = Helper::claim() else {
            return self.feed(text, offset);
        };
        self.stats.bytes += text.len() as u64;
        let bounds = piece_bounds(text.as_bytes(), piece_size.max(1));
        let pieces = bounds.len() - 1;
        let piece = |i: usize| (&text[bounds[i]..bounds[i + 1]], offset + bounds[i] as u64);
        // The next piece nobody has claimed; each piece is parsed by whoever claims it.
        let next = AtomicUsize::new(0);
        let (full_tx, full_rx) = mpsc::sync_channel::<Batch<'_>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Item<'_>>>();
        // The helper's parser and batch vectors are allocated here, so that what the
        // helper thread keeps between calls is only its stack.
        let mut helper_parser = RecordParser::new();
        let capacity = (piece_size / 128).clamp(16, 4096);
        for _ in 0..IN_FLIGHT + 2 {
            let _ = empty_tx.send(Vec::with_capacity(capacity));
        }
        // The scope returns once the helper's job has ended (re-raising its panic).
        helper.pool.in_place_scope(|scope| {
            let next = &next;
            scope.spawn(move |_| {
                let parser = &mut helper_parser;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= pieces {
                        break;
                    }
                    let (t, off) = piece(i);
                    let items = empty_rx
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(capacity));
                    if full_tx.send(parse_piece(parser, i, t, off, items)).is_err() {
                        break;
                    }
                }
            });
            // Batches received or parsed here that are not yet written (few: at most
            // IN_FLIGHT of our own plus what the channel held).
            let mut pending: Vec<Batch<'_>> = Vec::new();
            let mut spare: Vec<Item<'_>> = Vec::with_capacity(capacity);
            let mut parser = RecordParser::new();
            let mut want = 0;
            let mut late = 0;
            let mut solo = false;
            while want < pieces {
                if let Some(p) = pending.iter().position(|b| b.index == want) {
                    let batch = pending.swap_remove(p);
                    let items = self.write_batch(batch);
                    // Keep one vector for our own pieces, recycle the others.
                    if spare.capacity() == 0 {
                        spare = items;
                    } else {
                        let _ = empty_tx.send(items);
                    }
                    want += 1;
                    continue;
                }
                if let Ok(b) = full_rx.try_recv() {
                    self.receive(b, want, &mut pending, &empty_tx);
                    continue;
                }
                if solo {
                    let (t, off) = piece(want);
                    let items = own_vector(&mut spare, capacity);
                    pending.push(parse_piece(&mut parser, want, t, off, items));
                    continue;
                }
                if pending.len() < IN_FLIGHT {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i < pieces {
                        let (t, off) = piece(i);
                        pending.push(parse_piece(
                            &mut parser,
                            i,
                            t,
                            off,
                            own_vector(&mut spare, capacity),
                        ));
                        continue;
                    }
                }
                // The helper claimed the piece we need: wait for it, spinning, as it is
                // usually nearly done and putting a thread to sleep and waking it costs
                // more (system calls, inter-processor interrupts) than a short spin.
                let started = Instant::now();
                let got = loop {
                    match full_rx.try_recv() {
                        Ok(b) => break Some(b),
                        Err(mpsc::TryRecvError::Disconnected) => break None,
                        Err(mpsc::TryRecvError::Empty) if started.elapsed() > PATIENCE => {
                            break None;
                        }
                        Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                    }
                };
                match got {
                    Some(b) => self.receive(b, want, &mut pending, &empty_tx),
                    // The helper is slow, most likely not running at all because other
                    // work has the second core: parse the piece here rather than wait
                    // (its batch is dropped when it comes), so the decode is never much
                    // slower than on one thread.
                    // After a few of those, the second core is evidently taken: stop
                    // handing out pieces and go on alone, as the helper would only
                    // compete with this thread for one core.
                    None => {
                        late += 1;
                        if late >= GIVE_UP_AFTER {
                            solo = true;
                            next.store(pieces, Ordering::Relaxed);
                        }
                        let (t, off) = piece(want);
                        let items = own_vector(&mut spare, capacity);
                        pending.push(parse_piece(&mut parser, want, t, off, items));
                    }
                }
            }
            // Stop the helper: no more pieces to claim, and its next send fails.
            next.store(pieces, Ordering::Relaxed);
            drop(full_rx);
        });
    }

    /// Keeps a batch from the helper for writing, or drops it if the piece was parsed
    /// and written here meanwhile.
    fn receive<'a>(
        &mut self,
        batch: Batch<'a>,
        want: usize,
        pending: &mut Vec<Batch<'a>>,
        empty_tx: &mpsc::Sender<Vec<Item<'a>>>,
    ) {
        if batch.index >= want {
            pending.push(batch);
        } else {
            let _ = empty_tx.send(batch.items);
        }
    }

    /// Writes a parsed batch; returns its emptied vector for reuse.
    fn write_batch<'a>(&mut self, mut batch: Batch<'a>) -> Vec<Item<'a>> {
        self.stats.records += batch.records;
        self.stats.lines += batch.lines;
        // By reference, then cleared: draining would move each item out first.
        for item in &batch.items {
            match item {
                Item::Event(event) => self.event(event),
                Item::Ignored => self.stats.ignored += 1,
                Item::Unparsed(e) => self.unparsed(*e),
            }
        }
        batch.items.clear();
        batch.items
    }

    /// Hands one event to the writer.
    pub fn event(&mut self, event: &Event<'_>) {
        self.event_observed(event, &mut ());
    }

    #[inline]
    fn event_observed(&mut self, event: &Event<'_>, observer: &mut impl Observer) {
        if !self.base_known
            && let Some(t) = event.time()
        {
            self.writer.set_base_time(t);
            self.base_known = true;
        }
        self.stats.events += 1;
        if matches!(event, Event::DecodeError(_)) {
            self.stats.decode_errors += 1;
        }
        let should_write = self.region.as_mut().is_none_or(|r| r.should_write(event));
        self.writer
            .write_event_observed(event, should_write, observer);
    }

    /// Warnings since the last call.
    pub fn drain_warnings(&mut self) -> std::vec::Drain<'_, Warning> {
        self.writer.drain_warnings()
    }

    /// Ends the trace; returns the sink, the counts and the last warnings.
    pub fn finish(mut self) -> (S, DecodeStats, Vec<Warning>) {
        self.writer.end_of_trace(None);
        let warnings = self.writer.drain_warnings().collect();
        let stats = self.stats;
        (self.writer.finish(), stats, warnings)
    }
}

/// The size of the pieces [`Decoder::feed_pipelined`] cuts its text into: large enough
/// that the hand-over between threads costs little per line, small enough that a batch
/// of events stays in the cache until it is written.
pub(crate) const PIECE: usize = 64 << 10;

/// The helper thread of [`Decoder::feed_pipelined`], claimed by one call at a time.
///
/// It is a pool of one thread, started on first use and kept, because starting and
/// joining a thread per call took 30-50 us, 3-5% of decoding a 2.4 MB input, against
/// about 10 us to hand a job to a waiting thread. A call that finds it taken (decodes
/// running at once on several threads) or that cannot start it decodes on its own
/// thread rather than queue behind another decode.
struct Helper {
    pool: &'static rayon_core::ThreadPool,
}

static HELPER_TAKEN: AtomicBool = AtomicBool::new(false);

impl Helper {
    fn claim() -> Option<Helper> {
        static POOL: OnceLock<Option<rayon_core::ThreadPool>> = OnceLock::new();
        let pool = POOL
            .get_or_init(|| {
                rayon_core::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(|_| "tracekit-parse".to_string())
                    .build()
                    .ok()
            })
            .as_ref()?;
        HELPER_TAKEN
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(Helper { pool })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPER_TAKEN.store(false, Ordering::Release);
    }
}

/// Whether this process may run on more than one core (asked once: the answer takes
/// system calls).
fn several_cores() -> bool {
    static SEVERAL: OnceLock<bool> = OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// How long the writing thread waits for the helper's batch before it parses the piece
/// itself: several times what parsing a piece takes, so only a helper that is not
/// running (another process has the second core) is found late.
const PATIENCE: Duration = Duration::from_micros(300);

/// How many times the helper may be late with a piece before the writing thread
/// parses the rest alone.
const GIVE_UP_AFTER: usize = 3;

/// How many parsed batches may wait to be written (bounds the memory of the pipeline).
const IN_FLIGHT: usize = 4;

/// One record as the pipelined decode hands it from parsing to writing.
enum Item<'a> {
    Event(Event<'a>),
    Ignored,
    Unparsed(ParseError),
}

/// The parsed records of one piece of text.
struct Batch<'a> {
    index: usize,
    records: u64,
    lines: u64,
    items: Vec<Item<'a>>,
}

/// The writing thread's spare batch vector, or a new one.
fn own_vector<'a>(spare: &mut Vec<Item<'a>>, capacity: usize) -> Vec<Item<'a>> {
    if spare.capacity() > 0 {
        std::mem::take(spare)
    } else {
        Vec::with_capacity(capacity)
    }
}

fn parse_piece<'a>(
    parser: &mut RecordParser<'a>,
    index: usize,
    text: &'a str,
    offset: u64,
    mut items: Vec<Item<'a>>,
) -> Batch<'a> {
    let mut records = 0;
    let mut lines = 0;
    items.clear();
    for rec in Records::new(text) {
        records += 1;
        lines += rec.line_count() as u64;
        items.push(match parser.parse(&rec, offset) {
            Ok(Parsed::Event(event)) => Item::Event(event),
            Ok(Parsed::Ignored(_)) => Item::Ignored,
            Err(e) => Item::Unparsed(e),
        });
    }
    Batch {
        index,
        records,
        lines,
        items,
    }
}

/// Cuts `b` into pieces of about `size` bytes that hold whole records: each cut is at
/// the start of a line that does not continue a record (not a TAB), so [`Records`]
/// splits every piece as it would split the whole. Returns the cut positions, `0` and
/// `b.len()` included.
pub(crate) fn piece_bounds(b: &[u8], size: usize) -> Vec<usize> {
    let mut bounds = vec![0];
    let mut pos = 0;
    while b.len() - pos > size {
        let mut cut = match memchr::memchr(b'\n', &b[pos + size..]) {
            Some(i) => pos + size + i + 1,
            None => b.len(),
        };
        while cut < b.len() && b[cut] == b'\t' {
            cut = match memchr::memchr(b'\n', &b[cut..]) {
                Some(i) => cut + i + 1,
                None => b.len(),
            };
        }
        if cut >= b.len() {
            break;
        }
        bounds.push(cut);
        pos = cut;
    }
    bounds.push(b.len());
    bounds
}

/// The first pass of a `-filter`: collects the hits of chunks of text.
#[derive(Clone, Debug)]
pub struct HitCollector {
    filter: RangeFilter,
    hits: Vec<SymbolHit>,
}

impl HitCollector {
    /// A collector for `filter`.
    pub fn new(filter: RangeFilter) -> Self {
        HitCollector {
            filter,
            hits: Vec::new(),
        }
    }

    /// Feeds text holding only complete records.
    pub fn feed(&mut self, text: &str) {
        let mut parser = RecordParser::new();
        for rec in Records::new(text) {
            if let Ok(Parsed::Event(e)) = parser.parse(&rec, 0)
                && let Some(h) = self.filter.hit(&e)
            {
                self.hits.push(h);
            }
        }
    }

    /// The hits found.
    pub fn finish(self) -> Vec<SymbolHit> {
        self.hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_hold_whole_records() {
        let text = b"a\n\tb\n\tc\n\nd\ne\n\tf\n\tg\nh";
        for size in 1..text.len() + 2 {
            let bounds = piece_bounds(text, size);
            assert_eq!(bounds.first(), Some(&0));
            assert_eq!(bounds.last(), Some(&text.len()));
            for w in bounds.windows(2) {
                assert!(w[0] < w[1]);
            }
            for &c in &bounds[1..bounds.len() - 1] {
                assert_eq!(text[c - 1], b'\n');
                assert_ne!(text[c], b'\t');
            }
        }
    }
}
