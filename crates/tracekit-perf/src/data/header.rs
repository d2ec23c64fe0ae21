//! The header of a perf.data file and the sections it points to, checked before
//! `linux-perf-data` reads them.
//!
//! The header (104 bytes) gives the attribute, data and event type sections (an
//! offset and a size each), the size of one event attribute, and a bitmap of the
//! feature sections listed after the data section. `linux-perf-data` sizes buffers
//! from these lengths and counts before reading what they count, and adds and
//! divides them unchecked: every section must lie in the file and every count fit
//! the bytes that hold it, or the file is refused with the offset of the field at
//! fault.

use std::io::{Read, Seek, SeekFrom};

/// The unsigned integer in `b` (at most 8 bytes) of the file's byte order.
pub(super) fn int(b: &[u8], big_endian: bool) -> u64 {
    let fold = |v: u64, &x: &u8| v << 8 | u64::from(x);
    if big_endian {
        b.iter().fold(0, fold)
    } else {
        b.iter().rev().fold(0, fold)
    }
}

/// The smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
const PERF_ATTR_SIZE_VER0: u64 = 64;
/// `HEADER_EVENT_DESC`, `HEADER_SIMPLEPERF_META_INFO`: feature sections that decide
/// where the event attributes are read from.
const FEATURE_EVENT_DESC: usize = 12;
const FEATURE_SIMPLEPERF_META_INFO: usize = 129;

/// Where a file's records are, as its header says.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub(super) big_endian: bool,
    /// The data section: `[start, end)`.
    pub(super) data: (u64, u64),
}

/// A fault found in a file's layout: the offset of the field at fault, and what
/// is wrong.
pub(super) type Fault = (u64, String);

/// Checks what `linux-perf-data` would trust in the header of a perf.data file of
/// `len` bytes, before it reads it: it sizes buffers from the header's lengths and
/// counts before reading what they count (a damaged header would have it allocate
/// without bound), and adds and divides them unchecked (which panics). Every
/// section it reads must lie in the file, every count fit the bytes that hold it.
/// `None`: not a whole header with a perf.data magic, which it refuses by itself.
pub(super) fn check_layout<R: Read + Seek>(
    reader: &mut R,
    len: u64,
) -> std::result::Result<Option<Layout>, Fault> {
    let mut header = [0u8; 104];
    if reader.seek(SeekFrom::Start(0)).is_err() || reader.read_exact(&mut header).is_err() {
        return Ok(None);
    }
    let big_endian = match &header[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Ok(None),
    };
    let field = |at: usize| int(&header[at..at + 8], big_endian);
    let section = |at: usize, what: &str| -> std::result::Result<(u64, u64), Fault> {
        let (offset, size) = (field(at), field(at + 8));
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok((offset, end)),
            _ => Err((
                at as u64,
                format!(
                    "the {what} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"
                ),
            )),
        }
    };
    let attrs = section(24, "attribute section")?;
    let data = section(40, "data section")?;
    let event_types = section(56, "event type section")?;
    let attr_size = field(16);
    if !(PERF_ATTR_SIZE_VER0..=len).contains(&attr_size) {
        return Err((
            16,
            format!(
                "an event attribute size of {attr_size} bytes (at least {PERF_ATTR_SIZE_VER0}, at most the file's {len})"
            ),
        ));
    }

    // The feature sections, listed after the data: one for each bit set.
    let features: Vec<usize> = (0..256)
        .filter(|&bit| field(72 + 8 * (bit / 64)) >> (bit % 64) & 1 == 1)
        .collect();
    let table = read_at(
        reader,
        data.1,
        16 * features.len() as u64,
        len,
        "the feature table",
    )?;
    let mut total = 0u64;
    let mut event_desc = None;
    let mut simpleperf = false;
    for (i, &feature) in features.iter().enumerate() {
        let at = data.1 + 16 * i as u64;
        let entry = &table[16 * i..16 * i + 16];
        let (offset, size) = (int(&entry[..8], big_endian), int(&entry[8..], big_endian));
        // The sections are read whole: together they fit the file.
        total = total.saturating_add(size);
        if offset.checked_add(size).is_none_or(|end| end > len) || total > len {
            return Err((
                at,
                format!(
                    "feature section {feature} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"
                ),
            ));
        }
        match feature {
            FEATURE_EVENT_DESC => event_desc = Some((offset, size)),
            FEATURE_SIMPLEPERF_META_INFO => simpleperf = true,
            _ => {}
        }
    }
    // Where the event attributes are read from, in linux-perf-data's order.
    let (at, events) = if let Some((offset, size)) = event_desc {
        let bytes = read_at(reader, offset, size, len, "the event descriptions")?;
        let events = check_event_desc(&bytes, big_endian).map_err(|(at, m)| (offset + at, m))?;
        (offset, events)
    } else if event_types.1 > event_types.0 {
        let events = (event_types.1 - event_types.0) / (attr_size + 16);
        check_events(events, 56)?;
        check_id_sections(reader, event_types, attr_size, len, big_endian)?;
        (56, events)
    } else if simpleperf {
        // Simpleperf's attribute size includes the section of IDs after each.
        let events = (attrs.1 - attrs.0) / attr_size;
        check_events(events, 24)?;
        check_id_sections(reader, attrs, attr_size - 16, len, big_endian)?;
        (24, events)
    } else {
        (24, (attrs.1 - attrs.0) / attr_size)
    };
    check_events(events, at)?;
    Ok(Some(Layout { big_endian, data }))
}

