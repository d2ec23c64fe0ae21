//! A timeline as bytes, to keep it in a file and read it back instead of
//! reading the trace again. No I/O: [`Timeline::write_to`] writes to any
//! `io::Write`; [`Timeline::read_from`] reads a byte slice into memory, and
//! [`Timeline::read_in_place`] reads shared bytes (a mapped file) leaving the
//! lanes' columns where they are, to be paged in as answers read them.
//!
//! All integers are little-endian. A string is 4 bytes of length and its
//! UTF-8 bytes; an optional id is a byte (0 none, 1 some) and the id (4). A
//! lane's summaries are not kept: they are made again as it is read. The
//! version also changes when the same bytes come to mean another layout (how
//! async slices are laid on tracks), so that a file kept by another build is
//! refused and the timeline made again rather than shown as it was.
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | magic `TKTIMEL` and the format version (11) |
//! | 8 | records read |
//! | 9 each | the first and the last time, each an optional `u64` (a byte, then 8) |
//! | 4 + strings | the strings |
//! | string, 4, zeros, 8 each | the argument sets' text (each a JSON object), their count + 1, zeros to the next multiple of 8, and where each starts (the last: where the last ends) |
//! | 4 + 13 each | processes: koid (8), optional name (5) |
//! | 4 + tracks | per track: kind (1: 0 thread, 1 async), pid (8), tid (8), optional name (5), optional memtrace domain of a thread's heap (5), then its lanes (4 bytes of count; per lane 4 bytes of slices, zeros to the next multiple of 8, and the columns start (8 each), end (8 each), name, category, arguments (4 each), then 4 bytes of async ids (none in a thread's lane, one per slice in an async track's), zeros to the next multiple of 8 and the ids (8 each)), then its instants (4 bytes of count; time (8), name, category, arguments (4 each) per instant) |
//! | 4 + counters | per series: pid (8), name (4), category (4), id (8), series (4), samples (4), then times (8 each), values (8 each, IEEE 754) and threads (8 each) |
//! | 4 + flows | per flow: id (8), events (4), then per event its track (4), time (8) and phase (1: 0 begin, 1 step, 2 end) |
//! | 1 (+ 16) | whether the trace places its clock on the monotonic clock (1), then a time of the trace (8) and the monotonic time it was (8), nanoseconds |
//!
//! A timeline of a damaged trace, or of one whose records were skipped, is not
//! written: reading it back would lose the damage. Reading checks every count,
//! id and order against the rest (a lane's slices must not overlap), so a file
//! that is not what it says is an error with its offset, never a timeline that
//! answers wrongly.

use std::io::{self, Write};

use tracekit_columns::{Cursor, LeWriter, Shared, Store};

use crate::lane::{Columns, Lane, OPEN};
use crate::{Counter, Flow, FlowPhase, FlowPoint, Instant, Timeline, Track, TrackKind};

pub use tracekit_columns::FileError;

const MAGIC: &[u8; 8] = &{
    let mut magic = *b"TKTIMEL\0";
    magic[7] = Timeline::FILE_VERSION;
    magic
};

/// The format's name in [`FileError::Magic`].
const FORMAT: &str = "a timeline";

impl Timeline {
    /// The version of the format [`Timeline::write_to`] writes, the last byte
    /// of its magic.
    pub const FILE_VERSION: u8 = 11;

