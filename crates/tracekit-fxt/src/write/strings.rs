//! String records (type 2) and the writer's string-id allocation; the reader's
//! `strings` module decodes them. The whole format: `docs/fxt-format.md` at the
//! repository root, §6.
//!
//! | bits  | field                     |
//! |-------|---------------------------|
//! | 0–3   | 2                         |
//! | 4–15  | size = 1 + ceil(len / 8)  |
//! | 16–30 | string index (1..=0x7FFF) |
//! | 32–46 | length in bytes           |
//!
//! followed by the zero-padded bytes. A record for an index already in use replaces
//! it for the records that follow, which is how temp and dyn slots are reused.

use super::{Destination, WriteError, Writer, check_len};
use crate::format::{RecordType, StringId, words_for};

/// First "dyn" slot id (slots reserved for generated call sites, valid right after
/// being set).
pub const FIRST_DYN_STRING: u16 = 2;
/// Number of dyn slots.
pub const NUM_DYN_STRINGS: u16 = 17;
/// First temp slot id.
pub const FIRST_TEMP_STRING: u16 = FIRST_DYN_STRING + NUM_DYN_STRINGS;

/// Bookkeeping of the id ranges.
#[derive(Clone, Debug)]
pub(crate) struct StringSlots {
    next_permanent: u32,
    num_temp: u16,
    process_reserved: bool,
}

impl StringSlots {
    pub(crate) fn new(num_temp: u16, process_reserved: bool) -> Result<Self, WriteError> {
        let first_permanent = u32::from(FIRST_TEMP_STRING) + u32::from(num_temp);
        // Equal to MAX + 1 is allowed: every id is then a temp slot.
        if first_permanent > u32::from(StringId::MAX) + 1 {
            return Err(WriteError::TooManyTempStrings { count: num_temp });
        }
        Ok(Self {
            next_permanent: first_permanent,
            num_temp,
            process_reserved,
        })
    }

    /// Whether id 1 is bound to `"process"` by the header.
    pub(crate) fn process_reserved(&self) -> bool {
        self.process_reserved
    }
}

impl<D: Destination> Writer<D> {
    /// Writes a string record binding `id` to `bytes`, with no slot bookkeeping.
    pub(crate) fn write_string_record(
        &mut self,
        id: StringId,
        bytes: &[u8],
    ) -> Result<(), WriteError> {
        check_len(bytes.len())?;
        let size = 1 + words_for(bytes.len());
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::String as u64
                | (size as u64) << 4
                | u64::from(id.get()) << 16
                | (bytes.len() as u64) << 32,
        );
        w.stream(bytes);
        Ok(())
    }

    /// Interns `s` under the next permanent id. It does not look for an earlier copy of
    /// the same string; keep the returned id.
    pub fn intern(&mut self, s: &str) -> Result<StringId, WriteError> {
        self.intern_bytes(s.as_bytes())
    }

    /// [`intern`](Self::intern) for bytes that may not be UTF-8.
    pub fn intern_bytes(&mut self, s: &[u8]) -> Result<StringId, WriteError> {
        let next = self.parts.strings.next_permanent;
        let id = u16::try_from(next)
            .ok()
            .and_then(StringId::new)
            .ok_or(WriteError::OutOfStringIds)?;
        self.write_string_record(id, s)?;
        self.parts.strings.next_permanent = next + 1;
        Ok(id)
    }

    /// Number of temp string slots.
    pub fn num_temp_strings(&self) -> u16 {
        self.parts.strings.num_temp
    }

    /// Binds temp slot `slot` (0-based) to `s`, replacing what it held; events written
    /// afterwards see the new value. For unboundedly many distinct strings.
    pub fn set_temp_string(&mut self, slot: u16, s: &str) -> Result<StringId, WriteError> {
        if slot >= self.parts.strings.num_temp {
            return Err(WriteError::SlotOutOfRange {
                slot,
                count: self.parts.strings.num_temp,
            });
        }
        let id = StringId::new(FIRST_TEMP_STRING + slot).ok_or(WriteError::SlotOutOfRange {
            slot,
            count: self.parts.strings.num_temp,
        })?;
        self.write_string_record(id, s.as_bytes())?;
        Ok(id)
    }

    /// Binds dyn slot `slot` (`0..17`) to `s`.
    pub fn set_dyn_string(&mut self, slot: u16, s: &str) -> Result<StringId, WriteError> {
        let id = (slot < NUM_DYN_STRINGS)
            .then(|| StringId::new(FIRST_DYN_STRING + slot))
            .flatten()
            .ok_or(WriteError::SlotOutOfRange {
                slot,
                count: NUM_DYN_STRINGS,
            })?;
        self.write_string_record(id, s.as_bytes())?;
        Ok(id)
    }

    /// Binds an explicit string id, e.g. to reproduce another writer's ids. Id 1 is
    /// refused (unless `s` is `"process"`) when the header reserved it.
    pub fn set_string(&mut self, id: StringId, s: &[u8]) -> Result<(), WriteError> {
        if id == StringId::PROCESS && self.parts.strings.process_reserved && s != b"process" {
            return Err(WriteError::ProcessStringReserved);
        }
        self.write_string_record(id, s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::write::{VecDestination, WriterOptions};

    #[test]
    fn permanent_ids_start_after_temp_slots() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        assert_eq!(w.intern("a").unwrap().get(), FIRST_TEMP_STRING + 100);
        assert_eq!(
            w.set_temp_string(1, "t").unwrap().get(),
            FIRST_TEMP_STRING + 1
        );
        assert!(w.set_temp_string(100, "t").is_err());
        assert_eq!(w.set_dyn_string(16, "d").unwrap().get(), 18);
        assert!(w.set_dyn_string(17, "d").is_err());
        assert_eq!(
            w.set_string(StringId::PROCESS, b"other"),
            Err(WriteError::ProcessStringReserved)
        );
    }

    #[test]
    fn running_out_of_ids_is_an_error() {
        let opts = WriterOptions {
            num_temp_strings: StringId::MAX - FIRST_TEMP_STRING,
            ..WriterOptions::default()
        };
        let mut w = Writer::with_options(VecDestination::new(), &opts).unwrap();
        assert_eq!(w.intern("last").unwrap().get(), StringId::MAX);
        assert_eq!(w.intern("more"), Err(WriteError::OutOfStringIds));
        let too_many = WriterOptions {
            num_temp_strings: StringId::MAX,
            ..WriterOptions::default()
        };
        assert!(Writer::with_options(VecDestination::new(), &too_many).is_err());
    }

    #[test]
    fn long_strings_are_refused_not_truncated() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let long = "x".repeat(32001);
        assert_eq!(
            w.intern(&long),
            Err(WriteError::StringTooLong { len: 32001 })
        );
        assert!(w.intern(&long[..32000]).is_ok());
        assert_eq!(crate::write::truncate_to_limit(&long).len(), 32000);
    }
}
