//! Identifiers, times, source locations and trace metadata: the value types
//! shared by the reader and the writer (the `Timestamp`, `Timedelta`,
//! `Location`, `Obj_id`, `Domain_id`, `Location_code`, `Allocation_source` and
//! `Info` modules of OCaml memtrace's `Trace`).

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// An absolute time: microseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Timestamp {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp(i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
            Err(e) => Timestamp(-i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX)),
        }
    }

    /// A timestamp from microseconds since the Unix epoch (OCaml `of_int64`).
    pub const fn from_micros(us: i64) -> Timestamp {
        Timestamp(us)
    }

    /// Microseconds since the Unix epoch (OCaml `to_int64`).
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// Seconds since the Unix epoch, as OCaml's `Unix.gettimeofday` gives them.
    pub fn to_secs_f64(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    /// A timestamp from seconds since the Unix epoch; fractions of a
    /// microsecond are truncated toward zero, as OCaml's `Int64.of_float` does.
    pub fn from_secs_f64(secs: f64) -> Timestamp {
        Timestamp((secs * 1_000_000.0) as i64)
    }

    /// This timestamp moved by `delta` (OCaml `Timedelta.offset`).
    pub const fn offset(self, delta: Timedelta) -> Timestamp {
        Timestamp(self.0.wrapping_add(delta.0))
    }

    /// The date and time in UTC, RFC 3339 with microseconds
    /// (`2024-05-01T12:00:00.123456Z`); before the epoch, the microseconds.
    pub fn to_rfc3339(self) -> String {
        match u64::try_from(self.0) {
            Ok(us) => {
                let t = UNIX_EPOCH + std::time::Duration::from_micros(us);
                humantime::format_rfc3339_micros(t).to_string()
            }
            Err(_) => format!("{} µs since the epoch", self.0),
        }
    }
}

/// A time relative to the start of the trace, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timedelta(i64);

impl Timedelta {
    /// A delta of `us` microseconds.
    pub const fn from_micros(us: i64) -> Timedelta {
        Timedelta(us)
    }

    /// The delta in microseconds (OCaml `to_int64`).
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// The delta in seconds.
    pub fn to_secs_f64(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

/// Seconds with microsecond precision and trailing zeros trimmed: `12.5s`,
/// `0s`, `0.000001s`; `-1.5s` before the start.
impl fmt::Display for Timedelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let us = self.0.unsigned_abs();
        let (secs, frac) = (us / 1_000_000, us % 1_000_000);
        if frac == 0 {
            write!(f, "{sign}{secs}s")
        } else {
            let digits = format!("{frac:06}");
            write!(f, "{sign}{secs}.{}s", digits.trim_end_matches('0'))
        }
    }
}

/// The identifier of one sampled allocation.
///
/// Ids are handed out in allocation order by the writer. In format v3 each
/// domain takes ids in chunks, so the ids of different domains interleave
/// but never collide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjId(u64);

impl ObjId {
    /// An object id from its number (OCaml `Obj_id.Expert.of_int`).
    pub const fn new(id: u64) -> ObjId {
        ObjId(id)
    }

    /// The id's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ObjId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The identifier of an OCaml domain. Format v1 and v2 traces only have the
/// main domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DomainId(u16);

impl DomainId {
    /// The initial domain of an OCaml program (OCaml `main_domain`).
    pub const MAIN: DomainId = DomainId(0);

    /// A domain id from its number (OCaml `Domain_id.Expert.of_int`).
    pub const fn new(id: u16) -> DomainId {
        DomainId(id)
    }

    /// The id's number.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for DomainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// An opaque code for one backtrace slot (in OCaml, a return address); it
/// stands for a list of source locations, more than one where functions were
/// inlined.
///
/// Codes are OCaml `int`s: 63-bit signed integers. [`LocationCode::new`]
/// keeps the low 63 bits and sign-extends them, as OCaml's `Int64.to_int`
/// does, so that every code round-trips through a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocationCode(i64);

impl LocationCode {
    /// A location code from an integer, truncated to 63 bits.
    pub const fn new(code: i64) -> LocationCode {
        LocationCode((code << 1) >> 1)
    }

