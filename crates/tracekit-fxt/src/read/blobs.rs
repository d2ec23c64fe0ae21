//! Decoding blob records (type 5) and large blob records (type 15, large type 0),
//! the mirror of [`crate::write::blobs`], whose docs give the header bits and both
//! large-blob formats. The whole format: `docs/fxt-format.md` at the repository
//! root, §10.
//!
//! A large record of another large type is [`Problem::UnknownLargeRecordType`], a
//! large blob of a format other than 0 (with metadata) and 1 (without) is
//! [`Problem::UnknownLargeBlobFormat`]; both are skipped. Words after a blob's
//! payload are ignored.

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{Blob, LargeBlob, LargeBlobMeta, RawRecord, Record};
use crate::format::{BlobType, bits};

pub(super) fn blob<'a>(h: u64, c: &mut Cursor<'a>) -> Option<RawRecord<'a>> {
    let name = c.string_ref(bits(h, 16, 31) as u16)?;
    let payload = c.stream(bits(h, 32, 46) as usize)?;
    Some(Record::Blob(Blob {
        name,
        blob_type: BlobType(bits(h, 48, 55) as u8),
        payload,
    }))
}

pub(super) fn large<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let large_type = bits(h, 36, 39) as u8;
    if large_type != 0 {
        n.note(Problem::UnknownLargeRecordType(large_type));
        return None;
    }
    let format = bits(h, 40, 43) as u8;
    if format > 1 {
        n.note(Problem::UnknownLargeBlobFormat(format));
        return None;
    }
    let f = c.word()?;
    let category = c.string_ref(bits(f, 0, 15) as u16)?;
    let name = c.string_ref(bits(f, 16, 31) as u16)?;
    let meta = if format == 0 {
        let ticks = c.word()?;
        let thread = c.thread_ref(bits(f, 36, 43) as u8)?;
        let args = n.args(c, bits(f, 32, 35) as u8)?;
        Some(LargeBlobMeta {
            ticks,
            thread,
            args,
        })
    } else {
        None
    };
    let len = usize::try_from(c.word()?).ok()?;
    let payload = c.stream(len)?;
    Some(Record::LargeBlob(LargeBlob {
        category,
        name,
        meta,
        payload,
    }))
}
