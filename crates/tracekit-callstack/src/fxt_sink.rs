//! The FXT sink: writes the trace writer's output as a Fuchsia trace (the format:
//! `docs/fxt-format.md` at the repository root) through `tracekit-fxt`.
//!
//! As magic-trace does: one FXT process per perf thread (named `[pid=P] [tid=T]`,
//! prefixed by the command name when known) holding a thread named `main`; process and
//! thread koids come from one counter; the category is empty; slice names and the
//! `symbol` argument are interned strings. Beyond the format's limits the sink degrades
//! instead of failing: past 32k interned strings names are written inline, past 255
//! thread slots threads are referenced inline, and a string longer than the format's
//! 32,000 bytes (a long C++ symbol) is cut, ends in [`TRUNCATED_MARKER`] and is
//! counted ([`FxtSink::truncated_strings`]).

use tracekit_fxt::format::{
    Arg as FxtArg, ArgValue as FxtValue, Koid, MAX_STRING_LEN, StringId, StringRef, ThreadRef,
};
use tracekit_fxt::write::{Destination, WriteError, Writer};

use crate::event::Time;
use crate::sink::{Arg, ArgValue, ProcessRef, Sink, TrackRef};
use crate::symbol::{FxHashMap, SymbolId};

/// Argument names and values the trace writer uses, interned once.
const KNOWN: [&str; 11] = [
    "address",
    "symbol",
    "inferred_start_time",
    "true",
    "inlined",
    "timestamp",
    "addr",
    "count",
    "pid",
    "tid",
    "freq (MHz)",
];

/// What ends a string cut to the format's length limit.
pub const TRUNCATED_MARKER: &str = "...[truncated]";

/// Longest inline string the sink writes when the string table is full: an
/// inline string shares its record's 32 KiB with the rest of the record.
const MAX_INLINE_LONG: usize = 1024;

/// Thread-table slots the FXT format has.
const THREAD_SLOTS: usize = 255;
/// Arguments the format allows on one record.
const MAX_ARGS: usize = 15;

/// Where koids for processes and threads without a real id (snapshot hits, a perf
/// record without a pid) start: above every Linux id (`pid_max` is at most 2^22),
/// so a made-up koid never names a real process or thread.
const MADE_UP_KOIDS: u64 = 1 << 32;

/// A [`Sink`] writing FXT.
pub struct FxtSink<D: Destination> {
    writer: Writer<D>,
    strings: FxHashMap<Box<str>, StringId>,
    strings_full: bool,
    known: [Option<StringId>; KNOWN.len()],
    symbols: Vec<Option<StringId>>,
    next_koid: u64,
    processes: Vec<Koid>,
    threads: Vec<ThreadRef>,
    error: Option<WriteError>,
    records: u64,
    truncated: u64,
}

impl<D: Destination> FxtSink<D> {
    /// A sink over a writer that has written its header.
    pub fn new(writer: Writer<D>) -> Self {
        FxtSink {
            writer,
            strings: FxHashMap::default(),
            strings_full: false,
            known: [None; KNOWN.len()],
            symbols: Vec::new(),
            next_koid: MADE_UP_KOIDS,
            processes: Vec::new(),
            threads: Vec::new(),
            error: None,
            records: 0,
            truncated: 0,
        }
    }

    /// Strings cut to the format's 32,000-byte limit (each distinct string once).
    pub fn truncated_strings(&self) -> u64 {
        self.truncated
    }

