//! Decoding one framed record into a [`RawRecord`], one function per format section,
//! mirroring the writer's modules. Pure: no reader state is touched here.

use super::Problem;
use super::args::{RawArgs, read_args};
use super::cursor::Cursor;
use super::records::{
    Blob, ContextSwitch, Event, KernelObject, LargeBlob, LargeBlobMeta, LegacyContextSwitch, Log,
    RawRecord, Record, ThreadWakeup, UserspaceObject,
};
use crate::format::{
    BlobType, ClockAnchor, EventKind, EventType, Initialization, Koid, MAGIC, ObjectType,
    ProviderEvent, RecordType, StringId, ThreadId, ThreadRef, ThreadState, bits, metadata_type,
};

/// Collects the problems of one record. Parsing returns `None` for an unusable
/// record; `failed` says whether a problem was already noted for it.
pub(crate) struct Notes<N> {
    note: N,
    failed: bool,
}

impl<N: FnMut(Problem)> Notes<N> {
    #[inline(always)]
    fn note(&mut self, p: Problem) {
        (self.note)(p);
    }

    /// Validated arguments; a problem with them makes the record unusable.
    #[inline(always)]
    fn args<'a>(&mut self, c: &mut Cursor<'a>, count: u8) -> Option<RawArgs<'a>> {
        let args = read_args(c, count, &mut self.note);
        self.failed |= args.is_none();
        args
    }

    /// Notes a problem that makes the record unusable.
    #[inline(always)]
    fn fail<T>(&mut self, p: Problem) -> Option<T> {
        self.failed = true;
        (self.note)(p);
        None
    }
}

/// The size in bytes of the record whose header is `header`.
#[inline]
pub(crate) fn record_bytes(header: u64) -> Result<u64, Problem> {
    let words = if header & 0xF == RecordType::Large as u64 {
        bits(header, 4, 35)
    } else {
        bits(header, 4, 15)
    };
    if words == 0 {
        return Err(Problem::ZeroSizeRecord);
    }
    Ok(words * 8)
}

/// Decodes one record (exactly its bytes). Problems go to `note`; `None` when the
/// record is skipped: an unknown kind, or malformed content (after a note).
#[inline(always)]
pub(crate) fn parse_record<'a>(rec: &'a [u8], note: impl FnMut(Problem)) -> Option<RawRecord<'a>> {
    let mut n = Notes {
        note,
        failed: false,
    };
    let mut c = Cursor::new(rec);
    let h = c.word()?;
    let code = (h & 0xF) as u8;
    let Some(ty) = RecordType::from_code(code) else {
        n.note(Problem::UnknownRecordType(code));
        return None;
    };
    let parsed = match ty {
        RecordType::Metadata => metadata(h, &mut c, &mut n),
        RecordType::Initialization => initialization(h, &mut c, &mut n),
        RecordType::String => string(h, &mut c, &mut n),
        RecordType::Thread => thread(h, &mut c, &mut n),
        RecordType::Event => event(h, &mut c, &mut n),
        RecordType::Blob => blob(h, &mut c),
        RecordType::UserspaceObject => userspace_object(h, &mut c, &mut n),
        RecordType::KernelObject => kernel_object(h, &mut c, &mut n),
        RecordType::Scheduling => scheduling(h, &mut c, &mut n),
        RecordType::Log => log(h, &mut c),
        RecordType::Large => large(h, &mut c, &mut n),
    };
    if parsed.is_none() && !n.failed {
        // A cursor read ran past the record's end.
        n.note(Problem::FieldOutOfRecord);
    }
    parsed
}
fn metadata<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let subtype = bits(h, 16, 19);
    let id = bits(h, 20, 51) as u32;
    Some(match subtype {
        metadata_type::PROVIDER_INFO => Record::ProviderInfo {
            id,
            name: c.stream(bits(h, 52, 59) as usize)?,
        },
        metadata_type::PROVIDER_SECTION => Record::ProviderSection { id },
        metadata_type::PROVIDER_EVENT => Record::ProviderEvent {
            id,
            event: ProviderEvent(bits(h, 52, 55) as u8),
        },
        metadata_type::TRACE_INFO => {
            let info_type = bits(h, 20, 23) as u8;
            if info_type == 0 {
                if h != MAGIC {
                    return n.fail(Problem::BadMagic { word: h });
                }
                Record::Magic
            } else {
                Record::TraceInfo { info_type, word: h }
            }
        }
        other => {
            n.note(Problem::UnknownMetadataType(other as u8));
            return None;
        }
    })
}

fn initialization<'a>(
    _h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let ticks_per_second = c.word()?;
    if ticks_per_second == 0 {
        return n.fail(Problem::ZeroTicksPerSecond);
    }
    // Jane Street's extension: base ticks and base time follow when the record is
    // long enough; shorter extra content is ignored as trailing words.
    let base = if c.remaining() >= 16 {
        Some(ClockAnchor {
            ticks: c.word()?,
            unix_ns: c.word()?,
        })
    } else {
        None
    };
    Some(Record::Initialization(Initialization {
        ticks_per_second,
        base,
    }))
}

fn string<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let value = c.stream(bits(h, 32, 46) as usize)?;
    match StringId::new(bits(h, 16, 30) as u16) {
        Some(id) => Some(Record::String { id, value }),
        None => {
            n.note(Problem::StringIndexZero);
            None
        }
    }
}

