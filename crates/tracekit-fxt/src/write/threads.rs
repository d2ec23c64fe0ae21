//! Thread records (type 3); the reader's `threads` module decodes them. The whole
//! format: `docs/fxt-format.md` at the repository root, §7.
//!
//! | word | content                                     |
//! |------|---------------------------------------------|
//! | 0    | 3, size 3, bits 16–23 thread index (1..=255) |
//! | 1    | process koid                                |
//! | 2    | thread koid                                 |
//!
//! Rebinding an index replaces it for the records that follow; with more than 255
//! threads, callers reuse slots.

use super::{Destination, WriteError, Writer};
use crate::format::{Koid, RecordType, ThreadId};

impl<D: Destination> Writer<D> {
    /// Binds thread-table index `id` to (`process`, `thread`).
    pub fn set_thread(
        &mut self,
        id: ThreadId,
        process: Koid,
        thread: Koid,
    ) -> Result<(), WriteError> {
        let mut w = self.reserve(24)?;
        w.word(RecordType::Thread as u64 | 3 << 4 | u64::from(id.get()) << 16);
        w.word(process.0);
        w.word(thread.0);
        Ok(())
    }

    /// Binds the zero-based slot `slot` (`0..=254`, id `slot + 1`), as Jane Street's
    /// `tracing` writer numbers them.
    pub fn set_thread_slot(
        &mut self,
        slot: u8,
        process: Koid,
        thread: Koid,
    ) -> Result<ThreadId, WriteError> {
        let id = ThreadId::from_slot(slot).ok_or(WriteError::SlotOutOfRange {
            slot: slot.into(),
            count: 255,
        })?;
        self.set_thread(id, process, thread)?;
        Ok(id)
    }
}
