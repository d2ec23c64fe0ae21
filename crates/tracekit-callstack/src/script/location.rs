//! Code locations: `SYMBOL+0xOFFSET (DSO)`, `[unknown] (DSO)`, `SYMBOL (inlined)`.
//!
//! perf prints a location as the symbol, its offset and the DSO in parentheses. Symbol
//! names may contain spaces, `+`, `=>` and parentheses (C++ templates, OCaml operators),
//! DSO paths may contain spaces and parentheses (`(/x (deleted))`), so the symbol is
//! everything before the **last** `+0xHEX` that is followed by white space and a
//! parenthesised DSO running to the end of the text (magic-trace's greedy regex
//! `^(.*)\+(0x[0-9a-f]+)\s+\(.*\)$`).

use super::lex::hex_digit;
use crate::event::{Address, Location, Symbol};

/// Where the parsers get locations from: parsed afresh ([`Uncached`]) or remembered by
/// address ([`LocationCache`]); both give equal locations.
pub(crate) trait Locations<'a> {
    /// The location of `ip`, whose text (after the address) is `text`.
    fn location(&mut self, ip: Address, text: &'a str) -> Location<'a>;

    /// A shortcut for a branch body: the source and destination locations when the
    /// same source address was last followed by the same text (`rest` from
    /// `src_text_start`); `None` to take the general path.
    fn branch_locations(
        &mut self,
        _rest: &'a str,
        _src_ip: Address,
        _src_text_start: usize,
    ) -> Option<(Location<'a>, Location<'a>)> {
        None
    }

    /// Notes the result of the general path for [`branch_locations`](Self::branch_locations).
    fn remember_branch(
        &mut self,
        _rest: &'a str,
        _src_text_start: usize,
        _src: Location<'a>,
        _dst: Location<'a>,
    ) {
    }
}

/// Parses every location.
pub(crate) struct Uncached;

impl<'a> Locations<'a> for Uncached {
    #[inline]
    fn location(&mut self, ip: Address, text: &'a str) -> Location<'a> {
        parse_location(ip, text)
    }
}

/// Slots of a [`LocationCache`] (a power of two).
const CACHE_SLOTS: usize = 1024;

/// The last location parsed per address (direct-mapped by a hash of the address).
/// Intel PT traces come back to the same branch addresses constantly, and perf prints
/// the same text for an address every time, so comparing the text with the one seen
/// before is much cheaper than searching it for the symbol's end again. A hit needs the
/// same address **and** the same text, so the result is always what
/// [`parse_location`] gives for this text (its symbol borrowed from the earlier,
/// identical text). Branch bodies are also remembered whole, by source address (see
/// `branch_locations`).
pub(crate) struct LocationCache<'a> {
    /// By address: the text and its location.
    slots: Box<[Option<(&'a str, Location<'a>)>]>,
    /// By source address: a branch body's text after the source address and the two
    /// locations read from it.
    pairs: Box<[Option<BranchPair<'a>>]>,
}

/// A branch body's text after the source address, and its source and destination.
type BranchPair<'a> = (&'a str, Location<'a>, Location<'a>);

/// Fibonacci hashing: the high bits of the product mix all address bits.
#[inline]
fn slot_of(ip: Address) -> usize {
    (ip.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
}

impl Default for LocationCache<'_> {
    fn default() -> Self {
        LocationCache {
            slots: vec![None; CACHE_SLOTS].into_boxed_slice(),
            pairs: vec![None; CACHE_SLOTS].into_boxed_slice(),
        }
    }
}

impl<'a> Locations<'a> for LocationCache<'a> {
    #[inline]
    fn location(&mut self, ip: Address, text: &'a str) -> Location<'a> {
        let slot = &mut self.slots[slot_of(ip)];
        if let Some((seen, loc)) = slot
            && loc.ip == ip
            && *seen == text
        {
            return *loc;
        }
        let loc = parse_location(ip, text);
        *slot = Some((text, loc));
        loc
    }

    #[inline]
    fn branch_locations(
        &mut self,
        rest: &'a str,
        src_ip: Address,
        src_text_start: usize,
    ) -> Option<(Location<'a>, Location<'a>)> {
        // The split of a branch body and both locations depend only on the source
        // address and the text after it, so the same address followed by the same text
        // gives the same pair. (Branches from one address mostly go to one place.)
        let tail = rest.get(src_text_start..)?;
        let (seen, src, dst) = self.pairs[slot_of(src_ip)]?;
        (src.ip == src_ip && seen == tail).then_some((src, dst))
    }

    fn remember_branch(
        &mut self,
        rest: &'a str,
        src_text_start: usize,
        src: Location<'a>,
        dst: Location<'a>,
    ) {
        if let Some(tail) = rest.get(src_text_start..) {
            self.pairs[slot_of(src.ip)] = Some((tail, src, dst));
        }
    }
}