fn thread<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let process = Koid(c.word()?);
    let thread = Koid(c.word()?);
    match ThreadId::new(bits(h, 16, 23) as u8) {
        Some(id) => Some(Record::Thread {
            id,
            process,
            thread,
        }),
        None => {
            n.note(Problem::ThreadIndexZero);
            None
        }
    }
}

#[inline(always)]
fn event<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let code = bits(h, 16, 19) as u8;
    let Some(ty) = EventType::from_code(code) else {
        n.note(Problem::UnknownEventType(code));
        return None;
    };
    let ticks = c.word()?;
    let thread = c.thread_ref(bits(h, 24, 31) as u8)?;
    let category = c.string_ref(bits(h, 32, 47) as u16)?;
    let name = c.string_ref(bits(h, 48, 63) as u16)?;
    let args = n.args(c, bits(h, 20, 23) as u8)?;
    let trailer = if ty.has_trailer() { c.word()? } else { 0 };
    Some(Record::Event(Event {
        kind: EventKind::from_parts(ty, trailer),
        ticks,
        thread,
        category,
        name,
        args,
    }))
}

fn blob<'a>(h: u64, c: &mut Cursor<'a>) -> Option<RawRecord<'a>> {
    let name = c.string_ref(bits(h, 16, 31) as u16)?;
    let payload = c.stream(bits(h, 32, 46) as usize)?;
    Some(Record::Blob(Blob {
        name,
        blob_type: BlobType(bits(h, 48, 55) as u8),
        payload,
    }))
}

fn userspace_object<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let pointer = c.word()?;
    let process = match ThreadId::new(bits(h, 16, 23) as u8) {
        Some(id) => ThreadRef::Index(id),
        None => ThreadRef::Inline {
            process: Koid(c.word()?),
            thread: Koid(0),
        },
    };
    let name = c.string_ref(bits(h, 24, 39) as u16)?;
    let args = n.args(c, bits(h, 40, 43) as u8)?;
    Some(Record::UserspaceObject(UserspaceObject {
        process,
        pointer,
        name,
        args,
    }))
}

fn kernel_object<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let koid = Koid(c.word()?);
    let name = c.string_ref(bits(h, 24, 39) as u16)?;
    let args = n.args(c, bits(h, 40, 43) as u8)?;
    Some(Record::KernelObject(KernelObject {
        object_type: ObjectType(bits(h, 16, 23) as u8),
        koid,
        name,
        args,
    }))
}

fn scheduling<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    Some(match bits(h, 60, 63) {
        1 => {
            let ticks = c.word()?;
            let outgoing_tid = Koid(c.word()?);
            let incoming_tid = Koid(c.word()?);
            let args = n.args(c, bits(h, 16, 19) as u8)?;
            Record::ContextSwitch(ContextSwitch {
                ticks,
                cpu: bits(h, 20, 35) as u16,
                outgoing_state: ThreadState(bits(h, 36, 39) as u8),
                outgoing_tid,
                incoming_tid,
                args,
            })
        }
        2 => {
            let ticks = c.word()?;
            let waking_tid = Koid(c.word()?);
            let args = n.args(c, bits(h, 16, 19) as u8)?;
            Record::ThreadWakeup(ThreadWakeup {
                ticks,
                cpu: bits(h, 20, 35) as u16,
                waking_tid,
                args,
            })
        }
        0 => {
            let ticks = c.word()?;
            let outgoing = c.thread_ref(bits(h, 28, 35) as u8)?;
            let incoming = c.thread_ref(bits(h, 36, 43) as u8)?;
            Record::LegacyContextSwitch(LegacyContextSwitch {
                ticks,
                cpu: bits(h, 16, 23) as u8,
                outgoing_state: ThreadState(bits(h, 24, 27) as u8),
                outgoing,
                incoming,
                outgoing_priority: bits(h, 44, 51) as u8,
                incoming_priority: bits(h, 52, 59) as u8,
            })
        }
        other => {
            n.note(Problem::UnknownSchedulingType(other as u8));
            return None;
        }
    })
}

fn log<'a>(h: u64, c: &mut Cursor<'a>) -> Option<RawRecord<'a>> {
    let ticks = c.word()?;
    let thread = c.thread_ref(bits(h, 32, 39) as u8)?;
    let message = c.stream(bits(h, 16, 30) as usize)?;
    Some(Record::Log(Log {
        ticks,
        thread,
        message,
    }))
}

fn large<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let large_type = bits(h, 36, 39) as u8;
    if large_type != 0 {
        n.note(Problem::UnknownLargeRecordType(large_type));
        return None;
    }
    let format = bits(h, 40, 43) as u8;
    if format > 1 {
        n.note(Problem::UnknownLargeBlobFormat(format));
        return None;
    }
    let f = c.word()?;
    let category = c.string_ref(bits(f, 0, 15) as u16)?;
    let name = c.string_ref(bits(f, 16, 31) as u16)?;
    let meta = if format == 0 {
        let ticks = c.word()?;
        let thread = c.thread_ref(bits(f, 36, 43) as u8)?;
        let args = n.args(c, bits(f, 32, 35) as u8)?;
        Some(LargeBlobMeta {
            ticks,
            thread,
            args,
        })
    } else {
        None
    };
    let len = usize::try_from(c.word()?).ok()?;
    let payload = c.stream(len)?;
    Some(Record::LargeBlob(LargeBlob {
        category,
        name,
        meta,
        payload,
    }))
}
