//! Decoding string records (type 2), the mirror of [`crate::write::strings`], whose
//! docs give the header bits. The whole format: `docs/fxt-format.md` at the
//! repository root, §6 "String records".
//!
//! The record binds a string-table index to the bytes that follow; binding index 0
//! is not allowed and the record is skipped with [`Problem::StringIndexZero`]. The
//! table itself is kept by the reader ([`super::tables`]).

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{RawRecord, Record};
use crate::format::{StringId, bits};

pub(super) fn string<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let value = c.stream(bits(h, 32, 46) as usize)?;
    match StringId::new(bits(h, 16, 30) as u16) {
        Some(id) => Some(Record::String { id, value }),
        None => {
            n.note(Problem::StringIndexZero);
            None
        }
    }
}
