//! Reading a trace from a stream (a pipe, a socket) one packet at a time.
//!
//! A [`StreamReader`] reads the trace-info packet, then, each time it is
//! asked, the next packet: its header, then the content size the header
//! announces, into one buffer that every packet reuses. So its memory is
//! bounded by the largest packet however long the stream is, and the first
//! events are decoded before the stream ends.
//!
//! Each packet is decoded by an [`Events`] pass over that buffer: the same
//! code as a [`Reader`](super::Reader)'s pass over a whole trace, with the
//! decoder state that outlives a packet ([`DecodeState`]) moved into the
//! pass and back. The stream itself only splits the input into packets; the
//! pass checks every header, skips wrong-pid and truncated packets and
//! reports errors, so events, warnings, errors and their byte offsets are
//! those of a [`Reader`](super::Reader) over the same bytes.
//!
//! An input that is still being written (a file a program appends to) says so by
//! failing a read with [`io::ErrorKind::WouldBlock`] where it has no more bytes yet:
//! the stream then keeps the start of the packet it has, reports no packet for now
//! ([`StreamReader::is_waiting`]) and, asked again, reads on from there, so a packet
//! cut anywhere by the writer's flushes is decoded whole once its last byte comes.

use std::io::{self, Read};
use std::ops::{Deref, DerefMut};

use super::info::read_trace_info;
use super::packet::read_packet_header;
use super::{DecodeState, Events, LocationTable};
use crate::error::{OpenError, Warning};
use crate::format::header_size;
use crate::types::{FormatVersion, Info, Location, LocationCode};

/// Bytes of a packet header up to and including the format version (offset
/// 28, a u16), which says how long the rest of the header is.
const HEADER_UP_TO_VERSION: usize = 30;

/// What the buffer reserves before reading a packet's content, so that the
/// usual packets (at most 32 KiB) are read without regrowing it, while a
/// header announcing a huge size reserves no more than this up front.
const INITIAL_RESERVE: usize = 64 << 10;

/// A trace read from a stream one packet at a time, in memory bounded by
/// the largest packet (plus the location table, which every reader keeps).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let bytes = tracekit_memtrace::doc_example_trace();
/// use tracekit_memtrace::StreamReader;
/// // Any `std::io::Read`: standard input, a socket, a decompressor.
/// let mut stream = StreamReader::new(&bytes[..], true)?;
/// let mut n = 0;
/// while let Some(mut packet) = stream.next_packet()? {
///     while let Some(item) = packet.next_event_with_locations() {
///         let (time, event, locations) = item?;
///         println!("{} µs: {}", time.as_micros(), event.display(locations));
///         n += 1;
///     }
/// }
/// assert_eq!(n, 1);
/// # Ok(()) }
/// ```
pub struct StreamReader<R> {
    input: R,
    info: Info,
    version: FormatVersion,
    locations: LocationTable,
    /// Lent to each packet's pass, which gives it back when dropped.
    state: DecodeState,
    parse_backtraces: bool,
    /// The current packet, or as much of it as the input held.
    buf: Vec<u8>,
    /// `buf` holds the start of a packet the input had no more of yet.
    waiting: bool,
    /// Bytes read from the input so far.
    consumed: u64,
    /// No more packets: the input ended, a pass failed, or reading failed.
    done: bool,
}

impl<R> std::fmt::Debug for StreamReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader")
            .field("info", &self.info)
            .field("version", &self.version)
            .field("position", &self.consumed)
            .finish_non_exhaustive()
    }
}

/// Appends the next `n` bytes of `input` to `buf`, fewer only where the
/// input ends. The buffer grows as the bytes arrive, not to `n` at once, so
/// a header announcing a huge packet costs only the bytes that are there
/// (the buffer's capacity stays below twice them plus [`INITIAL_RESERVE`]).
fn read_up_to(input: &mut impl Read, buf: &mut Vec<u8>, n: usize) -> io::Result<()> {
    buf.reserve(n.min(INITIAL_RESERVE));
    input.take(n as u64).read_to_end(buf)?;
    Ok(())
}

/// How long the packet whose first bytes are `buf` is: its header up to the
/// version, then its whole header, then the header and the content it
/// announces; only the header if that cannot be decoded (the pass then
/// reports why, exactly as over a whole trace).
fn packet_length(buf: &[u8]) -> usize {
    let Some(version) = buf.get(28..30) else {
        return HEADER_UP_TO_VERSION;
    };
    let header = header_size(u16::from_le_bytes([version[0], version[1]]));
    if buf.len() < header {
        return header;
    }
    match read_packet_header(buf, 0) {
        Ok(h) => header.saturating_add(h.content_size),
        Err(_) => header,
    }
}

