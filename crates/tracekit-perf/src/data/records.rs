//! The records of a perf.data file's data section, followed as `linux-perf-data`
//! reads them and checked where it would trust them: an `AUXTRACE` record's length
//! (it sizes a buffer from it before reading), an `MMAP2` record's build id and a
//! `SAMPLE` record's call chain (it panics on lengths the record does not hold).

use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::rc::Rc;

use linux_perf_data::linux_perf_event_reader::{
    Endianness, RawEventRecord, ReadFormat, RecordType, SampleFormat,
};

use super::header::int;

/// An `MMAP2` record with a build id where the device and inode would be.
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// A reader that counts what it has read, for error offsets, and once `watch` is
/// set follows the records it reads (see [`RecordWatch`]).
pub(super) struct Counting<R> {
    pub(super) inner: R,
    pub(super) read: Rc<Cell<u64>>,
    pub(super) watch: Rc<Cell<Option<RecordWatch>>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let at = self.read.get();
        let n = self.inner.read(buf)?;
        self.read.set(at.saturating_add(n as u64));
        if let Some(mut w) = self.watch.get() {
            let seen = w.see(at, buf.get(..n).unwrap_or(&[]));
            self.watch.set(Some(w));
            seen?;
        }
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let at = self.inner.seek(pos)?;
        self.read.set(at);
        Ok(at)
    }
}

/// `PERF_RECORD_AUXTRACE`.
const AUXTRACE: u32 = 71;

/// Follows the records of the data section as `linux-perf-data` reads them, one
/// after the other, to refuse an `AUXTRACE` record whose trace data would run past
/// the section: the reader sizes its buffer from that length before reading.
#[derive(Clone, Copy, Debug)]
pub(super) struct RecordWatch {
    pub(super) big_endian: bool,
    /// Where the next record starts.
    pub(super) next: u64,
    /// Where the data section ends.
    pub(super) end: u64,
    /// The next record's header, and an `AUXTRACE` record's data size after it.
    pub(super) head: [u8; 16],
    pub(super) have: usize,
    /// The `AUXTRACE` record refused: its offset and the data it claims.
    pub(super) refused: Option<(u64, u64)>,
}

impl RecordWatch {
    /// Takes the `bytes` read at offset `at`; an error when they complete an
    /// `AUXTRACE` record that claims more data than the section holds.
    fn see(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        while self.next < self.end {
            // The header, then an AUXTRACE record's data size.
            let want = if self.have >= 8 && self.auxtrace() {
                16
            } else {
                8
            };
            while self.have < want {
                let Some(&b) = (self.next + self.have as u64)
                    .checked_sub(at)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| bytes.get(i))
                else {
                    return Ok(());
                };
                self.head[self.have] = b;
                self.have += 1;
            }
            if self.have == 8 && self.auxtrace() {
                continue;
            }
            let size = self.word(&self.head[6..8]);
            if size < 8 {
                // linux-perf-data refuses it: nothing more to follow.
                self.next = self.end;
                return Ok(());
            }
            let data = if self.have == 16 {
                self.word(&self.head[8..16])
            } else {
                0
            };
            let Some(next) = self
                .next
                .checked_add(size)
                .and_then(|n| n.checked_add(data))
                .filter(|&n| n <= self.end)
            else {
                self.refused = Some((self.next, data));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    self.refusal().unwrap_or_default(),
                ));
            };
            self.next = next;
            self.have = 0;
        }
        Ok(())
    }

    /// Why a record was refused, if one was.
    pub(super) fn refusal(&self) -> Option<String> {
        let (at, data) = self.refused?;
        Some(format!(
            "the AUXTRACE record at byte {at} claims {data} bytes of trace data, past the data section's end at byte {}",
            self.end
        ))
    }

    /// Whether the header read is an `AUXTRACE` record's, long enough to hold the
    /// size of its data.
    fn auxtrace(&self) -> bool {
        self.word(&self.head[..4]) == u64::from(AUXTRACE) && self.word(&self.head[6..8]) >= 16
    }

    fn word(&self, b: &[u8]) -> u64 {
        int(b, self.big_endian)
    }
}

/// What `linux-perf-event-reader` would panic on in a record, checked before it
/// parses it: an `MMAP2` record's build id longer than 20 bytes (an `assert!`),
/// and a `SAMPLE` record's call chain of more addresses than the record holds (it
/// multiplies the count by 8 unchecked, a panic where overflow is checked).
pub(super) fn unparsable(record: &RawEventRecord<'_>) -> Option<String> {
    match record.record_type {
        RecordType::SAMPLE => callchain_overrun(record),
        RecordType::MMAP2 if record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 => {
            // pid, tid, address, length and offset, then the build id's length.
            let len = *record.data.as_slice().get(32)?;
            (len > 20).then(|| format!("an MMAP2 record's build id of {len} bytes (at most 20)"))
        }
        _ => None,
    }
}

/// Whether the call chain of a `SAMPLE` record claims more addresses than the
/// record holds. The fields before the chain are counted as the reader reads them.
fn callchain_overrun(record: &RawEventRecord<'_>) -> Option<String> {
    let info = &record.parse_info;
    let format = info.sample_format;
    if !format.contains(SampleFormat::CALLCHAIN) {
        return None;
    }
    let body = record.data.as_slice();
    let big_endian = info.endian == Endianness::BigEndian;
    let word = |i: u64| {
        let at = usize::try_from(i.checked_mul(8)?).ok()?;
        Some(int(body.get(at..at.checked_add(8)?)?, big_endian))
    };
    let before = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut words = before.iter().filter(|&&f| format.contains(f)).count() as u64;
    if format.contains(SampleFormat::READ) {
        let read = info.read_format;
        let has = |f: ReadFormat| u64::from(read.contains(f));
        let times = has(ReadFormat::TOTAL_TIME_ENABLED) + has(ReadFormat::TOTAL_TIME_RUNNING);
        if read.contains(ReadFormat::GROUP) {
            words += 1 + times + has(ReadFormat::ID);
        } else {
            // A count of values (with their IDs) after the times; the reader
            // fails by itself on a count the record does not hold.
            let values = word(words)?.checked_mul(1 + has(ReadFormat::ID))?;
            words = words.checked_add(1 + times)?.checked_add(values)?;
        }
    }
    let count = word(words)?;
    let room = (body.len() as u64 / 8).saturating_sub(words + 1);
    (count > room).then(|| {
        format!(
            "a SAMPLE record's call chain of {count} addresses runs past its {} bytes",
            body.len()
        )
    })
}
