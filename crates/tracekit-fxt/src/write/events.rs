//! Event records (type 4), general path: any thread ref, inline or indexed strings,
//! arguments as values. The precomputed-header fast path is in [`fast`](super::fast);
//! the reader's `events` module decodes both. The whole format: `docs/fxt-format.md`
//! at the repository root, §8 "Event records".
//!
//! | bits  | field             |
//! |-------|-------------------|
//! | 0–3   | 4                 |
//! | 4–15  | size in words     |
//! | 16–19 | event type        |
//! | 20–23 | argument count    |
//! | 24–31 | thread ref        |
//! | 32–47 | category ref      |
//! | 48–63 | name ref          |
//!
//! Body: timestamp, \[process koid, thread koid\], \[category stream\], \[name stream\],
//! arguments, \[trailer word: counter id, end timestamp, async or flow id\].
//!
//! | event type | trailer |
//! |------------|---------|
//! | 0 instant, 2 duration begin, 3 duration end | none |
//! | 1 counter | counter id |
//! | 4 duration complete | end timestamp (ticks) |
//! | 5 async begin, 6 async instant, 7 async end | correlation id |
//! | 8 flow begin, 9 flow step, 10 flow end | flow id |

use super::args::{EncodedArgs, args_words, count, ref_words, write_args};
use super::{Destination, Words, WriteError, Writer};
use crate::format::{EventKind, RawArg, RecordType, StringRef, ThreadRef};

impl<D: Destination> Writer<D> {
    /// Writes one event of any kind. The wrappers below name the kinds.
    pub fn write_event<'s>(
        &mut self,
        kind: EventKind,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let (words, n) = (args_words(args)?, count(args));
        self.event(
            kind,
            thread.into(),
            category.into(),
            name.into(),
            ticks,
            words,
            n,
            |w| write_args(w, args),
        )
    }

    /// [`write_event`](Self::write_event) with arguments encoded beforehand. With an
    /// indexed thread and strings, [`emit_encoded`](Self::emit_encoded) writes the
    /// same record from a precomputed header.
    pub fn write_event_encoded<'s>(
        &mut self,
        kind: EventKind,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &EncodedArgs,
    ) -> Result<(), WriteError> {
        let (words, n) = (args.words(), args.count() as u64);
        self.event(
            kind,
            thread.into(),
            category.into(),
            name.into(),
            ticks,
            words,
            n,
            |w| w.stream(args.as_bytes()),
        )
    }

    /// An event record whose `count` arguments take `args_words` words, written by
    /// `write_args`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn event(
        &mut self,
        kind: EventKind,
        thread: ThreadRef,
        category: StringRef<'_>,
        name: StringRef<'_>,
        ticks: u64,
        args_words: usize,
        count: u64,
        write_args: impl FnOnce(&mut Words<'_>),
    ) -> Result<(), WriteError> {
        if let EventKind::DurationComplete { end_ticks } = kind
            && end_ticks < ticks
        {
            return Err(WriteError::EndBeforeStart {
                start: ticks,
                end: end_ticks,
            });
        }
        let trailer = kind.trailer();
        let size = 2
            + thread.inline_words()
            + ref_words(category)?
            + ref_words(name)?
            + args_words
            + usize::from(trailer.is_some());
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Event as u64
                | (size as u64) << 4
                | (kind.event_type() as u64) << 16
                | count << 20
                | u64::from(thread.encode()) << 24
                | u64::from(category.encode()) << 32
                | u64::from(name.encode()) << 48,
        );
        w.word(ticks);
        if let ThreadRef::Inline { process, thread } = thread {
            w.word(process.0);
            w.word(thread.0);
        }
        if let StringRef::Inline(s) = category {
            w.stream(s);
        }
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        write_args(&mut w);
        if let Some(t) = trailer {
            w.word(t);
        }
        Ok(())
    }

    /// An instant event.
    pub fn instant<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        self.write_event(EventKind::Instant, thread, category, name, ticks, args)
    }

    /// A counter event; each numeric argument is one sample of series `counter_id`.
    pub fn counter<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        counter_id: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let kind = EventKind::Counter { id: counter_id };
        self.write_event(kind, thread, category, name, ticks, args)
    }

    /// A duration begin event.
    pub fn duration_begin<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        self.write_event(
            EventKind::DurationBegin,
            thread,
            category,
            name,
            ticks,
            args,
        )
    }

    /// A duration end event (closes the innermost open slice on the thread).
    pub fn duration_end<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        self.write_event(EventKind::DurationEnd, thread, category, name, ticks, args)
    }

    /// A duration complete event; fails with [`WriteError::EndBeforeStart`] if
    /// `end_ticks < start_ticks`.
    #[allow(clippy::too_many_arguments)]
    pub fn duration_complete<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        start_ticks: u64,
        end_ticks: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let kind = EventKind::DurationComplete { end_ticks };
        self.write_event(kind, thread, category, name, start_ticks, args)
    }

    /// An async begin event with correlation id `async_id`.
    #[allow(clippy::too_many_arguments)]
    pub fn async_begin<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        async_id: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let kind = EventKind::AsyncBegin { id: async_id };
        self.write_event(kind, thread, category, name, ticks, args)
    }

    /// An async instant event.
    #[allow(clippy::too_many_arguments)]
    pub fn async_instant<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        async_id: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let kind = EventKind::AsyncInstant { id: async_id };
        self.write_event(kind, thread, category, name, ticks, args)
    }

    /// An async end event.
    #[allow(clippy::too_many_arguments)]
    pub fn async_end<'s>(
        &mut self,
        thread: impl Into<ThreadRef>,
        category: impl Into<StringRef<'s>>,
        name: impl Into<StringRef<'s>>,
        ticks: u64,
        async_id: u64,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let kind = EventKind::AsyncEnd { id: async_id };
        self.write_event(kind, thread, category, name, ticks, args)
    }

    /// A flow begin event, bound to the enclosing slice on `thread`. Name and category
    /// are left empty (Perfetto ignores them); use [`write_event`](Self::write_event)
    /// to set them.
    pub fn flow_begin(
        &mut self,
        thread: impl Into<ThreadRef>,
        ticks: u64,
        flow_id: u64,
    ) -> Result<(), WriteError> {
        let kind = EventKind::FlowBegin { id: flow_id };
        self.write_event(kind, thread, StringRef::Empty, StringRef::Empty, ticks, &[])
    }

    /// A flow step event.
    pub fn flow_step(
        &mut self,
        thread: impl Into<ThreadRef>,
        ticks: u64,
        flow_id: u64,
    ) -> Result<(), WriteError> {
        let kind = EventKind::FlowStep { id: flow_id };
        self.write_event(kind, thread, StringRef::Empty, StringRef::Empty, ticks, &[])
    }

    /// A flow end event.
    pub fn flow_end(
        &mut self,
        thread: impl Into<ThreadRef>,
        ticks: u64,
        flow_id: u64,
    ) -> Result<(), WriteError> {
        let kind = EventKind::FlowEnd { id: flow_id };
        self.write_event(kind, thread, StringRef::Empty, StringRef::Empty, ticks, &[])
    }
}
