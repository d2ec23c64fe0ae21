//! The text form of a trace, one line per record: what `tracekit fxt dump` prints.
//!
//! ```text
//! 0x00000000 magic
//! 0x00000008 provider_info id=0 name="jane_tracing"
//! 0x00000028 initialization ticks_per_second=1000000000
//! 0x00000030 string id=1 value="process"
//! 0x00000048 thread id=1 process=1 thread=2
//! 0x00000060 duration_begin ts=1000 thread=1/2 category="app" name="step" args={"size": 7}
//! ```
//!
//! Each line is the record's byte offset, its type and its fields. Timestamps are in
//! nanoseconds (ticks converted with the provider's tick rate); strings are quoted as
//! Rust's `{:?}` quotes them (the format's strings are bytes; invalid UTF-8 is shown
//! lossily); threads print as `process/thread` koids; blobs print their size, not
//! their bytes. Refs are resolved against the tables as they were at the record.

use core::fmt::Write as _;
use std::io;

use crate::ConvertError;
use crate::format::{ArgValue, EventKind, ObjectType};
use crate::read::{Args, Entry, Record, Records, Str};

/// Writes one line per record of `reader` to `out` (at most `limit` records), calling
/// `progress` with the input offset every 8192 records; returns the records written.
pub fn write_dump(
    reader: &mut dyn Records,
    out: &mut dyn io::Write,
    limit: Option<u64>,
    mut progress: impl FnMut(u64),
) -> Result<u64, ConvertError> {
    let mut n = 0u64;
    let mut line = String::new();
    while limit.is_none_or(|l| n < l) {
        let Some(Entry {
            offset,
            record,
            tick_rate,
        }) = reader.next_entry()?
        else {
            break;
        };
        line.clear();
        let _ = write!(line, "{offset:#010x} ");
        format_record(&mut line, &record, |t| tick_rate.ns(t));
        line.push('\n');
        out.write_all(line.as_bytes())?;
        n += 1;
        if n.is_multiple_of(8192) {
            progress(offset);
        }
    }
    Ok(n)
}

/// `s` quoted as `{:?}` quotes a string.
pub fn quote(s: Str<'_>) -> String {
    format!("{:?}", s.to_string())
}

fn fmt_value(out: &mut String, v: &ArgValue<'_, Str<'_>>) {
    let _ = match v {
        ArgValue::Null => write!(out, "null"),
        ArgValue::Int32(x) => write!(out, "{x}"),
        ArgValue::UInt32(x) => write!(out, "{x}"),
        ArgValue::Int64(x) => write!(out, "{x}"),
        ArgValue::UInt64(x) => write!(out, "{x}"),
        ArgValue::Double(x) => write!(out, "{x:?}"),
        ArgValue::String(s) => write!(out, "{}", quote(*s)),
        ArgValue::Pointer(p) => write!(out, "{p:#x}"),
        ArgValue::Koid(k) => write!(out, "koid:{k}"),
        ArgValue::Bool(b) => write!(out, "{b}"),
        ArgValue::Blob(b) => write!(out, "<{} bytes>", b.len()),
    };
}

fn fmt_args(out: &mut String, args: Args<'_>) {
    if args.is_empty() {
        return;
    }
    out.push_str(" args={");
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: ", quote(a.name));
        fmt_value(out, &a.value);
    }
    out.push('}');
}

fn object_type_name(t: ObjectType) -> String {
    match t {
        ObjectType::PROCESS => "process".into(),
        ObjectType::THREAD => "thread".into(),
        other => other.0.to_string(),
    }
}

