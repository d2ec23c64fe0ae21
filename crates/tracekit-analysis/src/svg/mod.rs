//! Self-contained SVG output: an interactive flame graph ([`flame_graph`]) and a plot of
//! the live heap and allocation rate over time ([`timeline_plot`]). Both render into a
//! `String`; writing the file is the caller's business.

mod flame;
mod plot;

pub use flame::{FlameGraphOptions, flame_graph};
pub use plot::{PlotOptions, timeline_plot};

use std::fmt::Write;

/// Escapes text for SVG character data and attribute values.
pub(crate) fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // XML 1.0 forbids most control characters even as references.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// `escape` into a new string.
pub(crate) fn escaped(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    escape(&mut s, text);
    s
}

/// Bytes with a binary prefix and three significant digits: `512 B`, `1.50 KiB`,
/// `12.3 MiB`, `256 GiB`.
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let mut s = String::new();
    if u == 0 {
        let _ = write!(s, "{} B", v.round() as i64);
    } else if v.abs() >= 100.0 {
        let _ = write!(s, "{v:.0} {}", UNITS[u]);
    } else if v.abs() >= 10.0 {
        let _ = write!(s, "{v:.1} {}", UNITS[u]);
    } else {
        let _ = write!(s, "{v:.2} {}", UNITS[u]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human() {
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(1023.0), "1023 B");
        assert_eq!(human_bytes(1536.0), "1.50 KiB");
        assert_eq!(human_bytes(12.34 * 1024.0 * 1024.0), "12.3 MiB");
        assert_eq!(human_bytes(300.0 * 1024.0 * 1024.0 * 1024.0), "300 GiB");
    }

    #[test]
    fn escapes() {
        assert_eq!(
            escaped("a<b>&\"'\u{1}"),
            "a&lt;b&gt;&amp;&quot;&#39;\u{fffd}"
        );
    }
}
