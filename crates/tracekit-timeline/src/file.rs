//! A timeline as bytes, to keep it in a file and read it back instead of
//! reading the trace again. No I/O: [`Timeline::write_to`] writes to any
//! `io::Write`, [`Timeline::read_from`] reads a byte slice (a mapped file).
//!
//! All integers are little-endian. A string is 4 bytes of length and its
//! UTF-8 bytes; an optional id is a byte (0 none, 1 some) and the id (4). A
//! lane's summaries are not kept: they are made again as it is read.
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | magic `TKTIMEL` and the format version (3) |
//! | 8 | records read |
//! | 9 each | the first and the last time, each an optional `u64` (a byte, then 8) |
//! | 4 + strings | the strings |
//! | string, 4 + 8 each | the argument sets' text, their count + 1, and where each starts (the last: where the last ends) |
//! | 4 + 13 each | processes: koid (8), optional name (5) |
//! | 4 + tracks | per track: kind (1: 0 thread, 1 async), pid (8), tid (8), optional name (5), then its lanes (4 bytes of count; per lane 4 bytes of slices and the columns start (8 each), end (8 each), name, category, arguments (4 each), then 4 bytes of async ids (none in a thread's lane, one per slice in an async track's) and the ids (8 each)), then its instants (4 bytes of count; time (8), name, category, arguments (4 each) per instant) |
//! | 4 + counters | per series: pid (8), name (4), category (4), id (8), series (4), samples (4), then times (8 each), values (8 each, IEEE 754) and threads (8 each) |
//! | 4 + flows | per flow: id (8), events (4), then per event its track (4), time (8) and phase (1: 0 begin, 1 step, 2 end) |
//!
//! A timeline of a damaged trace, or of one whose records were skipped, is not
//! written: reading it back would lose the damage. Reading checks every count,
//! id and order against the rest (a lane's slices must not overlap), so a file
//! that is not what it says is an error with its offset, never a timeline that
//! answers wrongly.

use std::io::{self, Write};

use crate::lane::{Lane, OPEN, Slice};
use crate::{Counter, Flow, FlowPhase, FlowPoint, Instant, Timeline, Track, TrackKind};

const MAGIC: &[u8; 8] = b"TKTIMEL\x03";

/// Why bytes are not a timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// Not a timeline of this format version.
    #[error("not a timeline of this version")]
    Magic,
    /// The bytes end inside a section.
    #[error("cut short at byte {0}")]
    Truncated(usize),
    /// A value that contradicts the rest (a count, an id, an order) at this
    /// offset.
    #[error("inconsistent at byte {0}")]
    Inconsistent(usize),
    /// The timeline is of a damaged trace, which is not written.
    #[error("the timeline is of a damaged trace")]
    Damaged,
}

