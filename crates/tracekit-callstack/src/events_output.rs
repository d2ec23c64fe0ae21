//! magic-trace's event dump (`-output FILE.sexp`/`.binio`): every written event with
//! the thread's call stack before it, the stack compressed against earlier ones
//! (magic-trace's `Callstack_compression`, `src/callstack_compression.ml` in
//! janestreet/magic-trace, itself a simplified memtrace backtrace codec; the corpus
//! case `test_events_output__hello_world_binio` checks it): symbols get ids on first
//! sight, and a run of ids that
//! follows the "follow table" (the id seen after each id last time) is sent as the
//! first id and a step count.
//!
//! The dump is an observer the transcript hands the trace writer with each event, so
//! the writer knows nothing of it and the FXT path, which hands it none, pays nothing.

use std::fmt::Write as _;

use crate::event::{Event, SampleData};
use crate::resolved::{Frame, Observer, Resolved, ResolvedData, write_sexp};
use crate::sexp;
use crate::span;
use crate::symbol::{FxHashMap, SymbolId, SymbolTable};

/// The dump being written and its compression state.
#[derive(Clone, Debug, Default)]
pub(crate) struct EventsOutput {
    pub text: String,
    ids: FxHashMap<SymbolId, u64>,
    follow: FxHashMap<u64, u64>,
}

impl Observer for EventsOutput {
    /// Appends one record: the event and the stack `frames` (bottom first) before it.
    fn event(&mut self, r: &Resolved, frames: &[Frame], symbols: &SymbolTable) {
        let out = &mut self.text;
        out.push_str("((event ");
        write_sexp(out, r);
        out.push_str(") (callstack ((new_symbols (");
        let mut first = true;
        let mut stack_ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            let next = self.ids.len() as u64;
            let id = *self.ids.entry(f.symbol).or_insert_with(|| {
                if !first {
                    out.push(' ');
                }
                first = false;
                let _ = write!(out, "({} {next})", symbols.sexp(f.symbol));
                next
            });
            stack_ids.push(id);
        }
        out.push_str(")) (callstack (");
        // Runs along the follow table: (first id, steps).
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        for &x in &stack_ids {
            match runs.last_mut() {
                Some((_, last, steps)) if self.follow.get(last) == Some(&x) => {
                    *last = x;
                    *steps += 1;
                }
                _ => runs.push((x, x, 0)),
            }
        }
        for (i, (from, _, steps)) in runs.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let _ = write!(out, "({from} {steps})");
        }
        out.push_str(")))))\n");
        for w in stack_ids.windows(2) {
            self.follow.insert(w[0], w[1]);
        }
    }
}

/// magic-trace's S-expression of a parsed event (`Event.t`), as its decoder tests print
/// it; locations print only their addresses.
pub fn event_sexp(event: &Event<'_>) -> String {
    let mut out = String::new();
    match event {
        Event::DecodeError(e) => {
            out.push_str("(Error ((thread ");
            sexp::thread(&mut out, e.thread);
            out.push_str(") (time ");
            match e.time {
                Some(t) => {
                    let _ = write!(out, "({})", span::to_string(t.0));
                }
                None => out.push_str("()"),
            }
            out.push_str(") (instruction_pointer ");
            match e.ip {
                Some(ip) => {
                    let _ = write!(out, "({ip})");
                }
                None => out.push_str("()"),
            }
            let _ = write!(out, ") (message {})))", sexp::atom(e.message));
        }
        Event::Sample(s) => {
            let frame = |loc: &crate::event::Location<'_>| Frame {
                ip: loc.ip,
                symbol: SymbolId::UNKNOWN,
                offset: loc.offset,
                inlined: loc.inlined,
            };
            let data = match &s.data {
                SampleData::Branch(b) => ResolvedData::Branch {
                    trace_state_change: b.trace_state_change,
                    kind: b.kind,
                    src_ip: b.src.ip,
                    dst: frame(&b.dst),
                },
                SampleData::Power { freq_mhz } => ResolvedData::Power {
                    freq_mhz: *freq_mhz,
                },
                SampleData::Callstack(frames) => {
                    ResolvedData::Callstack(frames.iter().map(frame).collect())
                }
                SampleData::Counted(e) => ResolvedData::Counted {
                    location: frame(&e.location),
                    count: e.count,
                    name: e.name,
                },
            };
            write_sexp(
                &mut out,
                &Resolved {
                    thread: s.thread,
                    time: s.time,
                    in_transaction: s.in_transaction,
                    data,
                },
            );
        }
    }
    out
}
