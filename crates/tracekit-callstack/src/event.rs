//! The event model: what one `perf script` record means once parsed.
//!
//! Mirrors magic-trace's `Event.t` (`src/event.ml` in janestreet/magic-trace): a
//! record is either a
//! sample (a branch, a power/frequency change, a sampled call stack or a counted event
//! such as a branch miss) or an instruction-trace decode error. Events borrow their
//! text (symbol names, DSOs, messages) from the input buffer, so parsing allocates
//! nothing except for sampled call stacks.

use std::fmt;

/// A timestamp or duration in nanoseconds.
///
/// Parsed timestamps count from perf's clock origin (usually boot); the trace writer
/// subtracts the first event's time before writing anything ("mapped time").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

impl Time {
    /// Zero nanoseconds.
    pub const ZERO: Time = Time(0);

    /// The number of nanoseconds.
    pub fn ns(self) -> i64 {
        self.0
    }
}

/// A perf thread: the record's pid and tid. perf prints `0` (or a negative value in
/// error records) when it does not know one; those become `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Thread {
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
}

/// An instruction address. Values with the top bit set are kernel addresses; magic-trace
/// reads addresses as signed 64-bit numbers, so [`Address::as_signed`] is negative for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address(pub u64);

impl Address {
    /// The address as magic-trace's signed `int64`.
    pub fn as_signed(self) -> i64 {
        self.0 as i64
    }

    /// True for kernel addresses (negative as a signed number).
    pub fn is_kernel(self) -> bool {
        self.as_signed() < 0
    }
}

impl fmt::Display for Address {
    /// Formats as magic-trace's `Int64.Hex`: `0x1f`, or `-0x68dfef00` for kernel addresses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.as_signed();
        if v < 0 {
            write!(f, "-0x{:x}", v.unsigned_abs())
        } else {
            write!(f, "0x{v:x}")
        }
    }
}

/// The symbol of a location, as perf printed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Symbol<'a> {
    /// `NAME+0xOFF (DSO)`: a symbol perf resolved.
    Perf(&'a str),
    /// `[unknown] (DSO)`: perf knew the DSO but not the symbol. magic-trace names it
    /// `[unknown @ ADDR (DSO)]`, so each address is a different symbol.
    UnknownInDso(&'a str),
    /// Nothing perf could resolve (`[unknown]` without a DSO, or text in no known shape).
    Unknown,
    /// The synthetic frame pushed when tracing stops (`tr end`).
    Untraced,
    /// The synthetic frame pushed when tracing stops on a return.
    Returned,
    /// The synthetic frame pushed when tracing stops on a system call.
    Syscall,
}

impl Symbol<'_> {
    /// The name magic-trace gives a symbol without its address: synthetic frames get
    /// their bracketed names; `UnknownInDso` needs the address, see [`Location::display_name`].
    pub fn fixed_name(&self) -> Option<&str> {
        match self {
            Symbol::Perf(name) => Some(name),
            Symbol::UnknownInDso(_) => None,
            Symbol::Unknown => Some("[unknown]"),
            Symbol::Untraced => Some("[untraced]"),
            Symbol::Returned => Some("[returned]"),
            Symbol::Syscall => Some("[syscall]"),
        }
    }
}

/// A code location: an address and the symbol perf printed for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location<'a> {
    /// The instruction pointer.
    pub ip: Address,
    /// The symbol containing it.
    pub symbol: Symbol<'a>,
    /// Offset of `ip` from the symbol's start (perf's `+0x..`; truncated to 64 bits
    /// when perf prints garbage).
    pub offset: u64,
    /// True for a frame perf marked `(inlined)` (with `--inline`).
    pub inlined: bool,
}

impl<'a> Location<'a> {
    /// A location with no address, for the synthetic frames.
    pub const fn synthetic(symbol: Symbol<'a>) -> Self {
        Location {
            ip: Address(0),
            symbol,
            offset: 0,
            inlined: false,
        }
    }

    /// magic-trace's display name of this location's symbol, written into `out`.
    pub fn write_display_name(&self, out: &mut String) {
        use fmt::Write as _;
        match self.symbol {
            Symbol::UnknownInDso(dso) => {
                let _ = write!(out, "[unknown @ {} ({dso})]", self.ip);
            }
            other => out.push_str(other.fixed_name().unwrap_or_default()),
        }
    }

    /// magic-trace's display name of this location's symbol.
    pub fn display_name(&self) -> String {
        let mut s = String::new();
        self.write_display_name(&mut s);
        s
    }

    /// Whether two locations have the same symbol in magic-trace's sense (equal names;
    /// `[unknown @ …]` symbols are equal only with equal address and DSO).
    pub fn same_symbol(&self, other: &Location<'_>) -> bool {
        match (self.symbol, other.symbol) {
            (Symbol::UnknownInDso(a), Symbol::UnknownInDso(b)) => a == b && self.ip == other.ip,
            (Symbol::Perf(a), Symbol::Perf(b)) => a == b,
            (a, b) => std::mem::discriminant(&a) == std::mem::discriminant(&b),
        }
    }
}

