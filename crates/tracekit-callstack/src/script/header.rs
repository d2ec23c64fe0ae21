//! The first line of a record: `[COMM] [PID/]TID [[CPU]] SECS.FRAC: [PERIOD] EVENT: REST`.
//!
//! magic-trace asks perf for `-F pid,tid,time,...,event,period`, which prints
//! `  PID/TID SECS.NANOS:   PERIOD EVENT[/CONFIG/][:MODIFIERS]: REST`; perf's default
//! layout starts with the command name (which may contain spaces) and prints only the
//! tid. Both are accepted: the fast path reads the magic-trace layout directly, the
//! general path finds the timestamp token first and reads the columns before it.

use super::lex::{find_either, parse_dec, parse_time, skip_spaces, time_after_seconds, token_end};
use crate::event::{Thread, Time};

/// The parsed header columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header<'a> {
    pub comm: Option<&'a str>,
    pub thread: Thread,
    pub time: Time,
    pub period: Option<u64>,
    /// The event column without its final `:`, e.g. `branches:uH`, `branch-misses/period=50/u`.
    pub event: &'a str,
    /// What the event's name says the rest of the record is.
    pub class: EventClass,
    /// Everything after the event column.
    pub rest: &'a str,
}

impl<'a> Header<'a> {
    /// The event's name: the event column up to its first `/` or `:`.
    pub fn event_name(&self) -> &'a str {
        let end = find_either(self.event.as_bytes(), 0, b'/', b':');
        &self.event[..end]
    }
}

/// The kinds of record a header's event name announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventClass {
    /// `branches`: a branch sample.
    Branches,
    /// `cbr`: a core-to-bus ratio (frequency) change.
    Cbr,
    /// `branch-misses`.
    BranchMisses,
    /// `cache-misses`.
    CacheMisses,
    /// An event that carries nothing for a call-stack timeline (`psb`, ...).
    Ignored,
    /// Anything else: a stack sample (`cycles`, `cpu-clock`, ...).
    Other,
}

/// Events that carry nothing for a call-stack timeline (PT power and packet events).
const IGNORED_EVENTS: &[&str] = &[
    "psb", "pwre", "pwrx", "exstop", "mwait", "ptwrite", "evt", "iflag", "cfe",
];

impl EventClass {
    fn of(name: &str) -> EventClass {
        match name {
            "branches" => EventClass::Branches,
            "cbr" => EventClass::Cbr,
            "branch-misses" => EventClass::BranchMisses,
            "cache-misses" => EventClass::CacheMisses,
            _ if IGNORED_EVENTS.contains(&name) => EventClass::Ignored,
            _ => EventClass::Other,
        }
    }
}

/// The event column (without its `:`) and its class.
fn event_and_class(line: &str, start: usize, end: usize) -> (&str, EventClass) {
    let event = &line[start..end - 1];
    let name_end = find_either(event.as_bytes(), 0, b'/', b':');
    (event, EventClass::of(&event[..name_end]))
}

/// Why a header did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// No `SECS.FRAC:` timestamp column.
    NoTimestamp,
    /// No `EVENT:` column after the timestamp.
    NoEvent,
}

fn thread_of(pid: Option<u64>, tid: Option<u64>) -> Thread {
    // 0 means "unknown" to perf; so does anything that is no valid pid.
    let conv = |v: Option<u64>| v.and_then(|v| u32::try_from(v).ok()).filter(|&v| v != 0);
    Thread {
        pid: conv(pid),
        tid: conv(tid),
    }
}

/// Parses a header line.
pub(crate) fn parse_header(line: &str) -> Result<Header<'_>, HeaderError> {
    let b = line.as_bytes();
    let (comm, thread, time, after_time) = match fast_columns(b) {
        Some((thread, time, _, after)) => (None, thread, time, after),
        None => general_columns(line)?,
    };
    let (period, ev_start, ev_end) = middle_columns(b, after_time)?;
    let (event, class) = event_and_class(line, ev_start, ev_end);
    Ok(Header {
        comm,
        thread,
        time,
        period,
        event,
        class,
        rest: &line[ev_end..],
    })
}

