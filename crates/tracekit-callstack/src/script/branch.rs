//! Branch samples (`--itrace=b`): `FLAGS [(x)] SRC_IP SRC_LOCATION => DST_IP DST_LOCATION`.
//!
//! The flags column is perf's `sample_flags_to_name` text padded to a fixed width:
//! a kind name (`call`, `return`, `jcc`, `jmp`, `int`, `iret`, `syscall`, `sysret`,
//! `async`, `hw int`, `tx abrt`, ...) optionally prefixed by `tr strt ` or `tr end  `,
//! then a transaction marker such as `(x)`. Rather than enumerating the combinations
//! (newer perf versions keep adding some), the column is split into words up to the
//! first purely hexadecimal word, which is the source address.

use super::lex::{hex_digit, parse_hex, skip_spaces, token_end};
use super::location::Locations;
use crate::event::{Address, Branch, BranchKind, TraceStateChange};

/// The flags of a branch sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    pub trace_state_change: Option<TraceStateChange>,
    pub kind: Option<BranchKind>,
    pub in_transaction: bool,
    /// True when the words named no kind we know (magic-trace warns and ignores those).
    pub unrecognised: bool,
}

/// At most this many flag words are looked at; perf prints two or three.
const MAX_WORDS: usize = 8;

/// One word of the flags column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Tr,
    Strt,
    End,
    Call,
    Return,
    Int,
    Jmp,
    Jcc,
    Syscall,
    Hw,
    Iret,
    Sysret,
    Async,
    Tx,
    Abrt,
    /// A word this parser does not know (`vmentry`, raw flag letters, ...).
    Other,
}

impl Word {
    /// Classifies a word; newer perf appends `/miss/`-style qualifiers, which are dropped.
    #[inline]
    pub(crate) fn of(w: &[u8]) -> Word {
        let w = match w.iter().position(|&c| c == b'/') {
            Some(i) => &w[..i],
            None => w,
        };
        match w {
            b"tr" => Word::Tr,
            b"strt" => Word::Strt,
            b"end" => Word::End,
            b"call" => Word::Call,
            b"return" => Word::Return,
            b"int" => Word::Int,
            b"jmp" => Word::Jmp,
            b"jcc" => Word::Jcc,
            b"syscall" => Word::Syscall,
            b"hw" => Word::Hw,
            b"iret" => Word::Iret,
            b"sysret" => Word::Sysret,
            b"async" => Word::Async,
            b"tx" => Word::Tx,
            b"abrt" => Word::Abrt,
            _ => Word::Other,
        }
    }
}

/// Interprets the flag words (execution-state markers such as `(x)` already removed).
pub(crate) fn parse_flags(words: &[Word], in_transaction: bool) -> Flags {
    let mut k = words;
    let mut starts = false;
    let mut ends = false;
    if let [Word::Tr, Word::Strt, rest @ ..] = k {
        starts = true;
        // magic-trace reads `tr strt jmp` (perf >= 6.x) as a plain trace start.
        k = rest.strip_prefix(&[Word::Jmp][..]).unwrap_or(rest);
    }
    if let [Word::Tr, Word::End, rest @ ..] = k {
        ends = true;
        k = rest;
    }
    let trace_state_change = match (starts, ends) {
        (true, false) => Some(TraceStateChange::Start),
        (false, true) => Some(TraceStateChange::End),
        // `tr strt tr end` (seen with Go) means neither.
        _ => None,
    };
    let (kind, unrecognised) = match k {
        [] => (None, false),
        [Word::Call] => (Some(BranchKind::Call), false),
        [Word::Return] => (Some(BranchKind::Return), false),
        [Word::Int] => (Some(BranchKind::Interrupt), false),
        [Word::Jmp] | [Word::Jcc] => (Some(BranchKind::Jump), false),
        [Word::Syscall] => (Some(BranchKind::Syscall), false),
        [Word::Hw, Word::Int] => (Some(BranchKind::HardwareInterrupt), false),
        [Word::Iret] => (Some(BranchKind::Iret), false),
        [Word::Sysret] => (Some(BranchKind::Sysret), false),
        [Word::Async] => (Some(BranchKind::Async), false),
        [Word::Tx, Word::Abrt] => (Some(BranchKind::TxAbort), false),
        _ => (None, true),
    };
    Flags {
        trace_state_change,
        kind,
        in_transaction,
        unrecognised,
    }
}

