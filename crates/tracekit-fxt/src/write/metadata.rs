//! Metadata (type 0) and initialization (type 1) records; the reader's `metadata`
//! module decodes them. The whole format: `docs/fxt-format.md` at the repository
//! root, §4 and §5.
//!
//! | record            | header bits                                             | body |
//! |-------------------|---------------------------------------------------------|------|
//! | magic             | the whole word `0x0016547846040010`                     | — |
//! | provider info     | 16–19 = 1, 20–51 provider id, 52–59 name length         | name stream |
//! | provider section  | 16–19 = 2, 20–51 provider id                            | — |
//! | provider event    | 16–19 = 3, 20–51 provider id, 52–55 event id            | — |
//! | initialization    | (type 1)                                                | ticks/s \[, base ticks, base ns\] |

use super::{Destination, WriteError, Writer, check_field};
use crate::format::{MAGIC, MAX_PROVIDER_NAME_LEN, RecordType, metadata_type, words_for};
// The records' values live in `format`, which the reader shares; re-exported here,
// where the writer's users have always found them.
pub use crate::format::{ClockAnchor, Initialization, ProviderEvent};

pub(crate) fn metadata_header(subtype: u64, size_words: usize) -> u64 {
    RecordType::Metadata as u64 | (size_words as u64) << 4 | subtype << 16
}

impl<D: Destination> Writer<D> {
    /// The magic-number record. Readers that sniff the format need it first.
    pub fn write_magic(&mut self) -> Result<(), WriteError> {
        self.reserve(8)?.word(MAGIC);
        Ok(())
    }

    /// A provider info record: registers provider `id` under `name` and switches to it.
    pub fn write_provider_info(&mut self, id: u32, name: &[u8]) -> Result<(), WriteError> {
        if name.len() > MAX_PROVIDER_NAME_LEN {
            return Err(WriteError::ProviderNameTooLong { len: name.len() });
        }
        let size = 1 + words_for(name.len());
        let mut w = self.reserve_words(size)?;
        w.word(
            metadata_header(metadata_type::PROVIDER_INFO, size)
                | u64::from(id) << 20
                | (name.len() as u64) << 52,
        );
        w.stream(name);
        Ok(())
    }

    /// A provider section record: what follows belongs to provider `id`.
    pub fn write_provider_section(&mut self, id: u32) -> Result<(), WriteError> {
        self.reserve(8)?
            .word(metadata_header(metadata_type::PROVIDER_SECTION, 1) | u64::from(id) << 20);
        Ok(())
    }

    /// A provider event record (e.g. [`ProviderEvent::BUFFER_OVERFLOW`]).
    pub fn write_provider_event(
        &mut self,
        id: u32,
        event: ProviderEvent,
    ) -> Result<(), WriteError> {
        let event = check_field("provider event", event.0.into(), 4)?;
        self.reserve(8)?.word(
            metadata_header(metadata_type::PROVIDER_EVENT, 1) | u64::from(id) << 20 | event << 52,
        );
        Ok(())
    }

    /// An initialization record (2 words, or 4 with a [`ClockAnchor`]).
    pub fn write_initialization(&mut self, init: &Initialization) -> Result<(), WriteError> {
        if init.ticks_per_second == 0 {
            return Err(WriteError::ZeroTicksPerSecond);
        }
        let size = if init.base.is_some() { 4 } else { 2 };
        let mut w = self.reserve_words(size)?;
        w.word(RecordType::Initialization as u64 | (size as u64) << 4);
        w.word(init.ticks_per_second);
        if let Some(base) = init.base {
            w.word(base.ticks);
            w.word(base.unix_ns);
        }
        Ok(())
    }
}
