//! Framing and dispatch: the size of a record from its header word, and decoding one
//! framed record into a [`RawRecord`] by its record type (header bits 0–3) with the
//! function of that record's module ([`super::metadata`], [`super::strings`],
//! [`super::threads`], [`super::events`], [`super::blobs`], [`super::objects`],
//! [`super::scheduling`], [`super::log`]; each mirrors the writer's module of the
//! same name). Pure: no reader state is touched here. The whole format:
//! `docs/fxt-format.md` at the repository root, §1 "Records".
//!
//! Framing: every record is a whole number of 64-bit words; header bits 4–15 give
//! its size in words, header included, except for large records (type 15), whose
//! size is in bits 4–35. A size of 0 cannot be framed ([`Problem::ZeroSizeRecord`]),
//! and nothing after it can be read. Record types 10–14 are
//! [`Problem::UnknownRecordType`] and skipped by their size.

use super::Problem;
use super::args::{RawArgs, read_args};
use super::blobs::{blob, large};
use super::cursor::Cursor;
use super::events::event;
use super::log::log;
use super::metadata::{initialization, metadata};
use super::objects::{kernel_object, userspace_object};
use super::records::RawRecord;
use super::scheduling::scheduling;
use super::strings::string;
use super::threads::thread;
use crate::format::{RecordType, bits};

/// Collects the problems of one record. Parsing returns `None` for an unusable
/// record; `failed` says whether a problem was already noted for it.
pub(crate) struct Notes<N> {
    note: N,
    failed: bool,
}

impl<N: FnMut(Problem)> Notes<N> {
    #[inline(always)]
    pub(super) fn note(&mut self, p: Problem) {
        (self.note)(p);
    }

    /// Validated arguments; a problem with them makes the record unusable.
    #[inline(always)]
    pub(super) fn args<'a>(&mut self, c: &mut Cursor<'a>, count: u8) -> Option<RawArgs<'a>> {
        let args = read_args(c, count, &mut self.note);
        self.failed |= args.is_none();
        args
    }

    /// Notes a problem that makes the record unusable.
    #[inline(always)]
    pub(super) fn fail<T>(&mut self, p: Problem) -> Option<T> {
        self.failed = true;
        (self.note)(p);
        None
    }
}

/// The size in bytes of the record whose header is `header`.
#[inline]
pub(crate) fn record_bytes(header: u64) -> Result<u64, Problem> {
    let words = if header & 0xF == RecordType::Large as u64 {
        bits(header, 4, 35)
    } else {
        bits(header, 4, 15)
    };
    if words == 0 {
        return Err(Problem::ZeroSizeRecord);
    }
    Ok(words * 8)
}

/// Decodes one record (exactly its bytes). Problems go to `note`; `None` when the
/// record is skipped: an unknown kind, or malformed content (after a note).
#[inline(always)]
pub(crate) fn parse_record<'a>(rec: &'a [u8], note: impl FnMut(Problem)) -> Option<RawRecord<'a>> {
    let mut n = Notes {
        note,
        failed: false,
    };
    let mut c = Cursor::new(rec);
    let h = c.word()?;
    let code = (h & 0xF) as u8;
    let Some(ty) = RecordType::from_code(code) else {
        n.note(Problem::UnknownRecordType(code));
        return None;
    };
    let parsed = match ty {
        RecordType::Metadata => metadata(h, &mut c, &mut n),
        RecordType::Initialization => initialization(h, &mut c, &mut n),
        RecordType::String => string(h, &mut c, &mut n),
        RecordType::Thread => thread(h, &mut c, &mut n),
        RecordType::Event => event(h, &mut c, &mut n),
        RecordType::Blob => blob(h, &mut c),
        RecordType::UserspaceObject => userspace_object(h, &mut c, &mut n),
        RecordType::KernelObject => kernel_object(h, &mut c, &mut n),
        RecordType::Scheduling => scheduling(h, &mut c, &mut n),
        RecordType::Log => log(h, &mut c),
        RecordType::Large => large(h, &mut c, &mut n),
    };
    if parsed.is_none() && !n.failed {
        // A cursor read ran past the record's end.
        n.note(Problem::FieldOutOfRecord);
    }
    parsed
}
