//! Printing nanosecond spans the way Core's `Time_ns.Span` does, for transcripts
//! (`to_string_hum`: `19ns`, `2.253us`, `132.297ms`) and S-expression dumps
//! (`to_string`: `52d4h33m11.343298468s`), as magic-trace's expect tests print them.

use std::fmt::Write as _;

const UNITS: [(i64, &str); 6] = [
    (86_400_000_000_000, "d"),
    (3_600_000_000_000, "h"),
    (60_000_000_000, "m"),
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "us"),
];

/// `Time_ns.Span.to_string_hum` with default arguments: the largest unit not above the
/// value, three decimals with trailing zeros removed, `_` between thousands.
pub fn to_string_hum(ns: i64) -> String {
    let mut out = String::new();
    write_hum(&mut out, ns);
    out
}

/// [`to_string_hum`] into a buffer.
pub(crate) fn write_hum(out: &mut String, ns: i64) {
    let abs = ns.unsigned_abs();
    let (unit, suffix) = UNITS
        .iter()
        .copied()
        .find(|&(u, _)| abs >= u as u64)
        .unwrap_or((1, "ns"));
    if unit == 1 {
        // Integers print exactly; no need for the float path.
        push_grouped(out, &ns.to_string());
        out.push_str(suffix);
        return;
    }
    let x = ns as f64 / unit as f64;
    let s = format!("{x:.3}");
    let (int_part, frac) = s.split_once('.').unwrap_or((&s, ""));
    push_grouped(out, int_part);
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out.push_str(suffix);
}

/// Writes an integer's text with `_` between groups of three digits.
fn push_grouped(out: &mut String, digits: &str) {
    let (sign, digits) = match digits.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", digits),
    };
    out.push_str(sign);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('_');
        }
        out.push(c);
    }
}

/// `Time_ns.Span.to_string`: exact, e.g. `0s`, `19ns`, `155.368us`, `8d19h30m39.05333667s`.
pub(crate) fn to_string(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    if ns < 0 {
        out.push('-');
    }
    let a = ns.unsigned_abs();
    let secs = a / 1_000_000_000;
    let f = a % 1_000_000_000;
    let (d, h, m, s) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    if d > 0 {
        let _ = write!(out, "{d}d");
    }
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if m > 0 {
        let _ = write!(out, "{m}m");
    }
    let frac9 = |out: &mut String, v: u64| {
        if v != 0 {
            let digits = format!("{v:09}");
            out.push('.');
            out.push_str(digits.trim_end_matches('0'));
        }
    };
    if s > 0 {
        let _ = write!(out, "{s}");
        frac9(&mut out, f);
        out.push('s');
    } else if f >= 1_000_000 {
        let _ = write!(out, "{}", f / 1_000_000);
        frac9(&mut out, (f % 1_000_000) * 1000);
        out.push_str("ms");
    } else if f >= 1000 {
        let _ = write!(out, "{}", f / 1000);
        frac9(&mut out, (f % 1000) * 1_000_000);
        out.push_str("us");
    } else if f >= 1 {
        let _ = write!(out, "{f}ns");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hum() {
        assert_eq!(to_string_hum(0), "0ns");
        assert_eq!(to_string_hum(19), "19ns");
        assert_eq!(to_string_hum(1000), "1us");
        assert_eq!(to_string_hum(2253), "2.253us");
        assert_eq!(to_string_hum(70970), "70.97us");
        assert_eq!(to_string_hum(132_297_000), "132.297ms");
        assert_eq!(to_string_hum(999_999_500), "1_000ms");
        assert_eq!(to_string_hum(-1500), "-1.5us");
        assert_eq!(to_string_hum(1_000 * 86_400_000_000_000), "1_000d");
        assert_eq!(to_string_hum(1_062_500), "1.062ms");
        assert_eq!(to_string_hum(i64::MIN), "-106_751.991d");
    }

    #[test]
    fn exact() {
        assert_eq!(to_string(0), "0s");
        assert_eq!(to_string(4_509_191_343_298_468), "52d4h33m11.343298468s");
        assert_eq!(to_string(761_439_053_336_670), "8d19h30m39.05333667s");
        assert_eq!(to_string(155_368), "155.368us");
        assert_eq!(to_string(2_253), "2.253us");
        assert_eq!(to_string(5), "5ns");
        assert_eq!(to_string(60_000_000_000), "1m");
        assert_eq!(to_string(-1_000_000), "-1ms");
        assert_eq!(to_string(i64::MIN), "-106751d23h47m16.854775808s");
    }
}
