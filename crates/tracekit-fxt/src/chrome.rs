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
    let mut s = Json::default();
    s.raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut summary = ChromeSummary::default();
    let mut records = 0u64;
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
        // Where this record's text starts, to take it back if it has none.
        let mark = s.0.len();
        if summary.events > 0 {
            s.raw(",\n");
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
                s.raw("{\"name\":");
                s.string(e.name);
                s.raw(",\"cat\":");
                s.string(e.category);
                s.raw(",\"ph\":\"");
                s.raw(ph);
                s.raw("\",\"ts\":");
                s.micros(ns(e.ticks));
                if let EventKind::DurationComplete { end_ticks } = e.kind {
                    s.raw(",\"dur\":");
                    s.micros(ns(end_ticks).saturating_sub(ns(e.ticks)));
                }
                s.raw(",\"pid\":");
                s.u64(process.0);
                s.raw(",\"tid\":");
                s.u64(thread.0);
                match id {
                    Some(Id::Dec(id)) => {
                        s.raw(",\"id\":");
                        s.u64(id);
                    }
                    Some(Id::Hex(id)) => s.fmt(format_args!(",\"id\":\"{id:#x}\"")),
                    None => {}
                }
                match e.kind {
                    EventKind::Instant => s.raw(",\"s\":\"t\""),
                    EventKind::FlowStep { .. } | EventKind::FlowEnd { .. } => {
                        s.raw(",\"bp\":\"e\"")
                    }
                    _ => {}
                }
                if !e.args.is_empty() {
                    s.raw(",\"args\":");
                    s.args(e.args);
                }
                s.raw("}");
            }
            Record::KernelObject(o) if o.object_type == ObjectType::PROCESS => {
                s.raw("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
                s.u64(o.koid.0);
                s.raw(",\"args\":{\"name\":");
                s.string(o.name);
                s.raw("}}");
            }
            Record::KernelObject(o) if o.object_type == ObjectType::THREAD => {
                let pid = o.process().unwrap_or(Koid(0));
                s.raw("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
                s.u64(pid.0);
                s.raw(",\"tid\":");
                s.u64(o.koid.0);
                s.raw(",\"args\":{\"name\":");
                s.string(o.name);
                s.raw("}}");
            }
            Record::Log(l) => {
                s.raw("{\"name\":");
                s.string(Str(l.message));
                s.raw(",\"cat\":\"log\",\"ph\":\"i\",\"ts\":");
                s.micros(ns(l.ticks));
                s.raw(",\"pid\":");
                s.u64(l.thread.process.0);
                s.raw(",\"tid\":");
                s.u64(l.thread.thread.0);
                s.raw(",\"s\":\"t\"}");
            }
            Record::ContextSwitch(_)
            | Record::ThreadWakeup(_)
            | Record::LegacyContextSwitch(_)
            | Record::Blob(_)
            | Record::LargeBlob(_)
            | Record::UserspaceObject(_)
            | Record::KernelObject(_) => {
                s.0.truncate(mark);
                summary.skipped += 1;
                continue;
            }
            _ => {
                s.0.truncate(mark);
                continue;
            }
        }
        summary.events += 1;
        if s.0.len() >= FLUSH_BYTES {
            out.write_all(&s.0)?;
            s.0.clear();
        }
    }
    s.raw("\n]}\n");
    out.write_all(&s.0)?;
    Ok(summary)
}

/// The text is handed to the output in pieces of about this size: one write per
/// event cost a call through `dyn Write` and a copy per event.
const FLUSH_BYTES: usize = 1 << 16;

/// An event id: a number, or (for async events, whose ids Chrome compares as
/// strings) hexadecimal text.
enum Id {
    Dec(u64),
    Hex(u64),
}

/// `00` to `99`, two bytes each, for [`Json::u64`].
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// JSON text being written, with writers for the few shapes a Chrome event has.
/// Numbers are written without `core::fmt`, whose per-call dispatch and padding logic
/// were a fifth of a conversion's time.
#[derive(Default)]
struct Json(Vec<u8>);

