//! Decoding log records (type 9), the mirror of [`crate::write::log`], whose docs
//! give the header bits. The whole format: `docs/fxt-format.md` at the repository
//! root, §14 "Log records".
//!
//! The body is read in order: timestamp, inline thread koids (thread ref 0), then
//! the message stream, whose length is in the header.

use super::cursor::Cursor;
use super::records::{Log, RawRecord, Record};
use crate::format::bits;

pub(super) fn log<'a>(h: u64, c: &mut Cursor<'a>) -> Option<RawRecord<'a>> {
    let ticks = c.word()?;
    let thread = c.thread_ref(bits(h, 32, 39) as u8)?;
    let message = c.stream(bits(h, 16, 30) as usize)?;
    Some(Record::Log(Log {
        ticks,
        thread,
        message,
    }))
}