    /// Writes the timeline in the format of the module docs. A timeline of a
    /// damaged trace is refused ([`FileError::Damaged`] as
    /// `io::ErrorKind::InvalidInput`).
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.error.is_some() || !self.warnings.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                FileError::Damaged("the timeline is"),
            ));
        }
        let out = &mut LeWriter::new(out);
        out.write_all(MAGIC)?;
        out.u64(self.records)?;
        out.opt_u64(self.first_ns)?;
        out.opt_u64(self.last_ns)?;
        out.len32(self.strings.len())?;
        for s in &self.strings {
            out.str32(s.as_bytes())?;
        }
        out.str32(&self.args_text)?;
        out.len32(self.args_at.len())?;
        out.pad()?;
        out.values(self.args_at.iter().map(|a| a.to_le_bytes()))?;
        out.len32(self.processes.len())?;
        for &(pid, name) in &self.processes {
            out.u64(pid)?;
            out.opt_u32(name)?;
        }
        out.len32(self.tracks.len())?;
        for t in &self.tracks {
            out.u8(u8::from(t.kind == TrackKind::Async))?;
            out.u64(t.pid)?;
            out.u64(t.tid)?;
            out.opt_u32(t.name)?;
            out.opt_u32(t.heap_domain.map(u32::from))?;
            out.len32(t.lanes.len())?;
            for lane in &t.lanes {
                let n = lane.len();
                let slices = || (0..n).filter_map(|i| lane.get(i));
                out.len32(n)?;
                out.pad()?;
                out.values(slices().map(|s| s.start.to_le_bytes()))?;
                out.values(slices().map(|s| s.end.to_le_bytes()))?;
                out.values(slices().map(|s| s.name.to_le_bytes()))?;
                out.values(slices().map(|s| s.category.to_le_bytes()))?;
                out.values(slices().map(|s| s.args.to_le_bytes()))?;
                out.len32(lane.ids().len())?;
                out.pad()?;
                out.values(lane.ids().iter().map(|id| id.to_le_bytes()))?;
            }
            out.len32(t.instants.len())?;
            for i in &t.instants {
                out.u64(i.time)?;
                for v in [i.name, i.category, i.args] {
                    out.u32(v)?;
                }
            }
        }
        out.len32(self.counters.len())?;
        for c in &self.counters {
            out.u64(c.pid)?;
            out.u32(c.name)?;
            out.u32(c.category)?;
            out.u64(c.id)?;
            out.u32(c.series)?;
            out.len32(c.times.len())?;
            out.values(c.times.iter().map(|t| t.to_le_bytes()))?;
            out.values(c.values.iter().map(|v| v.to_bits().to_le_bytes()))?;
            out.values(c.threads.iter().map(|t| t.to_le_bytes()))?;
        }
        out.len32(self.flows.len())?;
        for f in &self.flows {
            out.u64(f.id)?;
            out.len32(f.points.len())?;
            for p in &f.points {
                out.len32(p.track)?;
                out.u64(p.time)?;
                let phase: u8 = match p.phase {
                    FlowPhase::Begin => 0,
                    FlowPhase::Step => 1,
                    FlowPhase::End => 2,
                };
                out.u8(phase)?;
            }
        }
        match self.monotonic {
            Some((trace, mono)) => {
                out.u8(1)?;
                out.u64(trace)?;
                out.u64(mono)?;
            }
            None => out.u8(0)?,
        }
        Ok(())
    }

    /// Reads a timeline written by [`Timeline::write_to`], into memory.
    pub fn read_from(bytes: &[u8]) -> Result<Timeline, FileError> {
        Timeline::read(Cursor::new(bytes), &mut |_| {})
    }

    /// Reads a timeline written by [`Timeline::write_to`] at byte `offset` of
    /// `bytes` (a mapped cache file), as [`Timeline::read_from`] does, but
    /// leaving its lanes' columns in place: the timeline keeps `bytes` and
    /// reads their values there. The format pads each lane's columns to a
    /// multiple of 8 from the timeline's start, so with `offset` a multiple
    /// of 8 every column is in place on a little-endian host (anywhere else,
    /// or at another offset, they are copied). Strings, arguments, instants, counters and
    /// flows are copied. `done` hears, after each lane, up to where the bytes
    /// are read and checked: the pages there can be let go, and are paged in
    /// again when an answer reads them.
    ///
    /// # Safety
    ///
    /// `bytes`' `as_ref` must return the same bytes at the same address, never
    /// changed, for as long as the timeline or any clone of `bytes` live: true
    /// of bytes in a vector, and of a read-only mapping of a file that nothing
    /// changes while it is mapped (which reading a mapped file already needs).
    pub unsafe fn read_in_place(
        bytes: Shared,
        offset: usize,
        done: &mut dyn FnMut(usize),
    ) -> Result<Timeline, FileError> {
        // SAFETY: this function's contract is `Cursor::in_place`'s.
        let r = unsafe { Cursor::in_place(&bytes, offset) }?;
        Timeline::read(r, done)
    }

    /// Reads the timeline at `r`, telling `done` how far it has come after
    /// each lane.
    fn read(mut r: Cursor<'_>, done: &mut dyn FnMut(usize)) -> Result<Timeline, FileError> {
        if r.take(8)? != MAGIC {
            return Err(FileError::Magic(FORMAT));
        }
        let records = r.u64()?;
        let first_ns = r.opt_u64()?;
        let last_ns = r.opt_u64()?;
        let n = r.count32(4)?;
        let mut strings = Vec::with_capacity(n);
        for _ in 0..n {
            strings.push(string(&mut r)?.into_boxed_str());
        }
        // The text and where each set starts, read in place: a set's text is
        // checked as UTF-8 when it is asked for ([`Timeline::args`]).
        let n = r.count32(1)?;
        let args_text = r.values::<u8>(n)?;
        let at = r.at();
        let n = r.count32(8)?;
        r.pad()?;
        let args_at = r.values::<u64>(n)?;
        let boundaries_hold = (args_at.is_empty() || args_at.first() == Some(&0))
            && args_at.windows(2).all(|w| w[0] <= w[1])
            && args_at
                .last()
                .is_none_or(|&end| end <= args_text.len() as u64);
        if !boundaries_hold {
            return Err(FileError::Inconsistent(at));
        }
        let arg_sets = args_at.len().saturating_sub(1);
        // Set 0 reads as `{}` whether or not the file holds it.
        let args_ok = |id: u32| id == 0 || (id as usize) < arg_sets;
        let string = |r: &Cursor<'_>, id: u32| match (id as usize) < strings.len() {
            true => Ok(id),
            false => Err(r.bad()),
        };
        let n = r.count32(13)?;
        let mut processes = Vec::with_capacity(n);
        for _ in 0..n {
            let pid = r.u64()?;
            let name = r.opt_u32()?;
            if let Some(name) = name {
                string(&r, name)?;
            }
            processes.push((pid, name));
        }
        let n = r.count32(25)?;
        let mut tracks = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.at();
            let kind = match r.u8()? {
                0 => TrackKind::Thread,
                1 => TrackKind::Async,
                _ => return Err(FileError::Inconsistent(at)),
            };
            let pid = r.u64()?;
            let tid = r.u64()?;
            let name = r.opt_u32()?;
            if let Some(name) = name {
                string(&r, name)?;
            }
            let at = r.at();
            let heap_domain = match r.opt_u32()? {
                None => None,
                Some(d) => Some(u16::try_from(d).map_err(|_| FileError::Inconsistent(at))?),
            };
            let lanes_n = r.count32(4)?;
            let mut lanes = Vec::with_capacity(lanes_n);
            for _ in 0..lanes_n {
                let n = r.count32(28)?;
                r.pad()?;
                let start: Store<u64> = r.values(n)?;
                let end: Store<u64> = r.values(n)?;
                let mut ids: [Store<u32>; 3] = Default::default();
                for (k, v) in ids.iter_mut().enumerate() {
                    let at = r.at();
                    *v = r.values(n)?;
                    let fits = |&id: &u32| match k {
                        2 => args_ok(id),
                        _ => (id as usize) < strings.len(),
                    };
                    if !v.iter().all(fits) {
                        return Err(FileError::Inconsistent(at));
                    }
                }
                let at = r.at();
                let ids_n = r.count32(8)?;
                r.pad()?;
                let async_ids = match ids_n {
                    0 => Store::default(),
                    m if m == n && kind == TrackKind::Async => r.values(n)?,
                    _ => return Err(FileError::Inconsistent(at)),
                };
                let mut last_end = 0u64;
                for i in 0..n {
                    let (s, e) = (start[i], end[i]);
                    // Slices in order, none before the previous one ends.
                    if (e != OPEN && e < s) || s < last_end || (i > 0 && end[i - 1] == OPEN) {
                        return Err(r.bad());
                    }
                    last_end = e;
                }
                let [name, category, args] = ids;
                let mut lane = Lane::from_columns(Columns {
                    start,
                    end,
                    name,
                    category,
                    args,
                    ids: async_ids,
                });
                lane.finish();
                lanes.push(lane);
                done(r.at());
            }
            let n = r.count32(20)?;
            let mut instants = Vec::with_capacity(n);
            let mut last_time = 0;
            for _ in 0..n {
                let at = r.at();
                let time = r.u64()?;
                let (name, category, args) = (r.u32()?, r.u32()?, r.u32()?);
                string(&r, name)?;
                string(&r, category)?;
                if time < last_time || !args_ok(args) {
                    return Err(FileError::Inconsistent(at));
                }
                last_time = time;
                instants.push(Instant {
                    time,
                    name,
                    category,
                    args,
                });
            }
            tracks.push(Track {
                kind,
                pid,
                tid,
                name,
                heap_domain,
                lanes,
                instants,
            });
        }
        let n = r.count32(32)?;
        let mut counters = Vec::with_capacity(n);
        for _ in 0..n {
            let pid = r.u64()?;
            let name = r.u32()?;
            string(&r, name)?;
            let category = r.u32()?;
            string(&r, category)?;
            let id = r.u64()?;
            let series = r.u32()?;
            string(&r, series)?;
            let samples = r.count32(24)?;
            let times = r.values::<u64>(samples)?.to_vec();
            let values = r.values::<u64>(samples)?;
            let values: Vec<f64> = values.iter().map(|&v| f64::from_bits(v)).collect();
            let threads = r.values::<u64>(samples)?.to_vec();
            counters.push(Counter {
                pid,
                name,
                category,
                id,
                series,
                times,
                values,
                threads,
            });
        }
        let n = r.count32(12)?;
        let mut flows = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u64()?;
            let events = r.count32(13)?;
            let mut points = Vec::with_capacity(events);
            for _ in 0..events {
                let at = r.at();
                let track = r.u32()? as usize;
                let time = r.u64()?;
                let phase = match r.u8()? {
                    0 => FlowPhase::Begin,
                    1 => FlowPhase::Step,
                    2 => FlowPhase::End,
                    _ => return Err(FileError::Inconsistent(at)),
                };
                if track >= tracks.len() {
                    return Err(FileError::Inconsistent(at));
                }
                points.push(FlowPoint { track, time, phase });
            }
            flows.push(Flow { id, points });
        }
        let at = r.at();
        let monotonic = match r.u8()? {
            0 => None,
            1 => Some((r.u64()?, r.u64()?)),
            _ => return Err(FileError::Inconsistent(at)),
        };
        r.finish()?;
        Ok(Timeline {
            strings,
            args_text,
            args_at,
            processes,
            tracks,
            counters,
            flows,
            first_ns,
            last_ns,
            records,
            warnings: Vec::new(),
            error: None,
            has_allocations: Default::default(),
            monotonic,
        })
    }
}

