//! Instruction trace errors:
//! ` instruction trace error type N [time S.F ]cpu C pid P tid T ip (0xADDR|0) code N: MESSAGE`.
//!
//! The columns between `error` and `code` are read as `key value` pairs, so the shapes
//! with and without `time`, and newer ones with extra pairs (`machine_pid`, `vcpu`),
//! all parse. The message runs to the end of the line (it may end in ` (dso)`).

use super::lex::{parse_hex, parse_signed_dec, parse_time, skip_spaces, token_end};
use crate::event::{Address, DecodeError, Thread, Time};

/// The text that starts an error record (after leading spaces).
pub(crate) const PREFIX: &str = "instruction trace error";

/// Parses an error line (`line` starts with [`PREFIX`] after optional spaces).
pub(crate) fn parse_trace_error(line: &str) -> Option<DecodeError<'_>> {
    let b = line.as_bytes();
    let mut i = skip_spaces(b, 0);
    i += PREFIX.len();
    if !line.get(..i)?.ends_with(PREFIX) {
        return None;
    }
    let mut thread = Thread::default();
    let mut time = None;
    let mut ip = None;
    loop {
        i = skip_spaces(b, i);
        let key_end = token_end(b, i);
        let key = &line[i..key_end];
        if key.is_empty() {
            return None;
        }
        let v = skip_spaces(b, key_end);
        match key {
            "code" => {
                let (_, end) = parse_signed_dec(b, v)?;
                if b.get(end) != Some(&b':') {
                    return None;
                }
                let msg_start = if b.get(end + 1) == Some(&b' ') {
                    end + 2
                } else {
                    end + 1
                };
                return Some(DecodeError {
                    thread,
                    time,
                    ip,
                    message: line.get(msg_start..).unwrap_or(""),
                });
            }
            "time" => {
                let (ns, end) = parse_time(b, v)?;
                time = Some(Time(ns));
                i = end;
            }
            "pid" | "tid" => {
                let (n, end) = parse_signed_dec(b, v)?;
                let n = u32::try_from(n).ok().filter(|&n| n != 0);
                if key == "pid" {
                    thread.pid = n;
                } else {
                    thread.tid = n;
                }
                i = end;
            }
            "ip" => {
                let end = token_end(b, v);
                let tok = &line[v..end];
                ip = match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
                    Some(hex) => {
                        let (a, e) = parse_hex(hex.as_bytes(), 0)?;
                        if e != hex.len() {
                            return None;
                        }
                        (a != 0).then_some(Address(a))
                    }
                    None if tok == "0" => None,
                    None => return None,
                };
                i = end;
            }
            _ => {
                // `type`, `cpu` and anything newer perf adds: skip the value.
                let end = token_end(b, v);
                if end == v {
                    return None;
                }
                i = end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let e = parse_trace_error(" instruction trace error type 1 time 47170.086912826 cpu -1 pid 293415 tid 293415 ip 0x7ffff7327730 code 7: Overflow packet").unwrap();
        assert_eq!(e.time, Some(Time(47170086912826)));
        assert_eq!(e.ip, Some(Address(0x7ffff7327730)));
        assert_eq!(e.thread.pid, Some(293415));
        assert_eq!(e.message, "Overflow packet");

        let e = parse_trace_error(" instruction trace error type 1 cpu -1 pid 1801680 tid 1801680 ip 0 code 8: Lost trace data").unwrap();
        assert_eq!(e.time, None);
        assert_eq!(e.ip, None);
        assert_eq!(e.message, "Lost trace data");

        let e = parse_trace_error(" instruction trace error type 1 time 1.5 cpu 3 pid -1 tid 7 machine_pid 5 vcpu 2 ip 0xffffffffb0999ed5 code 10: Never-ending loop (refer perf config intel-pt.max-loops)").unwrap();
        assert_eq!(
            e.thread,
            Thread {
                pid: None,
                tid: Some(7)
            }
        );
        assert!(e.ip.unwrap().is_kernel());
        assert_eq!(
            e.message,
            "Never-ending loop (refer perf config intel-pt.max-loops)"
        );

        assert!(parse_trace_error(" instruction trace error type 1").is_none());
        assert!(parse_trace_error(" instruction trace error ip zz code 1: x").is_none());
        assert!(parse_trace_error(" instruction trace error code 1 x").is_none());
        assert!(parse_trace_error(" instruction trace").is_none());
    }
}
