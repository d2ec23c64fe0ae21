//! Folded stacks, the text that flame graph tools read (inferno, Brendan Gregg's
//! `flamegraph.pl`): a line per distinct stack, its frames root first joined by
//! `;`, then a space and the stack's weight: `main;parse;read_line 42`.
//!
//! A frame's name must not hold what frames a line: a `;` would split the frame,
//! so it becomes `:`, as `stackcollapse-perf.pl` and inferno's `collapse-perf`
//! write it; a line break would end the line, so it becomes a space; an empty
//! name would leave nothing between two `;`, so it becomes `?`. The rule is
//! idempotent (an escaped name escapes to itself), so a name escaped twice is
//! still the same frame. Spaces stay: readers take the weight after the last one.

use std::borrow::Cow;
use std::io;

/// What separates the frames of a folded stack.
pub const SEPARATOR: char = ';';

/// `name` as a frame of a folded stack: borrowed when it needs no escaping.
pub fn frame(name: &str) -> Cow<'_, str> {
    if name.is_empty() {
        return Cow::Borrowed("?");
    }
    if !name.contains([SEPARATOR, '\n', '\r']) {
        return Cow::Borrowed(name);
    }
    Cow::Owned(
        name.chars()
            .map(|c| match c {
                SEPARATOR => ':',
                '\n' | '\r' => ' ',
                c => c,
            })
            .collect(),
    )
}

/// Appends frame `name` to the folded stack `line`, escaped, after a `;` unless it
/// is the first frame.
pub fn push_frame(line: &mut String, name: &str) {
    if !line.is_empty() {
        line.push(SEPARATOR);
    }
    line.push_str(&frame(name));
}

/// The folded stack of `frames` (root first), each escaped.
pub fn join<'a>(frames: impl IntoIterator<Item = &'a str>) -> String {
    let mut line = String::new();
    for f in frames {
        push_frame(&mut line, f);
    }
    line
}

/// Writes the line of the stack `frames` (root first, each escaped) of weight
/// `weight`.
pub fn write_line<'a>(
    out: &mut (impl io::Write + ?Sized),
    frames: impl IntoIterator<Item = &'a str>,
    weight: u64,
) -> io::Result<()> {
    let mut first = true;
    for f in frames {
        if !first {
            out.write_all(b";")?;
        }
        first = false;
        out.write_all(frame(f).as_bytes())?;
    }
    writeln!(out, " {weight}")
}

/// Writes the line of the folded stack `stack` (its frames joined, each escaped,
/// as [`push_frame`] and [`join`] make it) of weight `weight`.
pub fn write_stack(
    out: &mut (impl io::Write + ?Sized),
    stack: &str,
    weight: u64,
) -> io::Result<()> {
    writeln!(out, "{stack} {weight}")
}

/// The frames of the folded stack `stack` (a line without its weight), root first.
pub fn frames(stack: &str) -> std::str::Split<'_, char> {
    stack.split(SEPARATOR)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn separators_and_line_breaks_in_names_are_escaped() {
        assert_eq!(frame("main"), "main");
        assert!(matches!(frame("main"), Cow::Borrowed(_)));
        assert_eq!(frame("a;b;c"), "a:b:c");
        assert_eq!(frame("two\nlines\r\n"), "two lines  ");
        assert_eq!(frame(""), "?");
        // Spaces and the rest of a C++ or Rust name stay as they are.
        let name = "std::vector<int, std::allocator<int> >::push_back(int const&)";
        assert_eq!(frame(name), name);
    }

    #[test]
    fn escaping_is_idempotent() {
        for name in ["", "a;b", "x\ny", "plain", "?", "a:b"] {
            let once = frame(name).into_owned();
            assert_eq!(frame(&once), once, "{name:?}");
        }
    }

    #[test]
    fn stacks_are_frames_joined_root_first() {
        let mut line = String::new();
        push_frame(&mut line, "main");
        push_frame(&mut line, "operator;");
        push_frame(&mut line, "");
        assert_eq!(line, "main;operator:;?");
        assert_eq!(join(["main", "operator;", ""]), line);
        assert_eq!(
            frames(&line).collect::<Vec<_>>(),
            ["main", "operator:", "?"]
        );
        let mut out = Vec::new();
        write_line(&mut out, ["main", "a;b"], 7).unwrap();
        write_line(&mut out, [], 1).unwrap();
        write_stack(&mut out, &line, 2).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "main;a:b 7\n 1\nmain;operator:;? 2\n"
        );
    }
}