/// Why a branch body did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BranchError {
    /// No hexadecimal source address after the flags.
    NoSource,
    /// No ` => DST_IP ` separator.
    NoArrow,
}

/// Parses the text after the event column of a `branches` sample.
#[cfg(test)]
pub(crate) fn parse_branch(rest: &str) -> Result<(Branch<'_>, Flags), BranchError> {
    parse_branch_with(rest, &mut super::location::Uncached)
}

/// [`parse_branch`] taking its locations from `locs`.
#[inline]
pub(crate) fn parse_branch_with<'a>(
    rest: &'a str,
    locs: &mut impl Locations<'a>,
) -> Result<(Branch<'a>, Flags), BranchError> {
    let b = rest.as_bytes();
    let mut words = [Word::Other; MAX_WORDS];
    let mut n = 0;
    let mut in_transaction = false;
    let mut i = skip_spaces(b, 0);
    let (src_ip, src_text_start) = loop {
        if i >= b.len() {
            return Err(BranchError::NoSource);
        }
        // The first purely hexadecimal word is the source address. (Flag words such as
        // `jcc` rarely start with a hex digit; testing one byte skips the word parse.)
        if let Some((ip, hex_end)) = hex_digit(b[i]).and_then(|_| parse_hex(b, i)) {
            match b.get(hex_end) {
                Some(b' ') => break (ip, hex_end + 1),
                None | Some(b'\t') => return Err(BranchError::NoSource),
                Some(_) => {}
            }
        }
        let end = token_end(b, i);
        if end == i {
            // A tab: not perf's padding.
            return Err(BranchError::NoSource);
        }
        let tok = &b[i..end];
        if tok[0] == b'(' {
            // `(x)`, `(D)`, `(t)`, `(xDt)`: execution state; only `x` matters here.
            in_transaction |= tok.contains(&b'x');
        } else if n < MAX_WORDS {
            words[n] = Word::of(tok);
            n += 1;
        }
        i = skip_spaces(b, end);
    };
    let flags = parse_flags(&words[..n], in_transaction);
    let (src, dst) = match locs.branch_locations(rest, Address(src_ip), src_text_start) {
        Some(pair) => pair,
        None => {
            let (src_text_end, dst_ip, dst_text_start) =
                find_arrow(rest, src_text_start).ok_or(BranchError::NoArrow)?;
            let src = locs.location(Address(src_ip), &rest[src_text_start..src_text_end]);
            let dst = locs.location(Address(dst_ip), &rest[dst_text_start..]);
            locs.remember_branch(rest, src_text_start, src, dst);
            (src, dst)
        }
    };
    Ok((
        Branch {
            trace_state_change: flags.trace_state_change,
            kind: flags.kind,
            src,
            dst,
        },
        flags,
    ))
}

