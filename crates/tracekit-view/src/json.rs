//! The answers' JSON writer. Answers come in two layouts, each fixed by what
//! reads it byte for byte: a memtrace trace's answers are what `tracekit
//! memtrace ... --json` prints ([`Layout::Pretty`]); a timeline's are compact
//! ([`Layout::Compact`]), as its drawing answers are written by hand and as
//! the timeline cache keeps the `stats` answer.

/// How an answer's JSON is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Two-space indents, a member per line (serde_json's pretty printer).
    Pretty,
    /// No whitespace.
    Compact,
}

/// `value` as JSON laid out as `layout` says.
pub fn to_json(value: &impl serde::Serialize, layout: Layout) -> String {
    // The answers are plain data (no maps with keys other than strings):
    // serializing them cannot fail.
    match layout {
        Layout::Pretty => serde_json::to_string_pretty(value),
        Layout::Compact => serde_json::to_string(value),
    }
    .unwrap_or_default()
}
