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

/// Per byte of `x`: the high bit set where the byte is zero. Exact for the lowest zero
/// byte (a borrow can only mark bytes above a true zero), which is all callers use.
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGH
}

/// Index of the first byte at or after `i` equal to `c1` or `c2`, or `b.len()`; a word
/// at a time, as perf's columns (e.g. `branch-misses/period=50/u:`) can be long.
#[inline]
pub(crate) fn find_either(b: &[u8], mut i: usize, c1: u8, c2: u8) -> usize {
    let (p1, p2) = (ONES * u64::from(c1), ONES * u64::from(c2));
    while let Some(chunk) = b.get(i..i + 8) {
        let w = word(chunk);
        let m = zero_bytes(w ^ p1) | zero_bytes(w ^ p2);
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i] != c1 && b[i] != c2 {
        i += 1;
    }
    i
}

/// Index of the first whitespace byte (space or tab) at or after `i`, or `b.len()`.
#[inline]
pub(crate) fn token_end(b: &[u8], i: usize) -> usize {
    find_either(b, i, b' ', b'\t')
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
    // Addresses are up to 16 digits; with 16 bytes at hand, two words do it without a
    // loop (whose exit the branch predictor cannot guess).
    if let Some(chunk) = b.get(i..i + 16) {
        let lo = word(&chunk[..8]);
        let n = hex_run(lo);
        if n < 8 {
            return (n > 0).then(|| (hex_value(lo, n), i + n));
        }
        let hi = word(&chunk[8..]);
        let m = hex_run(hi);
        if m < 8 {
            let v = if m == 0 {
                hex_value(lo, 8)
            } else {
                (hex_value(lo, 8) << (4 * m)) | hex_value(hi, m)
            };
            return Some((v, i + 8 + m));
        }
    }
    parse_hex_scalar(b, i)
}

/// The eight bytes of `b` (which must hold exactly eight) as a little-endian word.
#[inline]
pub(crate) fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// How many leading bytes (from the lowest address) of a little-endian word are hex digits.
///
/// Each class is moved onto a small range starting at 0 and tested with one add per
/// byte (an ASCII byte plus at most 0x7f never carries into the next byte): XOR 0x30
/// takes `0`..=`9` to 0..=9, and OR 0x20 then XOR 0x60 takes `a`..=`f` and `A`..=`F`
/// to 1..=6. Bytes of 0x80 and up are never digits.
#[inline]
fn hex_run(w: u64) -> usize {
    let low7 = !HIGH;
    let ascii = !w & HIGH;
    let d = (w ^ (ONES * 0x30)) & low7;
    // High bit of `d + 0x76` clear: d < 10.
    let digit = !(d + ONES * 0x76) & HIGH;
    let l = ((w | (ONES * 0x20)) ^ (ONES * 0x60)) & low7;
    // l >= 1 and not l >= 7.
    let letter = (l + ONES * 0x7f) & !(l + ONES * 0x79) & HIGH;
    let not_hex = !((digit | letter) & ascii) & HIGH;
    (not_hex.trailing_zeros() / 8) as usize
}

/// The value of the first `n` (1..=8) hex digits of a little-endian word.
#[inline]
fn hex_value(w: u64, n: usize) -> u64 {
    // Nibble values, then drop the bytes after the run by shifting the run to the top:
    // the zero bytes below it act as leading zeros.
    let v = (w & 0x0f0f_0f0f_0f0f_0f0f) + ((w >> 6) & ONES) * 9;
    let v = v << (8 * (8 - n));
    let v = ((v << 4) & 0x00f0_00f0_00f0_00f0) | ((v >> 8) & 0x000f_000f_000f_000f);
    let v = ((v << 8) & 0x0000_ff00_0000_ff00) | ((v >> 16) & 0x0000_00ff_0000_00ff);
    ((v << 16) & 0x0000_0000_ffff_0000) | ((v >> 32) & 0x0000_0000_0000_ffff)
}

/// [`parse_hex`] a byte at a time.
#[inline]
fn parse_hex_scalar(b: &[u8], i: usize) -> Option<(u64, usize)> {
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
    let mut v: u64 = 0;
    let mut n = 0;
    // One pass; nineteen digits always fit, so only longer runs pay for checking.
    while let Some(&c) = rest.get(n) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = if n < 19 {
            v * 10 + u64::from(d)
        } else {
            v.checked_mul(10)?.checked_add(u64::from(d))?
        };
        n += 1;
    }
    (n > 0).then_some((v, i + n))
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
    time_after_seconds(b, secs, dot)
}

/// The rest of [`parse_time`] once the seconds `secs` are read and `b[dot]` is the `.`.
#[inline]
pub(crate) fn time_after_seconds(b: &[u8], secs: u64, dot: usize) -> Option<(i64, usize)> {
    let rest = b.get(dot + 1..)?;
    // `--ns` prints exactly nine digits: take eight at once.
    let (mut frac, mut n) = match rest.get(..9) {
        Some(nine) if all_digits(word(&nine[..8])) && nine[8].is_ascii_digit() => {
            let v = eight_digits(word(&nine[..8])) * 10 + u64::from(nine[8] - b'0');
            (v as i64, 9)
        }
        _ => (0, 0),
    };
    while let Some(&c) = rest.get(n).filter(|c| c.is_ascii_digit()) {
        if n < 9 {
            frac = frac * 10 + i64::from(c - b'0');
        }
        n += 1;
    }
    if n == 0 {
        return None;
    }
    for _ in n..9 {
        frac *= 10;
    }
    let ns = i64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac)?;
    Some((ns, dot + 1 + n))
}

