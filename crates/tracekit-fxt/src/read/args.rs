//! Argument decoding (spec §1.15), the mirror of [`crate::write::args`].
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
pub(crate) fn decode_arg(bytes: &[u8]) -> Result<Decoded<'_>, Problem> {
    let mut head = Cursor::new(bytes);
    let word = head.word().map_err(|_| Problem::ArgOutOfRecord)?;
    let words = bits(word, 4, 15) as usize;
    if words == 0 {
        return Err(Problem::ArgSizeZero);
    }
    let arg_bytes = bytes.get(..words * 8).ok_or(Problem::ArgOutOfRecord)?;
    let mut c = Cursor::new(arg_bytes);
    c.word().map_err(|_| Problem::ArgOutOfRecord)?;
    let out = |_| Problem::ArgOutOfRecord;
    let name = c.string_ref(bits(word, 16, 31) as u16).map_err(out)?;
    let code = bits(word, 0, 3) as u8;
    let Some(arg_type) = ArgType::from_code(code) else {
        return Ok(Decoded {
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
        ArgType::Int64 => ArgValue::Int64(c.word().map_err(out)? as i64),
        ArgType::UInt64 => ArgValue::UInt64(c.word().map_err(out)?),
        ArgType::Double => ArgValue::Double(f64::from_bits(c.word().map_err(out)?)),
        ArgType::String => ArgValue::String(c.string_ref(bits(word, 32, 47) as u16).map_err(out)?),
        ArgType::Pointer => ArgValue::Pointer(c.word().map_err(out)?),
        ArgType::Koid => ArgValue::Koid(Koid(c.word().map_err(out)?)),
        ArgType::Bool => ArgValue::Bool(bits(word, 32, 32) != 0),
        ArgType::Blob => ArgValue::Blob(c.stream(high as usize).map_err(out)?),
    };
    Ok(Decoded {
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

    /// The number of argument slots, including any of unknown type.
    pub fn slot_count(&self) -> usize {
        self.count.into()
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

/// Validates `count` arguments at the start of `c`, reporting non-fatal problems, and
/// returns them with the cursor moved past them.
pub(crate) fn read_args<'a>(
    c: &mut Cursor<'a>,
    count: u8,
    note: &mut dyn FnMut(Problem) -> Result<(), Problem>,
) -> Result<RawArgs<'a>, Problem> {
    let start = c.rest();
    let mut offset = 0usize;
    for _ in 0..count {
        let bytes = start.get(offset..).unwrap_or_default();
        let d = decode_arg(bytes)?;
        match d.arg {
            None => note(Problem::UnknownArgType(bits(
                u64::from_le_bytes(bytes.first_chunk::<8>().copied().unwrap_or_default()),
                0,
                3,
            ) as u8))?,
            Some(_) => {
                if d.used < d.words {
                    note(Problem::ArgPadding {
                        declared: d.words as u16,
                        used: d.used as u16,
                    })?;
                }
            }
        }
        offset += d.words * 8;
    }
    let bytes = start.get(..offset).unwrap_or_default();
    c.skip(offset).map_err(|_| Problem::ArgOutOfRecord)?;
    Ok(RawArgs::new(bytes, count))
}
