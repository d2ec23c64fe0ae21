//! S-expressions in the shape of magic-trace's `Event.t` and `Symbol.t` dumps (what
//! the decoder's expect tests in `src/perf_decode.ml` and the `-output FILE.sexp` event
//! dump print): atoms quoted as Sexplib does, events printed on one line.

use std::fmt::Write as _;

use crate::event::{Address, Thread};

/// An atom, quoted and escaped (OCaml `String.escaped`) when Sexplib would quote it.
pub(crate) fn atom(s: &str) -> String {
    if !must_quote(s) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    escape_into(&mut out, s);
    out.push('"');
    out
}

/// OCaml's `String.escaped`.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    for &c in s.as_bytes() {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(c as char),
            _ => {
                let _ = write!(out, "\\{c:03}");
            }
        }
    }
}

fn must_quote(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || b.iter().enumerate().any(|(i, &c)| match c {
            b'"' | b'(' | b')' | b';' | b'\\' => true,
            b'|' => i > 0 && b[i - 1] == b'#',
            b'#' => i > 0 && b[i - 1] == b'|',
            0..=32 | 127..=255 => true,
            _ => false,
        })
}

/// `((pid (P)) (tid (T)))`.
pub(crate) fn thread(out: &mut String, t: Thread) {
    out.push_str("((pid ");
    opt(out, t.pid);
    out.push_str(") (tid ");
    opt(out, t.tid);
    out.push_str("))");
}

fn opt(out: &mut String, v: Option<u32>) {
    match v {
        Some(v) => {
            let _ = write!(out, "({v})");
        }
        None => out.push_str("()"),
    }
}

/// `0x1f` / `-0x68dfef00`.
pub(crate) fn hex(out: &mut String, a: Address) {
    let _ = write!(out, "{a}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms() {
        assert_eq!(atom("main"), "main");
        assert_eq!(atom(""), "\"\"");
        assert_eq!(atom("a b"), "\"a b\"");
        assert_eq!(atom("a\"\\\t\x01é"), "\"a\\\"\\\\\\t\\001\\195\\169\"");
        assert_eq!(atom("a#|b"), "\"a#|b\"");
        assert_eq!(atom("a|#b"), "\"a|#b\"");
        assert_eq!(atom("a#b|c"), "a#b|c");
    }
}
