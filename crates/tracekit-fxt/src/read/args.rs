//! Argument decoding, the mirror of [`crate::write::args`], whose docs give the
//! layout. The whole format: `docs/fxt-format.md` at the repository root, §3
//! "Arguments". An argument of size 0 ([`Problem::ArgSizeZero`]) or reaching past its
//! record ([`Problem::ArgOutOfRecord`]) makes the record unusable; one with unused
//! words at its end ([`Problem::ArgPadding`]) is noted and read anyway, the next
//! argument starting where its size says.
//!
//! Arguments are validated once when their record is read; iterating [`RawArgs`] or
//! [`Args`] afterwards cannot fail. Unknown argument types are skipped by their size
//! (lenient) or rejected (strict).

use super::Problem;
use super::cursor::Cursor;
use super::records::Str;
use super::tables::StringTable;
use crate::format::{Arg, ArgType, ArgValue, Koid, RawArg, bits};

/// One decoded argument slot: `arg` is `None` for an unknown type.
pub(crate) struct Decoded<'a> {
    pub(crate) arg: Option<RawArg<'a>>,
    /// Words the argument's size field declares.
    pub(crate) words: usize,
    /// Words its content used (less than `words` means padding words at its end).
    pub(crate) used: usize,
}

/// Decodes the argument at the start of `bytes`.
#[inline]
pub(crate) fn decode_arg(bytes: &[u8]) -> Result<Decoded<'_>, Problem> {
    let word = match bytes.first_chunk::<8>() {
        Some(h) => u64::from_le_bytes(*h),
        None => return Err(Problem::ArgOutOfRecord),
    };
    let words = bits(word, 4, 15) as usize;
    if words == 0 {
        return Err(Problem::ArgSizeZero);
    }
    let Some(arg_bytes) = bytes.get(..words * 8) else {
        return Err(Problem::ArgOutOfRecord);
    };
    decode_body(word, words, arg_bytes).ok_or(Problem::ArgOutOfRecord)
}

#[inline(always)]
fn decode_body(word: u64, words: usize, arg_bytes: &[u8]) -> Option<Decoded<'_>> {
    let mut c = Cursor::new(arg_bytes);
    c.skip(8)?;
    let name = c.string_ref(bits(word, 16, 31) as u16)?;
    let code = bits(word, 0, 3) as u8;
    let Some(arg_type) = ArgType::from_code(code) else {
        return Some(Decoded {
            arg: None,
            words,
            used: words,
        });
    };
    let high = bits(word, 32, 63);
    let value = match arg_type {
        ArgType::Null => ArgValue::Null,
        ArgType::Int32 => ArgValue::Int32(high as u32 as i32),
        ArgType::UInt32 => ArgValue::UInt32(high as u32),
        ArgType::Int64 => ArgValue::Int64(c.word()? as i64),
        ArgType::UInt64 => ArgValue::UInt64(c.word()?),
        ArgType::Double => ArgValue::Double(f64::from_bits(c.word()?)),
        ArgType::String => ArgValue::String(c.string_ref(bits(word, 32, 47) as u16)?),
        ArgType::Pointer => ArgValue::Pointer(c.word()?),
        ArgType::Koid => ArgValue::Koid(Koid(c.word()?)),
        ArgType::Bool => ArgValue::Bool(bits(word, 32, 32) != 0),
        ArgType::Blob => ArgValue::Blob(c.stream(usize::try_from(high).ok()?)?),
    };
    Some(Decoded {
        arg: Some(Arg { name, value }),
        words,
        used: words - c.remaining() / 8,
    })
}

/// The arguments of a record, as written.
#[derive(Clone, Copy, Default)]
pub struct RawArgs<'a> {
    bytes: &'a [u8],
    count: u8,
}

impl<'a> RawArgs<'a> {
    pub(crate) fn new(bytes: &'a [u8], count: u8) -> Self {
        Self { bytes, count }
    }

    /// The encoded arguments.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Iterates the arguments of known types.
    pub fn iter(&self) -> RawArgsIter<'a> {
        RawArgsIter {
            bytes: self.bytes,
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for RawArgs<'a> {
    type Item = RawArg<'a>;
    type IntoIter = RawArgsIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl core::fmt::Debug for RawArgs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for RawArgs<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

/// Iterator over [`RawArgs`].
#[derive(Clone)]
pub struct RawArgsIter<'a> {
    bytes: &'a [u8],
    left: u8,
}

impl<'a> Iterator for RawArgsIter<'a> {
    type Item = RawArg<'a>;

