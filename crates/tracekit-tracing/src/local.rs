//! A thread's state for one layer: its FXT writer over a buffer of its own, its
//! caches (string refs of `&'static str`s and of callsites, the spans it entered),
//! and how field values become FXT argument values, strings interned in the
//! trace's string table when they repeat.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracekit_fxt::format::{ArgValue, EventKind, RawArg, StringId, StringRef, ThreadRef};
use tracekit_fxt::write::{EncodedArgs, EventHeader, Writer};
use tracing_core::{Level, Metadata};

use crate::fields::{EventValue, MAX_FIELDS, Value, int_arg, uint_arg};
use crate::lock::Slot;
use crate::span::{CachedSpan, SPAN_CACHE};
use crate::writer::{BUFFER, ThreadBuffer};
use crate::{FxtLayer, Shared};

/// A thread's state for one layer.
pub(crate) struct Local {
    pub(crate) writer: Writer<ThreadBuffer>,
    pub(crate) thread: ThreadRef,
    /// Interned `&'static str`s by address.
    pub(crate) strings: HashMap<(usize, usize), Option<StringId>>,
    /// The string refs of each callsite's name, target, level and fields, by the
    /// address of its metadata: one lookup per span or event.
    pub(crate) callsites: HashMap<usize, Callsite>,
    /// The spans entered on this thread and not exited: id, and the header of
    /// their end record when it can be precomputed.
    pub(crate) entered: Vec<Entered>,
    /// Values recorded while a span was entered here, for its end record.
    pub(crate) late: HashMap<u64, Vec<(StringRef<'static>, Value)>>,
    /// Spans entered here more than once: see [`CachedSpan`].
    pub(crate) spans: Box<[Option<CachedSpan>]>,
    pub(crate) shared: Arc<Shared>,
    /// Scratch for argument values that are not `&'static`.
    pub(crate) text: String,
    /// String values seen on this thread: interned from their second time on.
    pub(crate) values: HashMap<Box<str>, Seen>,
    /// The value last found interned in `values`: an event's message is usually
    /// its callsite's last one, and then costs a comparison, not a hash.
    /// Held in place (values this short are the only ones interned), so that
    /// changing it allocates nothing.
    pub(crate) last_value: LastValue,
}

/// What a thread knows of a short string value.
#[derive(Clone, Copy)]
pub(crate) enum Seen {
    /// Seen once, written inline.
    Once,
    /// Interned: written as a ref from now on.
    Interned(StringId),
    /// Seen again once the string table was full: always inline.
    Inline,
}

/// The string value a thread last found interned (see [`Local::last_value`]).
pub(crate) struct LastValue {
    pub(crate) bytes: [u8; INTERNED_VALUE],
    pub(crate) len: u8,
    pub(crate) id: Option<StringId>,
}

/// String values up to this many bytes are interned when they repeat (longer
/// ones rarely do, and cost more to hash than a ref saves).
pub(crate) const INTERNED_VALUE: usize = 64;

/// Distinct string values a thread remembers, so that values that never repeat
/// (ids, timestamps) cannot grow its memory without bound.
pub(crate) const SEEN_VALUES: usize = 4096;

impl Drop for Local {
    fn drop(&mut self) {
        // The thread's last records.
        let _ = self.writer.flush();
    }
}

thread_local! {
    /// The calling thread's state, and the id of the layer it belongs to. Only
    /// this thread takes its slot's owner side (`Slot::lock`).
    pub(crate) static LOCAL: RefCell<Option<(u64, Arc<Slot<Local>>)>> = const { RefCell::new(None) };
}

impl FxtLayer {
    /// Runs `f` with the calling thread's state, made on first use; not at all once
    /// the trace stopped or while the thread is already inside (a `tracing` call
    /// made by the layer itself).
    #[inline]
    pub(crate) fn with_local<R>(&self, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        if self.shared.stopped.load(Ordering::Relaxed) {
            return None;
        }
        LOCAL
            .try_with(|cell| {
                {
                    let slot = cell.try_borrow().ok()?;
                    if let Some((layer, slot)) = slot.as_ref()
                        && *layer == self.shared.id
                    {
                        // SAFETY: this thread's own slot (see `LOCAL`).
                        let mut local = unsafe { slot.lock() }?;
                        return Some(f(&mut local));
                    }
                }
                let new = Arc::new(Slot::new(self.new_local()?));
                if let Ok(mut threads) = self.shared.threads.lock() {
                    threads.retain(|t| t.strong_count() > 0);
                    threads.push(Arc::downgrade(&new));
                }
                let mut slot = cell.try_borrow_mut().ok()?;
                let (_, slot) = slot.insert((self.shared.id, new));
                // SAFETY: this thread's own slot, just made (see `LOCAL`).
                let mut local = unsafe { slot.lock() }?;
                Some(f(&mut local))
            })
            .ok()
            .flatten()
    }

