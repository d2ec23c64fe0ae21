//! A bounds-checked cursor over one record's bytes. Every read past the record's
//! declared end is `None`, never a panic.

use crate::format::{Koid, StringId, StringRef, ThreadId, ThreadRef, words_for};

#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    #[inline]
    pub(crate) fn word(&mut self) -> Option<u64> {
        let (head, tail) = self.bytes.split_first_chunk::<8>()?;
        self.bytes = tail;
        Some(u64::from_le_bytes(*head))
    }

    /// `len` bytes followed by padding to a word boundary.
    #[inline]
    pub(crate) fn stream(&mut self, len: usize) -> Option<&'a [u8]> {
        let padded = words_for(len).checked_mul(8)?;
        let taken = self.bytes.get(..padded)?;
        self.bytes = self.bytes.get(padded..).unwrap_or_default();
        taken.get(..len)
    }

    /// Decodes a 16-bit string ref, reading its inline stream if it has one.
    #[inline]
    pub(crate) fn string_ref(&mut self, encoded: u16) -> Option<StringRef<'a>> {
        Some(if encoded == 0 {
            StringRef::Empty
        } else if encoded & 0x8000 != 0 {
            StringRef::Inline(self.stream(usize::from(encoded & 0x7FFF))?)
        } else {
            match StringId::new(encoded) {
                Some(id) => StringRef::Index(id),
                None => StringRef::Empty,
            }
        })
    }

    /// Decodes an 8-bit thread ref, reading the inline koids if it has them.
    #[inline]
    pub(crate) fn thread_ref(&mut self, encoded: u8) -> Option<ThreadRef> {
        Some(match ThreadId::new(encoded) {
            Some(id) => ThreadRef::Index(id),
            None => ThreadRef::Inline {
                process: Koid(self.word()?),
                thread: Koid(self.word()?),
            },
        })
    }

    #[inline]
    pub(crate) fn skip(&mut self, bytes: usize) -> Option<()> {
        self.bytes = self.bytes.get(bytes..)?;
        Some(())
    }

    #[inline]
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }
}
