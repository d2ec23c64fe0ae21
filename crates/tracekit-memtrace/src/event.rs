//! Trace events (OCaml `Trace.Event`) and their text form.

use std::borrow::Cow;
use std::fmt;
use std::io;

use crate::types::{AllocationSource, DomainId, Location, LocationCode, ObjId};

/// A sampled allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Alloc<'a> {
    /// The new object's id; promote and collect events refer to it.
    pub obj_id: ObjId,
    /// Size in words, header word excluded.
    pub length: u64,
    /// The domain that allocated it.
    pub domain: DomainId,
    /// Number of samples that hit this allocation (at least 1).
    pub nsamples: u64,
    /// Where it was allocated.
    pub source: AllocationSource,
    /// Backtrace of the allocation, caller to callee: the first entry is the
    /// program's entry point, the last the allocation site.
    ///
    /// The reader lends the backtrace from its decoder state without copying;
    /// [`Event::into_owned`] makes a copy to keep.
    pub backtrace: Cow<'a, [LocationCode]>,
    /// How many leading entries of `backtrace` are the same as in the previous
    /// allocation of the same domain. This is the value stored in the trace:
    /// after a backtrace that the writer truncated it can exceed
    /// `backtrace.len()`, and the reader then repeats the previous backtrace.
    pub common_prefix: usize,
}

/// One trace event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event<'a> {
    /// An allocation was sampled.
    Alloc(Alloc<'a>),
    /// A sampled object was promoted to the major heap.
    Promote(ObjId, DomainId),
    /// A sampled object was collected (or, for external allocations, freed).
    Collect(ObjId, DomainId),
}

/// Where to find the source locations of a location code, for printing
/// events.
pub trait LocationLookup {
    /// The locations of `code`, or `None` if the code is unknown.
    fn locations(&self, code: LocationCode) -> Option<&[Location]>;
}

impl<S: std::hash::BuildHasher> LocationLookup
    for std::collections::HashMap<LocationCode, Vec<Location>, S>
{
    fn locations(&self, code: LocationCode) -> Option<&[Location]> {
        self.get(&code).map(Vec::as_slice)
    }
}

impl<L: LocationLookup + ?Sized> LocationLookup for &L {
    fn locations(&self, code: LocationCode) -> Option<&[Location]> {
        (**self).locations(code)
    }
}

/// An error from [`Event::write_to`].
#[derive(Debug, thiserror::Error)]
pub enum DisplayError {
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A backtrace entry's code is not in the location table (OCaml raises
    /// `Invalid_argument "invalid location code"` here).
    #[error("invalid location code {:08x}", .0.get())]
    UnknownLocationCode(LocationCode),
}

impl<'a> Event<'a> {
    /// The domain on which the event occurred.
    pub fn domain(&self) -> DomainId {
        match self {
            Event::Alloc(a) => a.domain,
            Event::Promote(_, d) | Event::Collect(_, d) => *d,
        }
    }

    /// The object the event is about.
    pub fn obj_id(&self) -> ObjId {
        match self {
            Event::Alloc(a) => a.obj_id,
            Event::Promote(id, _) | Event::Collect(id, _) => *id,
        }
    }