    /// A code already in 63-bit form (its top two bits equal).
    #[cfg(feature = "read")]
    #[inline(always)]
    pub(crate) const fn from_canonical(code: i64) -> LocationCode {
        LocationCode(code)
    }

    /// The code as a (sign-extended 63-bit) integer.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for LocationCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// How a sampled object was allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AllocationSource {
    /// On the minor heap.
    Minor,
    /// Directly on the major heap.
    Major,
    /// Outside the OCaml heap, reported through memtrace's `External` API.
    External,
}

impl AllocationSource {
    /// Every source, in the order of their codes (minor, major, external): the
    /// order in which per-source arrays, indexed by `source as usize`, hold them.
    pub const ALL: [AllocationSource; 3] = [
        AllocationSource::Minor,
        AllocationSource::Major,
        AllocationSource::External,
    ];

    /// The lower-case name, as command lines and JSON reports spell the source:
    /// `minor`, `major`, `external`.
    pub const fn name(self) -> &'static str {
        match self {
            AllocationSource::Minor => "minor",
            AllocationSource::Major => "major",
            AllocationSource::External => "external",
        }
    }

    /// The byte that encodes this source in a long alloc event.
    #[cfg(any(feature = "write", test))]
    pub(crate) const fn code(self) -> u8 {
        match self {
            AllocationSource::Minor => 0,
            AllocationSource::Major => 1,
            AllocationSource::External => 2,
        }
    }

    /// The word OCaml's `Event.to_string` uses for an allocation of this source.
    pub const fn event_name(self) -> &'static str {
        match self {
            AllocationSource::Minor => "alloc",
            AllocationSource::Major => "alloc_major",
            AllocationSource::External => "alloc_ext",
        }
    }
}

/// A string from a trace: raw bytes, usually but not always UTF-8.
///
/// Traces store file, function and program names without any encoding, so
/// tracekit keeps them as bytes and converts only for display. Clones are
/// cheap (reference counted), which keeps the location table small when many
/// locations share a file name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<[u8]>);

impl Name {
    /// A name holding `bytes`.
    pub fn new(bytes: impl AsRef<[u8]>) -> Name {
        Name(Arc::from(bytes.as_ref()))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as text, with invalid UTF-8 replaced by U+FFFD.
    pub fn to_str_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::new(b"")
    }
}

impl Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::borrow::Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Name {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(Arc::from(s.into_bytes()))
    }
}

impl From<&[u8]> for Name {
    fn from(s: &[u8]) -> Name {
        Name::new(s)
    }
}

impl From<Vec<u8>> for Name {
    fn from(s: Vec<u8>) -> Name {
        Name(Arc::from(s))
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_str_lossy())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.to_str_lossy(), f)
    }
}

/// A source location in the traced program.
///
/// In a trace, `line` has 20 bits, `start_char` 8 and `end_char` 10; the
/// writer stores larger values as the field's maximum.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// Source file name.
    pub filename: Name,
    /// Line number.
    pub line: u32,
    /// First column.
    pub start_char: u32,
    /// Last column.
    pub end_char: u32,
    /// Name of the enclosing definition (function).
    pub defname: Name,
}

impl Location {
    /// The location that stands for an unknown source position (OCaml
    /// `Location.unknown`): `??@<unknown>:1:1-1`. The writer substitutes it
    /// for location lists too large to encode.
    pub fn unknown() -> Location {
        Location {
            filename: Name::from("<unknown>"),
            line: 1,
            start_char: 1,
            end_char: 1,
            defname: Name::from("??"),
        }
    }

    /// Writes the location as OCaml's `Location.to_string` does,
    /// `defname@filename:line:start_char-end_char`, with names as raw bytes.
    pub fn write_to<W: std::io::Write + ?Sized>(&self, out: &mut W) -> std::io::Result<()> {
        out.write_all(&self.defname)?;
        out.write_all(b"@")?;
        out.write_all(&self.filename)?;
        write!(out, ":{}:{}-{}", self.line, self.start_char, self.end_char)
    }
}

