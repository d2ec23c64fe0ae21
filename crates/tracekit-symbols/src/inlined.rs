//! The module paths of inlined Rust functions, which line-tables-only debug
//! information leaves out.
//!
//! With `debug = "line-tables-only"`, the DWARF entry of an inlined function
//! holds its bare name (`make_words`, `reserve<u64, alloc::alloc::Global>`):
//! no linkage name and no enclosing namespaces (`readelf --debug-dump=info`
//! shows only `DW_AT_name` on those `DW_TAG_subprogram`s). The file and line
//! of its code are there, from the line table. The one place in the binary
//! that spells out paths is the symbol table, and only for functions that
//! have an out-of-line copy.
//!
//! # The rule
//!
//! An inlined frame with a bare name `f`, whose code is at line `L` of file
//! `F`, is given the path `p::f` when the object's symbol table has a Rust
//! function `p::f` (generic arguments aside) that is an out-of-line copy of
//! the same function: the outermost frame of the copy's code is in file `F`,
//! and its lines there span `L`. Generic arguments are dropped from `p`,
//! since a copy may be another instantiation; `f` keeps the arguments the
//! debug information gives. The name stays bare unless:
//!
//! * every such copy agrees on `p` (instances of one generic function do);
//! * when `p` names a `Self` type (`<T as Trait>::f`), the copy is the same
//!   instance (same name and generic arguments in the debug information):
//!   a trait's default method, or an impl the compiler makes (`FnOnce` for
//!   a function), has the same lines for every `Self`;
//! * when the copies' own code all sits on one line, at least two agree: a
//!   macro expansion (derives included) puts every function it makes on its
//!   call site's line, so one copy there may be of another function.
//!
//! Two functions of one name in one file (`new` in two `impl` blocks) are
//! told apart by their lines, so the path is that of the function the code
//! is in: a method keeps its type (`app::Tree::merge_into`), a function of
//! an inline module its module, and a function inlined from the standard
//! library or another crate can only get a path from that crate's file.
//!
//! # Limits
//!
//! A function inlined everywhere has no copy and keeps its bare name: its
//! path is not in the binary. Guessing it from the file's place in the crate
//! would be wrong for every method and every inline module. Nor does a
//! function whose copies disagree or fail the checks above get one (some
//! standard library functions, whose copies in the program and in the
//! precompiled library are mangled differently). `debug = "limited"` (or
//! more) records linkage names for inlined functions, and all of them are
//! then named in full without this rule. Names that are not Rust (C, C++)
//! are left alone.

use std::collections::HashMap;

use crate::names::strip_generics;
use crate::symbols::{SymbolIndex, Symbols};

/// Beyond this many functions of one name, the name is not worth the search.
const MAX_CANDIDATES: usize = 4096;

/// Line-table rows of one copy looked at to find its lines.
const MAX_ROWS: usize = 8192;

/// The object's Rust functions by bare name, and what their copies' debug
/// information says, looked up on first use.
pub(crate) struct InlinePaths {
    /// Normalised last path segment -> (symbol, path before that segment).
    by_name: HashMap<String, Vec<(SymbolIndex, String)>>,
    homes: HashMap<SymbolIndex, Option<Home>>,
}

/// What the debug information says about an out-of-line copy.
struct Home {
    /// Its name in the debug information (with generic arguments).
    name: String,
    /// The file and lines of its own code (not what is inlined into it).
    file: String,
    first: u32,
    last: u32,
    /// True once `first..=last` covers all the copy's rows, not only its
    /// first one.
    spanned: bool,
}

impl InlinePaths {
    pub(crate) fn new(symbols: &Symbols) -> InlinePaths {
        let mut by_name: HashMap<String, Vec<(SymbolIndex, String)>> = HashMap::new();
        for (i, raw) in symbols.iter() {
            let Ok(d) = rustc_demangle::try_demangle(raw) else {
                continue;
            };
            let path = strip_generics(&format!("{d:#}"));
            if let Some((prefix, last)) = split_last(&path) {
                by_name
                    .entry(normalize(last).to_owned())
                    .or_default()
                    .push((i, prefix.to_owned()));
            }
        }
        InlinePaths {
            by_name,
            homes: HashMap::new(),
        }
    }

