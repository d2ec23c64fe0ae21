//! Source locations of location codes (`docs/memtrace-format.md` §6 "Location
//! events"): what the reports print for a backtrace entry. The reports look codes up through the codec's
//! [`LocationLookup`], which a reader's [`LocationTable`](tracekit_memtrace::LocationTable)
//! implements.
//!
//! A location code stands for one backtrace slot, which expands to one or more source
//! locations when functions were inlined, caller first; the last location of the last
//! entry is the allocation site. A code with no locations prints as `$<code>`, as the
//! reference `Event.to_string` does.

use tracekit_memtrace::{Location, LocationCode, LocationLookup};

/// The locations of `code`, caller first; empty when the code has none or is
/// unknown.
fn locations_of(symbols: &dyn LocationLookup, code: LocationCode) -> &[Location] {
    symbols.locations(code).unwrap_or(&[])
}

/// What one frame of a report shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FrameLabel {
    /// Function names (defname).
    Function,
    /// Full locations, `defname@file:line:start-end`.
    Location,
    /// Source files.
    File,
}

/// How frames are named: Rust names as their readers write them, and stacks
/// from the program's `main`, unless asked otherwise.
///
/// By default a function's generic arguments are left out (`collect`, not
/// `collect<core::iter::adapters::map::Map<..>, ..>`: one frame per
/// function, not per instance) and a closure's type, `{closure_env#0}`, is
/// written as the closure it is, `{closure#0}`. Only names with a `::` path
/// or generic arguments (Rust, C++) are touched: OCaml's `Module.fn` names,
/// operators (`Stdlib.(<)`) included, are shown as they are.
///
/// A Rust program's stacks start with the runtime's frames (`_start`,
/// `__libc_start_main`, `std::rt::lang_start_internal`, `catch_unwind`, ...,
/// `std::sys::backtrace::__rust_begin_short_backtrace`), a thread's with
/// `start_thread` and the spawning machinery, all above the program's own
/// `main` or thread closure. By default a stack starts after the innermost
/// `__rust_begin_short_backtrace` frame, at the first frame there outside
/// the standard library: `main` or the closure the thread runs. A stack
/// without that frame (OCaml, C, or cut short) is shown whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Naming {
    /// Keep functions' generic arguments in their names (by default
    /// `collect<Map<Range<u32>, ..>>` is shown as `collect`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub full_names: bool,
    /// Show the runtime's frames above a Rust program's `main` and threads'
    /// closures (`_start`, `std::rt::lang_start_internal`, ...), which are
    /// left out by default.
    #[cfg_attr(feature = "clap", arg(long))]
    pub all_frames: bool,
}

impl Naming {
    /// A function name as shown.
    pub fn function(&self, defname: &str) -> String {
        if !defname.contains("::") && !defname.contains('<') {
            return defname.to_owned();
        }
        match self.full_names {
            true => tracekit_symbols::names::full_name(defname),
            false => tracekit_symbols::names::short_name(defname),
        }
    }

    /// Whether stacks start at the program's `main`.
    pub fn from_main(&self) -> bool {
        !self.all_frames
    }
}

/// Whether `loc` is the frame above which a Rust thread's stack is the
/// runtime's ([`Naming`]).
pub fn is_runtime_start(loc: &Location) -> bool {
    contains(&loc.defname, b"__rust_begin_short_backtrace")
}

/// One frame of a whole backtrace: its code, and its location (`None` for a
/// code without locations, one frame shown as `$code`).
pub type ShownFrame<'a> = (LocationCode, Option<&'a Location>);

/// Where a backtrace's stack starts when shown from `main` ([`Naming`]):
/// the index of the first of `frames` (caller first) after the innermost
/// runtime start that `std` does not skip; 0 when there is no runtime start
/// or nothing of the program after it.
pub fn main_start(frames: &[ShownFrame<'_>], std: &FrameSkip) -> usize {
    let Some(marker) = frames
        .iter()
        .rposition(|(_, l)| l.is_some_and(is_runtime_start))
    else {
        return 0;
    };
    frames
        .iter()
        .enumerate()
        .skip(marker + 1)
        .find(|(_, (_, l))| l.is_none_or(|l| !std.skips(l)))
        .map_or(0, |(i, _)| i)
}

/// The frames of a whole backtrace (`codes`, caller first) as they are
/// shown: from `main` when `naming` says so. `out` is cleared first.
pub fn shown_frames<'a>(
    symbols: &'a dyn LocationLookup,
    codes: &[LocationCode],
    naming: Naming,
    out: &mut Vec<ShownFrame<'a>>,
) {
    out.clear();
    for &code in codes {
        match locations_of(symbols, code) {
            [] => out.push((code, None)),
            l => out.extend(l.iter().map(|loc| (code, Some(loc)))),
        }
    }
    if naming.from_main() {
        let start = main_start(out, &FrameSkip::rust_std());
        out.drain(..start);
    }
}