/// What the last headers of a text had, for [`parse_header_cached`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeaderCache<'a> {
    /// A magic-trace layout line up to its timestamp (`  PID/TID [CPU] `), and its thread.
    lead: Option<(&'a [u8], Thread)>,
    /// The seconds of a timestamp after that lead, with their `.`, and their value.
    seconds: Option<(&'a [u8], u64)>,
    /// The text from after the timestamp's `:` to the end of the event column (its
    /// `:`), the period in it, where the event column starts in it, and its class.
    middle: Option<(&'a [u8], Option<u64>, usize, EventClass)>,
}

/// [`parse_header`], skipping the columns that repeat the last header's: perf prints
/// the same thread, padding, period and event on line after line, and comparing bytes
/// is cheaper than reading numbers and looking for ends of columns. Each shortcut is
/// taken only where the full parse would read exactly the compared bytes the same way
/// (see the comments), so the result is always `parse_header`'s.
#[inline]
pub(crate) fn parse_header_cached<'a>(
    line: &'a str,
    cache: &mut HeaderCache<'a>,
) -> Result<Header<'a>, HeaderError> {
    let b = line.as_bytes();
    // Same lead bytes: `fast_columns` would read the same thread from them and stop at
    // the same index (a digit there ends the space and `[CPU]` skipping), where the
    // timestamp must parse as it must in `fast_columns`.
    // Same seconds digits and `.` after the lead: `parse_time` would read the same
    // seconds and stop at the same `.`.
    let cached = cache.lead.and_then(|(lead, thread)| {
        if !b.starts_with(lead) {
            return None;
        }
        let t0 = lead.len();
        let (ns, j) = match cache.seconds {
            Some((text, secs)) if b[t0..].starts_with(text) => {
                time_after_seconds(b, secs, t0 + text.len() - 1)?
            }
            _ => {
                let (secs, dot) = parse_dec(b, t0)?;
                if b.get(dot) != Some(&b'.') {
                    return None;
                }
                cache.seconds = Some((&b[t0..=dot], secs));
                time_after_seconds(b, secs, dot)?
            }
        };
        (b.get(j) == Some(&b':')).then_some((thread, Time(ns), j + 1))
    });
    let (comm, thread, time, after_time) = match cached {
        Some((thread, time, after)) => (None, thread, time, after),
        None => match fast_columns(b) {
            Some((thread, time, time_start, after)) => {
                cache.lead = Some((&b[..time_start], thread));
                (None, thread, time, after)
            }
            None => general_columns(line)?,
        },
    };
    // Same middle bytes followed by white space (or the end): `middle_columns` would
    // find the same period and the same event column, whose end is that white space.
    if let Some((middle, period, ev_off, class)) = cache.middle {
        let ev_end = after_time + middle.len();
        if b[after_time..].starts_with(middle)
            && b.get(ev_end).is_none_or(|&c| c == b' ' || c == b'\t')
        {
            return Ok(Header {
                comm,
                thread,
                time,
                period,
                event: &line[after_time + ev_off..ev_end - 1],
                class,
                rest: &line[ev_end..],
            });
        }
    }
    let (period, ev_start, ev_end) = middle_columns(b, after_time)?;
    let (event, class) = event_and_class(line, ev_start, ev_end);
    cache.middle = Some((&b[after_time..ev_end], period, ev_start - after_time, class));
    Ok(Header {
        comm,
        thread,
        time,
        period,
        event,
        class,
        rest: &line[ev_end..],
    })
}

/// `[PERIOD] EVENT:` after the timestamp at `after_time`: the period, and the start and
/// end (after the `:`) of the event column.
#[inline]
fn middle_columns(b: &[u8], after_time: usize) -> Result<(Option<u64>, usize, usize), HeaderError> {
    let mut i = skip_spaces(b, after_time);
    let mut period = None;
    let tok_end = token_end(b, i);
    if let Some((p, _)) = parse_dec(b, i).filter(|&(_, end)| end == tok_end && tok_end < b.len()) {
        period = Some(p);
        i = skip_spaces(b, tok_end);
    }
    let ev_end = token_end(b, i);
    if ev_end == i || b[ev_end - 1] != b':' {
        return Err(HeaderError::NoEvent);
    }
    Ok((period, i, ev_end))
}

/// `  PID/TID [CPU] SECS.FRAC:` or `  TID SECS.FRAC:`; returns where the timestamp
/// starts and the index after its `:`.
#[inline]
fn fast_columns(b: &[u8]) -> Option<(Thread, Time, usize, usize)> {
    let i = skip_spaces(b, 0);
    let (first, mut i) = parse_dec(b, i)?;
    let (pid, tid) = if b.get(i) == Some(&b'/') {
        let (tid, j) = parse_dec(b, i + 1)?;
        i = j;
        (Some(first), Some(tid))
    } else {
        (None, Some(first))
    };
    if b.get(i) != Some(&b' ') {
        return None;
    }
    i = skip_cpu(b, skip_spaces(b, i));
    let (ns, j) = parse_time(b, i)?;
    if b.get(j) != Some(&b':') {
        return None;
    }
    Some((thread_of(pid, tid), Time(ns), i, j + 1))
}

/// Skips a `[CPU]` column and the spaces after it.
fn skip_cpu(b: &[u8], i: usize) -> usize {
    if b.get(i) == Some(&b'[')
        && let Some((_, j)) = parse_dec(b, i + 1).filter(|&(_, j)| b.get(j) == Some(&b']'))
    {
        return skip_spaces(b, j + 1);
    }
    i
}