/// At most this many events (attributes) in a recording: linux-perf-data keeps
/// each (a few hundred bytes) and reads each with a seek of its own, which costs
/// a buffered file reader a refill. `perf record -e 'syscalls:*'` has about 700.
const MAX_EVENTS: u64 = 1 << 13;

/// `events` described by the field at `at`: within [`MAX_EVENTS`].
fn check_events(events: u64, at: u64) -> std::result::Result<(), Fault> {
    if events > MAX_EVENTS {
        return Err((
            at,
            format!("{events} events (at most {MAX_EVENTS} are read)"),
        ));
    }
    Ok(())
}

/// `size` bytes at `offset`, which lie in the file of `len` bytes.
fn read_at<R: Read + Seek>(
    reader: &mut R,
    offset: u64,
    size: u64,
    len: u64,
    what: &str,
) -> std::result::Result<Vec<u8>, Fault> {
    if offset.checked_add(size).is_none_or(|end| end > len) {
        return Err((
            offset,
            format!("{what} (at byte {offset}, {size} bytes) ends past the file's {len} bytes"),
        ));
    }
    let mut bytes = vec![0; usize::try_from(size).map_err(|e| (offset, e.to_string()))?];
    reader
        .seek(SeekFrom::Start(offset))
        .and_then(|_| reader.read_exact(&mut bytes))
        .map_err(|e| (offset, format!("{what}: {e}")))?;
    Ok(bytes)
}

/// The `HEADER_EVENT_DESC` section: a count of events and an attribute size, then
/// for each event its attribute, a count of IDs, a name (length and bytes) and the
/// IDs. The counts and lengths must fit the section; a fault's offset is within it.
/// The count of events.
fn check_event_desc(bytes: &[u8], big_endian: bool) -> std::result::Result<u64, Fault> {
    // The offset `n` bytes after `at`, if the section goes that far.
    let skip = |at: usize, n: u64| {
        usize::try_from(n)
            .ok()
            .and_then(|n| at.checked_add(n))
            .filter(|&end| end <= bytes.len())
    };
    // The 4-byte count at `at`, and the offset after it.
    let count = |at: usize| Some((int(bytes.get(at..skip(at, 4)?)?, big_endian), at + 4));
    let fault = |at: usize, what: String| {
        (
            at as u64,
            format!(
                "{what} runs past the event descriptions' {} bytes",
                bytes.len()
            ),
        )
    };
    let (nr, at) = count(0).ok_or_else(|| fault(0, "the count of events".into()))?;
    let (attr_size, mut at) = count(at).ok_or_else(|| fault(at, "the attribute size".into()))?;
    for i in 0..nr {
        let entry = || {
            let (ids, next) = count(skip(at, attr_size)?)?;
            let (name, next) = count(next)?;
            skip(skip(next, name)?, ids * 8)
        };
        at = entry().ok_or_else(|| fault(at, format!("event description {i} of {nr}")))?;
    }
    Ok(nr)
}

/// The event attributes of `section` (`[start, end)`), each of `attr_size` bytes
/// and followed by the offset and size of its event IDs, which must lie in the
/// file of `len` bytes.
fn check_id_sections<R: Read + Seek>(
    reader: &mut R,
    section: (u64, u64),
    attr_size: u64,
    len: u64,
    big_endian: bool,
) -> std::result::Result<(), Fault> {
    let size = section.1 - section.0;
    let bytes = read_at(reader, section.0, size, len, "the event attributes")?;
    let entry = usize::try_from(attr_size + 16).map_err(|e| (16, e.to_string()))?;
    for (i, e) in bytes.chunks_exact(entry).enumerate() {
        let ids = &e[entry - 16..];
        let (offset, size) = (int(&ids[..8], big_endian), int(&ids[8..], big_endian));
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err((
                section.0 + (i * entry + entry - 16) as u64,
                format!(
                    "an event's IDs (at byte {offset}, {size} bytes) end past the file's {len} bytes"
                ),
            ));
        }
    }
    Ok(())
}