/// The labels of a whole backtrace (`codes`, caller first), from `main` when
/// `naming` says so, pushed onto `out`.
pub fn backtrace_labels(
    symbols: &dyn LocationLookup,
    codes: &[LocationCode],
    label: FrameLabel,
    naming: Naming,
    out: &mut Vec<String>,
) {
    let mut frames = Vec::new();
    shown_frames(symbols, codes, naming, &mut frames);
    out.extend(frames.iter().map(|(code, loc)| match loc {
        Some(loc) => location_label(loc, label, naming),
        None => format!("${code}"),
    }));
}

/// Label of allocations with an empty backtrace.
pub const EMPTY_BACKTRACE: &str = "[empty backtrace]";

/// Pushes the labels of one backtrace entry (one per location, caller first; `$code`
/// when it has none) onto `out`.
pub fn entry_labels(
    symbols: &dyn LocationLookup,
    code: LocationCode,
    label: FrameLabel,
    naming: Naming,
    out: &mut Vec<String>,
) {
    let locs = locations_of(symbols, code);
    if locs.is_empty() {
        out.push(format!("${code}"));
        return;
    }
    for loc in locs {
        out.push(location_label(loc, label, naming));
    }
}

/// Frames that a report looks past when it names an allocation site, so that a site
/// is the first frame of the program's own code rather than allocator plumbing, and
/// how it names the site ([`Naming`]).
///
/// A location is skipped when its function name starts with one of the name
/// prefixes or its file path contains one of the path fragments. The default,
/// [`FrameSkip::rust_std`], looks past Rust's standard library (sources under
/// `/rustc/`, std's vendored crates such as hashbrown, and `alloc::`/`core::`/`std::`
/// paths): in a trace of a Rust program the innermost frame is nearly always
/// `RawVec` or hashbrown growth, which says nothing about who allocated. OCaml
/// traces have no such frames, so the default changes nothing there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameSkip {
    name_prefixes: Vec<String>,
    path_fragments: Vec<String>,
    /// How the site found is named.
    pub naming: Naming,
}

impl FrameSkip {
    /// Skips nothing: the site is the innermost frame.
    pub fn none() -> Self {
        Self::default()
    }

    /// Skips the Rust standard library's frames.
    pub fn rust_std() -> Self {
        let names = [
            "alloc::",
            "core::",
            "std::",
            "hashbrown::",
            "<alloc::",
            "<core::",
            "<std::",
            "<hashbrown::",
            "__rust_",
            "__rdl_",
        ];
        Self {
            name_prefixes: names.iter().map(|s| s.to_string()).collect(),
            path_fragments: vec!["/rustc/".to_string(), "/rust/deps/".to_string()],
            naming: Naming::default(),
        }
    }

    /// Also skips locations whose function name starts with `pattern` or whose file
    /// path contains it.
    pub fn with_pattern(mut self, pattern: &str) -> Self {
        self.name_prefixes.push(pattern.to_string());
        self.path_fragments.push(pattern.to_string());
        self
    }

    /// The same, the site named as `naming` says.
    pub fn with_naming(mut self, naming: Naming) -> Self {
        self.naming = naming;
        self
    }

    /// True when nothing is skipped.
    pub fn is_empty(&self) -> bool {
        self.name_prefixes.is_empty() && self.path_fragments.is_empty()
    }

