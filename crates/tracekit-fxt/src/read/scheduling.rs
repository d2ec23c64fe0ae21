//! Decoding scheduling records (type 8): context switches, thread wakeups and
//! legacy context switches, the mirror of [`crate::write::scheduling`], whose docs
//! give the header bits of each subtype. The whole format: `docs/fxt-format.md` at
//! the repository root, §13 "Scheduling records".
//!
//! The subtype is in header bits 60–63; a subtype other than 0–2 is
//! [`Problem::UnknownSchedulingType`] and the record is skipped.

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{ContextSwitch, LegacyContextSwitch, RawRecord, Record, ThreadWakeup};
use crate::format::{Koid, ThreadState, bits};

pub(super) fn scheduling<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    Some(match bits(h, 60, 63) {
        1 => {
            let ticks = c.word()?;
            let outgoing_tid = Koid(c.word()?);
            let incoming_tid = Koid(c.word()?);
            let args = n.args(c, bits(h, 16, 19) as u8)?;
            Record::ContextSwitch(ContextSwitch {
                ticks,
                cpu: bits(h, 20, 35) as u16,
                outgoing_state: ThreadState(bits(h, 36, 39) as u8),
                outgoing_tid,
                incoming_tid,
                args,
            })
        }
        2 => {
            let ticks = c.word()?;
            let waking_tid = Koid(c.word()?);
            let args = n.args(c, bits(h, 16, 19) as u8)?;
            Record::ThreadWakeup(ThreadWakeup {
                ticks,
                cpu: bits(h, 20, 35) as u16,
                waking_tid,
                args,
            })
        }
        0 => {
            let ticks = c.word()?;
            let outgoing = c.thread_ref(bits(h, 28, 35) as u8)?;
            let incoming = c.thread_ref(bits(h, 36, 43) as u8)?;
            Record::LegacyContextSwitch(LegacyContextSwitch {
                ticks,
                cpu: bits(h, 16, 23) as u8,
                outgoing_state: ThreadState(bits(h, 24, 27) as u8),
                outgoing,
                incoming,
                outgoing_priority: bits(h, 44, 51) as u8,
                incoming_priority: bits(h, 52, 59) as u8,
            })
        }
        other => {
            n.note(Problem::UnknownSchedulingType(other as u8));
            return None;
        }
    })
}
