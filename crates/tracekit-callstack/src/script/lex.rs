//! Byte-level scanning shared by the `perf script` line parsers: skipping padding,
//! hexadecimal and decimal numbers. perf pads its columns with long runs of spaces, so
//! space skipping works a word at a time.

/// Eight spaces, for comparing a whole word at a time.
const SPACES: u64 = u64::from_le_bytes([b' '; 8]);

/// Index of the first byte at or after `i` that is not a space (U+0020).
#[inline]
pub(crate) fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let diff = u64::from_le_bytes(word) ^ SPACES;
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    i
}

/// Index of the first whitespace byte (space or tab) at or after `i`, or `b.len()`.
#[inline]
pub(crate) fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b' ' && b[i] != b'\t' {
        i += 1;
    }
    i
}

/// Value of one hexadecimal digit.
#[inline]
pub(crate) fn hex_digit(c: u8) -> Option<u64> {
    match c {
        b'0'..=b'9' => Some(u64::from(c - b'0')),
        b'a'..=b'f' => Some(u64::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(c - b'A' + 10)),
        _ => None,
    }
}

/// Parses hexadecimal digits starting at `i`; returns the value (the low 64 bits if
/// there are more than 16 digits, as perf sometimes prints garbage offsets) and the
/// index after the last digit. `None` if there is no digit.
#[inline]
pub(crate) fn parse_hex(b: &[u8], mut i: usize) -> Option<(u64, usize)> {
    let start = i;
    let mut v: u64 = 0;
    while let Some(d) = b.get(i).copied().and_then(hex_digit) {
        v = (v << 4) | d;
        i += 1;
    }
    (i > start).then_some((v, i))
}

/// Parses decimal digits starting at `i`; `None` if there is no digit or the value
/// overflows `u64`.
#[inline]
pub(crate) fn parse_dec(b: &[u8], mut i: usize) -> Option<(u64, usize)> {
    let start = i;
    let mut v: u64 = 0;
    while let Some(&c) = b.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        i += 1;
    }
    (i > start).then_some((v, i))
}

/// Parses a possibly negative decimal number (perf prints `-1` for unknown pids and cpus
/// in error records).
pub(crate) fn parse_signed_dec(b: &[u8], i: usize) -> Option<(i64, usize)> {
    if b.get(i) == Some(&b'-') {
        let (v, end) = parse_dec(b, i + 1)?;
        Some((-(i64::try_from(v).ok()?), end))
    } else {
        let (v, end) = parse_dec(b, i)?;
        Some((i64::try_from(v).ok()?, end))
    }
}

/// Parses perf's `SECONDS.FRACTION` timestamp at `i` into nanoseconds. The fraction is
/// padded or truncated to nine digits (perf prints six without `--ns`).
pub(crate) fn parse_time(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let (secs, dot) = parse_dec(b, i)?;
    if b.get(dot) != Some(&b'.') {
        return None;
    }
    let mut j = dot + 1;
    let mut frac: i64 = 0;
    let mut digits = 0;
    while let Some(&c) = b.get(j) {
        if !c.is_ascii_digit() {
            break;
        }
        if digits < 9 {
            frac = frac * 10 + i64::from(c - b'0');
            digits += 1;
        }
        j += 1;
    }
    if j == dot + 1 {
        return None;
    }
    for _ in digits..9 {
        frac *= 10;
    }
    let ns = i64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac)?;
    Some((ns, j))
}

/// True when `s` is a non-empty run of hexadecimal digits.
#[inline]
pub(crate) fn is_hex_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&c| hex_digit(c).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_spaces_across_words() {
        let s = b"                   x";
        assert_eq!(skip_spaces(s, 0), 19);
        assert_eq!(skip_spaces(s, 19), 19);
        assert_eq!(skip_spaces(b"   ", 0), 3);
        assert_eq!(skip_spaces(b"", 0), 0);
        assert_eq!(skip_spaces(b"ab", 5), 5);
    }

    #[test]
    fn parses_numbers() {
        assert_eq!(parse_hex(b"7ffd19 x", 0), Some((0x7ffd19, 6)));
        assert_eq!(parse_hex(b"x", 0), None);
        assert_eq!(
            parse_hex(b"1ffffffffff22f000", 0),
            Some((0xffffffffff22f000, 17))
        );
        assert_eq!(parse_dec(b"99999999999999999999999", 0), None);
        assert_eq!(parse_signed_dec(b"-1 ", 0), Some((-1, 2)));
        assert_eq!(
            parse_time(b"47170.086912826:", 0),
            Some((47170086912826, 15))
        );
        assert_eq!(parse_time(b"362.251657:", 0), Some((362251657000, 10)));
        assert_eq!(parse_time(b"1.1234567891234", 0), Some((1123456789, 15)));
        assert_eq!(parse_time(b"1.", 0), None);
        assert_eq!(parse_time(b"99999999999999999.1", 0), None);
    }
}