/// `defname@filename:line:start_char-end_char`, as OCaml's `Location.to_string`
/// (names that are not UTF-8 are shown lossily; use [`Location::write_to`] for
/// the raw bytes).
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}:{}:{}-{}",
            self.defname, self.filename, self.line, self.start_char, self.end_char
        )
    }
}

/// Global trace metadata, from the trace-info event at the start of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    /// Sampling rate: the probability that a given word of allocation is sampled.
    pub sample_rate: f64,
    /// Machine word size in bits (64).
    pub word_size: u8,
    /// `Sys.executable_name` of the traced program.
    pub executable_name: Name,
    /// Host name of the machine that ran it.
    pub host_name: Name,
    /// OCaml runtime parameters (`Sys.runtime_parameters ()`).
    pub ocaml_runtime_params: Name,
    /// Process id of the traced program. Packets with another pid (from a
    /// forked child) are skipped when reading.
    pub pid: i64,
    /// The domain that wrote the trace-info packet.
    pub initial_domain: DomainId,
    /// When tracing started.
    pub start_time: Timestamp,
    /// Free-form context string (format v2 and later); an empty string is `None`.
    pub context: Option<Name>,
}

/// A version of the memtrace trace format (the `version` field of every
/// packet header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FormatVersion {
    /// Pre-release writers: no context string in the trace info.
    V1,
    /// memtrace 0.1 and 0.2.x: single domain.
    V2,
    /// memtrace after 0.2.3: a domain id in every packet header.
    #[default]
    V3,
}

impl FormatVersion {
    /// The version number written in packet headers.
    pub const fn number(self) -> u16 {
        match self {
            FormatVersion::V1 => 1,
            FormatVersion::V2 => 2,
            FormatVersion::V3 => 3,
        }
    }

    /// The format version for a header's version number. Readers treat every
    /// number below 2 as v1, as the reference reader does.
    pub const fn from_number(n: u16) -> Option<FormatVersion> {
        match n {
            0 | 1 => Some(FormatVersion::V1),
            2 => Some(FormatVersion::V2),
            3 => Some(FormatVersion::V3),
            _ => None,
        }
    }
}

impl fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{:03}", self.number())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn location_code_keeps_63_bits() {
        assert_eq!(LocationCode::new(-3574).get(), -3574);
        assert_eq!(LocationCode::new(i64::MAX).get(), -1);
        assert_eq!(LocationCode::new(1 << 62).get(), -(1 << 62));
        assert_eq!(LocationCode::new((1 << 62) - 1).get(), (1 << 62) - 1);
    }

    #[test]
    fn location_to_string_matches_ocaml() {
        assert_eq!(Location::unknown().to_string(), "??@<unknown>:1:1-1");
        let mut out = Vec::new();
        Location::unknown().write_to(&mut out).unwrap();
        assert_eq!(out, b"??@<unknown>:1:1-1");
    }

    #[test]
    fn timedelta_displays_as_seconds() {
        let d = Timedelta::from_micros;
        assert_eq!(d(0).to_string(), "0s");
        assert_eq!(d(12_500_000).to_string(), "12.5s");
        assert_eq!(d(1).to_string(), "0.000001s");
        assert_eq!(d(300_000).to_string(), "0.3s");
        assert_eq!(d(-1_500_000).to_string(), "-1.5s");
        assert_eq!(d(i64::MIN).to_string(), "-9223372036854.775808s");
        assert_eq!(d(2_500_000).to_secs_f64(), 2.5);
    }

    #[test]
    fn allocation_sources_in_code_order() {
        for (i, s) in AllocationSource::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i);
            assert_eq!(usize::from(s.code()), i);
        }
        assert_eq!(AllocationSource::External.name(), "external");
    }

    #[test]
    fn timestamp_float_conversions() {
        let t = Timestamp::from_secs_f64(1.5);
        assert_eq!(t.as_micros(), 1_500_000);
        assert_eq!(t.to_secs_f64(), 1.5);
        assert_eq!(t.offset(Timedelta::from_micros(5)).as_micros(), 1_500_005);
    }
}
