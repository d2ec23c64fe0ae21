//! Decoding event records (type 4), the mirror of [`crate::write::events`] and
//! [`crate::write::fast`], whose docs give the header bits and body order. The
//! whole format: `docs/fxt-format.md` at the repository root, §8 "Event records".
//!
//! The body is read in order: timestamp, inline thread koids (thread ref 0), inline
//! category and name streams, the arguments ([`super::args`]), then the trailer
//! word for the event types that have one ([`EventType::has_trailer`]). An event
//! type 11–15 is [`Problem::UnknownEventType`] and the record is skipped. Words
//! after the trailer are ignored (an old reader convention put an optional scope
//! word after an instant event's arguments).

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{Event, RawRecord, Record};
use crate::format::{EventKind, EventType, bits};

#[inline(always)]
pub(super) fn event<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let code = bits(h, 16, 19) as u8;
    let Some(ty) = EventType::from_code(code) else {
        n.note(Problem::UnknownEventType(code));
        return None;
    };
    let ticks = c.word()?;
    let thread = c.thread_ref(bits(h, 24, 31) as u8)?;
    let category = c.string_ref(bits(h, 32, 47) as u16)?;
    let name = c.string_ref(bits(h, 48, 63) as u16)?;
    let args = n.args(c, bits(h, 20, 23) as u8)?;
    let trailer = if ty.has_trailer() { c.word()? } else { 0 };
    Some(Record::Event(Event {
        kind: EventKind::from_parts(ty, trailer),
        ticks,
        thread,
        category,
        name,
        args,
    }))
}
