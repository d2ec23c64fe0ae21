//! Decoding thread records (type 3), the mirror of [`crate::write::threads`], whose
//! docs give the layout. The whole format: `docs/fxt-format.md` at the repository
//! root, §7 "Thread records".
//!
//! The record binds a thread-table index to a process and thread koid; binding
//! index 0 is not allowed and the record is skipped with
//! [`Problem::ThreadIndexZero`]. The table itself is kept by the reader
//! ([`super::tables`]).

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{RawRecord, Record};
use crate::format::{Koid, ThreadId, bits};

pub(super) fn thread<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let process = Koid(c.word()?);
    let thread = Koid(c.word()?);
    match ThreadId::new(bits(h, 16, 23) as u8) {
        Some(id) => Some(Record::Thread {
            id,
            process,
            thread,
        }),
        None => {
            n.note(Problem::ThreadIndexZero);
            None
        }
    }
}