/// The branch kind of an Intel PT branch sample (perf's flags column, without the
/// trace start/end prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchKind {
    /// `async`: an asynchronous branch (interrupt, fault).
    Async,
    /// `call`.
    Call,
    /// `return`.
    Return,
    /// `syscall`.
    Syscall,
    /// `sysret`.
    Sysret,
    /// `hw int`: a hardware interrupt.
    HardwareInterrupt,
    /// `int`: a software interrupt (e.g. `int3`).
    Interrupt,
    /// `iret`.
    Iret,
    /// `jmp` or `jcc`.
    Jump,
    /// `tx abrt`: a TSX transaction abort.
    TxAbort,
}

impl BranchKind {
    /// magic-trace's constructor name (used in S-expression dumps).
    pub(crate) fn sexp_name(self) -> &'static str {
        match self {
            BranchKind::Async => "Async",
            BranchKind::Call => "Call",
            BranchKind::Return => "Return",
            BranchKind::Syscall => "Syscall",
            BranchKind::Sysret => "Sysret",
            BranchKind::HardwareInterrupt => "Hardware_interrupt",
            BranchKind::Interrupt => "Interrupt",
            BranchKind::Iret => "Iret",
            BranchKind::Jump => "Jump",
            BranchKind::TxAbort => "Tx_abort",
        }
    }
}

/// Whether a branch starts or stops tracing (`tr strt` / `tr end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceStateChange {
    /// `tr strt`: tracing (re)starts at the destination.
    Start,
    /// `tr end`: tracing stops at the source.
    End,
}

/// An Intel PT branch sample: `FLAGS SRC_IP SRC_SYM => DST_IP DST_SYM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch<'a> {
    /// `tr strt` / `tr end`, if present (both at once count as neither).
    pub trace_state_change: Option<TraceStateChange>,
    /// The branch kind; `None` when the flags name no kind (or one we do not know).
    pub kind: Option<BranchKind>,
    /// Where the branch came from.
    pub src: Location<'a>,
    /// Where it went.
    pub dst: Location<'a>,
}

/// Which counted event an [`EventSample`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CountedEvent {
    /// `branch-misses`.
    BranchMisses,
    /// `cache-misses`.
    CacheMisses,
}

impl CountedEvent {
    /// The perf event name, also the name of its track and slices.
    pub fn name(self) -> &'static str {
        match self {
            CountedEvent::BranchMisses => "branch-misses",
            CountedEvent::CacheMisses => "cache-misses",
        }
    }
}

/// One sample of a counted event (magic-trace's experimental extra events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSample<'a> {
    /// Where it happened.
    pub location: Location<'a>,
    /// The sample's period.
    pub count: u64,
    /// Which event.
    pub name: CountedEvent,
}

/// What a sample carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SampleData<'a> {
    /// An Intel PT branch.
    Branch(Branch<'a>),
    /// A `cbr` record: the core frequency changed.
    Power {
        /// Frequency in MHz.
        freq_mhz: u32,
    },
    /// A sampled call stack (`cycles`, `cpu-clock`, ...), root first.
    Callstack(Vec<Location<'a>>),
    /// A counted event (`branch-misses`, `cache-misses`).
    Counted(EventSample<'a>),
}

/// A sample record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The thread it belongs to.
    pub thread: Thread,
    /// perf's `comm` column, when the layout has one.
    pub comm: Option<&'a str>,
    /// Its timestamp.
    pub time: Time,
    /// Whether it happened inside a TSX transaction (`(x)`).
    pub in_transaction: bool,
    /// What it says.
    pub data: SampleData<'a>,
}

/// An `instruction trace error` record: perf could not decode part of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError<'a> {
    /// The thread it belongs to.
    pub thread: Thread,
    /// Its timestamp; some perf versions print none.
    pub time: Option<Time>,
    /// The address where decoding failed (`ip 0` becomes `None`).
    pub ip: Option<Address>,
    /// perf's message, e.g. `Overflow packet`.
    pub message: &'a str,
}

/// One parsed `perf script` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A sample.
    Sample(Sample<'a>),
    /// A decode error.
    DecodeError(DecodeError<'a>),
}

impl<'a> Event<'a> {
    /// The thread the event belongs to.
    pub fn thread(&self) -> Thread {
        match self {
            Event::Sample(s) => s.thread,
            Event::DecodeError(e) => e.thread,
        }
    }

    /// The event's time, if it has one.
    pub fn time(&self) -> Option<Time> {
        match self {
            Event::Sample(s) => Some(s.time),
            Event::DecodeError(e) => e.time,
        }
    }

    /// Shifts the event's time by `-origin` (the harness's time origin).
    pub fn shift_time(&mut self, origin: Time) {
        match self {
            Event::Sample(s) => s.time = Time(s.time.0.wrapping_sub(origin.0)),
            Event::DecodeError(e) => {
                if let Some(t) = &mut e.time {
                    *t = Time(t.0.wrapping_sub(origin.0));
                }
            }
        }
    }

    /// The perf `comm` of the event, when known.
    pub fn comm(&self) -> Option<&'a str> {
        match self {
            Event::Sample(s) => s.comm,
            Event::DecodeError(_) => None,
        }
    }
}
