//! Scheduling records (type 8); the reader's `scheduling` module decodes them. The
//! whole format: `docs/fxt-format.md` at the repository root, §13. The subtype is in
//! bits 60–63.
//!
//! | subtype | header bits | body |
//! |---------|-------------|------|
//! | 1, context switch | 16–19 argument count, 20–35 cpu, 36–39 outgoing thread state | timestamp, outgoing tid, incoming tid, arguments |
//! | 2, thread wakeup | 16–19 argument count, 20–35 cpu | timestamp, waking tid, arguments |
//! | 0, legacy context switch | 16–23 cpu, 24–27 outgoing state, 28–35 outgoing thread ref, 36–43 incoming thread ref, 44–51 outgoing priority, 52–59 incoming priority | timestamp, \[outgoing pid, tid\], \[incoming pid, tid\] |
//!
//! Perfetto reads the arguments `incoming_weight`, `outgoing_weight`, `weight` (int32)
//! and `waker` (koid). PyPI `fxt` rejects the legacy form; Jane Street's parser skips
//! all scheduling records.

use super::args::{args_words, count, write_args};
use super::{Destination, WriteError, Writer, check_field};
use crate::format::{Koid, RawArg, RecordType, ThreadRef, ThreadState};

const CONTEXT_SWITCH: u64 = 1;
const THREAD_WAKEUP: u64 = 2;
const LEGACY_CONTEXT_SWITCH: u64 = 0;

/// The two sides of a legacy context switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacySwitchThread {
    /// The thread.
    pub thread: ThreadRef,
    /// Its priority.
    pub priority: u8,
}

impl<D: Destination> Writer<D> {
    /// A context switch on `cpu` from `outgoing_tid` (left in `outgoing_state`) to
    /// `incoming_tid`.
    #[allow(clippy::too_many_arguments)]
    pub fn context_switch(
        &mut self,
        ticks: u64,
        cpu: u16,
        outgoing_state: ThreadState,
        outgoing_tid: Koid,
        incoming_tid: Koid,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let state = check_field("thread state", outgoing_state.0.into(), 4)?;
        let size = 4 + args_words(args)?;
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Scheduling as u64
                | (size as u64) << 4
                | count(args) << 16
                | u64::from(cpu) << 20
                | state << 36
                | CONTEXT_SWITCH << 60,
        );
        w.word(ticks);
        w.word(outgoing_tid.0);
        w.word(incoming_tid.0);
        write_args(&mut w, args);
        Ok(())
    }

    /// A thread wakeup of `waking_tid` on `cpu`.
    pub fn thread_wakeup(
        &mut self,
        ticks: u64,
        cpu: u16,
        waking_tid: Koid,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let size = 3 + args_words(args)?;
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Scheduling as u64
                | (size as u64) << 4
                | count(args) << 16
                | u64::from(cpu) << 20
                | THREAD_WAKEUP << 60,
        );
        w.word(ticks);
        w.word(waking_tid.0);
        write_args(&mut w, args);
        Ok(())
    }

    /// A legacy context switch (subtype 0). Prefer [`context_switch`](Self::context_switch):
    /// PyPI `fxt` rejects this form.
    pub fn legacy_context_switch(
        &mut self,
        ticks: u64,
        cpu: u8,
        outgoing_state: ThreadState,
        outgoing: LegacySwitchThread,
        incoming: LegacySwitchThread,
    ) -> Result<(), WriteError> {
        let state = check_field("thread state", outgoing_state.0.into(), 4)?;
        let size = 2 + outgoing.thread.inline_words() + incoming.thread.inline_words();
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::Scheduling as u64
                | (size as u64) << 4
                | u64::from(cpu) << 16
                | state << 24
                | u64::from(outgoing.thread.encode()) << 28
                | u64::from(incoming.thread.encode()) << 36
                | u64::from(outgoing.priority) << 44
                | u64::from(incoming.priority) << 52
                | LEGACY_CONTEXT_SWITCH << 60,
        );
        w.word(ticks);
        for side in [outgoing, incoming] {
            if let ThreadRef::Inline { process, thread } = side.thread {
                w.word(process.0);
                w.word(thread.0);
            }
        }
        Ok(())
    }
}
