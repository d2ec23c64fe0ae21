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

/// Label of allocations with an empty backtrace.
pub const EMPTY_BACKTRACE: &str = "[empty backtrace]";

/// Pushes the labels of one backtrace entry (one per location, caller first; `$code`
/// when it has none) onto `out`.
pub fn entry_labels(
    symbols: &dyn LocationLookup,
    code: LocationCode,
    label: FrameLabel,
    out: &mut Vec<String>,
) {
    let locs = locations_of(symbols, code);
    if locs.is_empty() {
        out.push(format!("${code}"));
        return;
    }
    for loc in locs {
        out.push(location_label(loc, label));
    }
}

/// Frames that a report looks past when it names an allocation site, so that a site
/// is the first frame of the program's own code rather than allocator plumbing.
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
        }
    }

    /// Also skips locations whose function name starts with `pattern` or whose file
    /// path contains it.
    pub fn with_pattern(mut self, pattern: &str) -> Self {
        self.name_prefixes.push(pattern.to_string());
        self.path_fragments.push(pattern.to_string());
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
        |loc| location_label(loc, label),
        |code| format!("${code}"),
    )
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

/// The label of a location; names that are not UTF-8 are shown lossily.
fn location_label(loc: &Location, label: FrameLabel) -> String {
    match label {
        FrameLabel::Location => loc.to_string(),
        FrameLabel::Function => loc.defname.to_string(),
        FrameLabel::File => loc.filename.to_string(),
    }
}

/// The label of the allocation site of an entry: its last location, or `$code`.
pub fn leaf_label(symbols: &dyn LocationLookup, code: LocationCode, label: FrameLabel) -> String {
    match locations_of(symbols, code).last() {
        None => format!("${code}"),
        Some(loc) => location_label(loc, label),
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
        // All plumbing: the innermost location names the site.
        assert_eq!(label(&[2, 3]).as_deref(), Some("do_alloc<Global>"));
        assert_eq!(label(&[]), None);
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
            Some("grow_one<u8>@/rustc/abc/library/alloc/src/raw_vec/mod.rs:2:1-2")
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
