//! Text inside SVG: character data and attribute values escaped, as both
//! renderers write names and numbers into their documents.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            escaped("a<b>&\"'\u{1}"),
            "a&lt;b&gt;&amp;&quot;&#39;\u{fffd}"
        );
    }
}