/// Reads the rest of the packet whose first bytes are in `buf` (none at
/// first): less where the input ends. A read that would block returns its
/// error with the bytes read so far kept in `buf`, to go on from there.
fn read_packet(input: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<()> {
    loop {
        let length = packet_length(buf);
        let have = buf.len();
        if have >= length {
            return Ok(());
        }
        read_up_to(input, buf, length - have)?;
        if buf.len() < length {
            return Ok(());
        }
    }
}

impl<R: Read> StreamReader<R> {
    /// Reads the trace-info packet from `input`. Without
    /// `parse_backtraces`, allocations come with empty backtraces and
    /// decoding is several times faster (as with [`Reader::events`](super::Reader::events)).
    ///
    /// Nothing is read beyond a packet before [`StreamReader::next_packet`]
    /// asks for the next one.
    pub fn new(mut input: R, parse_backtraces: bool) -> Result<StreamReader<R>, OpenError> {
        let mut buf = Vec::new();
        read_packet(&mut input, &mut buf)?;
        let (info, version, end) = read_trace_info(&buf)?;
        Ok(StreamReader {
            input,
            info,
            version,
            locations: LocationTable::default(),
            state: DecodeState::default(),
            parse_backtraces,
            buf,
            waiting: false,
            consumed: end as u64,
            done: false,
        })
    }

    /// Reads the next packet and lends a pass over its events, or `None` at
    /// the end of the trace and after a pass ended with an error.
    ///
    /// Fails only when reading the input fails; the stream then ends. A
    /// malformed packet is reported by its pass, as a [`ReadError`](crate::ReadError)
    /// with the packet's offset in the stream, after which the stream ends.
    /// A pass dropped before it returns `None` skips the rest of its packet.
    pub fn next_packet(&mut self) -> io::Result<Option<PacketEvents<'_>>> {
        if self.done {
            return Ok(None);
        }
        if !std::mem::take(&mut self.waiting) {
            self.buf.clear();
        }
        match read_packet(&mut self.input, &mut self.buf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.waiting = true;
                return Ok(None);
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        }
        if self.buf.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let base = self.consumed;
        self.consumed += self.buf.len() as u64;
        let StreamReader {
            info,
            locations,
            state,
            parse_backtraces,
            buf,
            done,
            ..
        } = self;
        let events = Events::new(
            &buf[..],
            base,
            info,
            locations,
            std::mem::take(state),
            *parse_backtraces,
            0,
        );
        Ok(Some(PacketEvents {
            events,
            home: state,
            stream_done: done,
        }))
    }
}

impl<R> StreamReader<R> {
    /// The input, to wait on it for more where it had none ([`StreamReader::is_waiting`]).
    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.input
    }

    /// Whether the packets ended for now because the input had no more bytes
    /// yet (a read failed with [`io::ErrorKind::WouldBlock`]), rather than at its
    /// end or at damage: asked again, the reader goes on with the packet it
    /// has the start of.
    pub fn is_waiting(&self) -> bool {
        self.waiting && !self.done
    }

    /// The trace metadata.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The format version of the trace-info packet.
    pub fn format_version(&self) -> FormatVersion {
        self.version
    }

    /// Bytes read from the input so far: the offset of the next packet.
    pub fn position(&self) -> u64 {
        self.consumed
    }

    /// The locations of `code`, once a packet with the location event that
    /// defines it has been decoded.
    pub fn lookup_location_code(&self, code: LocationCode) -> Option<&[Location]> {
        self.locations.get(code)
    }

    /// Every location code seen so far.
    pub fn locations(&self) -> &LocationTable {
        &self.locations
    }

    /// Warnings about skipped packets not yet taken (from a pass, with
    /// [`Events::take_warnings`], or from here).
    pub fn warnings(&self) -> &[Warning] {
        &self.state.warnings
    }

    /// Takes the warnings recorded so far, leaving none.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.state.warnings)
    }

    /// The input, positioned after the last packet read.
    pub fn into_inner(self) -> R {
        self.input
    }
}

/// The pass over one packet's events that [`StreamReader::next_packet`]
/// lends: an [`Events`] pass (through `Deref`) whose offsets are the
/// stream's. Dropping it gives the decoder state back to the stream.
pub struct PacketEvents<'s> {
    events: Events<'s>,
    home: &'s mut DecodeState,
    stream_done: &'s mut bool,
}

impl<'s> Deref for PacketEvents<'s> {
    type Target = Events<'s>;

    fn deref(&self) -> &Events<'s> {
        &self.events
    }
}

impl<'s> DerefMut for PacketEvents<'s> {
    fn deref_mut(&mut self) -> &mut Events<'s> {
        &mut self.events
    }
}

