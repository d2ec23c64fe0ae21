//! Log records (type 9); the reader's `log` module decodes them. The whole format:
//! `docs/fxt-format.md` at the repository root, §14.
//!
//! | bits  | field                   |
//! |-------|-------------------------|
//! | 0–3   | 9                       |
//! | 4–15  | size in words           |
//! | 16–30 | message length in bytes |
//! | 32–39 | thread ref              |
//!
//! Body: timestamp, \[pid, tid\] if the thread ref is inline, message stream. Perfetto, Tracy and Jane Street's parser ignore log
//! records (Perfetto's importer skips them without a warning); PyPI `fxt` and the Fuchsia
//! readers decode them.

use super::{Destination, WriteError, Writer};
use crate::format::{MAX_BLOB_LEN, RecordType, ThreadRef, words_for};

impl<D: Destination> Writer<D> {
    /// A log message of at most 32767 bytes.
    pub fn log(
        &mut self,
        thread: impl Into<ThreadRef>,
        ticks: u64,
        message: &[u8],
    ) -> Result<(), WriteError> {
        let thread = thread.into();
        if message.len() > MAX_BLOB_LEN {
            return Err(WriteError::PayloadTooLong {
                len: message.len(),
                max: MAX_BLOB_LEN,
            });
        }
        let size = 2 + thread.inline_words() + words_for(message.len());
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Log as u64
                | (size as u64) << 4
                | (message.len() as u64) << 16
                | u64::from(thread.encode()) << 32,
        );
        w.word(ticks);
        if let ThreadRef::Inline { process, thread } = thread {
            w.word(process.0);
            w.word(thread.0);
        }
        w.stream(message);
        Ok(())
    }
}