    /// The full name of the inlined function `name` whose code is at `line`
    /// of `file`, if an out-of-line copy vouches for it.
    pub(crate) fn qualify(
        &mut self,
        dwarf: &addr2line::Loader,
        symbols: &Symbols,
        name: &str,
        file: &str,
        line: u32,
    ) -> Option<String> {
        if line == 0 || file.is_empty() || !is_bare(name) {
            return None;
        }
        let candidates = self.by_name.get(normalize(&strip_generics(name)))?;
        if candidates.len() > MAX_CANDIDATES {
            return None;
        }
        let mut found: Option<&str> = None;
        // Copies found, and whether one of them has code on several lines.
        let (mut copies, mut spread) = (0, false);
        for (i, prefix) in candidates {
            let Some(home) = self
                .homes
                .entry(*i)
                .or_insert_with(|| home(dwarf, symbols, *i))
            else {
                continue;
            };
            if home.file != file {
                continue;
            }
            if !home.spanned {
                span(dwarf, symbols, *i, home);
            }
            if !(home.first..=home.last).contains(&line) {
                continue;
            }
            // The lines of a trait's default method, or of a compiler-made
            // impl, are those of every `Self` type, and the path names one:
            // only a copy of the same instance (the generic arguments,
            // `Self` among them, are in the debug information's name) will do.
            if prefix.starts_with('<') && home.name != name {
                continue;
            }
            match found {
                Some(p) if p != prefix => return None,
                _ => found = Some(prefix),
            }
            copies += 1;
            spread |= home.first != home.last;
        }
        // Code on a single line may be several functions: a macro expansion
        // (derives included) puts all it makes on its call site's line, and
        // then one copy may be of another function than the inlined one. Two
        // copies that agree (instances of a generic function, such as
        // `core::ptr::drop_in_place`) will do.
        if !spread && copies < 2 {
            return None;
        }
        found.map(|p| format!("{p}::{name}"))
    }
}

impl InlinePaths {
    /// Whether the function whose out-of-line copy is symbol `i` has its own
    /// code in `file` on lines around `line` (its first and last lines there
    /// enclose it).
    pub(crate) fn symbol_encloses(
        &mut self,
        dwarf: &addr2line::Loader,
        symbols: &Symbols,
        i: SymbolIndex,
        file: &str,
        line: u32,
    ) -> bool {
        let Some(home) = self
            .homes
            .entry(i)
            .or_insert_with(|| home(dwarf, symbols, i))
        else {
            return false;
        };
        if home.file != file {
            return false;
        }
        if !home.spanned {
            span(dwarf, symbols, i, home);
        }
        (home.first..=home.last).contains(&line)
    }

    /// Whether the function named `full` (a path, as [`qualify`](Self::qualify)
    /// gives it) has an out-of-line copy whose own code in `file` encloses
    /// `line`.
    pub(crate) fn named_encloses(
        &mut self,
        dwarf: &addr2line::Loader,
        symbols: &Symbols,
        full: &str,
        file: &str,
        line: u32,
    ) -> bool {
        let path = strip_generics(full);
        let Some((prefix, last)) = split_last(&path) else {
            return false;
        };
        let Some(candidates) = self.by_name.get(normalize(last)) else {
            return false;
        };
        if candidates.len() > MAX_CANDIDATES {
            return false;
        }
        let copies: Vec<SymbolIndex> = candidates
            .iter()
            .filter(|(_, p)| p == prefix)
            .map(|(i, _)| *i)
            .collect();
        copies
            .into_iter()
            .any(|i| self.symbol_encloses(dwarf, symbols, i, file, line))
    }
}

