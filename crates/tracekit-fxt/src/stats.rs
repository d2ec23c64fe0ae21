//! Counts of a trace's records: what `tracekit fxt stats` prints.
//!
//! By record type and event type; the providers; the processes and threads with
//! their names (from kernel objects) and event counts; the time span of the
//! timestamped records in nanoseconds; the reader's warnings.
//!
//! Counted as the records pass ([`Counted`], beside a timeline's build), each
//! record costs a few comparisons of numbers and addresses: the counts are
//! kept by thread koids and by the addresses of the type names, and given the
//! names [`Stats`] shows (a thread's `process/thread`) once, when asked for.

use std::collections::{BTreeMap, HashMap};

use crate::format::{EventKind, Koid, ObjectType};
use crate::read::{Entry, ReadError, Record, Records, Str, Thread};

/// The events and name of one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ThreadStats {
    /// Its name, from a thread kernel object.
    pub name: Option<String>,
    /// Events on it.
    pub events: u64,
}

/// Counts of a whole trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Input bytes read.
    pub bytes: u64,
    /// Records read (skipped ones aside).
    pub records: u64,
    /// Records by type name.
    pub record_types: BTreeMap<&'static str, u64>,
    /// Events by type name.
    pub event_types: BTreeMap<&'static str, u64>,
    /// Provider names by id.
    pub providers: BTreeMap<u32, String>,
    /// Processes by koid, with their names where a kernel object gives one.
    pub processes: BTreeMap<u64, Option<String>>,
    /// Threads by `process/thread` koids.
    pub threads: BTreeMap<String, ThreadStats>,
    /// The earliest timestamp, in nanoseconds.
    pub first_ns: Option<u64>,
    /// The latest timestamp (or duration end), in nanoseconds.
    pub last_ns: Option<u64>,
    /// The reader's warnings.
    pub warnings: u64,
}

impl Stats {
    /// Reads every record of `reader`, calling `progress` with the input offset every
    /// 8192 records.
    pub fn collect(
        reader: &mut dyn Records,
        mut progress: impl FnMut(u64),
    ) -> Result<Stats, ReadError> {
        let mut counted = Counted::new(reader);
        while let Some(offset) = counted.next_entry()?.map(|e| e.offset) {
            if counted.tally.records.is_multiple_of(8192) {
                progress(offset);
            }
        }
        Ok(counted.stats())
    }

    /// Takes the bytes read and the warnings from `reader`, once its records
    /// are counted.
    pub fn finish(&mut self, reader: &dyn Records) {
        self.bytes = reader.position();
        self.warnings = reader.warning_count();
    }

    /// The name [`Stats::threads`] gives thread `t`.
    fn thread_key(t: Thread) -> String {
        format!("{}/{}", t.process, t.thread)
    }
}

