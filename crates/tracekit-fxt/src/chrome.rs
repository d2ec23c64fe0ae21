//! Conversion to Chrome's trace event JSON (what chrome://tracing, Perfetto and
//! speedscope open): what `tracekit fxt to-json` writes.
//!
//! ```text
//! {"displayTimeUnit":"ns","traceEvents":[
//! {"name":"process_name","ph":"M","pid":1,"args":{"name":"myproc"}},
//! {"name":"step","cat":"app","ph":"X","ts":0.010,"dur":4.990,"pid":1,"tid":2,"args":{"size":7}},
//! ...
//! ]}
//! ```
//!
//! | FXT record | Chrome event |
//! |---|---|
//! | instant event | `ph: "i"`, `s: "t"` (thread scope) |
//! | counter event | `ph: "C"`, `id` |
//! | duration begin / end / complete | `ph: "B"` / `"E"` / `"X"` with `dur` |
//! | async begin / instant / end | `ph: "b"` / `"n"` / `"e"`, `id` in hex |
//! | flow begin / step / end | `ph: "s"` / `"t"` / `"f"`, `id`, `bp: "e"` on step and end |
//! | process / thread kernel object | metadata `ph: "M"`, `process_name` / `thread_name` |
//! | log record | instant in category `log`, the message as its name |
//! | scheduling, blobs, userspace and other kernel objects | left out, counted |
//!
//! Times are microseconds (`ts`, `dur`) written exactly, with the nanoseconds as three
//! decimals. Arguments keep their FXT types: integers and finite doubles as numbers,
//! other doubles, pointers (hex) and blobs (their size) as strings, koids as numbers.
//!
//! The JSON is written directly, not through a document tree: converting is a hot
//! path (whole traces of hundreds of megabytes), and a tree per event cost most of
//! the time.

use core::fmt::Write as _;
use std::io;

use crate::ConvertError;
use crate::format::{ArgValue, EventKind, Koid, ObjectType};
use crate::read::{Args, Entry, Record, Records, Str, Thread};

/// What a conversion wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChromeSummary {
    /// Chrome events written.
    pub events: u64,
    /// Records without a Chrome equivalent (scheduling, blobs, objects), left out.
    pub skipped: u64,
}