    pub(crate) fn new_local(&self) -> Option<Local> {
        let sender = self.shared.sender.lock().ok()?.clone()?;
        let tid = current_tid();
        let current = std::thread::current();
        let name = match current.name() {
            Some(n) => n.to_string(),
            None => format!("thread {tid}"),
        };
        let thread = self
            .shared
            .registry
            .lock()
            .ok()?
            .thread(self.shared.pid, tid, &name);
        let buffer = ThreadBuffer {
            bytes: vec![0; BUFFER],
            sender: Some(sender),
            shared: self.shared.clone(),
        };
        let writer = Writer::without_header(buffer).ok()?;
        Some(Local {
            writer,
            thread,
            strings: HashMap::default(),
            callsites: HashMap::default(),
            entered: Vec::new(),
            late: HashMap::default(),
            spans: std::iter::repeat_with(|| None).take(SPAN_CACHE).collect(),
            shared: self.shared.clone(),
            text: String::new(),
            values: HashMap::default(),
            last_value: LastValue {
                bytes: [0; INTERNED_VALUE],
                len: 0,
                id: None,
            },
        })
    }

    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        self.shared.clock.now()
    }
}

/// The kernel's id of the calling thread (FXT thread koids are the real tids).
pub(crate) fn current_tid() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u64::try_from(tid).unwrap_or(0)
}

/// A span entered on this thread and not exited yet: its id, the header of
/// its end record (its name and category in it), which is all that exiting it
/// needs but when the header could not be made or values were recorded since,
/// and the thread's allocations at its entry ([`crate::alloc`]). Kept small: it
/// is written on every entry and read on every exit.
pub(crate) type Entered = (u64, Option<EventHeader<()>>, crate::alloc::Mark);

/// A callsite's strings as refs.
pub(crate) struct Callsite {
    pub(crate) name: StringRef<'static>,
    pub(crate) category: StringRef<'static>,
    /// The headers of a span's begin and end records on this thread, for the
    /// writer's fast path; `None` when the thread or a string has no index (past
    /// the 255th thread, or once the string table is full).
    pub(crate) begin: Option<EventHeader<()>>,
    pub(crate) end: Option<EventHeader<()>>,
    /// The argument name `level`, and the callsite's level as its value.
    pub(crate) level_key: StringRef<'static>,
    pub(crate) level: StringRef<'static>,
    /// By field index.
    pub(crate) fields: Vec<StringRef<'static>>,
}

impl Local {
    /// Writes the begin record of span `id` entered at `ticks` if this thread has
    /// it in its cache, unchanged since (no values recorded, no flows to end, not a
    /// closed span whose id was reused), `mark` its allocations at entry; false
    /// when the registry must be asked.
    #[inline]
    pub(crate) fn enter_cached(&mut self, id: u64, ticks: u64, mark: crate::alloc::Mark) -> bool {
        let Some(c) = &self.spans[id as usize % SPAN_CACHE] else {
            return false;
        };
        let s = &c.state;
        if c.id != id
            || s.closed.load(Ordering::Acquire)
            || s.has_flows.load(Ordering::Relaxed)
            || s.version.load(Ordering::Acquire) != c.version
        {
            return false;
        }
        self.entered.push((id, c.end, mark));
        let _ = match &c.begin {
            Some(begin) => self.writer.emit_encoded(begin, ticks, &c.encoded),
            None => self.writer.write_event_encoded(
                EventKind::DurationBegin,
                self.thread,
                c.category,
                c.name,
                ticks,
                &c.encoded,
            ),
        };
        true
    }

