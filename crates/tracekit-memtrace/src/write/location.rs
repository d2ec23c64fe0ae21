//! Encoding location events; mirrors [`crate::read`]'s `location` module,
//! whose docs give the layout. The whole format: `docs/memtrace-format.md` at
//! the repository root, §6 "Location events".
//!
//! Values too large for their bit field are clamped to the field's maximum
//! (line 2^20 − 1, start_char 255, end_char 1023). A list of more than 255
//! locations, or whose worst-case encoding (`9 + Σ (6 + file + 1 + def + 1)`
//! bytes) is over 4096 bytes, is replaced by [`Location::unknown`], as the
//! reference writer does.

use super::buf::{put_i64, put_string, put_u8, put_u16, put_u32};
use crate::format::{LOCATION_MAX_LENGTH, MTF_LENGTH, Mtf};
use crate::types::{Location, LocationCode, Name};

// Encoder side of the move-to-front tables. Keys are the writer's full names:
// a name with a NUL is written truncated but keyed whole, as in the reference.
impl<T: Default> Mtf<T> {
    /// The MTF code of `name` (31 if new) and its value, now at the front.
    fn encode(&mut self, name: &Name) -> (usize, &mut T) {
        let mut found = MTF_LENGTH;
        for (i, slot) in self.slots.iter().enumerate() {
            match slot {
                None => break,
                Some((k, _)) if k.as_bytes() == name.as_bytes() => {
                    found = i;
                    break;
                }
                Some(_) => {}
            }
        }
        if found == MTF_LENGTH {
            self.slots.rotate_right(1);
            self.slots[0] = Some((name.clone(), T::default()));
        } else {
            self.slots[..=found].rotate_right(1);
        }
        let value = match &mut self.slots[0] {
            Some((_, v)) => v,
            None => unreachable!("slot 0 was just filled"),
        };
        (found, value)
    }
}

/// Whether a writer sends `locs` as they are: at most 255 locations whose
/// worst-case encoding fits in 4096 bytes. A list that does not is written
/// as [`Location::unknown`] (except by [`Writer::put_event_exact`](crate::Writer)),
/// so a tracer that makes its own lists shortens them to fit first.
pub fn location_list_fits(locs: &[Location]) -> bool {
    locs.len() <= 255 && worst_case_size(locs) <= LOCATION_MAX_LENGTH
}

/// The most bytes a location event body for `locs` can take.
fn worst_case_size(locs: &[Location]) -> usize {
    locs.iter().fold(8 + 1, |size, l| {
        size + 6 + (l.filename.len() + 1) + (l.defname.len() + 1)
    })
}

/// Per-domain state of the location encoder.
#[derive(Clone, Debug, Default)]
pub(crate) struct LocationEncoder {
    files: Mtf<Box<Mtf<()>>>,
}

fn clamp(n: u32, max: u32) -> u64 {
    u64::from(n.min(max))
}

impl LocationEncoder {
    /// Appends a location event body for `code` to `b`. Lists of more than
    /// 255 locations, or (unless `whole`) whose worst-case size exceeds 4 KiB,
    /// are replaced by [`Location::unknown`], as the reference writer does.
    /// Returns whether the list was written as it is.
    pub(crate) fn put_location(
        &mut self,
        b: &mut Vec<u8>,
        code: LocationCode,
        locs: &[Location],
        whole: bool,
    ) -> bool {
        let unknown;
        let as_is = locs.len() <= 255 && (whole || worst_case_size(locs) <= LOCATION_MAX_LENGTH);
        let locs = if as_is {
            locs
        } else {
            unknown = [Location::unknown()];
            &unknown[..]
        };
        put_i64(b, code.get());
        put_u8(b, locs.len() as u8);
        for loc in locs {
            let (file_code, defs) = self.files.encode(&loc.filename);
            let (def_code, ()) = defs.encode(&loc.defname);
            let word = clamp(loc.line, 0xfffff)
                | clamp(loc.start_char, 0xff) << 20
                | clamp(loc.end_char, 0x3ff) << 28
                | (file_code as u64) << 38
                | (def_code as u64) << 43;
            put_u32(b, word as u32);
            put_u16(b, (word >> 32) as u16);
            if file_code == MTF_LENGTH {
                put_string(b, &loc.filename);
            }
            if def_code == MTF_LENGTH {
                put_string(b, &loc.defname);
            }
        }
        as_is
    }
}
