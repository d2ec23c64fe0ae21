//! Source locations of location codes (format notes section 4): what the reports print
//! for a backtrace entry.
//!
//! A location code stands for one backtrace slot, which expands to one or more source
//! locations when functions were inlined, caller first; the last location of the last
//! entry is the allocation site. A code with no locations prints as `$<code>`, as the
//! reference `Event.to_string` does.

use std::borrow::Cow;
use std::fmt;

use crate::event::LocationCode;
use crate::hash::FxHashMap;

/// One source location (`Location.t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// Source file.
    pub filename: String,
    /// Line number.
    pub line: u32,
    /// First character on the line.
    pub start_char: u32,
    /// Last character on the line.
    pub end_char: u32,
    /// Name of the enclosing definition (function).
    pub defname: String,
}

impl fmt::Display for Location {
    /// `defname@filename:line:start_char-end_char`, as `Location.to_string`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}:{}:{}-{}",
            self.defname, self.filename, self.line, self.start_char, self.end_char
        )
    }
}

/// Resolves location codes to source locations.
pub trait Symbols {
    /// The locations of `code`, caller first; empty when the code has none or is
    /// unknown. Callers look each code up once per report, so converting on the fly
    /// is fine.
    fn locations(&self, code: LocationCode) -> Cow<'_, [Location]>;
}

/// A location table built from a trace's location events.
#[derive(Clone, Debug, Default)]
pub struct LocationTable {
    table: FxHashMap<u64, Vec<Location>>,
}

impl LocationTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the locations of `code`.
    pub fn insert(&mut self, code: LocationCode, locations: Vec<Location>) {
        self.table.insert(code.0, locations);
    }

    /// Number of codes.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when no code is known.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

impl Symbols for LocationTable {
    fn locations(&self, code: LocationCode) -> Cow<'_, [Location]> {
        Cow::Borrowed(self.table.get(&code.0).map(Vec::as_slice).unwrap_or(&[]))
    }
}

/// Symbols that know nothing: every entry prints as `$<code>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSymbols;

impl Symbols for NoSymbols {
    fn locations(&self, _code: LocationCode) -> Cow<'_, [Location]> {
        Cow::Borrowed(&[])
    }
}

/// What one frame of a report shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameLabel {
    /// `defname@file:line:start-end`.
    Location,
    /// `defname`.
    Function,
    /// `file`.
    File,
}

/// Pushes the labels of one backtrace entry (one per location, caller first; `$code`
/// when it has none) onto `out`.
pub fn entry_labels(
    symbols: &dyn Symbols,
    code: LocationCode,
    label: FrameLabel,
    out: &mut Vec<String>,
) {
    let locs = symbols.locations(code);
    if locs.is_empty() {
        out.push(format!("${}", code.as_signed()));
        return;
    }
    for loc in locs.iter() {
        out.push(match label {
            FrameLabel::Location => loc.to_string(),
            FrameLabel::Function => loc.defname.clone(),
            FrameLabel::File => loc.filename.clone(),
        });
    }
}

/// The label of the allocation site of an entry: its last location, or `$code`.
pub fn leaf_label(symbols: &dyn Symbols, code: LocationCode, label: FrameLabel) -> String {
    match symbols.locations(code).last() {
        None => format!("${}", code.as_signed()),
        Some(loc) => match label {
            FrameLabel::Location => loc.to_string(),
            FrameLabel::Function => loc.defname.clone(),
            FrameLabel::File => loc.filename.clone(),
        },
    }
}