/// The counts of the records of every record: kept by numbers and by the
/// addresses of names, and added to a [`Stats`] by name when asked for.
#[derive(Clone, Debug, Default)]
struct Tally {
    records: u64,
    /// By type name: the same literal, at one address, found by it.
    record_types: Vec<(&'static str, u64)>,
    event_types: Vec<(&'static str, u64)>,
    /// Events per thread, in the order first seen; `at` finds a thread's
    /// place, and `last` is the thread of the last event (events come in
    /// runs of one thread).
    threads: Vec<(Thread, u64)>,
    at: HashMap<Thread, usize>,
    last: usize,
}

impl Tally {
    /// Counts one more of `name` in `list`.
    #[inline]
    fn bump(list: &mut Vec<(&'static str, u64)>, name: &'static str) {
        let found = list
            .iter()
            .position(|(n, _)| std::ptr::eq(*n, name))
            .or_else(|| list.iter().position(|(n, _)| *n == name));
        match found.and_then(|i| list.get_mut(i)) {
            Some((_, count)) => *count += 1,
            None => list.push((name, 1)),
        }
    }

    /// Counts an event on `thread`.
    #[inline]
    fn event_on(&mut self, thread: Thread) {
        if let Some((t, events)) = self.threads.get_mut(self.last)
            && *t == thread
        {
            *events += 1;
            return;
        }
        let at = *self.at.entry(thread).or_insert_with(|| {
            self.threads.push((thread, 0));
            self.threads.len() - 1
        });
        if let Some((_, events)) = self.threads.get_mut(at) {
            *events += 1;
        }
        self.last = at;
    }

    /// `stats` with these counts added.
    fn add_to(&self, stats: &mut Stats) {
        stats.records += self.records;
        for &(name, count) in &self.record_types {
            *stats.record_types.entry(name).or_default() += count;
        }
        for &(name, count) in &self.event_types {
            *stats.event_types.entry(name).or_default() += count;
        }
        for &(thread, events) in &self.threads {
            stats.processes.entry(thread.process.0).or_default();
            let key = Stats::thread_key(thread);
            stats.threads.entry(key).or_default().events += events;
        }
    }

    /// Counts one record: the many (events) here, the few (names of
    /// providers, processes and threads) into `stats` at once.
    fn count(&mut self, stats: &mut Stats, entry: &Entry<'_>) {
        let (rec, tick_rate) = (entry.record, entry.tick_rate);
        self.records += 1;
        Tally::bump(&mut self.record_types, rec.type_name());
        if let Some(t) = rec.ticks() {
            let ns = tick_rate.ns(t);
            stats.first_ns = Some(stats.first_ns.map_or(ns, |f| f.min(ns)));
            stats.last_ns = Some(stats.last_ns.map_or(ns, |l| l.max(ns)));
        }
        match rec {
            Record::ProviderInfo { id, name } => {
                stats.providers.insert(id, Str(name).to_string());
            }
            Record::Event(e) => {
                Tally::bump(&mut self.event_types, e.kind.event_type().name());
                self.event_on(e.thread);
                if let EventKind::DurationComplete { end_ticks } = e.kind {
                    let ns = tick_rate.ns(end_ticks);
                    stats.last_ns = Some(stats.last_ns.map_or(ns, |l| l.max(ns)));
                }
            }
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                stats.processes.insert(o.koid.0, Some(o.name.to_string()));
            }
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                let pid = o.process().unwrap_or(Koid(0));
                let t = Thread {
                    process: pid,
                    thread: o.koid,
                };
                let key = Stats::thread_key(t);
                stats.threads.entry(key).or_default().name = Some(o.name.to_string());
            }
            _ => {}
        }
    }
}

/// A reader that counts what passes through it, so that another consumer of
/// the records gets the trace's [`Stats`] in the same pass.
pub struct Counted<'r> {
    reader: &'r mut dyn Records,
    /// What was counted before, and the names of the few records that name.
    stats: Stats,
    tally: Tally,
}

impl<'r> Counted<'r> {
    /// Counts the records read from `reader`.
    pub fn new(reader: &'r mut dyn Records) -> Counted<'r> {
        Counted::continuing(reader, Stats::default())
    }

    /// Counts the records read from `reader` on from `counts`, the counts of
    /// the records it gave before ([`Counted::into_counts`]): a trace followed
    /// while it is written is read in many goes.
    pub fn continuing(reader: &'r mut dyn Records, counts: Stats) -> Counted<'r> {
        Counted {
            reader,
            stats: counts,
            tally: Tally::default(),
        }
    }

    /// The counts of the records read, to go on with ([`Counted::continuing`]).
    pub fn into_counts(self) -> Stats {
        let mut st = self.stats;
        self.tally.add_to(&mut st);
        st
    }

    /// The counts of the records read so far.
    pub fn stats(&self) -> Stats {
        let mut st = self.stats.clone();
        self.tally.add_to(&mut st);
        st.finish(&*self.reader);
        st
    }
}

impl Records for Counted<'_> {
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        let entry = self.reader.next_entry()?;
        if let Some(e) = &entry {
            self.tally.count(&mut self.stats, e);
        }
        Ok(entry)
    }