impl Json {
    #[inline]
    fn raw(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    /// Anything else, through `core::fmt` (rare shapes: hex ids, doubles, blobs).
    fn fmt(&mut self, args: core::fmt::Arguments<'_>) {
        // Writing to a Vec cannot fail.
        let _ = io::Write::write_fmt(&mut self.0, args);
    }

    /// `v` in decimal, as `{v}` would write it.
    #[inline]
    fn u64(&mut self, mut v: u64) {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        while v >= 100 {
            let d = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
        }
        if v >= 10 {
            let d = v as usize * 2;
            i -= 2;
            tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
        } else {
            i -= 1;
            tmp[i] = b'0' + v as u8;
        }
        self.0.extend_from_slice(&tmp[i..]);
    }

    #[inline]
    fn i64(&mut self, v: i64) {
        if v < 0 {
            self.0.push(b'-');
        }
        self.u64(v.unsigned_abs());
    }

    /// Nanoseconds as microseconds, exactly: `1797` is `1.797`.
    #[inline]
    fn micros(&mut self, ns: u64) {
        self.u64(ns / 1000);
        let frac = (ns % 1000) as usize;
        let d = (frac % 100) * 2;
        self.0.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            DIGIT_PAIRS[d],
            DIGIT_PAIRS[d + 1],
        ]);
    }

    /// The arguments as a JSON object, in record order.
    fn args(&mut self, args: Args<'_>) {
        self.0.push(b'{');
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            self.string(a.name);
            self.0.push(b':');
            match a.value {
                ArgValue::Null => self.raw("null"),
                ArgValue::Int32(x) => self.i64(x.into()),
                ArgValue::UInt32(x) => self.u64(x.into()),
                ArgValue::Int64(x) => self.i64(x),
                ArgValue::UInt64(x) => self.u64(x),
                // `{:?}` writes the shortest text that reads back as the same double,
                // always with a fraction or an exponent: a JSON number.
                ArgValue::Double(x) if x.is_finite() => self.fmt(format_args!("{x:?}")),
                ArgValue::Double(x) => self.fmt(format_args!("\"{x}\"")),
                ArgValue::String(v) => self.string(v),
                ArgValue::Pointer(p) => self.fmt(format_args!("\"{p:#x}\"")),
                ArgValue::Koid(k) => self.u64(k.0),
                ArgValue::Bool(b) => self.raw(if b { "true" } else { "false" }),
                ArgValue::Blob(b) => self.fmt(format_args!("\"<{} bytes>\"", b.len())),
            }
        }
        self.0.push(b'}');
    }

    /// `v` as a JSON string: quoted, with `"`, `\` and control characters escaped
    /// (bytes that are not UTF-8 become U+FFFD).
    #[inline]
    fn string(&mut self, v: Str<'_>) {
        let bytes = v.0;
        self.0.push(b'"');
        // Names, categories and most values are printable ASCII: copied as they are.
        if bytes
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            self.0.extend_from_slice(bytes);
        } else {
            self.escaped(bytes);
        }
        self.0.push(b'"');
    }

    /// [`Json::string`]'s text when some byte needs a second look.
    #[cold]
    fn escaped(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
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
            self.raw(&text[start..i]);
            if escape.is_empty() {
                self.fmt(format_args!("\\u{b:04x}"));
            } else {
                self.raw(escape);
            }
            start = i + 1;
        }
        self.raw(&text[start..]);
    }
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
    fn numbers_are_written_as_core_fmt_writes_them() {
        let mut u = vec![0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 65_535, u64::MAX];
        u.extend((0..20).map(|p| 10u64.pow(p)));
        u.extend((1..20).map(|p| 10u64.pow(p) - 1));
        for v in u {
            let mut j = Json::default();
            j.u64(v);
            assert_eq!(j.0, v.to_string().as_bytes());
            let mut j = Json::default();
            j.micros(v);
            assert_eq!(j.0, format!("{}.{:03}", v / 1000, v % 1000).as_bytes());
        }
        for v in [0, -1, 7, -10, -99, 1234, i64::MIN, i64::MAX] {
            let mut j = Json::default();
            j.i64(v);
            assert_eq!(j.0, v.to_string().as_bytes());
        }
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