/// Writes the records of `reader` to `out` as one Chrome trace event JSON document,
/// calling `progress` with the input offset every 8192 records.
pub fn write_chrome_json(
    reader: &mut dyn Records,
    out: &mut dyn io::Write,
    mut progress: impl FnMut(u64),
) -> Result<ChromeSummary, ConvertError> {
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut summary = ChromeSummary::default();
    let mut records = 0u64;
    let mut s = String::with_capacity(512);
    while let Some(Entry {
        offset,
        record,
        tick_rate,
    }) = reader.next_entry()?
    {
        records += 1;
        if records.is_multiple_of(8192) {
            progress(offset);
        }
        s.clear();
        if summary.events > 0 {
            s.push_str(",\n");
        }
        let ns = |t| tick_rate.ns(t);
        match record {
            Record::Event(e) => {
                let Thread { process, thread } = e.thread;
                let (ph, id) = match e.kind {
                    EventKind::Instant => ("i", None),
                    EventKind::Counter { id } => ("C", Some(Id::Dec(id))),
                    EventKind::DurationBegin => ("B", None),
                    EventKind::DurationEnd => ("E", None),
                    EventKind::DurationComplete { .. } => ("X", None),
                    EventKind::AsyncBegin { id } => ("b", Some(Id::Hex(id))),
                    EventKind::AsyncInstant { id } => ("n", Some(Id::Hex(id))),
                    EventKind::AsyncEnd { id } => ("e", Some(Id::Hex(id))),
                    EventKind::FlowBegin { id } => ("s", Some(Id::Dec(id))),
                    EventKind::FlowStep { id } => ("t", Some(Id::Dec(id))),
                    EventKind::FlowEnd { id } => ("f", Some(Id::Dec(id))),
                };
                s.push_str("{\"name\":");
                string(&mut s, e.name);
                s.push_str(",\"cat\":");
                string(&mut s, e.category);
                let _ = write!(s, ",\"ph\":\"{ph}\",\"ts\":");
                micros(&mut s, ns(e.ticks));
                if let EventKind::DurationComplete { end_ticks } = e.kind {
                    s.push_str(",\"dur\":");
                    micros(&mut s, ns(end_ticks).saturating_sub(ns(e.ticks)));
                }
                let _ = write!(s, ",\"pid\":{},\"tid\":{}", process.0, thread.0);
                match id {
                    Some(Id::Dec(id)) => {
                        let _ = write!(s, ",\"id\":{id}");
                    }
                    Some(Id::Hex(id)) => {
                        let _ = write!(s, ",\"id\":\"{id:#x}\"");
                    }
                    None => {}
                }
                match e.kind {
                    EventKind::Instant => s.push_str(",\"s\":\"t\""),
                    EventKind::FlowStep { .. } | EventKind::FlowEnd { .. } => {
                        s.push_str(",\"bp\":\"e\"")
                    }
                    _ => {}
                }
                if !e.args.is_empty() {
                    s.push_str(",\"args\":");
                    args(&mut s, e.args);
                }
                s.push('}');
            }
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                let _ = write!(
                    s,
                    "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":",
                    o.koid.0
                );
                string(&mut s, o.name);
                s.push_str("}}");
            }
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                let pid = o.process().unwrap_or(Koid(0));
                let _ = write!(
                    s,
                    "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                    pid.0, o.koid.0
                );
                string(&mut s, o.name);
                s.push_str("}}");
            }
            Record::Log(l) => {
                s.push_str("{\"name\":");
                string(&mut s, Str(l.message));
                s.push_str(",\"cat\":\"log\",\"ph\":\"i\",\"ts\":");
                micros(&mut s, ns(l.ticks));
                let _ = write!(
                    s,
                    ",\"pid\":{},\"tid\":{},\"s\":\"t\"}}",
                    l.thread.process.0, l.thread.thread.0
                );
            }
            Record::ContextSwitch(_)
            | Record::ThreadWakeup(_)
            | Record::LegacyContextSwitch(_)
            | Record::Blob(_)
            | Record::LargeBlob(_)
            | Record::UserspaceObject(_)
            | Record::KernelObject(_) => {
                summary.skipped += 1;
                continue;
            }
            _ => continue,
        }
        out.write_all(s.as_bytes())?;
        summary.events += 1;
    }
    out.write_all(b"\n]}\n")?;
    Ok(summary)
}

/// An event id: a number, or (for async events, whose ids Chrome compares as
/// strings) hexadecimal text.
enum Id {
    Dec(u64),
    Hex(u64),
}

/// Nanoseconds as microseconds, exactly: `1797` is `1.797`.
fn micros(s: &mut String, ns: u64) {
    let _ = write!(s, "{}.{:03}", ns / 1000, ns % 1000);
}

/// The arguments as a JSON object, in record order.
fn args(s: &mut String, args: Args<'_>) {
    s.push('{');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        string(s, a.name);
        s.push(':');
        let _ = match a.value {
            ArgValue::Null => write!(s, "null"),
            ArgValue::Int32(x) => write!(s, "{x}"),
            ArgValue::UInt32(x) => write!(s, "{x}"),
            ArgValue::Int64(x) => write!(s, "{x}"),
            ArgValue::UInt64(x) => write!(s, "{x}"),
            // `{:?}` writes the shortest text that reads back as the same double,
            // always with a fraction or an exponent: a JSON number.
            ArgValue::Double(x) if x.is_finite() => write!(s, "{x:?}"),
            ArgValue::Double(x) => write!(s, "\"{x}\""),
            ArgValue::String(v) => {
                string(s, v);
                Ok(())
            }
            ArgValue::Pointer(p) => write!(s, "\"{p:#x}\""),
            ArgValue::Koid(k) => write!(s, "{}", k.0),
            ArgValue::Bool(b) => write!(s, "{b}"),
            ArgValue::Blob(b) => write!(s, "\"<{} bytes>\"", b.len()),
        };
    }
    s.push('}');
}