fn u32_of(n: usize) -> io::Result<[u8; 4]> {
    u32::try_from(n)
        .map(u32::to_le_bytes)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn write_opt(out: &mut dyn Write, v: Option<u32>) -> io::Result<()> {
    match v {
        None => out.write_all(&[0; 5]),
        Some(v) => {
            out.write_all(&[1])?;
            out.write_all(&v.to_le_bytes())
        }
    }
}

/// Values as their little-endian bytes, through a buffer of about 64 KiB.
fn write_le<const N: usize>(
    out: &mut dyn Write,
    v: impl Iterator<Item = [u8; N]>,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    for x in v {
        buf.extend_from_slice(&x);
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

fn write_str(out: &mut dyn Write, s: &str) -> io::Result<()> {
    out.write_all(&u32_of(s.len())?)?;
    out.write_all(s.as_bytes())
}

impl Timeline {
    /// Writes the timeline in the format of the module docs. A timeline of a
    /// damaged trace is refused ([`FileError::Damaged`] as
    /// `io::ErrorKind::InvalidInput`).
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.error.is_some() || !self.warnings.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                FileError::Damaged,
            ));
        }
        out.write_all(MAGIC)?;
        out.write_all(&self.records.to_le_bytes())?;
        for t in [self.first_ns, self.last_ns] {
            match t {
                None => out.write_all(&[0; 9])?,
                Some(t) => {
                    out.write_all(&[1])?;
                    out.write_all(&t.to_le_bytes())?;
                }
            }
        }
        out.write_all(&u32_of(self.strings.len())?)?;
        for s in &self.strings {
            write_str(out, s)?;
        }
        write_str(out, &self.args_text)?;
        out.write_all(&u32_of(self.args_at.len())?)?;
        write_le(out, self.args_at.iter().map(|a| a.to_le_bytes()))?;
        out.write_all(&u32_of(self.processes.len())?)?;
        for &(pid, name) in &self.processes {
            out.write_all(&pid.to_le_bytes())?;
            write_opt(out, name)?;
        }
        out.write_all(&u32_of(self.tracks.len())?)?;
        for t in &self.tracks {
            out.write_all(&[u8::from(t.kind == TrackKind::Async)])?;
            out.write_all(&t.pid.to_le_bytes())?;
            out.write_all(&t.tid.to_le_bytes())?;
            write_opt(out, t.name)?;
            out.write_all(&u32_of(t.lanes.len())?)?;
            for lane in &t.lanes {
                let n = lane.len();
                let slices = || (0..n).filter_map(|i| lane.get(i));
                out.write_all(&u32_of(n)?)?;
                write_le(out, slices().map(|s| s.start.to_le_bytes()))?;
                write_le(out, slices().map(|s| s.end.to_le_bytes()))?;
                write_le(out, slices().map(|s| s.name.to_le_bytes()))?;
                write_le(out, slices().map(|s| s.category.to_le_bytes()))?;
                write_le(out, slices().map(|s| s.args.to_le_bytes()))?;
                out.write_all(&u32_of(lane.ids().len())?)?;
                write_le(out, lane.ids().iter().map(|id| id.to_le_bytes()))?;
            }
            out.write_all(&u32_of(t.instants.len())?)?;
            for i in &t.instants {
                out.write_all(&i.time.to_le_bytes())?;
                for v in [i.name, i.category, i.args] {
                    out.write_all(&v.to_le_bytes())?;
                }
            }
        }
        out.write_all(&u32_of(self.counters.len())?)?;
        for c in &self.counters {
            out.write_all(&c.pid.to_le_bytes())?;
            out.write_all(&c.name.to_le_bytes())?;
            out.write_all(&c.category.to_le_bytes())?;
            out.write_all(&c.id.to_le_bytes())?;
            out.write_all(&c.series.to_le_bytes())?;
            out.write_all(&u32_of(c.times.len())?)?;
            write_le(out, c.times.iter().map(|t| t.to_le_bytes()))?;
            write_le(
                out,
                (c.values.iter().map(|v| v.to_bits())).map(u64::to_le_bytes),
            )?;
            write_le(out, c.threads.iter().map(|t| t.to_le_bytes()))?;
        }
        out.write_all(&u32_of(self.flows.len())?)?;
        for f in &self.flows {
            out.write_all(&f.id.to_le_bytes())?;
            out.write_all(&u32_of(f.points.len())?)?;
            for p in &f.points {
                out.write_all(&u32_of(p.track)?)?;
                out.write_all(&p.time.to_le_bytes())?;
                let phase: u8 = match p.phase {
                    FlowPhase::Begin => 0,
                    FlowPhase::Step => 1,
                    FlowPhase::End => 2,
                };
                out.write_all(&[phase])?;
            }
        }
        Ok(())
    }

    /// Reads a timeline written by [`Timeline::write_to`].
    pub fn read_from(bytes: &[u8]) -> Result<Timeline, FileError> {
        Timeline::read_from_releasing(bytes, &mut |_| {})
    }

    /// [`Timeline::read_from`], telling `done` now and then how many bytes
    /// it has read and copied, which it will not read again: a caller that
    /// maps the file can let those pages go, so that the file and the
    /// timeline are not both resident.
    pub fn read_from_releasing(
        bytes: &[u8],
        done: &mut dyn FnMut(usize),
    ) -> Result<Timeline, FileError> {
        let mut r = Bytes { bytes, at: 0 };
        if r.take(8)? != MAGIC {
            return Err(FileError::Magic);
        }
        let records = r.u64()?;
        let first_ns = r.opt_u64()?;
        let last_ns = r.opt_u64()?;
        let n = r.count(4)?;
        let mut strings = Vec::with_capacity(n);
        for _ in 0..n {
            strings.push(r.string()?.into_boxed_str());
        }
        let args_text = r.string()?;
        let at = r.at;
        let n = r.count(8)?;
        let args_at = r.u64s(n)?;
        let boundaries_hold = (args_at.is_empty() || args_at.first() == Some(&0))
            && args_at.windows(2).all(|w| w[0] <= w[1])
            && args_at
                .iter()
                .all(|&a| usize::try_from(a).is_ok_and(|a| args_text.is_char_boundary(a)));
        if !boundaries_hold {
            return Err(FileError::Inconsistent(at));
        }
        let arg_sets = args_at.len().saturating_sub(1);
        // Set 0 reads as `{}` whether or not the file holds it.
        let args_ok = |id: u32| id == 0 || (id as usize) < arg_sets;
        let string = |r: &Bytes<'_>, id: u32| match (id as usize) < strings.len() {
            true => Ok(id),
            false => Err(r.bad()),
        };
        let n = r.count(13)?;
        let mut processes = Vec::with_capacity(n);
        for _ in 0..n {
            let pid = r.u64()?;
            let name = r.opt_u32()?;
            if let Some(name) = name {
                string(&r, name)?;
            }
            processes.push((pid, name));
        }
        let n = r.count(25)?;
        let mut tracks = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.at;
            let kind = match r.take(1)? {
                [0] => TrackKind::Thread,
                [1] => TrackKind::Async,
                _ => return Err(FileError::Inconsistent(at)),
            };
            let pid = r.u64()?;
            let tid = r.u64()?;
            let name = r.opt_u32()?;
            if let Some(name) = name {
                string(&r, name)?;
            }
            let lanes_n = r.count(4)?;
            let mut lanes = Vec::with_capacity(lanes_n);
            for _ in 0..lanes_n {
                let n = r.count(28)?;
                let start = r.u64s(n)?;
                let end = r.u64s(n)?;
                let mut ids = [Vec::new(), Vec::new(), Vec::new()];
                for (k, v) in ids.iter_mut().enumerate() {
                    let at = r.at;
                    *v = r.u32s(n)?;
                    let fits = |&id: &u32| match k {
                        2 => args_ok(id),
                        _ => (id as usize) < strings.len(),
                    };
                    if !v.iter().all(fits) {
                        return Err(FileError::Inconsistent(at));
                    }
                }
                let at = r.at;
                let async_ids = match r.count(8)? {
                    0 => Vec::new(),
                    m if m == n && kind == TrackKind::Async => r.u64s(n)?,
                    _ => return Err(FileError::Inconsistent(at)),
                };
                let mut lane = Lane::default();
                let mut last_end = 0u64;
                for i in 0..n {
                    let (s, e) = (start[i], end[i]);
                    // Slices in order, none before the previous one ends.
                    if (e != OPEN && e < s) || s < last_end || (i > 0 && end[i - 1] == OPEN) {
                        return Err(r.bad());
                    }
                    last_end = e;
                    let slice = Slice {
                        start: s,
                        end: e,
                        name: ids[0][i],
                        category: ids[1][i],
                        args: ids[2][i],
                    };
                    match async_ids.get(i) {
                        Some(&id) => lane.push_async(slice, id),
                        None => lane.push(slice),
                    }
                }
                lane.finish();
                lanes.push(lane);
                done(r.at);
            }
            let n = r.count(20)?;
            let mut instants = Vec::with_capacity(n);
            let mut last_time = 0;
            for _ in 0..n {
                let at = r.at;
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
                lanes,
                instants,
            });
        }
        let n = r.count(32)?;
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
            let samples = r.count(24)?;
            let times = r.u64s(samples)?;
            let values: Vec<f64> = r.u64s(samples)?.into_iter().map(f64::from_bits).collect();
            let threads = r.u64s(samples)?;
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
        let n = r.count(12)?;
        let mut flows = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u64()?;
            let events = r.count(13)?;
            let mut points = Vec::with_capacity(events);
            for _ in 0..events {
                let at = r.at;
                let track = r.u32()? as usize;
                let time = r.u64()?;
                let phase = match r.take(1)? {
                    [0] => FlowPhase::Begin,
                    [1] => FlowPhase::Step,
                    [2] => FlowPhase::End,
                    _ => return Err(FileError::Inconsistent(at)),
                };
                if track >= tracks.len() {
                    return Err(FileError::Inconsistent(at));
                }
                points.push(FlowPoint { track, time, phase });
            }
            flows.push(Flow { id, points });
        }
        if r.at != bytes.len() {
            return Err(r.bad());
        }
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
        })
    }
}