/// The general layout: find the first `SECS.FRAC:` token; before it, an optional `[CPU]`,
/// then `PID/TID` or `TID`, and before that the command name.
fn general_columns(line: &str) -> Result<(Option<&str>, Thread, Time, usize), HeaderError> {
    let b = line.as_bytes();
    // (start, end) of the last two tokens seen before the timestamp.
    let mut prev: [Option<(usize, usize)>; 2] = [None, None];
    let mut i = 0;
    loop {
        i = skip_spaces(b, i);
        while i < b.len() && b[i] == b'\t' {
            i = skip_spaces(b, i + 1);
        }
        if i >= b.len() {
            return Err(HeaderError::NoTimestamp);
        }
        let end = token_end(b, i);
        if let Some((ns, _)) = parse_time(b, i).filter(|&(_, j)| j + 1 == end && b[j] == b':') {
            let mut cols = prev;
            // Drop a `[CPU]` column.
            if cols[1].is_some_and(|(s, e)| b[s] == b'[' && b[e - 1] == b']') {
                cols = [None, cols[0]];
            }
            let (thread, comm_end) = match cols[1] {
                Some((s, e)) => match thread_token(&b[s..e]) {
                    Some(thread) => (thread, s),
                    None => (Thread::default(), e),
                },
                None => (Thread::default(), 0),
            };
            let comm = line[..comm_end].trim_matches([' ', '\t']);
            let comm = (!comm.is_empty()).then_some(comm);
            return Ok((comm, thread, Time(ns), end));
        }
        prev = [prev[1], Some((i, end))];
        i = end;
    }
}

/// `PID/TID` or `TID`.
fn thread_token(t: &[u8]) -> Option<Thread> {
    let (first, i) = parse_dec(t, 0)?;
    if i == t.len() {
        return Some(thread_of(None, Some(first)));
    }
    if t[i] != b'/' {
        return None;
    }
    let (tid, j) = parse_dec(t, i + 1)?;
    (j == t.len()).then(|| thread_of(Some(first), Some(tid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_trace_layout() {
        let h = parse_header(
            " 25375/25375 4509191.343298468:                            1   branches:uH:   call  x",
        )
        .unwrap();
        assert_eq!(h.thread.pid, Some(25375));
        assert_eq!(h.time, Time(4509191343298468));
        assert_eq!(h.period, Some(1));
        assert_eq!(h.event, "branches:uH");
        assert_eq!(h.event_name(), "branches");
        assert_eq!(h.class, EventClass::Branches);
        assert_eq!(h.rest, "   call  x");
        assert_eq!(h.comm, None);

        let h = parse_header("3871580/3871580 431228.526799230:         50                  branch-misses/period=50/u:   0").unwrap();
        assert_eq!(h.event_name(), "branch-misses");
        assert_eq!(h.class, EventClass::BranchMisses);
        assert_eq!(h.period, Some(50));

        let h = parse_header("825432/825432 339457.445933440:       1 cycles:u: ").unwrap();
        assert_eq!(h.event_name(), "cycles");
        assert_eq!(h.class, EventClass::Other);
        assert_eq!(h.rest, " ");

        for (event, class) in [
            ("cbr:", EventClass::Cbr),
            ("cache-misses/period=50/u:", EventClass::CacheMisses),
            ("psb:", EventClass::Ignored),
            ("branchesx:", EventClass::Other),
            ("pt/cyc/u:", EventClass::Other),
        ] {
            let line = format!("1/1 1.5: 1 {event} x");
            assert_eq!(parse_header(&line).unwrap().class, class, "{event}");
        }
    }

    #[test]
    fn default_layout_with_comm() {
        let h = parse_header("t  8948   362.251657:     100000 cpu-clock: ").unwrap();
        assert_eq!(h.comm, Some("t"));
        assert_eq!(
            h.thread,
            Thread {
                pid: None,
                tid: Some(8948)
            }
        );
        assert_eq!(h.time, Time(362251657000));
        assert_eq!(h.event_name(), "cpu-clock");

        let h = parse_header("Web Content 12/34 [001] 1.000000001: 1 task-clock:u:").unwrap();
        assert_eq!(h.comm, Some("Web Content"));
        assert_eq!(
            h.thread,
            Thread {
                pid: Some(12),
                tid: Some(34)
            }
        );
        assert_eq!(h.event, "task-clock:u");

        let h = parse_header("5  8948   362.251657: cpu-clock: ").unwrap();
        assert_eq!(h.comm, Some("5"));
        assert_eq!(h.period, None);
    }

    #[test]
    fn bad_headers() {
        assert_eq!(parse_header("hello"), Err(HeaderError::NoTimestamp));
        assert_eq!(parse_header("1/1 1.0: 5"), Err(HeaderError::NoEvent));
        assert_eq!(parse_header("1/1 1.0:"), Err(HeaderError::NoEvent));
        assert_eq!(parse_header(""), Err(HeaderError::NoTimestamp));
        assert_eq!(
            parse_header("0/0 1.0: 1 x:").unwrap().thread,
            Thread::default()
        );
    }
}