/// The bare closure of a frame's name (`{closure#2}` of `{closure#2}<..>`),
/// if that is all the name is.
pub(crate) fn bare_closure(name: &str) -> Option<String> {
    let bare = strip_generics(name);
    let index = bare.strip_prefix("{closure#")?.strip_suffix('}')?;
    index.bytes().all(|b| b.is_ascii_digit()).then_some(bare)
}

/// The outermost frame at `addr`, the function whose code this is (not what
/// is inlined into it): its name in the debug information, its file and
/// line.
fn outermost(dwarf: &addr2line::Loader, addr: u64) -> Option<(String, String, u32)> {
    let mut frames = dwarf.find_frames(addr).ok()?;
    let mut last = None;
    while let Ok(Some(frame)) = frames.next() {
        let name = frame
            .function
            .as_ref()
            .and_then(|f| f.raw_name().ok())
            .map(|n| n.into_owned())
            .unwrap_or_default();
        last = Some(
            frame
                .location
                .and_then(|l| Some((name, l.file?.to_owned(), l.line?))),
        );
    }
    last.flatten().filter(|(_, _, line)| *line != 0)
}

fn home(dwarf: &addr2line::Loader, symbols: &Symbols, i: SymbolIndex) -> Option<Home> {
    let (start, _) = symbols.range(i)?;
    let (name, file, line) = outermost(dwarf, start)?;
    Some(Home {
        name,
        file,
        first: line,
        last: line,
        spanned: false,
    })
}

/// Widens `home` to the lines of all of the copy's own code in its file.
fn span(dwarf: &addr2line::Loader, symbols: &Symbols, i: SymbolIndex, home: &mut Home) {
    home.spanned = true;
    let Some((start, end)) = symbols.range(i) else {
        return;
    };
    let Ok(rows) = dwarf.find_location_range(start, end) else {
        return;
    };
    // Cut short, the span is narrower than the function: a name may then be
    // left bare, never given a wrong path.
    for (addr, _, _) in rows.take(MAX_ROWS) {
        if let Some((_, file, line)) = outermost(dwarf, addr.max(start))
            && file == home.file
        {
            home.first = home.first.min(line);
            home.last = home.last.max(line);
        }
    }
}

/// The full name of the inlined closure `frames[i]` (`{closure#N}`, bare),
/// from the generic arguments of the other frames at its address: the
/// functions it is passed through name its type, `p::{closure_env#N}`, whose
/// path `p` is the function the closure is written in. Of the paths named
/// so, the one taken is that of a frame at the same address whose code is in
/// the closure's file (the function that made the closure and called what
/// runs it); with none such, the one path there is when it is not the
/// standard library's. `None` when that does not settle it.
pub(crate) fn closure_path(frames: &[crate::Frame], i: usize) -> Option<String> {
    let closure = frames.get(i)?;
    let bare = strip_generics(&closure.function);
    let index = bare.strip_prefix("{closure#")?.strip_suffix('}')?;
    let needle = format!("::{{closure_env#{index}}}");
    let mut paths: Vec<&str> = Vec::new();
    for f in frames {
        let name = f.function.as_str();
        let mut from = 0;
        while let Some(at) = name.get(from..).and_then(|r| r.find(&needle)) {
            let end = from + at;
            let start = name[..end]
                .rfind(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | '}' | '#')))
                .map_or(0, |p| p + 1);
            let path = &name[start..end];
            if !path.is_empty() && !paths.contains(&path) {
                paths.push(path);
            }
            from = end + needle.len();
        }
    }
    let written_in_file = |path: &str| {
        let last = split_last(path).map_or(path, |(_, l)| l);
        frames.iter().enumerate().any(|(j, f)| {
            j != i
                && f.file == closure.file
                && strip_generics(&f.function).rsplit("::").next() == Some(last)
        })
    };
    let mut found = paths.iter().filter(|p| written_in_file(p));
    let path = match (found.next(), found.next()) {
        (Some(p), None) => *p,
        (Some(_), Some(_)) => return None,
        (None, _) => match paths.as_slice() {
            [p] if !is_std(p) => *p,
            _ => return None,
        },
    };
    Some(format!("{path}::{bare}"))
}

