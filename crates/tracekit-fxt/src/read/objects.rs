//! Decoding userspace object records (type 6) and kernel object records (type 7),
//! the mirror of [`crate::write::objects`], whose docs give the header bits. The
//! whole format: `docs/fxt-format.md` at the repository root, §11 and
//! §12.
//!
//! A userspace object's *process* ref is a thread ref whose inline form (0) is
//! followed by a single word, the process koid; it is returned as an inline
//! [`ThreadRef`] with thread koid 0. Kernel objects of any object type are decoded;
//! what a process or thread object means is up to the consumer.

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{KernelObject, RawRecord, Record, UserspaceObject};
use crate::format::{Koid, ObjectType, ThreadId, ThreadRef, bits};

pub(super) fn userspace_object<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let pointer = c.word()?;
    let process = match ThreadId::new(bits(h, 16, 23) as u8) {
        Some(id) => ThreadRef::Index(id),
        None => ThreadRef::Inline {
            process: Koid(c.word()?),
            thread: Koid(0),
        },
    };
    let name = c.string_ref(bits(h, 24, 39) as u16)?;
    let args = n.args(c, bits(h, 40, 43) as u8)?;
    Some(Record::UserspaceObject(UserspaceObject {
        process,
        pointer,
        name,
        args,
    }))
}

pub(super) fn kernel_object<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let koid = Koid(c.word()?);
    let name = c.string_ref(bits(h, 24, 39) as u16)?;
    let args = n.args(c, bits(h, 40, 43) as u8)?;
    Some(Record::KernelObject(KernelObject {
        object_type: ObjectType(bits(h, 16, 23) as u8),
        koid,
        name,
        args,
    }))
}