impl Drop for PacketEvents<'_> {
    fn drop(&mut self) {
        *self.home = std::mem::take(&mut self.events.state);
        if self.events.failed {
            *self.stream_done = true;
        }
    }
}

impl std::fmt::Debug for PacketEvents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketEvents")
            .field("position", &self.events.position())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::synth::synth_info;
    use crate::{Reader, Writer};

    /// A trace whose second packet's header announces `content_bits / 8`
    /// bytes of content (header included) of which only 100 follow.
    fn huge_packet(packet_bits: u32) -> Vec<u8> {
        let info = synth_info();
        let mut out = Writer::new(Vec::new(), &info)
            .unwrap()
            .into_inner()
            .unwrap();
        let mut p = Vec::new();
        crate::write::packet::put_header(&mut p, 3, info.pid, 0, None);
        let t = info.start_time.as_micros();
        crate::write::packet::finish_header(&mut p, t, t, 0, 0);
        p[4..8].copy_from_slice(&packet_bits.to_le_bytes());
        out.extend_from_slice(&p);
        out.extend_from_slice(&[0x5a; 100]);
        out
    }

    #[test]
    fn the_buffer_holds_one_packet_however_long_the_stream() {
        let config = crate::synth::SynthConfig {
            allocs: 200_000,
            ..Default::default()
        };
        let data = crate::synth::write_synthetic(Vec::new(), &config).unwrap();
        let mut stream = StreamReader::new(&data[..], true).unwrap();
        let (mut events, mut largest) = (0, 0);
        loop {
            let Some(mut packet) = stream.next_packet().unwrap() else {
                break;
            };
            while let Some(item) = packet.next_event() {
                item.unwrap();
                events += 1;
            }
            drop(packet);
            largest = largest.max(stream.buf.len());
        }
        assert!(data.len() > 50 * largest, "{} bytes", data.len());
        assert!(events > 300_000);
        // The writer's packets are at most 32 KiB, which the first
        // reservation covers.
        assert!(largest <= crate::format::MAX_PACKET_SIZE);
        assert!(
            stream.buf.capacity() <= INITIAL_RESERVE,
            "{}",
            stream.buf.capacity()
        );
    }

    #[test]
    fn a_huge_announced_packet_allocates_only_what_is_there() {
        // 268 MB announced, 100 bytes present.
        let data = huge_packet(0x7fff_fff8);
        let mut stream = StreamReader::new(&data[..], true).unwrap();
        let mut packet = stream.next_packet().unwrap().unwrap();
        assert!(packet.next_event().is_none());
        let warnings = packet.take_warnings();
        drop(packet);
        assert!(
            stream.buf.capacity() <= 2 * data.len() + INITIAL_RESERVE,
            "{} bytes reserved",
            stream.buf.capacity()
        );
        assert!(matches!(
            warnings[..],
            [Warning::TruncatedPacket {
                content_size: 0x0fff_ffbb,
                available: 100,
                ..
            }]
        ));
        // As the slice reader says.
        let mut reader = Reader::from_bytes(&data).unwrap();
        let mut events = reader.events(true);
        assert!(events.next_event().is_none());
        assert_eq!(events.take_warnings(), warnings);
        assert!(stream.next_packet().unwrap().is_none());
    }

    /// Each event's time and text, from every packet `stream` has now.
    fn events(stream: &mut StreamReader<impl Read>, out: &mut Vec<String>) {
        while let Some(mut packet) = stream.next_packet().unwrap() {
            while let Some(item) = packet.next_event_with_locations() {
                let (time, event, locations) = item.unwrap();
                out.push(format!("{} {}", time.as_micros(), event.display(locations)));
            }
        }
    }

    #[test]
    fn an_input_still_written_is_read_whole_whatever_its_pieces() {
        let config = crate::synth::SynthConfig {
            allocs: 3_000,
            ..Default::default()
        };
        let data = crate::synth::write_synthetic(Vec::new(), &config).unwrap();
        let mut whole = Vec::new();
        events(&mut StreamReader::new(&data[..], true).unwrap(), &mut whole);
        assert!(whole.len() > 3_000);
        let info_packet = Reader::from_bytes(&data).unwrap().data_offset;
        for piece in [7, 500, 4_093] {
            let input = tracekit_testutil::Growing::new(&data, info_packet);
            let mut stream = StreamReader::new(input, true).unwrap();
            let mut seen = Vec::new();
            loop {
                events(&mut stream, &mut seen);
                if !stream.is_waiting() {
                    break;
                }
                stream.input.write(piece);
            }
            assert_eq!(seen, whole, "pieces of {piece} bytes");
            assert!(stream.warnings().is_empty());
        }
    }
}