/// Whether a path is of the standard library's crates.
fn is_std(path: &str) -> bool {
    ["core::", "alloc::", "std::"]
        .iter()
        .any(|c| path.starts_with(c))
}

/// True for a name without a path: `make_words`, `reserve<u64,
/// alloc::alloc::Global>` (whose `::` are in its generic arguments).
pub(crate) fn is_bare(name: &str) -> bool {
    !strip_generics(name).contains("::")
}

/// Splits a path at its last `::` outside angle brackets.
pub(crate) fn split_last(path: &str) -> Option<(&str, &str)> {
    let bytes = path.as_bytes();
    let mut depth = 0i32;
    let mut split = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' if i == 0 || bytes[i - 1] != b'-' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                split = Some(i);
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let at = split?;
    let (prefix, last) = (path.get(..at)?, path.get(at + 2..)?);
    (!prefix.is_empty() && !last.is_empty()).then_some((prefix, last))
}

/// The last segment in the form both sides share: closures are
/// `{{closure}}` in legacy symbols and `{closure#0}` in DWARF.
fn normalize(last: &str) -> &str {
    if last.starts_with("{{closure}}") || last.starts_with("{closure#") {
        "{closure}"
    } else {
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_the_last_top_level_separator() {
        assert_eq!(
            split_last("<alloc::vec::Vec as core::ops::drop::Drop>::drop"),
            Some(("<alloc::vec::Vec as core::ops::drop::Drop>", "drop"))
        );
        assert_eq!(
            split_last("workload::Tree::merge_into"),
            Some(("workload::Tree", "merge_into"))
        );
        assert_eq!(
            split_last("workload::main::{{closure}}"),
            Some(("workload::main", "{{closure}}"))
        );
        assert_eq!(split_last("main"), None);
        assert_eq!(split_last("::x"), None);
    }

    fn frame(function: &str, file: &str) -> crate::Frame {
        crate::Frame {
            function: function.to_owned(),
            file: file.to_owned(),
            line: 1,
            column: 1,
        }
    }

    #[test]
    fn a_closure_is_named_after_the_function_it_is_written_in() {
        // Innermost first, as at one address of `heapdemo::churn`.
        let frames = [
            frame("from_elem<u8>", "/rustc/x/library/alloc/src/vec/mod.rs"),
            frame("{closure#0}", "src/main.rs"),
            frame(
                "{closure#0}<u32, (), heapdemo::churn::{closure_env#0}, \
                 core::iter::traits::iterator::Iterator::for_each::call::{closure_env#0}<u8>>",
                "/rustc/x/library/core/src/iter/adapters/map.rs",
            ),
            frame(
                "collect<core::iter::adapters::map::Map<core::ops::range::Range<u32>, \
                 heapdemo::churn::{closure_env#0}>>",
                "/rustc/x/library/core/src/iter/traits/iterator.rs",
            ),
            frame("churn", "src/main.rs"),
        ];
        assert_eq!(
            closure_path(&frames, 1).as_deref(),
            Some("heapdemo::churn::{closure#0}")
        );
        // The standard library's closure: named by a path, but no frame of
        // `map_fold` is there to vouch for it, and it is std's.
        assert_eq!(closure_path(&frames, 2), None);
        // Not a closure.
        assert_eq!(closure_path(&frames, 0), None);
        // Another closure index is another closure.
        let mut other = frames.clone();
        other[1].function = "{closure#1}".to_owned();
        assert_eq!(closure_path(&other, 1), None);
    }

    #[test]
    fn closures_match_across_manglings() {
        assert_eq!(normalize("{{closure}}"), normalize("{closure#3}"));
        assert_eq!(normalize("merge_into"), "merge_into");
    }
}