    /// A copy that owns its backtrace.
    pub fn into_owned(self) -> Event<'static> {
        match self {
            Event::Alloc(a) => Event::Alloc(Alloc {
                obj_id: a.obj_id,
                length: a.length,
                domain: a.domain,
                nsamples: a.nsamples,
                source: a.source,
                backtrace: Cow::Owned(a.backtrace.into_owned()),
                common_prefix: a.common_prefix,
            }),
            Event::Promote(id, d) => Event::Promote(id, d),
            Event::Collect(id, d) => Event::Collect(id, d),
        }
    }

    /// Writes the event exactly as OCaml memtrace's `Event.to_string` prints
    /// it, names as raw bytes:
    ///
    /// * `%010d alloc|alloc_major|alloc_ext nsamples len=L dom=D % 4d: backtrace`
    ///   where each backtrace entry is its locations (`defname@file:line:start-end`)
    ///   joined by spaces, or `$code` for a code without locations;
    /// * `%010d promote`, `%010d collect`.
    ///
    /// A code missing from `lookup` is an error, as in OCaml.
    pub fn write_to<W: io::Write + ?Sized, L: LocationLookup + ?Sized>(
        &self,
        out: &mut W,
        lookup: &L,
    ) -> Result<(), DisplayError> {
        match self {
            Event::Alloc(a) => {
                write!(
                    out,
                    "{:010} {} {} len={} dom={} {:>4}: ",
                    a.obj_id.get(),
                    a.source.event_name(),
                    a.nsamples,
                    a.length,
                    a.domain.get(),
                    SpaceFlag(a.common_prefix),
                )?;
                let mut first = true;
                for &code in a.backtrace.iter() {
                    let locs = lookup
                        .locations(code)
                        .ok_or(DisplayError::UnknownLocationCode(code))?;
                    if !first {
                        out.write_all(b" ")?;
                    }
                    first = false;
                    if locs.is_empty() {
                        write!(out, "${}", code.get())?;
                    } else {
                        for (i, loc) in locs.iter().enumerate() {
                            if i > 0 {
                                out.write_all(b" ")?;
                            }
                            loc.write_to(out)?;
                        }
                    }
                }
                Ok(())
            }
            Event::Promote(id, _) => Ok(write!(out, "{:010} promote", id.get())?),
            Event::Collect(id, _) => Ok(write!(out, "{:010} collect", id.get())?),
        }
    }

    /// The event as OCaml's `Event.to_string` shows it, for `Display`. Names
    /// that are not UTF-8 are shown lossily and unknown codes as `$code`; use
    /// [`Event::write_to`] for exact bytes.
    pub fn display<'e, L: LocationLookup + ?Sized>(
        &'e self,
        lookup: &'e L,
    ) -> EventDisplay<'e, 'a, L> {
        EventDisplay {
            event: self,
            lookup,
        }
    }
}

/// OCaml's `% d`: a space in place of the sign of a non-negative number.
struct SpaceFlag(usize);

impl fmt::Display for SpaceFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!(" {}", self.0))
    }
}

/// [`Display`](fmt::Display) of an event with a location lookup; see
/// [`Event::display`].
pub struct EventDisplay<'e, 'a, L: ?Sized> {
    event: &'e Event<'a>,
    lookup: &'e L,
}

impl<L: LocationLookup + ?Sized> fmt::Display for EventDisplay<'_, '_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Lenient<'l, L: ?Sized>(&'l L);
        impl<L: LocationLookup + ?Sized> LocationLookup for Lenient<'_, L> {
            fn locations(&self, code: LocationCode) -> Option<&[Location]> {
                Some(self.0.locations(code).unwrap_or(&[]))
            }
        }
        let mut buf = Vec::new();
        self.event
            .write_to(&mut buf, &Lenient(self.lookup))
            .map_err(|_| fmt::Error)?;
        f.write_str(&String::from_utf8_lossy(&buf))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::Name;
    use std::collections::HashMap;

    #[test]
    fn alloc_line_matches_ocaml_format() {
        let loc = Location {
            filename: Name::from("a.ml"),
            line: 3,
            start_char: 4,
            end_char: 5,
            defname: Name::from("A.f"),
        };
        let mut t = HashMap::new();
        t.insert(LocationCode::new(7), vec![loc.clone(), loc]);
        t.insert(LocationCode::new(-3574), vec![]);
        let table = t;
        let ev = Event::Alloc(Alloc {
            obj_id: ObjId::new(42),
            length: 3,
            domain: DomainId::new(2),
            nsamples: 1,
            source: AllocationSource::Major,
            backtrace: Cow::Owned(vec![LocationCode::new(-3574), LocationCode::new(7)]),
            common_prefix: 3005,
        });
        assert_eq!(
            ev.display(&table).to_string(),
            "0000000042 alloc_major 1 len=3 dom=2  3005: $-3574 A.f@a.ml:3:4-5 A.f@a.ml:3:4-5"
        );
        let empty = Event::Alloc(Alloc {
            obj_id: ObjId::new(0),
            length: 1,
            domain: DomainId::MAIN,
            nsamples: 2,
            source: AllocationSource::Minor,
            backtrace: Cow::Borrowed(&[]),
            common_prefix: 0,
        });
        assert_eq!(
            empty.display(&table).to_string(),
            "0000000000 alloc 2 len=1 dom=0    0: "
        );
        assert_eq!(
            Event::Collect(ObjId::new(5), DomainId::MAIN)
                .display(&table)
                .to_string(),
            "0000000005 collect"
        );
        let unknown = Event::Alloc(Alloc {
            backtrace: Cow::Owned(vec![LocationCode::new(9)]),
            ..match empty {
                Event::Alloc(a) => a,
                _ => unreachable!(),
            }
        });
        let err = unknown.write_to(&mut Vec::new(), &table).unwrap_err();
        assert_eq!(err.to_string(), "invalid location code 00000009");
    }
}
