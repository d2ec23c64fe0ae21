//! Events with their symbols interned: what the trace writer queues and processes (a
//! parsed [`Event`](crate::event::Event) borrows the input text, these do not), what it
//! shows an [`Observer`] (magic-trace's events dump), and their S-expression, which
//! both the dump and the writer's warnings print.
//!
//! The types live here rather than in the writer so that the dump can read them
//! without the writer depending on the dump.

use std::fmt::Write as _;

use crate::event::{Address, BranchKind, CountedEvent, Thread, Time, TraceStateChange};
use crate::sexp;
use crate::span;
use crate::symbol::{SymbolId, SymbolTable};

/// Sees each event the trace writer processes inside the filter's region, with the
/// thread's call stack (root first) as it was before the event. The writer takes its
/// observer per call, so that the trait stays inside the crate; `()` observes nothing,
/// and as its method is empty, a writer driven with it (the FXT path) pays nothing.
pub(crate) trait Observer {
    fn event(&mut self, _event: &Resolved, _stack: &[Frame], _symbols: &SymbolTable) {}
}

impl Observer for () {}

impl<O: Observer> Observer for Option<O> {
    fn event(&mut self, event: &Resolved, stack: &[Frame], symbols: &SymbolTable) {
        if let Some(o) = self {
            o.event(event, stack, symbols);
        }
    }
}

/// A frame on a call stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub ip: Address,
    pub symbol: SymbolId,
    pub offset: u64,
    pub inlined: bool,
}

impl Frame {
    pub(crate) const fn synthetic(symbol: SymbolId) -> Self {
        Frame {
            ip: Address(0),
            symbol,
            offset: 0,
            inlined: false,
        }
    }
}

/// An event whose symbols are interned: what the writer queues and processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub thread: Thread,
    pub time: Time,
    pub in_transaction: bool,
    pub data: ResolvedData,
}

/// What happened, by kind of sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResolvedData {
    Branch {
        trace_state_change: Option<TraceStateChange>,
        kind: Option<BranchKind>,
        src_ip: Address,
        dst: Frame,
    },
    Power {
        freq_mhz: u32,
    },
    /// Root first.
    Callstack(Vec<Frame>),
    Counted {
        location: Frame,
        count: u64,
        name: CountedEvent,
    },
}

fn write_change(out: &mut String, c: Option<TraceStateChange>) {
    match c {
        Some(TraceStateChange::Start) => out.push_str(" (trace_state_change Start)"),
        Some(TraceStateChange::End) => out.push_str(" (trace_state_change End)"),
        None => {}
    }
}

/// `(Ok (...))` for a resolved event (locations print only their addresses).
pub(crate) fn write_sexp(out: &mut String, r: &Resolved) {
    out.push_str("(Ok ((thread ");
    sexp::thread(out, r.thread);
    let _ = write!(out, ") (time {}) (data ", span::to_string(r.time.0));
    match &r.data {
        ResolvedData::Branch {
            trace_state_change,
            kind,
            src_ip,
            dst,
        } => {
            out.push_str("(Trace");
            write_change(out, *trace_state_change);
            if let Some(k) = kind {
                let _ = write!(out, " (kind {})", k.sexp_name());
            }
            let _ = write!(out, " (src {src_ip}) (dst {})))", dst.ip);
        }
        ResolvedData::Power { freq_mhz } => {
            let _ = write!(out, "(Power (freq {freq_mhz})))");
        }
        ResolvedData::Callstack(frames) => {
            out.push_str("(Stacktrace_sample (callstack (");
            for (i, f) in frames.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                sexp::hex(out, f.ip);
            }
            out.push_str("))))");
        }
        ResolvedData::Counted {
            location,
            count,
            name,
        } => {
            let name = match name {
                CountedEvent::BranchMisses => "Branch_misses",
                CountedEvent::CacheMisses => "Cache_misses",
            };
            let _ = write!(
                out,
                "(Event_sample (location {}) (count {count}) (name {name})))",
                location.ip
            );
        }
    }
    if r.in_transaction {
        out.push_str(" (in_transaction)");
    }
    out.push_str("))");
}

/// A resolved event as an S-expression.
pub(crate) fn to_sexp(r: &Resolved) -> String {
    let mut s = String::new();
    write_sexp(&mut s, r);
    s
}