/// A cursor over the bytes being read.
struct Bytes<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn bad(&self) -> FileError {
        FileError::Inconsistent(self.at)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FileError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(FileError::Truncated(self.at))?;
        let b = self
            .bytes
            .get(self.at..end)
            .ok_or(FileError::Truncated(self.at))?;
        self.at = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FileError> {
        let at = self.at;
        self.take(N)?
            .try_into()
            .map_err(|_| FileError::Truncated(at))
    }

    fn u64(&mut self) -> Result<u64, FileError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, FileError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64s(&mut self, n: usize) -> Result<Vec<u64>, FileError> {
        (0..n).map(|_| self.u64()).collect()
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, FileError> {
        (0..n).map(|_| self.u32()).collect()
    }

    fn opt_u64(&mut self) -> Result<Option<u64>, FileError> {
        let at = self.at;
        match self.take(1)? {
            [0] => self.u64().map(|_| None),
            [1] => self.u64().map(Some),
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    fn opt_u32(&mut self) -> Result<Option<u32>, FileError> {
        let at = self.at;
        match self.take(1)? {
            [0] => self.u32().map(|_| None),
            [1] => self.u32().map(Some),
            _ => Err(FileError::Inconsistent(at)),
        }
    }

    /// A count of items that take at least `each` bytes of what is left: more
    /// is a file cut short.
    fn count(&mut self, each: usize) -> Result<usize, FileError> {
        let at = self.at;
        let n = self.u32()? as usize;
        match n.checked_mul(each.max(1)) {
            Some(b) if b <= self.bytes.len() - self.at => Ok(n),
            _ => Err(FileError::Truncated(at)),
        }
    }

    fn string(&mut self) -> Result<String, FileError> {
        let at = self.at;
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| FileError::Inconsistent(at))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_fxt::format::{Arg, ArgValue, Koid};
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
            Some(FileError::Magic)
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
