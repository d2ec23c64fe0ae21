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

/// Digit values of hexadecimal characters; 0xff for anything else.
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Value of one hexadecimal digit.
#[inline]
pub(crate) fn hex_digit(c: u8) -> Option<u64> {
    let d = HEX[c as usize];
    (d != 0xff).then_some(u64::from(d))
}

/// Parses hexadecimal digits starting at `i`; returns the value (the low 64 bits if
/// there are more than 16 digits, as perf sometimes prints garbage offsets) and the
/// index after the last digit. `None` if there is no digit.
#[inline]
pub(crate) fn parse_hex(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let rest = b.get(i..)?;
    let mut v: u64 = 0;
    let mut n = 0;
    for &c in rest {
        let d = HEX[c as usize];
        if d == 0xff {
            break;
        }
        v = (v << 4) | u64::from(d);
        n += 1;
    }
    (n > 0).then_some((v, i + n))
}

/// Parses decimal digits starting at `i`; `None` if there is no digit or the value
/// overflows `u64`.
#[inline]
pub(crate) fn parse_dec(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let rest = b.get(i..)?;
    let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let digits = &rest[..n];
    // Nineteen digits always fit; only longer runs need checking.
    let v = if n <= 19 {
        digits
            .iter()
            .fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'))
    } else {
        digits.iter().try_fold(0u64, |v, &c| {
            v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        })?
    };
    Some((v, i + n))
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
    let rest = b.get(dot + 1..)?;
    let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let mut frac = rest[..n.min(9)]
        .iter()
        .fold(0i64, |v, &c| v * 10 + i64::from(c - b'0'));
    for _ in n..9 {
        frac *= 10;
    }
    let ns = i64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac)?;
    Some((ns, dot + 1 + n))
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