/// `v` as a JSON string: quoted, with `"`, `\` and control characters escaped (bytes
/// that are not UTF-8 become U+FFFD).
fn string(s: &mut String, v: Str<'_>) {
    let text = String::from_utf8_lossy(v.0);
    s.push('"');
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..0x20 => "",
            _ => continue,
        };
        s.push_str(&text[start..i]);
        if escape.is_empty() {
            let _ = write!(s, "\\u{b:04x}");
        } else {
            s.push_str(escape);
        }
        start = i + 1;
    }
    s.push_str(&text[start..]);
    s.push('"');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::format::{Arg, StringRef};
    use crate::read::Reader;
    use crate::write::{VecDestination, Writer};

    fn convert(bytes: &[u8]) -> (serde_json::Value, ChromeSummary) {
        let mut out = Vec::new();
        let summary = write_chrome_json(&mut Reader::new(bytes), &mut out, |_| {}).unwrap();
        (serde_json::from_slice(&out).unwrap(), summary)
    }

    #[test]
    fn events_metadata_and_escapes() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        w.set_process_name(Koid(1), StringRef::inline("my\"proc\n"))
            .unwrap();
        let thread = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
        let (cat, name) = (w.intern("app").unwrap(), w.intern("st\\ep\u{1}é").unwrap());
        let (size, ratio, ptr) = (
            w.intern("size").unwrap(),
            w.intern("ratio").unwrap(),
            w.intern("ptr").unwrap(),
        );
        w.duration_complete(
            thread,
            cat,
            name,
            10,
            5_000,
            &[
                Arg::new(size, ArgValue::Int64(-7)),
                Arg::new(ratio, ArgValue::Double(0.1)),
                Arg::new(ptr, ArgValue::Pointer(0xff)),
            ],
        )
        .unwrap();
        w.counter(
            thread,
            cat,
            name,
            1_797,
            3,
            &[Arg::new(size, ArgValue::UInt32(4))],
        )
        .unwrap();
        w.async_begin(thread, cat, name, 2_000, 0x2a, &[]).unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let (v, summary) = convert(&bytes);
        assert_eq!(
            summary,
            ChromeSummary {
                events: 4,
                skipped: 0
            }
        );
        let e = v["traceEvents"].as_array().unwrap();
        assert_eq!(e[0]["ph"], "M");
        assert_eq!(e[0]["args"]["name"], "my\"proc\n");
        assert_eq!(e[1]["name"], "st\\ep\u{1}é");
        assert_eq!(e[1]["ph"], "X");
        assert_eq!(e[1]["ts"], 0.01);
        assert_eq!(e[1]["dur"], 4.99);
        assert_eq!(
            (e[1]["pid"].as_u64(), e[1]["tid"].as_u64()),
            (Some(1), Some(2))
        );
        assert_eq!(e[1]["args"]["size"], -7);
        assert_eq!(e[1]["args"]["ratio"], 0.1);
        assert_eq!(e[1]["args"]["ptr"], "0xff");
        assert_eq!(e[2]["ph"], "C");
        assert_eq!(e[2]["ts"], 1.797);
        assert_eq!(e[2]["id"], 3);
        assert_eq!(e[3]["ph"], "b");
        assert_eq!(e[3]["id"], "0x2a");
    }

    #[test]
    fn records_without_an_equivalent_are_counted() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let name = w.intern("blob").unwrap();
        w.blob(name, crate::format::BlobType(1), b"12345678")
            .unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let (v, summary) = convert(&bytes);
        assert_eq!(
            summary,
            ChromeSummary {
                events: 0,
                skipped: 1
            }
        );
        assert!(v["traceEvents"].as_array().unwrap().is_empty());
    }
}