/// Parses the text after an address into a location.
pub(crate) fn parse_location(ip: Address, text: &str) -> Location<'_> {
    let mut end = text.len();
    while end > 0 && matches!(text.as_bytes()[end - 1], b' ' | b'\t' | b'\r') {
        end -= 1;
    }
    let text = &text[..end];
    let b = text.as_bytes();
    let mut loc = Location {
        ip,
        symbol: Symbol::Unknown,
        offset: 0,
        inlined: false,
    };
    if b.last() == Some(&b')') {
        // Candidates from the right, as the greedy name group would find them.
        let mut end = b.len();
        while let Some(p) = memchr::memrchr(b'+', &b[..end]) {
            if b.get(p + 1) == Some(&b'0')
                && b.get(p + 2) == Some(&b'x')
                && let Some((offset, dso_open)) = offset_then_dso(b, p + 3)
            {
                loc.symbol = Symbol::Perf(&text[..p]);
                loc.offset = offset;
                loc.inlined = &b[dso_open + 1..b.len() - 1] == b"inlined";
                return loc;
            }
            end = p;
        }
    }
    if let Some(after) = text.strip_prefix("[unknown]") {
        // `^\[unknown\]\s+\((.*)\)`: the DSO runs to the last `)`, wherever it is.
        let trimmed = after.trim_start_matches(is_space_char);
        if trimmed.len() < after.len()
            && let Some(inner) = trimmed.strip_prefix('(')
            && let Some(close) = inner.rfind(')')
        {
            loc.symbol = Symbol::UnknownInDso(&inner[..close]);
        }
        return loc;
    }
    // Not in magic-trace: `perf script` without `symoff` prints `NAME (DSO)`.
    if let Some(open) = matching_open_paren(b).filter(|_| b.last() == Some(&b')')) {
        let name = text[..open].trim_end_matches(is_space_char);
        if !name.is_empty() && name.len() < open {
            loc.symbol = Symbol::Perf(name);
            loc.inlined = &text[open + 1..b.len() - 1] == "inlined";
        }
    }
    loc
}

fn is_space_char(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// After `+0x` at `i`: hex digits, white space, `(`; returns the offset and the index
/// of the `(`.
fn offset_then_dso(b: &[u8], mut i: usize) -> Option<(u64, usize)> {
    let start = i;
    let mut v: u64 = 0;
    // The regex only accepts lowercase digits here.
    while let Some(&c) = b.get(i) {
        if c.is_ascii_uppercase() {
            break;
        }
        let Some(d) = hex_digit(c) else { break };
        v = (v << 4) | d;
        i += 1;
    }
    if i == start {
        return None;
    }
    let ws = i;
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
    {
        i += 1;
    }
    (i > ws && b.get(i) == Some(&b'(')).then_some((v, i))
}

/// Index of the `(` matching the final `)`, counting nesting.
fn matching_open_paren(b: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    for i in (0..b.len()).rev() {
        match b[i] {
            b')' => depth += 1,
            b'(' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(text: &str) -> (Symbol<'_>, u64) {
        let l = parse_location(Address(0x10), text);
        (l.symbol, l.offset)
    }

    #[test]
    fn symbols_with_offsets() {
        assert_eq!(sym("main+0x87 (/home/demo)"), (Symbol::Perf("main"), 0x87));
        assert_eq!(sym("x => +0xb (foo.so)"), (Symbol::Perf("x => "), 0xb));
        assert_eq!(sym("+ +0xb (foo.so)"), (Symbol::Perf("+ "), 0xb));
        assert_eq!(
            sym("a::B<a::C, a::D>::run+0x1eb (foo.so)"),
            (Symbol::Perf("a::B<a::C, a::D>::run"), 0x1eb)
        );
        assert_eq!(
            sym("memcpy@plt+0xffffffffff22f000 (foo.so)"),
            (Symbol::Perf("memcpy@plt"), 0xffffffffff22f000)
        );
        assert_eq!(
            sym("main+0x10 (/tmp/a.out (deleted))"),
            (Symbol::Perf("main"), 0x10)
        );
        assert_eq!(sym("f+0x1 (x) "), (Symbol::Perf("f"), 1));
    }

    #[test]
    fn unknown_symbols() {
        assert_eq!(
            sym("[unknown] (this is a spaced dso.so)"),
            (Symbol::UnknownInDso("this is a spaced dso.so"), 0)
        );
        assert_eq!(
            sym("[unknown] ([unknown])"),
            (Symbol::UnknownInDso("[unknown]"), 0)
        );
        assert_eq!(sym("[unknown]"), (Symbol::Unknown, 0));
        assert_eq!(sym(""), (Symbol::Unknown, 0));
        assert_eq!(sym("garbage"), (Symbol::Unknown, 0));
        assert_eq!(sym("+0xzz"), (Symbol::Unknown, 0));
        // Not an offset, so the no-offset form applies.
        assert_eq!(sym("f+0xzz (x)"), (Symbol::Perf("f+0xzz"), 0));
    }

    #[test]
    fn without_offsets_and_inlined() {
        assert_eq!(sym("main (/tmp/a.out)"), (Symbol::Perf("main"), 0));
        let l = parse_location(Address(1), "inner (inlined)");
        assert_eq!(l.symbol, Symbol::Perf("inner"));
        assert!(l.inlined);
        let l = parse_location(Address(1), "inner+0x4 (inlined)");
        assert_eq!(l.symbol, Symbol::Perf("inner"));
        assert!(l.inlined);
        assert_eq!(sym("(x)"), (Symbol::Unknown, 0));
        assert_eq!(sym("a b)"), (Symbol::Unknown, 0));
    }
}