/// One dump line for a record (without the offset).
/// Appends the text of `record` (a dump line without its offset) to `s`; `ns`
/// converts the record's ticks to nanoseconds.
pub fn format_record(s: &mut String, record: &Record<'_>, ns: impl Fn(u64) -> u64) {
    let _ = match record {
        Record::Magic => write!(s, "magic"),
        Record::ProviderInfo { id, name } => {
            write!(s, "provider_info id={id} name={}", quote(Str(name)))
        }
        Record::ProviderSection { id } => write!(s, "provider_section id={id}"),
        Record::ProviderEvent { id, event } => {
            write!(s, "provider_event id={id} event={}", event.0)
        }
        Record::TraceInfo { info_type, word } => {
            write!(s, "trace_info type={info_type} word={word:#018x}")
        }
        Record::Initialization(i) => {
            let _ = write!(s, "initialization ticks_per_second={}", i.ticks_per_second);
            match i.base {
                Some(b) => write!(s, " base_ticks={} base_time_ns={}", b.ticks, b.unix_ns),
                None => Ok(()),
            }
        }
        Record::String { id, value } => {
            write!(s, "string id={} value={}", id.get(), quote(Str(value)))
        }
        Record::Thread {
            id,
            process,
            thread,
        } => write!(
            s,
            "thread id={} process={process} thread={thread}",
            id.get()
        ),
        Record::Event(e) => {
            let _ = write!(s, "{} ts={}", e.kind.event_type().name(), ns(e.ticks));
            let _ = match e.kind {
                EventKind::DurationComplete { end_ticks } => write!(s, " end={}", ns(end_ticks)),
                EventKind::Counter { id } => write!(s, " counter_id={id}"),
                EventKind::AsyncBegin { id }
                | EventKind::AsyncInstant { id }
                | EventKind::AsyncEnd { id } => write!(s, " async_id={id}"),
                EventKind::FlowBegin { id }
                | EventKind::FlowStep { id }
                | EventKind::FlowEnd { id } => {
                    write!(s, " flow_id={id}")
                }
                _ => Ok(()),
            };
            let _ = write!(
                s,
                " thread={} category={} name={}",
                e.thread,
                quote(e.category),
                quote(e.name)
            );
            fmt_args(s, e.args);
            Ok(())
        }
        Record::Blob(b) => write!(
            s,
            "blob name={} type={} bytes={}",
            quote(b.name),
            b.blob_type.0,
            b.payload.len()
        ),
        Record::UserspaceObject(o) => {
            let _ = write!(
                s,
                "userspace_object process={} pointer={:#x} name={}",
                o.process.process,
                o.pointer,
                quote(o.name)
            );
            fmt_args(s, o.args);
            Ok(())
        }
        Record::KernelObject(o) => {
            let _ = write!(
                s,
                "kernel_object type={} koid={} name={}",
                object_type_name(o.object_type),
                o.koid,
                quote(o.name)
            );
            fmt_args(s, o.args);
            Ok(())
        }
        Record::ContextSwitch(c) => {
            let _ = write!(
                s,
                "context_switch ts={} cpu={} outgoing={} state={} incoming={}",
                ns(c.ticks),
                c.cpu,
                c.outgoing_tid,
                c.outgoing_state.0,
                c.incoming_tid
            );
            fmt_args(s, c.args);
            Ok(())
        }
        Record::ThreadWakeup(c) => {
            let _ = write!(
                s,
                "thread_wakeup ts={} cpu={} waking={}",
                ns(c.ticks),
                c.cpu,
                c.waking_tid
            );
            fmt_args(s, c.args);
            Ok(())
        }
        Record::LegacyContextSwitch(c) => write!(
            s,
            "legacy_context_switch ts={} cpu={} outgoing={} state={} priority={} incoming={} priority={}",
            ns(c.ticks),
            c.cpu,
            c.outgoing,
            c.outgoing_state.0,
            c.outgoing_priority,
            c.incoming,
            c.incoming_priority
        ),
        Record::Log(l) => write!(
            s,
            "log ts={} thread={} message={}",
            ns(l.ticks),
            l.thread,
            quote(Str(l.message))
        ),
        Record::LargeBlob(b) => {
            let _ = write!(s, "large_blob");
            if let Some(m) = &b.meta {
                let _ = write!(s, " ts={} thread={}", ns(m.ticks), m.thread);
            }
            let _ = write!(
                s,
                " category={} name={} bytes={}",
                quote(b.category),
                quote(b.name),
                b.payload.len()
            );
            if let Some(m) = &b.meta {
                fmt_args(s, m.args);
            }
            Ok(())
        }
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::format::{Arg, Koid, StringRef};
    use crate::read::Reader;
    use crate::write::{VecDestination, Writer};

    #[test]
    fn one_line_per_record() {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let thread = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
        let (cat, name, size) = (
            w.intern("app").unwrap(),
            w.intern("step").unwrap(),
            w.intern("size").unwrap(),
        );
        w.duration_begin(
            thread,
            cat,
            name,
            1_000,
            &[Arg::new(size, ArgValue::Int32(7))],
        )
        .unwrap();
        w.instant(thread, cat, "say \"hi\"", 1_500, &[]).unwrap();
        w.duration_end(thread, cat, name, 2_000, &[]).unwrap();
        w.set_process_name(Koid(1), StringRef::inline("proc"))
            .unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let mut out = Vec::new();
        let n = write_dump(&mut Reader::new(&bytes), &mut out, None, |_| {}).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() as u64, n);
        assert_eq!(lines[0], "0x00000000 magic");
        let tail: Vec<&str> = lines.iter().rev().take(4).rev().map(|l| &l[11..]).collect();
        assert_eq!(
            tail,
            [
                r#"duration_begin ts=1000 thread=1/2 category="app" name="step" args={"size": 7}"#,
                r#"instant ts=1500 thread=1/2 category="app" name="say \"hi\"""#,
                r#"duration_end ts=2000 thread=1/2 category="app" name="step""#,
                r#"kernel_object type=process koid=1 name="proc""#,
            ]
        );
        // The offsets are the records' own.
        let offsets: Vec<u64> = lines
            .iter()
            .map(|l| u64::from_str_radix(&l[2..10], 16).unwrap())
            .collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*offsets.last().unwrap() as usize, bytes.len() - 24);
        // A limit stops early.
        let mut out = Vec::new();
        assert_eq!(
            write_dump(&mut Reader::new(&bytes), &mut out, Some(2), |_| {}).unwrap(),
            2
        );
    }
}
