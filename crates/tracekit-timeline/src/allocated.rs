//! Allocations per slice, by name: what a `tracing` program allocated inside
//! each span, when `tracekit-alloc` traced its heap.
//!
//! The tracing layer puts two arguments on a slice's end record, which the
//! timeline joins to the slice's arguments:
//!
//! | argument | what |
//! |---|---|
//! | `allocated_bytes` | bytes allocated on the thread while the slice ran, its children's included (estimated as memtrace does; exact at rate 1) |
//! | `allocations` | allocations sampled meanwhile |
//!
//! A slice's self figures are its own less its children's: the slices one
//! lane deeper on its thread that lie inside it. Async slices carry none.

use rustc_hash::FxHashMap;

use crate::{Timeline, TrackKind};

/// A name's allocations: inside its slices (children included) and their
/// own (children's taken out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Allocated {
    /// Bytes allocated inside the slices.
    pub bytes: u64,
    /// Of those, the bytes not allocated inside a child slice.
    pub self_bytes: u64,
    /// Allocations inside the slices.
    pub allocations: u64,
    /// Of those, the ones not inside a child slice.
    pub self_allocations: u64,
}

/// Whether any slice of `t` carries allocations (a look through the
/// arguments' text the first time, kept).
pub fn has_allocations(t: &Timeline) -> bool {
    *t.has_allocations.get_or_init(|| {
        let key = b"\"allocated_bytes\":";
        t.args_text.windows(key.len()).any(|w| w == key)
    })
}

/// The number after `"key":` in an arguments object.
fn number(args: &str, key: &str) -> Option<u64> {
    let at = args.find(key)? + key.len();
    let digits = args.get(at..)?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits.get(..end)?.parse().ok()
}

/// The allocations of argument set `args`: bytes, allocations.
pub fn of_args(t: &Timeline, args: u32) -> Option<(u64, u64)> {
    if args == 0 {
        return None;
    }
    let text = t.args(args);
    Some((
        number(text, "\"allocated_bytes\":")?,
        number(text, "\"allocations\":").unwrap_or(0),
    ))
}

/// The allocations of the thread slices of `tracks` that overlap `range` (on
/// the trace's clock; `None`: all), by name.
pub fn by_name(
    t: &Timeline,
    tracks: &[usize],
    range: Option<(u64, u64)>,
) -> FxHashMap<u32, Allocated> {
    let mut out: FxHashMap<u32, Allocated> = FxHashMap::default();
    for track in tracks.iter().filter_map(|&i| t.tracks().get(i)) {
        if track.kind != TrackKind::Thread {
            continue;
        }
        // Per lane, each slice's own figures: its whole less its children's.
        let mut own: Vec<Vec<(u64, u64)>> = Vec::with_capacity(track.lanes.len());
        for lane in &track.lanes {
            own.push(
                (0..lane.len())
                    .map(|i| {
                        lane.get(i)
                            .and_then(|s| of_args(t, s.args))
                            .unwrap_or((0, 0))
                    })
                    .collect(),
            );
        }
        for depth in 1..track.lanes.len() {
            let (outer, inner) = (&track.lanes[depth - 1], &track.lanes[depth]);
            for i in 0..inner.len() {
                let Some(s) = inner.get(i) else { continue };
                let (bytes, count) = own[depth][i];
                if bytes == 0 && count == 0 {
                    continue;
                }
                // The parent: the last slice of the lane above starting at
                // or before this one.
                let Some(p) = outer
                    .starting_before(s.start.saturating_add(1))
                    .checked_sub(1)
                else {
                    continue;
                };
                if let Some(parent) = own[depth - 1].get_mut(p) {
                    parent.0 = parent.0.saturating_sub(bytes);
                    parent.1 = parent.1.saturating_sub(count);
                }
            }
        }
        for (depth, lane) in track.lanes.iter().enumerate() {
            for i in lane.shown(range) {
                let Some(s) = lane.get(i) else { continue };
                let Some((bytes, count)) = of_args(t, s.args) else {
                    continue;
                };
                let (self_bytes, self_count) = own[depth][i];
                let a = out.entry(s.name).or_default();
                a.bytes += bytes;
                a.allocations += count;
                a.self_bytes += self_bytes;
                a.self_allocations += self_count;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_after_their_key() {
        let args = r#"{"id":7,"allocated_bytes":4096,"allocations":3}"#;
        assert_eq!(number(args, "\"allocated_bytes\":"), Some(4096));
        assert_eq!(number(args, "\"allocations\":"), Some(3));
        assert_eq!(number(args, "\"missing\":"), None);
    }
}
