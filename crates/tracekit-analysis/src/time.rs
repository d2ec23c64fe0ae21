//! Times on the command line: durations from the trace start such as `12.5s`,
//! `300ms`, `1500us` or `2m`, and their display.
//!
//! Memtrace timestamps are whole microseconds (section 2.2 of the format notes), so
//! every time here is a [`Timedelta`] from `info.start_time`, which displays as the
//! parser reads it (`12.5s`).

use tracekit_memtrace::Timedelta;

/// Why a time argument was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeParseError {
    /// The text was empty.
    #[error("empty time")]
    Empty,
    /// The number part is not a non-negative decimal number.
    #[error("not a number (expected e.g. 12.5s, 300ms, 1500us)")]
    BadNumber,
    /// The unit is not one of `us`, `ms`, `s`, `m`, `h`.
    #[error("unknown unit (use us, ms, s, m or h)")]
    BadUnit,
    /// The value does not fit in 63-bit microseconds (about 292 000 years) or is
    /// negative.
    #[error("time out of range")]
    OutOfRange,
}

/// Parses a time offset from the trace start.
///
/// Accepts a non-negative decimal number followed by an optional unit: `us` (or `µs`),
/// `ms`, `s`, `m` (or `min`), `h`. A bare number means seconds. The result is rounded to
/// the nearest microsecond. Decimal arithmetic is exact: `0.1s` is 100000 µs.
pub fn parse_time(text: &str) -> Result<Timedelta, TimeParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(TimeParseError::Empty);
    }
    if text.starts_with('-') {
        return Err(TimeParseError::OutOfRange);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale_us: u128 = match unit.trim() {
        "" | "s" | "sec" => 1_000_000,
        "ms" => 1_000,
        "us" | "µs" => 1,
        "m" | "min" => 60_000_000,
        "h" => 3_600_000_000,
        _ => return Err(TimeParseError::BadUnit),
    };
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(TimeParseError::BadNumber);
    }
    // Fixed point with 12 fractional digits keeps every supported unit exact.
    const FRAC_DIGITS: usize = 12;
    let int_value: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| TimeParseError::OutOfRange)?
    };
    let mut frac_value: u128 = 0;
    for (i, b) in frac_part.bytes().enumerate() {
        if i >= FRAC_DIGITS {
            break;
        }
        frac_value = frac_value * 10 + u128::from(b - b'0');
    }
    for _ in frac_part.len()..FRAC_DIGITS {
        frac_value *= 10;
    }
    let one = 10u128.pow(FRAC_DIGITS as u32);
    let fixed = int_value
        .checked_mul(one)
        .and_then(|v| v.checked_add(frac_value))
        .and_then(|v| v.checked_mul(scale_us))
        .ok_or(TimeParseError::OutOfRange)?;
    let us = (fixed + one / 2) / one;
    i64::try_from(us)
        .map(Timedelta::from_micros)
        .map_err(|_| TimeParseError::OutOfRange)
}

/// [`parse_time`] in nanoseconds, for timelines whose clocks count them.
pub fn parse_time_ns(text: &str) -> Result<u64, TimeParseError> {
    let t = parse_time(text)?;
    u64::try_from(t.as_micros())
        .ok()
        .and_then(|us| us.checked_mul(1_000))
        .ok_or(TimeParseError::OutOfRange)
}

/// [`parse_time`] as a command-line value parser (`12.5s`, `300ms`, a bare
/// number of seconds).
#[cfg(feature = "clap")]
pub(crate) fn time_arg(s: &str) -> Result<Timedelta, String> {
    parse_time(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(t: i64) -> Timedelta {
        Timedelta::from_micros(t)
    }

    #[test]
    fn units() {
        assert_eq!(parse_time("12.5s"), Ok(us(12_500_000)));
        assert_eq!(parse_time("300ms"), Ok(us(300_000)));
        assert_eq!(parse_time("1500us"), Ok(us(1500)));
        assert_eq!(parse_time("1500µs"), Ok(us(1500)));
        assert_eq!(parse_time("2m"), Ok(us(120_000_000)));
        assert_eq!(parse_time("1h"), Ok(us(3_600_000_000)));
        assert_eq!(parse_time("3"), Ok(us(3_000_000)));
        assert_eq!(parse_time(" 0.1s "), Ok(us(100_000)));
        assert_eq!(parse_time(".5s"), Ok(us(500_000)));
        assert_eq!(parse_time("7."), Ok(us(7_000_000)));
        assert_eq!(parse_time("0.0000004s"), Ok(us(0)));
        assert_eq!(parse_time("0.0000005s"), Ok(us(1)));
        assert_eq!(parse_time("1.23456789ms"), Ok(us(1235)));
    }

    #[test]
    fn rejects() {
        assert_eq!(parse_time(""), Err(TimeParseError::Empty));
        assert_eq!(parse_time("s"), Err(TimeParseError::BadNumber));
        assert_eq!(parse_time("-1s"), Err(TimeParseError::OutOfRange));
        assert_eq!(parse_time("1.2.3s"), Err(TimeParseError::BadNumber));
        assert_eq!(parse_time("12 parsecs"), Err(TimeParseError::BadUnit));
        assert_eq!(parse_time("1e3s"), Err(TimeParseError::BadUnit));
        assert_eq!(
            parse_time("99999999999999999999999h"),
            Err(TimeParseError::OutOfRange)
        );
        assert_eq!(
            parse_time("99999999999999s"),
            Err(TimeParseError::OutOfRange)
        );
        // A Timedelta holds up to i64::MAX microseconds.
        assert_eq!(
            parse_time("9223372036854s"),
            Ok(us(9_223_372_036_854_000_000))
        );
        assert_eq!(
            parse_time("9223372036855s"),
            Err(TimeParseError::OutOfRange)
        );
    }

    proptest::proptest! {
        #[test]
        fn display_round_trips(t in 0i64..i64::MAX) {
            // The codec's Display of a Timedelta is what the parser reads.
            proptest::prop_assert_eq!(parse_time(&us(t).to_string()), Ok(us(t)));
        }
    }
}