    fn position(&self) -> u64 {
        self.reader.position()
    }

    fn warnings(&self) -> &[crate::read::Warning] {
        self.reader.warnings()
    }

    fn warning_count(&self) -> u64 {
        self.reader.warning_count()
    }
}

impl core::fmt::Display for Stats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let st = self;
        writeln!(f, "bytes              {}", st.bytes)?;
        writeln!(f, "records            {}", st.records)?;
        for (k, v) in &st.record_types {
            writeln!(f, "  {k:<22} {v}")?;
        }
        let events: u64 = st.event_types.values().sum();
        writeln!(f, "events             {events}")?;
        for (k, v) in &st.event_types {
            writeln!(f, "  {k:<22} {v}")?;
        }
        match (st.first_ns, st.last_ns) {
            (Some(a), Some(b)) => {
                writeln!(
                    f,
                    "time span          {a} .. {b} ns ({:.3} ms)",
                    b.saturating_sub(a) as f64 / 1e6
                )?;
            }
            _ => {
                writeln!(f, "time span          (no timestamped records)")?;
            }
        }
        writeln!(f, "providers          {}", st.providers.len())?;
        for (id, name) in &st.providers {
            writeln!(f, "  {id:<22} {name:?}")?;
        }
        writeln!(f, "processes          {}", st.processes.len())?;
        for (pid, name) in &st.processes {
            writeln!(
                f,
                "  {pid:<22} {}",
                name.as_deref()
                    .map(|n| format!("{n:?}"))
                    .unwrap_or_default()
            )?;
        }
        writeln!(f, "threads            {}", st.threads.len())?;
        for (k, t) in &st.threads {
            let name = t
                .name
                .as_deref()
                .map(|n| format!("{n:?}"))
                .unwrap_or_default();
            writeln!(f, "  {k:<22} {:>8} events {name}", t.events)?;
        }
        writeln!(f, "warnings           {}", st.warnings)?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::format::StringRef;
    use crate::read::Reader;
    use crate::write::{VecDestination, Writer};

    #[test]
    fn counts_records_events_threads_and_time() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        w.set_process_name(Koid(1), StringRef::inline("proc"))
            .unwrap();
        w.set_thread_name(Koid(1), Koid(2), StringRef::inline("main"))
            .unwrap();
        let thread = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
        let other = w.set_thread_slot(2, Koid(1), Koid(3)).unwrap();
        let (cat, name) = (w.intern("c").unwrap(), w.intern("n").unwrap());
        w.duration_complete(thread, cat, name, 100, 900, &[])
            .unwrap();
        w.instant(other, cat, name, 500, &[]).unwrap();
        w.instant(thread, cat, name, 50, &[]).unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let st = Stats::collect(&mut Reader::new(&bytes), |_| {}).unwrap();
        assert_eq!(st.bytes, bytes.len() as u64);
        assert_eq!(st.event_types.get("duration_complete"), Some(&1));
        assert_eq!(st.event_types.get("instant"), Some(&2));
        assert_eq!(st.processes.get(&1), Some(&Some("proc".to_string())));
        assert_eq!(
            st.threads.get("1/2"),
            Some(&ThreadStats {
                name: Some("main".into()),
                events: 2
            })
        );
        assert_eq!(st.threads.get("1/3").map(|t| t.events), Some(1));
        assert_eq!((st.first_ns, st.last_ns), (Some(50), Some(900)));
        assert_eq!(st.warnings, 0);
        let text = st.to_string();
        assert!(
            text.contains("time span          50 .. 900 ns (0.001 ms)"),
            "{text}"
        );
        assert!(
            text.contains("  1/2                           2 events \"main\""),
            "{text}"
        );
        // Counted on the way through another reader's pass: the same counts.
        let mut reader = Reader::new(&bytes);
        let mut counted = Counted::new(&mut reader);
        while counted.next_entry().unwrap().is_some() {}
        assert_eq!(counted.stats(), st);
    }
}