/// Whether all eight bytes of a word are ASCII digits.
#[inline]
fn all_digits(w: u64) -> bool {
    // A byte below `0` borrows into its high bit; one above `9` carries into it.
    // (Non-ASCII bytes are caught by their own high bit; carries and borrows only
    // disturb bytes above one already caught.)
    ((w.wrapping_sub(ONES * u64::from(b'0')) | w.wrapping_add(ONES * (0x7f - u64::from(b'9'))) | w)
        & HIGH)
        == 0
}

/// The value of eight ASCII digits loaded little-endian (first digit in the low byte):
/// pairs, then quads, then the whole, combined in parallel lanes.
#[inline]
fn eight_digits(chunk: u64) -> u64 {
    let d = chunk.wrapping_sub(0x3030_3030_3030_3030);
    let d = ((d & 0x0f00_0f00_0f00_0f00) >> 8) + (d & 0x000f_000f_000f_000f) * 10;
    let d = ((d & 0x00ff_0000_00ff_0000) >> 16) + (d & 0x0000_00ff_0000_00ff) * 100;
    ((d & 0x0000_ffff_0000_0000) >> 32) + (d & 0x0000_0000_0000_ffff) * 10000
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
    fn word_at_a_time_hex_agrees() {
        let samples: &[&[u8]] = &[
            b"7ffff7327730 __memmove_avx",
            b"40ac3f itch_bbo::book::Book",
            b"0 [unknown] (foo.so) => x",
            b"ffffffffb0999ed5 code 10: x",
            b"1ffffffffff22f000 (foo.so)  ",
            b"ABCdef0123456789abcdef012 x",
            b"g0123456789abcdefgh0123",
            b"0123456789abcdef\xff0123456",
            b"12\x8034567890123456789",
            b"fffffffffffffffff",
            b"deadbeef:cafebabe12345",
        ];
        for s in samples {
            for i in 0..s.len() {
                assert_eq!(
                    parse_hex(s, i),
                    parse_hex_scalar(s, i),
                    "{:?} at {i}",
                    String::from_utf8_lossy(s)
                );
            }
        }
        // Every byte value at every position of a 16-byte window.
        for pos in 0..16 {
            for c in 0..=255u8 {
                let mut s = *b"0123456789abcdef0123";
                s[pos] = c;
                assert_eq!(parse_hex(&s, 0), parse_hex_scalar(&s, 0), "{c} at {pos}");
            }
        }
    }

    #[test]
    fn token_ends_agree_with_bytes() {
        let s: &[u8] = b"branch-misses/period=50/u:\tab cd\x80\xff x   \t";
        for i in 0..=s.len() + 1 {
            let want = if i >= s.len() {
                i
            } else {
                s[i..]
                    .iter()
                    .position(|&c| c == b' ' || c == b'\t')
                    .map_or(s.len(), |p| i + p)
            };
            assert_eq!(token_end(s, i), want, "at {i}");
        }
    }

    #[test]
    fn word_at_a_time_searches_agree() {
        let s: &[u8] = b"a>b => c\x80>\xff>>  (x) =>  9>\x3e0";
        for from in 0..=s.len() + 1 {
            let want = s[from.min(s.len())..]
                .iter()
                .position(|&c| c == b'>' || c == 0x80)
                .map_or(s.len().max(from), |p| from + p);
            assert_eq!(find_either(s, from, b'>', 0x80), want, "{from}");
        }
        for c in 0..=255u8 {
            for pos in 0..8 {
                let mut w = *b"01234567";
                w[pos] = c;
                assert_eq!(
                    all_digits(u64::from_le_bytes(w)),
                    c.is_ascii_digit(),
                    "{c} at {pos}"
                );
            }
        }
    }

    #[test]
    fn decimal_lengths() {
        assert_eq!(parse_dec(b"0000000000000000000000001x", 0), Some((1, 25)));
        assert_eq!(parse_dec(b"18446744073709551615", 0), Some((u64::MAX, 20)));
        assert_eq!(parse_dec(b"18446744073709551616", 0), None);
        assert_eq!(parse_dec(b"12/34", 3), Some((34, 5)));
        assert_eq!(parse_dec(b"12", 2), None);
        assert_eq!(parse_dec(b"12", 3), None);
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
        assert_eq!(parse_time(b"0.123456789", 0), Some((123456789, 11)));
        assert_eq!(parse_time(b"7.000000001x", 0), Some((7000000001, 11)));
        assert_eq!(parse_time(b"7.9876543210", 0), Some((7987654321, 12)));
        assert_eq!(eight_digits(u64::from_le_bytes(*b"12345678")), 12345678);
        assert_eq!(eight_digits(u64::from_le_bytes(*b"99999999")), 99999999);
    }
}
