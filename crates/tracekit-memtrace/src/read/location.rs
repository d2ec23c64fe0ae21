//! Decoding location events: a location code and its source locations, with
//! file and definition names move-to-front coded per domain, into the
//! trace's [`LocationTable`]. The encoder is [`crate::write`]'s `location`
//! module. The whole format: `docs/memtrace-format.md` at the repository root,
//! §6 "Location events".
//!
//! | field | type |
//! | --- | --- |
//! | code | u64 (OCaml int: the low 63 bits count) |
//! | nlocs | u8 |
//! | per location | u32 low + u16 high of a 48-bit word, then the file name (if its MTF code is 31), then the definition name (if its MTF code is 31) |
//!
//! The 48-bit word holds line (bits 0–19), start_char (20–27), end_char
//! (28–37), the file name's MTF code (38–42) and the definition name's MTF
//! code (43–47). Names are move-to-front coded per domain: a table of the 31
//! most recent file names, each with its own table of 31 definition names. A
//! code below 31 takes that slot's name and moves it to the front (an empty
//! slot is an error); 31 means the name follows as a NUL-terminated string and
//! is pushed at the front, the last entry falling off. A new file name pushed
//! into a full table takes over the definition table of the entry falling off,
//! not an empty one: v1 traces rely on it.
//!
//! A code sent again must come with the same locations.

use super::buf::{Cursor, Eof};
use crate::error::ReadErrorKind;
use crate::format::{MTF_LENGTH, Mtf};
use crate::types::{Location, LocationCode, Name};
use rustc_hash::FxHashMap;

/// Why decoding a location failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LocError {
    Eof,
    Kind(ReadErrorKind),
}

impl From<Eof> for LocError {
    fn from(_: Eof) -> LocError {
        LocError::Eof
    }
}

impl<T> Mtf<T> {
    /// Moves slot `i` to the front and returns it.
    fn take(&mut self, i: usize) -> Result<&mut (Name, T), LocError> {
        if self.slots[i].is_none() {
            return Err(LocError::Kind(ReadErrorKind::EmptyMtfSlot));
        }
        self.slots[..=i].rotate_right(1);
        self.slots[0]
            .as_mut()
            .ok_or(LocError::Kind(ReadErrorKind::EmptyMtfSlot))
    }

    /// Pushes a new entry at the front; the last one falls off.
    fn push(&mut self, name: Name, value: T) -> &mut (Name, T) {
        self.slots.rotate_right(1);
        self.slots[0].insert((name, value))
    }
}

/// The distinct names of a trace, so that a name sent again (after the MTF
/// table forgot it) costs no allocation and no memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Names {
    set: std::collections::HashSet<Name>,
}

impl Names {
    fn intern(&mut self, bytes: &[u8]) -> Name {
        match self.set.get(bytes) {
            Some(n) => n.clone(),
            None => {
                let n = Name::new(bytes);
                self.set.insert(n.clone());
                n
            }
        }
    }
}

/// Per-domain state of the location decoder.
#[derive(Clone, Debug, Default)]
pub(crate) struct LocationDecoder {
    files: Mtf<Box<Mtf<()>>>,
}

impl LocationDecoder {
    /// Decodes one location record.
    fn location(&mut self, c: &mut Cursor<'_>, names: &mut Names) -> Result<Location, LocError> {
        let low = u64::from(c.u32()?);
        let high = u64::from(c.u16()?);
        let word = (high << 32) | low;
        let line = (word & 0xfffff) as u32;
        let start_char = ((word >> 20) & 0xff) as u32;
        let end_char = ((word >> 28) & 0x3ff) as u32;
        let file_code = ((word >> 38) & 0x1f) as usize;
        let def_code = ((word >> 43) & 0x1f) as usize;
        let file = if file_code == MTF_LENGTH {
            let name = names.intern(c.string()?);
            // A new file takes over the definition table of the file about to
            // fall off the end, instead of an empty one. Pre-release (v1)
            // writers produced traces that rely on this.
            let defs = match self.files.slots[MTF_LENGTH - 1].take() {
                Some((_, defs)) => defs,
                None => Box::default(),
            };
            self.files.push(name, defs)
        } else {
            self.files.take(file_code)?
        };
        let filename = file.0.clone();
        let defs = &mut file.1;
        let defname = if def_code == MTF_LENGTH {
            let name = names.intern(c.string()?);
            defs.push(name, ()).0.clone()
        } else {
            defs.take(def_code)?.0.clone()
        };
        Ok(Location {
            filename,
            line,
            start_char,
            end_char,
            defname,
        })
    }

    /// Decodes a location event body into `out` (cleared first) and returns
    /// its code.
    pub(crate) fn location_event(
        &mut self,
        c: &mut Cursor<'_>,
        names: &mut Names,
        out: &mut Vec<Location>,
    ) -> Result<LocationCode, LocError> {
        out.clear();
        let code = LocationCode::new(c.i64()?);
        let nlocs = c.u8()?;
        for _ in 0..nlocs {
            out.push(self.location(c, names)?);
        }
        Ok(code)
    }
}

/// The locations of every location code seen so far: one table for the whole
/// trace, shared by all domains.
#[derive(Clone, Debug, Default)]
pub struct LocationTable {
    map: FxHashMap<LocationCode, Box<[Location]>>,
    pub(crate) names: Names,
}

impl LocationTable {
    /// The locations of `code` (outermost inlined function first), or `None`
    /// if no location event defined it. An empty list is a code the writer
    /// knew no location for; OCaml prints it as `$code`.
    pub fn get(&self, code: LocationCode) -> Option<&[Location]> {
        self.map.get(&code).map(|b| &**b)
    }

    /// Number of distinct location codes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no location code is known.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every code and its locations, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (LocationCode, &[Location])> {
        self.map.iter().map(|(&c, l)| (c, &**l))
    }

    /// Records `locs` for `code`; a code seen before must come with the same
    /// locations.
    pub(crate) fn insert(
        &mut self,
        code: LocationCode,
        locs: &mut Vec<Location>,
    ) -> Result<(), ReadErrorKind> {
        match self.map.get(&code) {
            Some(old) if **old == **locs => Ok(()),
            Some(_) => Err(ReadErrorKind::InconsistentLocation(code)),
            None => {
                self.map
                    .insert(code, std::mem::take(locs).into_boxed_slice());
                Ok(())
            }
        }
    }
}

/// A table of the given codes' locations (a code given twice keeps its last
/// locations), for a table kept elsewhere and read back.
impl FromIterator<(LocationCode, Vec<Location>)> for LocationTable {
    fn from_iter<I: IntoIterator<Item = (LocationCode, Vec<Location>)>>(codes: I) -> Self {
        LocationTable {
            map: codes
                .into_iter()
                .map(|(c, l)| (c, l.into_boxed_slice()))
                .collect(),
            names: Names::default(),
        }
    }
}

impl crate::event::LocationLookup for LocationTable {
    fn locations(&self, code: LocationCode) -> Option<&[Location]> {
        self.get(code)
    }
}