/// A string: 4 bytes of length, then its UTF-8 bytes.
fn string(r: &mut Cursor<'_>) -> Result<String, FileError> {
    let at = r.at();
    let n = r.u32()? as usize;
    let b = r.take(n)?;
    String::from_utf8(b.to_vec()).map_err(|_| FileError::Inconsistent(at))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_fxt::format::{Arg, ArgValue, Koid, ObjectType, RawArg, StringRef};
    use tracekit_fxt::io::IoDestination;
    use tracekit_fxt::read::Reader;
    use tracekit_fxt::write::Writer;

    /// A small trace with every kind of thing a timeline keeps.
    fn timeline() -> Timeline {
        let mut w = Writer::new(IoDestination::new(Vec::new())).unwrap();
        let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
        w.set_thread_name(Koid(1), Koid(2), "main").unwrap();
        let (c, a, b) = (
            w.intern("cat").unwrap(),
            w.intern("outer").unwrap(),
            w.intern("inner").unwrap(),
        );
        // The tracing layer's clock anchor on the process: tick 4 was
        // 1,000,004 ns of the monotonic clock.
        let anchor = [
            RawArg::new(StringRef::inline("clock_ticks"), ArgValue::UInt64(4)),
            RawArg::new(
                StringRef::inline("clock_monotonic_ns"),
                ArgValue::UInt64(1_000_004),
            ),
        ];
        w.kernel_object(ObjectType::PROCESS, Koid(1), "app", &anchor)
            .unwrap();
        let key = w.intern("n").unwrap();
        let args = [Arg::new(key, ArgValue::Int64(-5))];
        w.duration_begin(t, c, a, 10, &args).unwrap();
        w.duration_complete(t, c, b, 12, 15, &[]).unwrap();
        w.duration_end(t, c, a, 20, &[]).unwrap();
        w.duration_begin(t, c, b, 30, &[]).unwrap();
        w.instant(t, c, b, 16, &args).unwrap();
        w.async_begin(t, c, a, 5, 9, &[]).unwrap();
        w.async_end(t, c, a, 25, 9, &[]).unwrap();
        w.counter(t, c, a, 18, 3, &[Arg::new(key, ArgValue::Double(2.5))])
            .unwrap();
        let other = w.set_thread_slot(1, Koid(1), Koid(3)).unwrap();
        // The second thread names its heap's memtrace domain.
        let heap = [
            RawArg::new(StringRef::inline("process"), ArgValue::Koid(Koid(1))),
            RawArg::new(StringRef::inline("memtrace_domain"), ArgValue::UInt64(7)),
        ];
        w.kernel_object(ObjectType::THREAD, Koid(3), "worker", &heap)
            .unwrap();
        w.flow_begin(t, 11, 77).unwrap();
        w.flow_step(other, 13, 77).unwrap();
        w.flow_end(t, 19, 77).unwrap();
        let bytes = w.finish_io().unwrap();
        Timeline::build(&mut Reader::new(&bytes), &mut |_| {})
    }

    fn written(t: &Timeline) -> Vec<u8> {
        let mut out = Vec::new();
        t.write_to(&mut out).unwrap();
        out
    }

    #[test]
    fn a_timeline_read_back_is_the_one_written() {
        let t = timeline();
        assert_eq!(t.slices(), 4);
        let file = written(&t);
        let back = Timeline::read_from(&file).unwrap();
        assert_eq!(written(&back), file, "written again, byte for byte");
        assert_eq!(back.slices(), 4);
        assert_eq!(back.counters(), t.counters());
        assert_eq!(back.counters()[0].threads, [2]);
        assert_eq!(back.string(back.counters()[0].category), "cat");
        // The async slice keeps its id.
        let async_track = back
            .tracks()
            .iter()
            .find(|t| t.kind == TrackKind::Async)
            .unwrap();
        assert_eq!(async_track.lanes[0].id(0), Some(9));
        assert_eq!(back.tracks()[0].lanes[0].id(0), None);
        assert_eq!(back.flows(), t.flows());
        // The clock's place on the monotonic clock (ticks are nanoseconds here).
        assert_eq!(back.from_monotonic(1_000_004), Some(4));
        assert_eq!(back.from_monotonic(1_000_010), Some(10));
        assert_eq!(t.from_monotonic(1_000_010), Some(10));
        let flow = &t.flows()[0];
        assert_eq!(flow.id, 77);
        let steps: Vec<_> = flow.points.iter().map(|p| (p.time, p.phase)).collect();
        assert_eq!(
            steps,
            [
                (11, FlowPhase::Begin),
                (13, FlowPhase::Step),
                (19, FlowPhase::End)
            ]
        );
        assert_ne!(flow.points[0].track, flow.points[1].track, "on two threads");
        assert_eq!(back.tracks()[0].instants, t.tracks()[0].instants);
        // Each thread's heap domain, where its record names it.
        let domains: Vec<_> = (back.tracks().iter())
            .filter(|t| t.kind == TrackKind::Thread)
            .map(|t| (t.tid, t.heap_domain))
            .collect();
        assert_eq!(domains, [(2, None), (3, Some(7))]);
        let s = back.tracks()[0].lanes[0].get(0).unwrap();
        assert_eq!(back.string(s.name), "outer");
        assert_eq!(back.args(s.args), r#"{"n":-5}"#);
        // Lanes answer as before: their summaries were made again.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (x, y) in t.tracks().iter().zip(back.tracks()) {
            for (l, m) in x.lanes.iter().zip(&y.lanes) {
                l.window(0, 40, 3, &mut a);
                m.window(0, 40, 3, &mut b);
            }
        }
        assert_eq!(a, b);
        assert!(!a.is_empty());
        // In place, after a key as a cache file has: the same timeline, its
        // lanes' columns all in place when the timeline starts at a multiple
        // of 8 (as a cache file places it), copied at any other start.
        let own = |t: &Timeline| -> usize {
            let lanes = t.tracks().iter().flat_map(|t| &t.lanes);
            lanes.map(|l| l.own_bytes()).sum()
        };
        for key in 16..24 {
            let mut keyed = vec![b'k'; key];
            keyed.extend_from_slice(&file);
            let shared: Shared = std::sync::Arc::new(keyed);
            let mut done = Vec::new();
            // SAFETY: a vector's bytes, never changed.
            let placed = unsafe {
                Timeline::read_in_place(std::sync::Arc::clone(&shared), key, &mut |at| {
                    done.push(at)
                })
            }
            .unwrap();
            assert_eq!(
                written(&placed),
                file,
                "written again from the bytes in place"
            );
            assert!(!done.is_empty() && done.windows(2).all(|w| w[0] <= w[1]));
            assert!(done.iter().all(|&at| at <= file.len()));
            let mut c = Vec::new();
            a.clear();
            for (x, y) in back.tracks().iter().zip(placed.tracks()) {
                for (l, m) in x.lanes.iter().zip(&y.lanes) {
                    l.window(0, 40, 3, &mut a);
                    m.window(0, 40, 3, &mut c);
                }
            }
            assert_eq!(a, c);
            // At 4 past a multiple of 8, the 4-byte columns are still aligned.
            match (key % 8, cfg!(target_endian = "little")) {
                (0, true) => assert_eq!(own(&placed), 0, "all in place at {key}"),
                (4, true) => assert!(0 < own(&placed) && own(&placed) < own(&back)),
                _ => assert_eq!(own(&placed), own(&back), "copied at {key}"),
            }
        }
        // An empty timeline too.
        let empty = written(&Timeline::default());
        assert_eq!(written(&Timeline::read_from(&empty).unwrap()), empty);
    }

    #[test]
    fn bad_bytes_are_an_error_with_an_offset_never_a_panic() {
        let file = written(&timeline());
        assert_eq!(
            Timeline::read_from(b"nope").err(),
            Some(FileError::Truncated(0))
        );
        assert_eq!(
            Timeline::read_from(b"TKTIMEL\x09xxxxxxxx").err(),
            Some(FileError::Magic(FORMAT))
        );
        for n in 0..file.len() {
            assert!(Timeline::read_from(&file[..n]).is_err(), "cut at {n}");
        }
        let mut longer = file.clone();
        longer.push(0);
        assert!(Timeline::read_from(&longer).is_err());
        for at in 8..file.len() {
            for bit in [0x01, 0x80] {
                let mut f = file.clone();
                f[at] ^= bit;
                // Any answer but a panic; one that reads is checked whole.
                if let Ok(t) = Timeline::read_from(&f) {
                    for track in t.tracks() {
                        for lane in &track.lanes {
                            for i in 1..lane.len() {
                                let (p, s) = (lane.get(i - 1).unwrap(), lane.get(i).unwrap());
                                assert!(p.end <= s.start, "{at}: lanes overlap");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_damaged_trace_s_timeline_is_not_written() {
        let mut t = timeline();
        t.error = Some(tracekit_fxt::read::ReadError {
            offset: 8,
            problem: tracekit_fxt::read::Problem::ZeroSizeRecord,
        });
        let e = t.write_to(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