    /// True when `loc` is to be looked past. Names are matched as the trace stores
    /// them, as bytes.
    pub fn skips(&self, loc: &Location) -> bool {
        self.name_prefixes
            .iter()
            .any(|p| loc.defname.starts_with(p.as_bytes()))
            || self
                .path_fragments
                .iter()
                .any(|p| contains(&loc.filename, p.as_bytes()))
    }
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The label of the allocation site of a backtrace (`codes`, caller first): the
/// innermost location that `skip` does not skip. A code without locations stops the
/// search (nothing is known about it, so it is not plumbing); when every location is
/// skipped the innermost one names the site.
pub fn site_label(
    symbols: &dyn LocationLookup,
    codes: &[LocationCode],
    label: FrameLabel,
    skip: &FrameSkip,
) -> Option<String> {
    find_site(
        symbols,
        codes,
        skip,
        |loc| location_label(loc, label, skip.naming),
        |code| format!("${code}"),
    )
}

/// What one entry of a backtrace says of its site ([`site_label`], which looks
/// at entries from the innermost): `Some` of the site's label when the entry
/// names it (it has no locations, or one that `skip` does not skip), `None`
/// when the search goes on past it. A label depends on the entry alone, so a
/// caller naming many backtraces may keep it per entry.
pub fn entry_site_label(
    symbols: &dyn LocationLookup,
    code: LocationCode,
    label: FrameLabel,
    skip: &FrameSkip,
) -> Option<String> {
    let locs = locations_of(symbols, code);
    if locs.is_empty() {
        return Some(format!("${code}"));
    }
    (locs.iter().rev().find(|l| !skip.skips(l))).map(|loc| location_label(loc, label, skip.naming))
}

/// Whether the allocation site of a backtrace ([`site_label`]'s) has a source line:
/// `Some(false)` for a location with line 0, which is what a program built without
/// line tables yields; `None` for an empty backtrace or a code without locations.
pub fn site_has_line(
    symbols: &dyn LocationLookup,
    codes: &[LocationCode],
    skip: &FrameSkip,
) -> Option<bool> {
    find_site(symbols, codes, skip, |loc| Some(loc.line != 0), |_| None).flatten()
}

/// The search behind [`site_label`]: `found` of the site's location, or `unknown`
/// of the first code (from the innermost) without locations.
fn find_site<T>(
    symbols: &dyn LocationLookup,
    codes: &[LocationCode],
    skip: &FrameSkip,
    found: impl Fn(&Location) -> T,
    unknown: impl Fn(LocationCode) -> T,
) -> Option<T> {
    let leaf = *codes.last()?;
    for &code in codes.iter().rev() {
        let locs = locations_of(symbols, code);
        if locs.is_empty() {
            return Some(unknown(code));
        }
        if let Some(loc) = locs.iter().rev().find(|l| !skip.skips(l)) {
            return Some(found(loc));
        }
    }
    Some(match locations_of(symbols, leaf).last() {
        None => unknown(leaf),
        Some(loc) => found(loc),
    })
}

/// The label of a location, its function named as `naming` says; names that
/// are not UTF-8 are shown lossily.
pub fn location_label(loc: &Location, label: FrameLabel, naming: Naming) -> String {
    match label {
        FrameLabel::Location => {
            let defname = loc.defname.to_string();
            let shown = naming.function(&defname);
            if shown == defname {
                return loc.to_string();
            }
            let loc = Location {
                defname: shown.as_str().into(),
                ..loc.clone()
            };
            loc.to_string()
        }
        FrameLabel::Function => naming.function(&loc.defname.to_string()),
        FrameLabel::File => loc.filename.to_string(),
    }
}

/// The label of the allocation site of an entry: its last location, or `$code`.
pub fn leaf_label(
    symbols: &dyn LocationLookup,
    code: LocationCode,
    label: FrameLabel,
    naming: Naming,
) -> String {
    match locations_of(symbols, code).last() {
        None => format!("${code}"),
        Some(loc) => location_label(loc, label, naming),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    type LocationTable = HashMap<LocationCode, Vec<Location>>;

    fn loc(defname: &str, filename: &str, line: u32) -> Location {
        Location {
            filename: filename.into(),
            line,
            start_char: 1,
            end_char: 2,
            defname: defname.into(),
        }
    }

    /// Code 1: the program's frame; code 2: a std frame with an inlined std frame
    /// inside it (short name, std path); code 3: hashbrown; code 4: unknown.
    fn table() -> LocationTable {
        let mut t = LocationTable::new();
        t.insert(
            LocationCode::new(1),
            vec![loc("app::work", "src/main.rs", 10)],
        );
        t.insert(
            LocationCode::new(2),
            vec![
                loc(
                    "alloc::vec::Vec<T>::push",
                    "/rustc/abc/library/alloc/src/vec/mod.rs",
                    1,
                ),
                loc(
                    "grow_one<u8>",
                    "/rustc/abc/library/alloc/src/raw_vec/mod.rs",
                    2,
                ),
            ],
        );
        t.insert(
            LocationCode::new(3),
            vec![loc(
                "do_alloc<Global>",
                "/rust/deps/hashbrown-0.16.1/src/raw/alloc.rs",
                19,
            )],
        );
        t
    }

    fn codes(c: &[u64]) -> Vec<LocationCode> {
        c.iter().map(|&c| LocationCode::new(c as i64)).collect()
    }

    #[test]
    fn rust_std_frames_are_looked_past_inlined_ones_included() {
        let t = table();
        let skip = FrameSkip::rust_std();
        let label = |c: &[u64]| site_label(&t, &codes(c), FrameLabel::Function, &skip);
        assert_eq!(label(&[1, 2, 3]).as_deref(), Some("app::work"));
        assert_eq!(label(&[1, 2]).as_deref(), Some("app::work"));
        assert_eq!(label(&[1]).as_deref(), Some("app::work"));
        // Nothing known about code 4: it names the site rather than being skipped.
        assert_eq!(label(&[1, 4, 3]).as_deref(), Some("$4"));
        // All plumbing: the innermost location names the site, without its
        // generic arguments unless asked for full names.
        assert_eq!(label(&[2, 3]).as_deref(), Some("do_alloc"));
        let full = FrameSkip::rust_std().with_naming(Naming {
            full_names: true,
            ..Naming::default()
        });
        let label = site_label(&t, &codes(&[2, 3]), FrameLabel::Function, &full);
        assert_eq!(label.as_deref(), Some("do_alloc<Global>"));
        assert_eq!(site_label(&t, &[], FrameLabel::Function, &skip), None);
    }

    fn located(name: &str) -> Location {
        loc(name, "/src/x.rs", 1)
    }

    #[test]
    fn stacks_start_at_the_programs_main() {
        let std = FrameSkip::rust_std();
        let runtime = [
            located("_start"),
            located("std::rt::lang_start_internal"),
            located("std::sys::backtrace::__rust_begin_short_backtrace"),
            located("core::ops::function::FnOnce::call_once<fn(), ()>"),
            located("app::main"),
            located("app::work"),
        ];
        let code = LocationCode::new(1);
        let refs: Vec<ShownFrame<'_>> = runtime.iter().map(|l| (code, Some(l))).collect();
        assert_eq!(main_start(&refs, &std), 4);
        // A code without locations after the start is the program's.
        let mut unknown = refs.clone();
        unknown[3] = (code, None);
        assert_eq!(main_start(&unknown, &std), 3);
        // No runtime start, or nothing of the program after it: shown whole.
        assert_eq!(main_start(&refs[..2], &std), 0);
        assert_eq!(main_start(&refs[..4], &std), 0);
    }

    #[test]
    fn a_site_without_a_line_is_told_apart() {
        let mut t = table();
        // A program built without line tables: its frames have line 0.
        t.insert(LocationCode::new(5), vec![loc("app::main", "app", 0)]);
        let skip = FrameSkip::rust_std();
        let has_line = |c: &[u64]| site_has_line(&t, &codes(c), &skip);
        assert_eq!(has_line(&[1, 2, 3]), Some(true));
        // The std frames have lines, but the site is the program's frame.
        assert_eq!(has_line(&[5, 2, 3]), Some(false));
        assert_eq!(has_line(&[5, 4]), None);
        assert_eq!(has_line(&[]), None);
    }

    #[test]
    fn no_skip_names_the_innermost_location() {
        let t = table();
        let label = |c: &[u64]| site_label(&t, &codes(c), FrameLabel::Location, &FrameSkip::none());
        assert_eq!(
            label(&[1, 2]).as_deref(),
            Some("grow_one@/rustc/abc/library/alloc/src/raw_vec/mod.rs:2:1-2")
        );
    }

    #[test]
    fn names_that_are_not_utf8_are_matched_as_bytes_and_shown_lossily() {
        let mut t = table();
        let odd = Location {
            filename: b"/rustc/abc/\xffvec.rs".as_slice().into(),
            defname: b"alloc::\xfe".as_slice().into(),
            ..loc("", "", 3)
        };
        t.insert(LocationCode::new(6), vec![odd]);
        let skip = FrameSkip::rust_std();
        assert!(skip.skips(&t[&LocationCode::new(6)][0]));
        let label = |c: &[u64], l| site_label(&t, &codes(c), l, &FrameSkip::none());
        assert_eq!(
            label(&[1, 6], FrameLabel::Function).as_deref(),
            Some("alloc::\u{fffd}")
        );
        assert_eq!(
            site_label(&t, &codes(&[1, 6]), FrameLabel::Function, &skip).as_deref(),
            Some("app::work")
        );
    }

    #[test]
    fn patterns_match_names_by_prefix_and_paths_by_fragment() {
        let t = table();
        let skip = FrameSkip::none().with_pattern("app::");
        assert!(skip.skips(&loc("app::work", "x.rs", 1)));
        assert!(!skip.skips(&loc("my_app::work", "x.rs", 1)));
        assert!(skip.skips(&loc("f", "/src/app::/x.rs", 1)));
        let skip = FrameSkip::none().with_pattern("main.rs");
        let label = site_label(&t, &codes(&[3, 1]), FrameLabel::File, &skip);
        assert_eq!(
            label.as_deref(),
            Some("/rust/deps/hashbrown-0.16.1/src/raw/alloc.rs")
        );
    }
}
