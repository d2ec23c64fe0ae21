//! Sizes on the command line (`--min-size 4096`, `64k`, `1.5MiB`) and in reports
//! (`1.5 MiB`). Nothing here depends on the rest of the crate, so that filters,
//! queries and renderers all read and write sizes through it.

/// Bytes with a binary prefix and three significant digits (the one definition,
/// in the trace crate, so that every report says sizes alike).
pub use tracekit_memtrace::dump::human_bytes;

/// Why a size argument was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeParseError {
    /// Not a non-negative decimal number with an optional unit.
    #[error("not a size (expected e.g. 4096, 64k, 1.5MiB)")]
    Bad,
    /// Larger than 2^64 bytes.
    #[error("size out of range")]
    OutOfRange,
}

/// Parses a byte size: a non-negative decimal number and an optional unit, `B`, `k`/`KiB`,
/// `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (binary multiples; `KB`, `MB`... are accepted as the
/// same binary units, as most memory tools print them). Case-insensitive.
pub fn parse_bytes(text: &str) -> Result<u64, SizeParseError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(SizeParseError::Bad),
    };
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(SizeParseError::Bad);
    }
    let value: f64 = number.parse().map_err(|_| SizeParseError::Bad)?;
    let bytes = (value * (1u64 << shift) as f64).round();
    if !(0.0..18_446_744_073_709_551_616.0).contains(&bytes) {
        return Err(SizeParseError::OutOfRange);
    }
    Ok(bytes as u64)
}

/// [`parse_bytes`] as a command-line value parser (`4096`, `64k`, `1MiB`).
#[cfg(feature = "clap")]
pub(crate) fn size_arg(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64k"), Ok(65536));
        assert_eq!(parse_bytes("1.5MiB"), Ok(1_572_864));
        assert_eq!(parse_bytes("2 GB"), Ok(2 << 30));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("12x"), Err(SizeParseError::Bad));
        assert_eq!(parse_bytes("-1"), Err(SizeParseError::Bad));
        assert_eq!(parse_bytes(""), Err(SizeParseError::Bad));
        assert_eq!(parse_bytes("1.2.3k"), Err(SizeParseError::Bad));
        assert_eq!(parse_bytes("99999999999T"), Err(SizeParseError::OutOfRange));
    }
}