    /// The string ref of a `&'static str`: its interned id, or inline once the
    /// table is full.
    #[inline]
    pub(crate) fn string(&mut self, s: &'static str) -> StringRef<'static> {
        let key = (s.as_ptr() as usize, s.len());
        let id = match self.strings.get(&key) {
            Some(&id) => id,
            None => {
                let id = self
                    .shared
                    .registry
                    .lock()
                    .ok()
                    .and_then(|mut r| r.intern(s));
                self.strings.insert(key, id);
                id
            }
        };
        match id {
            Some(id) => StringRef::Index(id),
            None => StringRef::inline(s),
        }
    }

    /// The ref of string value `s` (cut to the format's limit): inline the first
    /// time this thread sees it, interned from the second time on while the string
    /// table has room.
    pub(crate) fn value_string<'v>(&mut self, s: &'v str) -> StringRef<'v> {
        let s = tracekit_fxt::write::truncate_to_limit(s);
        if s.is_empty() || s.len() > INTERNED_VALUE {
            return StringRef::inline(s);
        }
        if let Some(id) = self.last_value.id
            && self
                .last_value
                .bytes
                .get(..usize::from(self.last_value.len))
                == Some(s.as_bytes())
        {
            return StringRef::Index(id);
        }
        let seen = match self.values.get(s) {
            Some(&seen) => seen,
            None => {
                if self.values.len() < SEEN_VALUES {
                    self.values.insert(s.into(), Seen::Once);
                }
                return StringRef::inline(s);
            }
        };
        let seen = match seen {
            Seen::Once => {
                let id = (self.shared.registry.lock().ok()).and_then(|mut r| r.intern(s));
                let seen = id.map_or(Seen::Inline, Seen::Interned);
                self.values.insert(s.into(), seen);
                seen
            }
            seen => seen,
        };
        match seen {
            Seen::Interned(id) => {
                let last = &mut self.last_value;
                if let Some(to) = last.bytes.get_mut(..s.len()) {
                    to.copy_from_slice(s.as_bytes());
                    last.len = s.len() as u8;
                    last.id = Some(id);
                }
                StringRef::Index(id)
            }
            _ => StringRef::inline(s),
        }
    }

    /// The FXT value of an event's field, whose text is in `text`.
    pub(crate) fn event_value<'t>(
        &mut self,
        v: EventValue,
        text: &'t str,
    ) -> ArgValue<'t, StringRef<'t>> {
        match v {
            EventValue::I64(v) => int_arg(v),
            EventValue::U64(v) => uint_arg(v),
            EventValue::F64(v) => ArgValue::Double(v),
            EventValue::Bool(v) => ArgValue::Bool(v),
            EventValue::Text(a, b) => {
                ArgValue::String(self.value_string(text.get(a..b).unwrap_or_default()))
            }
        }
    }

    /// The FXT value of an owned field value.
    pub(crate) fn value<'v>(&mut self, v: &'v Value) -> ArgValue<'v, StringRef<'v>> {
        match v {
            Value::Null => ArgValue::Null,
            Value::I64(v) => int_arg(*v),
            Value::U64(v) => uint_arg(*v),
            Value::F64(v) => ArgValue::Double(*v),
            Value::Bool(v) => ArgValue::Bool(*v),
            Value::Str(s) => ArgValue::String(self.value_string(s)),
        }
    }

    /// Encodes a span's level and fields (`values`, by field index) into `out`.
    pub(crate) fn encode(
        &mut self,
        meta: &'static Metadata<'static>,
        values: &[(usize, Value)],
        out: &mut EncodedArgs,
    ) {
        let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
        let values = &values[..values.len().min(MAX_FIELDS)];
        for (slot, (_, v)) in raw[1..].iter_mut().zip(values) {
            slot.value = self.value(v);
        }
        let c = self.callsite(meta);
        raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
        for (slot, (field, _)) in raw[1..].iter_mut().zip(values) {
            slot.name = c.fields.get(*field).copied().unwrap_or_default();
        }
        // Fifteen arguments at most, and strings cut to the limit: this cannot fail.
        let _ = out.set(&raw[..values.len() + 1]);
    }

    /// The strings of the callsite of `meta`.
    #[inline]
    pub(crate) fn callsite(&mut self, meta: &'static Metadata<'static>) -> &Callsite {
        let key = meta as *const Metadata<'static> as usize;
        if !self.callsites.contains_key(&key) {
            let (name, category) = (self.string(meta.name()), self.string(meta.target()));
            let (begin, end) = match (self.thread, category, name) {
                (ThreadRef::Index(t), StringRef::Index(c), StringRef::Index(n)) => (
                    Some(EventHeader::duration_begin(t, c, n)),
                    Some(EventHeader::duration_end(t, c, n)),
                ),
                _ => (None, None),
            };
            let c = Callsite {
                name,
                category,
                begin,
                end,
                level_key: self.string("level"),
                level: self.string(level_name(meta.level())),
                fields: meta
                    .fields()
                    .iter()
                    .map(|f| self.string(f.name()))
                    .collect(),
            };
            self.callsites.insert(key, c);
        }
        // Inserted above when missing.
        &self.callsites[&key]
    }
}

pub(crate) fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARN",
        Level::INFO => "INFO",
        Level::DEBUG => "DEBUG",
        Level::TRACE => "TRACE",
    }
}

thread_local! {
    static TID: u64 = current_tid();
}

/// The calling thread's tid, read from the kernel once per thread.
pub(crate) fn current_tid_cached() -> u64 {
    TID.try_with(|t| *t).unwrap_or_else(|_| current_tid())
}