    #[inline]
    fn next(&mut self) -> Option<RawArg<'a>> {
        while self.left > 0 {
            self.left -= 1;
            let Ok(d) = decode_arg(self.bytes) else {
                self.left = 0;
                return None;
            };
            self.bytes = self.bytes.get(d.words * 8..).unwrap_or_default();
            if let Some(arg) = d.arg {
                return Some(arg);
            }
        }
        None
    }
}

/// The arguments of a record, with string refs resolved.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    raw: RawArgs<'a>,
    strings: &'a StringTable,
}

impl<'a> Args<'a> {
    pub(crate) fn new(raw: RawArgs<'a>, strings: &'a StringTable) -> Self {
        Self { raw, strings }
    }

    /// The arguments as written.
    pub fn raw(&self) -> RawArgs<'a> {
        self.raw
    }

    /// Iterates the arguments of known types.
    pub fn iter(&self) -> ArgsIter<'a> {
        ArgsIter {
            raw: self.raw.iter(),
            strings: self.strings,
        }
    }

    /// The first argument called `name`.
    pub fn get(&self, name: &str) -> Option<ArgValue<'a, Str<'a>>> {
        self.iter().find(|a| a.name == name).map(|a| a.value)
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.raw.count == 0
    }
}

impl<'a> IntoIterator for Args<'a> {
    type Item = Arg<'a, Str<'a>>;
    type IntoIter = ArgsIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl core::fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Args<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

/// Iterator over [`Args`].
#[derive(Clone)]
pub struct ArgsIter<'a> {
    raw: RawArgsIter<'a>,
    strings: &'a StringTable,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = Arg<'a, Str<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let arg = self.raw.next()?;
        let name = self.strings.resolve(arg.name);
        let value = match arg.value {
            ArgValue::Null => ArgValue::Null,
            ArgValue::Int32(v) => ArgValue::Int32(v),
            ArgValue::UInt32(v) => ArgValue::UInt32(v),
            ArgValue::Int64(v) => ArgValue::Int64(v),
            ArgValue::UInt64(v) => ArgValue::UInt64(v),
            ArgValue::Double(v) => ArgValue::Double(v),
            ArgValue::String(s) => ArgValue::String(self.strings.resolve(s)),
            ArgValue::Pointer(v) => ArgValue::Pointer(v),
            ArgValue::Koid(v) => ArgValue::Koid(v),
            ArgValue::Bool(v) => ArgValue::Bool(v),
            ArgValue::Blob(b) => ArgValue::Blob(b),
        };
        Some(Arg { name, value })
    }
}

/// Validates `count` arguments at the start of `c` and returns them with the cursor
/// moved past them. Problems go to `note`; `None` means the record is unusable (after
/// a note).
#[inline]
pub(crate) fn read_args<'a>(
    c: &mut Cursor<'a>,
    count: u8,
    note: &mut impl FnMut(Problem),
) -> Option<RawArgs<'a>> {
    let start = c.rest();
    let mut offset = 0usize;
    for _ in 0..count {
        let bytes = start.get(offset..).unwrap_or_default();
        let d = match decode_arg(bytes) {
            Ok(d) => d,
            Err(p) => {
                note(p);
                return None;
            }
        };
        match d.arg {
            None => note(Problem::UnknownArgType(
                bytes.first().map_or(0, |b| b & 0xF),
            )),
            Some(_) if d.used < d.words => note(Problem::ArgPadding {
                declared: d.words as u16,
                used: d.used as u16,
            }),
            Some(_) => {}
        }
        offset += d.words * 8;
    }
    let (Some(bytes), Some(())) = (start.get(..offset), c.skip(offset)) else {
        note(Problem::ArgOutOfRecord);
        return None;
    };
    Some(RawArgs::new(bytes, count))
}

/// Calls `f` with every string ref (names and string values) of validated arguments,
/// reading only their header words.
#[inline]
pub(crate) fn walk_refs(args: RawArgs<'_>, f: &mut impl FnMut(u16)) {
    let mut bytes = args.bytes;
    for _ in 0..args.count {
        let Some(head) = bytes.first_chunk::<8>() else {
            return;
        };
        let word = u64::from_le_bytes(*head);
        f(bits(word, 16, 31) as u16);
        if bits(word, 0, 3) == ArgType::String as u64 {
            f(bits(word, 32, 47) as u16);
        }
        let words = (bits(word, 4, 15) as usize).max(1);
        bytes = bytes.get(words * 8..).unwrap_or_default();
    }
}
