//! The [`tracing_subscriber::Layer`] callbacks: what each of `tracing`'s span
//! and event notifications writes (the table in the [crate docs](crate)).

use std::sync::atomic::Ordering;

use tracekit_fxt::format::{ArgValue, EventKind, RawArg, StringRef};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::FxtLayer;
use crate::fields::{Collect, EventFields, EventValue, MAX_FIELDS, Value};
use crate::local::current_tid_cached;
use crate::span::{CachedSpan, SPAN_CACHE, SpanArgs};

impl<S> tracing_subscriber::Layer<S> for FxtLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let _own = crate::alloc::Own::start();
        let Some(span) = ctx.span(id) else { return };
        let mut args = SpanArgs::default();
        attrs.record(&mut Collect(&mut args.args));
        // Fields declared without a value (`field::Empty`), to be recorded later:
        // null until then, so that the begin record shows every field.
        for field in attrs.metadata().fields().iter() {
            if !args.args.iter().any(|(i, _)| *i == field.index()) {
                args.args.push((field.index(), Value::Null));
            }
        }
        self.with_local(|l| l.encode(attrs.metadata(), &args.args, &mut args.encoded));
        span.extensions_mut().insert(args);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let _own = crate::alloc::Own::start();
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let mut new = Vec::new();
        values.record(&mut Collect(&mut new));
        let mut ext = span.extensions_mut();
        let Some(args) = ext.get_mut::<SpanArgs>() else {
            return;
        };
        for (field, v) in &new {
            match args.args.iter_mut().find(|(n, _)| n == field) {
                Some(slot) => slot.1 = v.clone(),
                None => args.args.push((*field, v.clone())),
            }
        }
        // Values recorded while the span is entered here go on its end record (the
        // begin is written); all go on its later entries.
        let raw_id = id.into_u64();
        self.with_local(|l| {
            l.encode(meta, &args.args, &mut args.encoded);
            if l.entered.iter().any(|e| e.0 == raw_id) {
                let fields = l.callsite(meta).fields.clone();
                let late = l.late.entry(raw_id).or_default();
                for (field, v) in new {
                    if let Some(&name) = fields.get(field) {
                        late.push((name, v));
                    }
                }
            }
        });
        // Still under the write lock: a thread copying `encoded` into its cache
        // holds the read lock, so it sees the new bytes with the new version.
        args.state.version.fetch_add(1, Ordering::Release);
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        let _own = crate::alloc::Own::start();
        // A flow from the slice open here now (where the link is made, usually in
        // the span followed) to the follower's next entry.
        let Some(span) = ctx.span(id) else { return };
        let Some(followed) = ctx.span(follows) else {
            return;
        };
        let flow = self.shared.flows.fetch_add(1, Ordering::Relaxed);
        let ticks = self.now();
        let meta = followed.metadata();
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category, thread) = (c.name, c.category, l.thread);
            let kind = EventKind::FlowBegin { id: flow };
            let _ = l
                .writer
                .write_event(kind, thread, category, name, ticks, &[]);
        });
        if let Some(args) = span.extensions().get::<SpanArgs>()
            && let Ok(mut flows) = args.state.flows.lock()
        {
            flows.push(flow);
            args.state.has_flows.store(true, Ordering::Relaxed);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let own = crate::alloc::Own::start();
        let mark = own.mark();
        let ticks = self.now();
        let raw_id = id.into_u64();
        if self.with_local(|l| l.enter_cached(raw_id, ticks, mark)) == Some(true) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let ext = span.extensions();
        let Some(args) = ext.get::<SpanArgs>() else {
            return;
        };
        let state = &args.state;
        let tid = current_tid_cached();
        let mut went_async = false;
        let mut first_entry = false;
        // Nearly always entered on the thread it was first entered on: a load, not
        // a read-modify-write, tells.
        let first_thread = state.first_thread.load(Ordering::Relaxed);
        if first_thread != tid {
            match state
                .first_thread
                .compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    state.first_enter.store(ticks, Ordering::Relaxed);
                    first_entry = true;
                }
                Err(t) if t != tid && !state.moved.swap(true, Ordering::Relaxed) => {
                    went_async = true;
                    self.shared.moved.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        }
        // A task's async begin names the span it runs under (looked up once,
        // here, rather than for every span made), so that it can be followed.
        let parent = match went_async {
            true => span.parent().map(|p| p.id().into_u64()),
            false => None,
        };
        // Flows into this span end at this entry, once.
        let flows = if state.has_flows.load(Ordering::Relaxed)
            && state.has_flows.swap(false, Ordering::Relaxed)
        {
            state
                .flows
                .lock()
                .map(|mut f| std::mem::take(&mut *f))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category, begin, end) = (c.name, c.category, c.begin, c.end);
            let thread = l.thread;
            // The span entered around this one here: the task that polls it.
            let within = (l.entered.last()).map(|e| e.0).filter(|&w| w != raw_id);
            l.entered.push((raw_id, end, mark));
            if went_async {
                let first_enter = state.first_enter.load(Ordering::Relaxed);
                // Once per task: its fields, the span it was made under and the
                // one it runs in (the task polling it), to follow it to either;
                // `within` 0 (no span id is 0) when no span is entered around
                // it, a task of its own, so that a reader knows every async
                // slice here is a task's.
                let arg = |name, id| RawArg::new(StringRef::inline(name), ArgValue::UInt64(id));
                let links: Vec<RawArg<'_>> =
                    [("parent", parent), ("within", Some(within.unwrap_or(0)))]
                        .into_iter()
                        .filter_map(|(name, id)| Some(arg(name, id?)))
                        .collect();
                let mut with_links = args.encoded.clone();
                let encoded = match with_links.append(&links) {
                    Ok(()) => &with_links,
                    Err(_) => &args.encoded,
                };
                let _ = l.writer.write_event_encoded(
                    EventKind::AsyncBegin { id: raw_id },
                    thread,
                    category,
                    name,
                    first_enter,
                    encoded,
                );
            }
            let _ = match &begin {
                Some(begin) => l.writer.emit_encoded(begin, ticks, &args.encoded),
                None => l.writer.write_event_encoded(
                    EventKind::DurationBegin,
                    thread,
                    category,
                    name,
                    ticks,
                    &args.encoded,
                ),
            };
            for &flow in &flows {
                let kind = EventKind::FlowEnd { id: flow };
                let _ = l
                    .writer
                    .write_event(kind, thread, category, name, ticks, &[]);
            }
            // Entered before (here or elsewhere): likely again, so cached. A span
            // entered once is not, and closing it then needs no lookup.
            if !first_entry {
                if !state.cached.swap(true, Ordering::Relaxed) {
                    self.shared.cached.fetch_add(1, Ordering::Relaxed);
                }
                l.spans[raw_id as usize % SPAN_CACHE] = Some(CachedSpan {
                    id: raw_id,
                    state: state.clone(),
                    // Read under the extensions' read lock, which `record` holds
                    // for writing while it changes `encoded` and bumps this.
                    version: state.version.load(Ordering::Acquire),
                    name,
                    category,
                    begin,
                    end,
                    encoded: args.encoded.clone(),
                });
            }
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let own = crate::alloc::Own::start();
        let now = own.mark();
        let ticks = self.now();
        let id = id.into_u64();
        self.with_local(|l| {
            // Spans exit in the order they were entered, nearly always: the end
            // record's header comes from the thread's stack, without a lookup in
            // the registry.
            let (end, allocated) = match l.entered.last() {
                Some(&(top, end, mark)) if top == id => {
                    l.entered.pop();
                    (end, crate::alloc::between(mark, now))
                }
                _ => match l.entered.iter().rposition(|e| e.0 == id) {
                    Some(i) => {
                        let (_, end, mark) = l.entered.remove(i);
                        (end, crate::alloc::between(mark, now))
                    }
                    None => (None, None),
                },
            };
            let late = if l.late.is_empty() {
                Vec::new()
            } else {
                l.late.remove(&id).unwrap_or_default()
            };
            if late.is_empty()
                && allocated.is_none()
                && let Some(end) = end
            {
                let _ = l.writer.emit(&end, ticks, ());
                return;
            }
            let Some(meta) = ctx.metadata(&Id::from_u64(id)) else {
                return;
            };
            let c = l.callsite(meta);
            let (name, category) = (c.name, c.category);
            let thread = l.thread;
            let mut raw = Vec::with_capacity(late.len().min(MAX_FIELDS) + 2);
            for (n, v) in late.iter().take(MAX_FIELDS) {
                raw.push(RawArg::new(*n, l.value(v)));
            }
            if let Some((bytes, count)) = allocated {
                let (b, n) = (l.string("allocated_bytes"), l.string("allocations"));
                raw.push(RawArg::new(b, crate::fields::uint_arg(bytes)));
                raw.push(RawArg::new(n, crate::fields::uint_arg(count)));
            }
            let kind = EventKind::DurationEnd;
            let _ = l
                .writer
                .write_event(kind, thread, category, name, ticks, &raw);
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let _own = crate::alloc::Own::start();
        if self.shared.moved.load(Ordering::Relaxed) == 0
            && self.shared.cached.load(Ordering::Relaxed) == 0
        {
            return;
        }
        let Some(span) = ctx.span(&id) else { return };
        let state = match span.extensions().get::<SpanArgs>() {
            Some(a) => a.state.clone(),
            None => return,
        };
        // Before the registry frees the id for another span.
        if state.cached.swap(false, Ordering::Relaxed) {
            state.closed.store(true, Ordering::Release);
            self.shared.cached.fetch_sub(1, Ordering::Relaxed);
        }
        if !state.moved.load(Ordering::Relaxed) {
            return;
        }
        self.shared.moved.fetch_sub(1, Ordering::Relaxed);
        let meta = span.metadata();
        let ticks = self.now();
        self.with_local(|l| {
            let c = l.callsite(meta);
            let (name, category) = (c.name, c.category);
            let _ = l.writer.write_event(
                EventKind::AsyncEnd { id: id.into_u64() },
                l.thread,
                category,
                name,
                ticks,
                &[],
            );
        });
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let _own = crate::alloc::Own::start();
        let meta = event.metadata();
        let ticks = self.now();
        self.with_local(|l| {
            let mut text = std::mem::take(&mut l.text);
            text.clear();
            let mut fields = EventFields {
                text,
                values: [(0, EventValue::Bool(false)); MAX_FIELDS + 1],
                len: 0,
                message: None,
            };
            event.record(&mut fields);
            // Read in place: the values are an array of their own.
            let EventFields {
                text,
                values,
                len,
                message: fields_message,
            } = &fields;
            let (values, fields_message) = (values.get(..*len).unwrap_or(&[]), *fields_message);
            // The message names the instant; without one, the event's own name.
            let message = match fields_message.and_then(|i| values.get(i)).map(|v| v.1) {
                Some(EventValue::Text(a, b)) => {
                    Some(l.value_string(text.get(a..b).unwrap_or_default()))
                }
                _ => None,
            };
            // Values first (interning needs the thread's state), names after.
            let mut raw = [RawArg::new(StringRef::Empty, ArgValue::Null); MAX_FIELDS + 1];
            let mut names = [0; MAX_FIELDS + 1];
            let mut n = 1;
            for (i, &(field, v)) in values.iter().enumerate() {
                if Some(i) == fields_message || n > MAX_FIELDS {
                    continue;
                }
                raw[n].value = l.event_value(v, text);
                names[n] = field;
                n += 1;
            }
            let c = l.callsite(meta);
            let name = message.unwrap_or(c.name);
            raw[0] = RawArg::new(c.level_key, ArgValue::String(c.level));
            for (slot, field) in raw[1..n].iter_mut().zip(&names[1..n]) {
                slot.name = c.fields.get(*field).copied().unwrap_or_default();
            }
            let category = c.category;
            let thread = l.thread;
            let _ =
                l.writer
                    .write_event(EventKind::Instant, thread, category, name, ticks, &raw[..n]);
            l.text = fields.text;
        });
    }
}
