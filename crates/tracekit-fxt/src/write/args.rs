//! Argument encoding; [`crate::read::args`] decodes it. The whole format:
//! `docs/fxt-format.md` at the repository root, §3 "Arguments".
//!
//! | bits  | field                                  |
//! |-------|----------------------------------------|
//! | 0–3   | argument type ([`ArgType`](crate::format::ArgType)) |
//! | 4–15  | size in words, header included         |
//! | 16–31 | name string ref                        |
//! | 32–63 | value for int32/uint32/bool/string ref/blob size |
//!
//! then the inline name stream, then the value: one word for 64-bit types, the inline
//! string stream for inline string values, the padded payload for blobs.

use super::{Words, WriteError, check_len};
use crate::format::{ArgValue, MAX_ARGS, RawArg, StringRef, words_for};

/// Words one argument takes, after checking its strings.
pub(crate) fn arg_words(arg: &RawArg<'_>) -> Result<usize, WriteError> {
    let mut words = 1 + ref_words(arg.name)?;
    words += match arg.value {
        ArgValue::Null | ArgValue::Int32(_) | ArgValue::UInt32(_) | ArgValue::Bool(_) => 0,
        ArgValue::Int64(_)
        | ArgValue::UInt64(_)
        | ArgValue::Double(_)
        | ArgValue::Pointer(_)
        | ArgValue::Koid(_) => 1,
        ArgValue::String(s) => ref_words(s)?,
        ArgValue::Blob(b) => {
            if u32::try_from(b.len()).is_err() {
                return Err(WriteError::PayloadTooLong {
                    len: b.len(),
                    max: u32::MAX as usize,
                });
            }
            words_for(b.len())
        }
    };
    Ok(words)
}

/// Words of inline data a string ref adds, after checking its length.
#[inline]
pub(crate) fn ref_words(r: StringRef<'_>) -> Result<usize, WriteError> {
    if let StringRef::Inline(bytes) = r {
        check_len(bytes.len())?;
    }
    Ok(r.inline_words())
}

/// Words all arguments take, after checking their count.
pub(crate) fn args_words(args: &[RawArg<'_>]) -> Result<usize, WriteError> {
    if args.len() > MAX_ARGS {
        return Err(WriteError::TooManyArgs { count: args.len() });
    }
    let mut words = 0;
    for arg in args {
        words += arg_words(arg)?;
    }
    Ok(words)
}

/// Encodes arguments whose sizes were counted by [`args_words`].
pub(crate) fn write_args(w: &mut Words<'_>, args: &[RawArg<'_>]) {
    for arg in args {
        // Sizes were checked when the record was sized; an arg fits 12 bits because
        // the whole record fits 4095 words.
        let size = arg_words(arg).unwrap_or(1) as u64;
        let head = arg.value.arg_type() as u64 | size << 4 | u64::from(arg.name.encode()) << 16;
        let value_bits: u64 = match arg.value {
            ArgValue::Int32(v) => u64::from(v as u32),
            ArgValue::UInt32(v) => u64::from(v),
            ArgValue::Bool(v) => u64::from(v),
            ArgValue::String(s) => u64::from(s.encode()),
            ArgValue::Blob(b) => b.len() as u64,
            _ => 0,
        };
        w.word(head | value_bits << 32);
        if let StringRef::Inline(name) = arg.name {
            w.stream(name);
        }
        match arg.value {
            ArgValue::Int64(v) => w.word(v as u64),
            ArgValue::UInt64(v) | ArgValue::Pointer(v) => w.word(v),
            ArgValue::Double(v) => w.word(v.to_bits()),
            ArgValue::Koid(k) => w.word(k.0),
            ArgValue::String(StringRef::Inline(s)) => w.stream(s),
            ArgValue::Blob(b) => w.stream(b),
            _ => {}
        }
    }
}

/// Arguments encoded once and written on many events
/// ([`Writer::write_event_encoded`](super::Writer::write_event_encoded)): a span's
/// fields go on each of its entries, and encoding them once leaves the event a
/// header, a timestamp and a copy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedArgs {
    count: u8,
    bytes: Vec<u8>,
}

impl EncodedArgs {
    /// No arguments.
    pub fn new() -> EncodedArgs {
        EncodedArgs::default()
    }

    /// `args`, encoded; an error, as [`Writer::write_event`](super::Writer::write_event)
    /// gives, when there are more than 15 or a string is too long.
    pub fn encode(args: &[RawArg<'_>]) -> Result<EncodedArgs, WriteError> {
        let mut e = EncodedArgs::new();
        e.set(args)?;
        Ok(e)
    }

    /// Replaces the arguments with `args`, reusing the allocation; on an error they
    /// are left unchanged.
    pub fn set(&mut self, args: &[RawArg<'_>]) -> Result<(), WriteError> {
        let words = args_words(args)?;
        self.bytes.clear();
        self.bytes.resize(words * 8, 0);
        let mut w = Words {
            buf: &mut self.bytes,
        };
        write_args(&mut w, args);
        self.count = count(args) as u8;
        Ok(())
    }

    /// Adds `more` after the arguments; on an error (more than 15 in all, a
    /// string too long) they are left unchanged.
    pub fn append(&mut self, more: &[RawArg<'_>]) -> Result<(), WriteError> {
        let total = self.count() + more.len();
        if total > MAX_ARGS {
            return Err(WriteError::TooManyArgs { count: total });
        }
        let words = args_words(more)?;
        let at = self.bytes.len();
        self.bytes.resize(at + words * 8, 0);
        let mut w = Words {
            buf: &mut self.bytes[at..],
        };
        write_args(&mut w, more);
        self.count = total as u8;
        Ok(())
    }

    /// How many arguments.
    pub fn count(&self) -> usize {
        usize::from(self.count)
    }

    /// The words they take.
    pub fn words(&self) -> usize {
        self.bytes.len() / 8
    }

    /// The encoded bytes, a whole number of words.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Counts arguments for a 4-bit header field (already checked to be at most 15).
#[inline]
pub(crate) fn count(args: &[RawArg<'_>]) -> u64 {
    (args.len() & 0xF) as u64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_appended_are_encoded_as_if_given_at_once() {
        let a = [
            RawArg::new(StringRef::inline("level"), ArgValue::Int32(3)),
            RawArg::new(
                StringRef::inline("path"),
                ArgValue::String(StringRef::inline("/x")),
            ),
        ];
        let b = [RawArg::new(
            StringRef::inline("parent"),
            ArgValue::UInt64(7),
        )];
        let mut appended = EncodedArgs::encode(&a).unwrap();
        appended.append(&b).unwrap();
        let all: Vec<_> = a.iter().chain(&b).copied().collect();
        assert_eq!(appended, EncodedArgs::encode(&all).unwrap());
        // Past 15 in all: refused, the arguments unchanged.
        let many = vec![b[0]; 14];
        let before = appended.clone();
        assert!(appended.append(&many).is_err());
        assert_eq!(appended, before);
    }
}
