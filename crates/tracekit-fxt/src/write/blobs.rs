//! Blob records (type 5) and large blob records (type 15, large type 0); the reader's
//! `blobs` module decodes them. The whole format: `docs/fxt-format.md` at the
//! repository root, §10.
//!
//! | bits  | blob (type 5)                          | large blob (type 15)     |
//! |-------|----------------------------------------|--------------------------|
//! | 0–3   | 5                                      | 15                       |
//! | 4–15  | size in words                          | size in words (4–35)     |
//! | 16–31 | name ref                               |                          |
//! | 32–46 | payload size in bytes                  |                          |
//! | 36–39 |                                        | large type: 0            |
//! | 40–43 |                                        | blob format (0 or 1)     |
//! | 48–55 | blob type (1 data, 2 last-branch records, 3 Perfetto trace) |  |
//!
//! Blob body: \[name stream\], payload stream. Several blobs with one name form one
//! logical blob, so payloads over 32767 bytes can be split across records.
//!
//! | format | body |
//! |--------|------|
//! | 0, with metadata | format word (0–15 category, 16–31 name, 32–35 argument count, 36–43 thread ref), \[category\], \[name\], timestamp, \[pid, tid\], arguments, payload size word, payload |
//! | 1, without metadata | format word (0–15 category, 16–31 name), \[category\], \[name\], payload size word, payload |
//!
//! Reader survival: Perfetto and Tracy frame *every* record with the 12-bit size field,
//! so a large record longer than 4095 words would be mis-framed by them. The writer
//! therefore refuses large blobs over 4095 words ([`WriteError::RecordTooLarge`]):
//! up to that size the 12-bit and 32-bit size fields agree and every reader skips or
//! reads the record correctly. Perfetto, Tracy and Jane Street's parser then ignore
//! it; PyPI `fxt` and the Fuchsia readers decode it. Perfetto reads only blob records
//! of type 3 (embedded Perfetto protobuf) and ignores other blob types.

use super::args::{args_words, count, ref_words, write_args};
use super::{Destination, WriteError, Writer};
use crate::format::{
    BlobType, MAX_BLOB_LEN, MAX_RECORD_WORDS, RawArg, RecordType, StringRef, ThreadRef, words_for,
};

/// Large record type of a large blob.
const LARGE_BLOB: u64 = 0;

impl<D: Destination> Writer<D> {
    /// A blob record of at most 32767 payload bytes.
    pub fn blob<'s>(
        &mut self,
        name: impl Into<StringRef<'s>>,
        blob_type: BlobType,
        payload: &[u8],
    ) -> Result<(), WriteError> {
        let name = name.into();
        if payload.len() > MAX_BLOB_LEN {
            return Err(WriteError::PayloadTooLong {
                len: payload.len(),
                max: MAX_BLOB_LEN,
            });
        }
        let size = 1 + ref_words(name)? + words_for(payload.len());
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Blob as u64
                | (size as u64) << 4
                | u64::from(name.encode()) << 16
                | (payload.len() as u64) << 32
                | u64::from(blob_type.0) << 48,
        );
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        w.stream(payload);
        Ok(())
    }

    /// A large blob with metadata (format 0): a timestamped, attributed payload.
    #[allow(clippy::too_many_arguments)]
    pub fn large_blob_event<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &[RawArg<'_>],
        payload: &[u8],
    ) -> Result<(), WriteError> {
        let thread = thread.into();
        let category = category.into();
        let name = name.into();
        let size = 2
            + ref_words(category)?
            + ref_words(name)?
            + 1
            + thread.inline_words()
            + args_words(args)?
            + 1
            + words_for(payload.len());
        let mut w = self.reserve_words(size)?;
        w.word(large_header(size, 0));
        w.word(
            u64::from(category.encode())
                | u64::from(name.encode()) << 16
                | count(args) << 32
                | u64::from(thread.encode()) << 36,
        );
        if let StringRef::Inline(s) = category {
            w.stream(s);
        }
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        w.word(ticks);
        if let ThreadRef::Inline { process, thread } = thread {
            w.word(process.0);
            w.word(thread.0);
        }
        write_args(&mut w, args);
        w.word(payload.len() as u64);
        w.stream(payload);
        Ok(())
    }

    /// A large blob without metadata (format 1).
    pub fn large_blob<'s>(
        &mut self,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        payload: &[u8],
    ) -> Result<(), WriteError> {
        let category = category.into();
        let name = name.into();
        let size = 2 + ref_words(category)? + ref_words(name)? + 1 + words_for(payload.len());
        let mut w = self.reserve_words(size)?;
        w.word(large_header(size, 1));
        w.word(u64::from(category.encode()) | u64::from(name.encode()) << 16);
        if let StringRef::Inline(s) = category {
            w.stream(s);
        }
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        w.word(payload.len() as u64);
        w.stream(payload);
        Ok(())
    }
}

/// `size` is at most [`MAX_RECORD_WORDS`] here (checked by `reserve_words`), so the
/// 12-bit and 32-bit readings of the size agree.
fn large_header(size: usize, format: u64) -> u64 {
    debug_assert!(size <= MAX_RECORD_WORDS);
    RecordType::Large as u64 | (size as u64) << 4 | LARGE_BLOB << 36 | format << 40
}