    /// Event records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Closes the writer and returns the destination, or the first error.
    pub fn finish(self) -> Result<D, WriteError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.writer.finish()
    }

    /// Closes the writer, keeping the destination (for the details of an I/O
    /// error, say); returns the first error of the whole trace.
    pub fn close(&mut self) -> Result<(), WriteError> {
        let closed = self.writer.close();
        match self.error {
            Some(e) => Err(e),
            None => closed,
        }
    }

    /// The destination.
    pub fn destination_mut(&mut self) -> &mut D {
        self.writer.destination_mut()
    }

    fn check(&mut self, r: Result<(), WriteError>) {
        match r {
            Ok(()) => self.records += 1,
            Err(e) => {
                if self.error.is_none() {
                    self.error = Some(e);
                }
            }
        }
    }

    /// An argument name or value: the writer's few fixed strings skip the hash table.
    #[inline]
    fn arg_string<'s>(&mut self, s: &'s str) -> StringRef<'s> {
        match KNOWN.iter().position(|k| k.len() == s.len() && *k == s) {
            Some(i) => match self.known[i] {
                Some(id) => StringRef::Index(id),
                None => {
                    let r = self.string(s);
                    if let StringRef::Index(id) = r {
                        self.known[i] = Some(id);
                    }
                    r
                }
            },
            None => self.string(s),
        }
    }

    /// The string of an interned symbol, cached by symbol id.
    #[inline]
    fn symbol_string<'s>(&mut self, symbol: SymbolId, name: &'s str) -> StringRef<'s> {
        let i = symbol.0 as usize;
        if let Some(Some(id)) = self.symbols.get(i) {
            return StringRef::Index(*id);
        }
        let r = self.string(name);
        if let StringRef::Index(id) = r {
            if self.symbols.len() <= i {
                self.symbols.resize(i + 1, None);
            }
            self.symbols[i] = Some(id);
        }
        r
    }

    /// The string's interned id, or the string inline once the table is full.
    #[inline]
    fn string<'s>(&mut self, s: &'s str) -> StringRef<'s> {
        if s.is_empty() {
            return StringRef::Empty;
        }
        if let Some(&id) = self.strings.get(s) {
            return StringRef::Index(id);
        }
        if s.len() > MAX_STRING_LEN {
            return self.long_string(s);
        }
        if !self.strings_full
            && let Some(id) = self.intern(s)
        {
            self.strings.insert(Box::from(s), id);
            return StringRef::Index(id);
        }
        StringRef::inline(s)
    }

    /// Interns `text`: `None` once the string table is full (remembered, so the
    /// caller writes strings inline from then on) or after a write error (kept
    /// for [`FxtSink::finish`]).
    fn intern(&mut self, text: &str) -> Option<StringId> {
        match self.writer.intern(text) {
            Ok(id) => Some(id),
            Err(WriteError::OutOfStringIds) => {
                self.strings_full = true;
                None
            }
            Err(e) => {
                if self.error.is_none() {
                    self.error = Some(e);
                }
                None
            }
        }
    }

    /// A string over the format's limit: interned cut, with the marker, and
    /// remembered under its full text so it is cut and counted once.
    #[cold]
    fn long_string<'s>(&mut self, s: &'s str) -> StringRef<'s> {
        if !self.strings_full {
            let mut end = MAX_STRING_LEN - TRUNCATED_MARKER.len();
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let cut = format!("{}{TRUNCATED_MARKER}", &s[..end]);
            if let Some(id) = self.intern(&cut) {
                self.truncated += 1;
                self.strings.insert(Box::from(s), id);
                return StringRef::Index(id);
            }
        }
        // No table slot left: a shorter cut, inline, without the marker (an inline
        // ref can only borrow the caller's text).
        self.truncated += 1;
        let mut end = MAX_INLINE_LONG;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        StringRef::inline(&s[..end])
    }

    fn koid(&mut self) -> Koid {
        self.next_koid += 1;
        Koid(self.next_koid)
    }

    fn thread(&self, track: TrackRef) -> Option<ThreadRef> {
        self.threads.get(track.0 as usize).copied()
    }

    /// Converts arguments; `out` must hold `MAX_ARGS`.
    fn args<'s>(
        &mut self,
        args: &[Arg<'s>],
        name: (&'s str, StringRef<'s>),
        out: &mut [FxtArg<'s, StringRef<'s>>; MAX_ARGS],
    ) -> usize {
        let n = args.len().min(MAX_ARGS);
        for (slot, a) in out.iter_mut().zip(&args[..n]) {
            let value = match a.value {
                ArgValue::Int(v) => match i32::try_from(v) {
                    Ok(v) => FxtValue::Int32(v),
                    Err(_) => FxtValue::Int64(v),
                },
                ArgValue::Pointer(p) => FxtValue::Pointer(p.0),
                // The `symbol` argument repeats the slice's name.
                ArgValue::Str(s) if s == name.0 => FxtValue::String(name.1),
                ArgValue::Str(s) => FxtValue::String(self.arg_string(s)),
            };
            *slot = FxtArg {
                name: self.arg_string(a.name),
                value,
            };
        }
        n
    }

    fn event(
        &mut self,
        track: TrackRef,
        kind: Kind,
        time: Time,
        name: (&str, Option<SymbolId>),
        args: &[Arg<'_>],
    ) {
        if self.error.is_some() {
            return;
        }
        let Some(thread) = self.thread(track) else {
            return;
        };
        let name_ref = match name.1 {
            Some(symbol) => self.symbol_string(symbol, name.0),
            None => self.string(name.0),
        };
        let name = (name.0, name_ref);
        let mut buf = [FxtArg {
            name: StringRef::Empty,
            value: FxtValue::Null,
        }; MAX_ARGS];
        let n = self.args(args, name, &mut buf);
        let ticks = ticks_of(time);
        let r = match kind {
            Kind::Begin => {
                self.writer
                    .duration_begin(thread, StringRef::Empty, name_ref, ticks, &buf[..n])
            }
            Kind::End => {
                self.writer
                    .duration_end(thread, StringRef::Empty, name_ref, ticks, &buf[..n])
            }
            Kind::Instant => {
                self.writer
                    .instant(thread, StringRef::Empty, name_ref, ticks, &buf[..n])
            }
            Kind::Counter => {
                self.writer
                    .counter(thread, StringRef::Empty, name_ref, ticks, 0, &buf[..n])
            }
            Kind::Complete(end) => {
                let end = ticks_of(end).max(ticks);
                self.writer.duration_complete(
                    thread,
                    StringRef::Empty,
                    name_ref,
                    ticks,
                    end,
                    &buf[..n],
                )
            }
        };
        self.check(r);
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Begin,
    End,
    Instant,
    Counter,
    Complete(Time),
}

/// FXT ticks are unsigned; times before the base (possible for inferred frames) clamp
/// to the start of the trace.
fn ticks_of(t: Time) -> u64 {
    u64::try_from(t.0).unwrap_or(0)
}

impl<D: Destination> Sink for FxtSink<D> {
    fn add_process(&mut self, name: &str, pid: Option<u32>) -> ProcessRef {
        let koid = match pid {
            Some(pid) => Koid(u64::from(pid)),
            None => self.koid(),
        };
        let name_ref = self.string(name);
        let r = self.writer.set_process_name(koid, name_ref);
        self.check(r);
        self.processes.push(koid);
        ProcessRef(u32::try_from(self.processes.len() - 1).unwrap_or(u32::MAX))
    }

    fn add_thread(&mut self, process: ProcessRef, name: &str, tid: Option<u32>) -> TrackRef {
        let pid = self
            .processes
            .get(process.0 as usize)
            .copied()
            .unwrap_or(Koid(0));
        let tid = match tid {
            Some(tid) => Koid(u64::from(tid)),
            None => self.koid(),
        };
        let name_ref = self.string(name);
        let r = self.writer.set_thread_name(pid, tid, name_ref);
        self.check(r);
        let slot = self.threads.len();
        let thread = if slot < THREAD_SLOTS {
            match self.writer.set_thread_slot(slot as u8, pid, tid) {
                Ok(id) => ThreadRef::Index(id),
                Err(e) => {
                    self.check(Err(e));
                    ThreadRef::Inline {
                        process: pid,
                        thread: tid,
                    }
                }
            }
        } else {
            ThreadRef::Inline {
                process: pid,
                thread: tid,
            }
        };
        self.threads.push(thread);
        TrackRef(u32::try_from(slot).unwrap_or(u32::MAX))
    }

    fn begin(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        self.event(track, Kind::Begin, time, (name, None), args);
    }

    fn end(&mut self, track: TrackRef, time: Time, name: &str) {
        self.event(track, Kind::End, time, (name, None), &[]);
    }

    fn begin_symbol(
        &mut self,
        track: TrackRef,
        time: Time,
        symbol: SymbolId,
        name: &str,
        args: &[Arg<'_>],
    ) {
        self.event(track, Kind::Begin, time, (name, Some(symbol)), args);
    }

    fn end_symbol(&mut self, track: TrackRef, time: Time, symbol: SymbolId, name: &str) {
        self.event(track, Kind::End, time, (name, Some(symbol)), &[]);
    }

    fn complete(&mut self, track: TrackRef, start: Time, end: Time, name: &str, args: &[Arg<'_>]) {
        self.event(track, Kind::Complete(end), start, (name, None), args);
    }

    fn instant(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        self.event(track, Kind::Instant, time, (name, None), args);
    }

    fn counter(&mut self, track: TrackRef, time: Time, name: &str, args: &[Arg<'_>]) {
        self.event(track, Kind::Counter, time, (name, None), args);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_fxt::read::{Reader, Record};
    use tracekit_fxt::write::VecDestination;

    #[test]
    fn strings_over_the_limit_are_cut_marked_and_counted_once() {
        let mut sink = FxtSink::new(Writer::new(VecDestination::new()).unwrap());
        let process = sink.add_process("p", None);
        let track = sink.add_thread(process, "t", None);
        // A 40,000-byte symbol with a 2-byte character across the cut.
        let long = format!("{}é{}", "a".repeat(31_985), "b".repeat(8_000));
        for i in 0..3 {
            sink.begin(track, Time(i * 10), &long, &[]);
            sink.end(track, Time(i * 10 + 5), &long);
        }
        assert_eq!(sink.truncated_strings(), 1);
        let bytes = sink.finish().unwrap().into_vec();
        let mut r = Reader::new(&bytes);
        let mut cut = Vec::new();
        let mut events = 0;
        while let Some(rec) = r.next_record().unwrap() {
            match rec {
                Record::String { value, .. } if value.len() > 1000 => {
                    cut.push(String::from_utf8(value.to_vec()).unwrap())
                }
                Record::Event(e) => {
                    events += 1;
                    assert!(e.name.to_string().ends_with(TRUNCATED_MARKER));
                }
                _ => {}
            }
        }
        assert_eq!(events, 6);
        assert_eq!(cut.len(), 1, "interned once");
        assert!(cut[0].len() <= MAX_STRING_LEN);
        assert!(cut[0].ends_with(TRUNCATED_MARKER));
        assert!(long.starts_with(cut[0].trim_end_matches(TRUNCATED_MARKER)));
        assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    }
}