/// Finds the last ` => +HEX ` at or after `from` (the greedy source group of
/// magic-trace's regex); returns where the source text ends, the destination address
/// and where the destination text starts.
#[inline]
fn find_arrow(rest: &str, from: usize) -> Option<(usize, u64, usize)> {
    let b = rest.as_bytes();
    let mut end = b.len();
    while end > from {
        let p = memchr::memrchr(b'>', &b[from..end])? + from;
        end = p;
        if p < from + 2 || b[p - 1] != b'=' || b[p - 2] != b' ' {
            continue;
        }
        let i = p + 1;
        let j = skip_spaces(b, i);
        if j == i {
            continue;
        }
        // (magic-trace's regex takes lowercase digits only; perf prints no others.)
        let Some((ip, k)) = parse_hex(b, j) else {
            continue;
        };
        if b.get(k) != Some(&b' ') {
            continue;
        }
        return Some((p - 2, ip, k + 1));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Symbol;

    fn flags(s: &str) -> Flags {
        let mut tx = false;
        let mut words = Vec::new();
        for w in s.split_whitespace() {
            if w.starts_with('(') {
                tx |= w.contains('x');
            } else {
                words.push(Word::of(w.as_bytes()));
            }
        }
        parse_flags(&words, tx)
    }

    #[test]
    fn flag_words() {
        use BranchKind::*;
        use TraceStateChange::*;
        let f = |s| {
            let f = flags(s);
            (f.trace_state_change, f.kind)
        };
        assert_eq!(f("call"), (None, Some(Call)));
        assert_eq!(f("tr strt"), (Some(Start), None));
        assert_eq!(f("tr strt jmp"), (Some(Start), None));
        assert_eq!(f("tr end"), (Some(End), None));
        assert_eq!(f("tr end  async"), (Some(End), Some(Async)));
        assert_eq!(f("tr end  syscall"), (Some(End), Some(Syscall)));
        assert_eq!(f("tr strt tr end"), (None, None));
        assert_eq!(f("hw int"), (None, Some(HardwareInterrupt)));
        assert_eq!(f("tx abrt"), (None, Some(TxAbort)));
        assert_eq!(f("jcc/miss"), (None, Some(Jump)));
        assert_eq!(f("tr strt call"), (Some(Start), Some(Call)));
        assert!(flags("call (x)").in_transaction);
        assert!(flags("jmp (xDt)").in_transaction);
        assert!(!flags("jmp (D)").in_transaction);
        assert!(flags("vmentry").unrecognised);
    }

    #[test]
    fn branch_bodies() {
        let (br, _) = parse_branch(
            "   call                     7f6fce0b71f4 __clock_gettime+0x24 (foo.so) =>     7ffd193838e0 __vdso_clock_gettime+0x0 (foo.so)",
        )
        .unwrap();
        assert_eq!(br.kind, Some(BranchKind::Call));
        assert_eq!(br.src.ip, Address(0x7f6fce0b71f4));
        assert_eq!(br.src.symbol, Symbol::Perf("__clock_gettime"));
        assert_eq!(br.dst.symbol, Symbol::Perf("__vdso_clock_gettime"));

        let (br, _) = parse_branch(
            "   call                     56234f77576b x => +0xb (foo.so) =>     56234f4bc7a0 => +0x0 (foo.so)",
        )
        .unwrap();
        assert_eq!(br.src.symbol, Symbol::Perf("x => "));
        assert_eq!(br.dst.symbol, Symbol::Perf("=> "));
        assert_eq!(br.dst.ip, Address(0x56234f4bc7a0));

        let (br, f) = parse_branch(
            "   tr end  async                     7f6fce0b71f4 [unknown] (foo.so) =>     0 [unknown] ([unknown])",
        )
        .unwrap();
        assert_eq!(br.trace_state_change, Some(TraceStateChange::End));
        assert_eq!(br.kind, Some(BranchKind::Async));
        assert_eq!(br.dst.ip, Address(0));
        assert!(!f.in_transaction);

        let (br, f) = parse_branch("  jmp  (x)  10 a+0x0 (b) => 20 c+0x0 (d)").unwrap();
        assert!(f.in_transaction);
        assert_eq!(br.dst.symbol, Symbol::Perf("c"));
    }

    #[test]
    fn bad_bodies() {
        assert_eq!(parse_branch("   call   "), Err(BranchError::NoSource));
        assert_eq!(parse_branch(""), Err(BranchError::NoSource));
        assert_eq!(
            parse_branch(" call 10 a+0x0 (b)"),
            Err(BranchError::NoArrow)
        );
        assert_eq!(parse_branch(" call 10 a => b"), Err(BranchError::NoArrow));
        assert_eq!(parse_branch(" call 10"), Err(BranchError::NoSource));
        assert_eq!(
            parse_branch(" call\t10 x => 1 y"),
            Err(BranchError::NoSource)
        );
    }
}
