//! The fast path for event records: a header word computed once per call site, then
//! per event one capacity check, the header, the caller's timestamp, and the arguments.
//!
//! The argument signature is a type: `EventHeader<(Int32, Int64)>` can only be written
//! with an `(Int32, Int64)` value, so writing the wrong number or kind of arguments for
//! a header (a runtime check in Jane Street's `tracing` writer) does not compile, and
//! neither does a 16th
//! argument: tuples implement [`FixedArgs`] up to 15 elements, and since tuples nest
//! (`((A, B), C)` is three arguments), building a header checks the total count with
//! a compile-time assertion (see [`EventHeader`]). Which trailer an event
//! needs is also part of the type: `EventHeader<A, Plain>` for instant, begin and end,
//! `EventHeader<A, WithId>` for counter, async and flow events, and
//! `EventHeader<A, Complete>` for complete events, whose end is checked at runtime.
//!
//! Fast-path arguments name themselves with interned [`StringId`]s, so their size is a
//! constant; inline strings go through the general [`Writer::write_event`].
//!
//! ```
//! use tracekit_fxt::format::{Koid, ThreadId};
//! use tracekit_fxt::write::fast::{EventHeader, Int32};
//! use tracekit_fxt::write::{VecDestination, Writer};
//!
//! let mut w = Writer::new(VecDestination::new())?;
//! let thread = w.set_thread_slot(0, Koid(1), Koid(2))?;
//! let (cat, name, depth) = (w.intern("app")?, w.intern("work")?, w.intern("depth")?);
//! let begin = EventHeader::<(Int32,)>::duration_begin(thread, cat, name);
//! let end = EventHeader::<()>::duration_end(thread, cat, name);
//! for i in 0..10 {
//!     w.emit(&begin, 100 * i, (Int32(depth, 1),))?;
//!     w.emit(&end, 100 * i + 50, ())?;
//! }
//! let bytes = w.finish()?.into_vec();
//! # assert_eq!(bytes.len() % 8, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::marker::PhantomData;

use super::{Destination, EncodedArgs, WriteError, Writer};
use crate::format::{
    ArgType, EventType, Koid, MAX_ARGS, MAX_RECORD_WORDS, RecordType, StringId, ThreadId,
};

mod sealed {
    pub trait Sealed {
        /// Encodes into exactly `WORDS * 8` bytes.
        fn encode_to(self, out: &mut [u8]);
    }
}

/// An argument list whose count and size are known at compile time: one of the
/// argument types of this module, or a tuple of up to 15 of them (`()` for none).
/// Tuples nest, so a list can count more than 15; [`EventHeader`] refuses those at
/// compile time.
pub trait FixedArgs: sealed::Sealed + Copy {
    /// Number of arguments.
    const COUNT: usize;
    /// Words they take.
    const WORDS: usize;
}

#[inline(always)]
fn put(out: &mut [u8], word: u64) {
    if let Some(w) = out.first_chunk_mut::<8>() {
        *w = word.to_le_bytes();
    }
}

#[inline(always)]
const fn arg_head(ty: ArgType, words: u64, name: StringId) -> u64 {
    ty as u64 | words << 4 | (name.get() as u64) << 16
}

macro_rules! one_word_arg {
    ($(#[$m:meta])* $name:ident, $ty:ty, $arg:ident, |$v:ident| $bits:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name(pub StringId, pub $ty);
        impl sealed::Sealed for $name {
            #[inline(always)]
            fn encode_to(self, out: &mut [u8]) {
                let $v = self.1;
                put(out, arg_head(ArgType::$arg, 1, self.0) | ($bits) << 32);
            }
        }
        impl FixedArgs for $name {
            const COUNT: usize = 1;
            const WORDS: usize = 1;
        }
    };
}

macro_rules! two_word_arg {
    ($(#[$m:meta])* $name:ident, $ty:ty, $arg:ident, |$v:ident| $bits:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name(pub StringId, pub $ty);
        impl sealed::Sealed for $name {
            #[inline(always)]
            fn encode_to(self, out: &mut [u8]) {
                let $v = self.1;
                put(out, arg_head(ArgType::$arg, 2, self.0));
                if let Some(rest) = out.get_mut(8..) {
                    put(rest, $bits);
                }
            }
        }
        impl FixedArgs for $name {
            const COUNT: usize = 1;
            const WORDS: usize = 2;
        }
    };
}

/// A null argument (a name with no value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Null(pub StringId);
impl sealed::Sealed for Null {
    #[inline(always)]
    fn encode_to(self, out: &mut [u8]) {
        put(out, arg_head(ArgType::Null, 1, self.0));
    }
}
impl FixedArgs for Null {
    const COUNT: usize = 1;
    const WORDS: usize = 1;
}

one_word_arg!(
    /// An int32 argument.
    Int32, i32, Int32, |v| u64::from(v as u32)
);
one_word_arg!(
    /// A uint32 argument.
    UInt32, u32, UInt32, |v| u64::from(v)
);
one_word_arg!(
    /// A bool argument.
    Bool, bool, Bool, |v| u64::from(v)
);
one_word_arg!(
    /// A string argument whose value is an interned string.
    Str, StringId, String, |v| u64::from(v.get())
);
two_word_arg!(
    /// An int64 argument.
    Int64, i64, Int64, |v| v as u64
);
two_word_arg!(
    /// A uint64 argument.
    UInt64, u64, UInt64, |v| v
);
two_word_arg!(
    /// A double argument.
    Double, f64, Double, |v| v.to_bits()
);
two_word_arg!(
    /// A pointer argument.
    Pointer, u64, Pointer, |v| v
);
two_word_arg!(
    /// A kernel object id argument.
    KoidArg, Koid, Koid, |v| v.0
);

impl sealed::Sealed for () {
    #[inline(always)]
    fn encode_to(self, _out: &mut [u8]) {}
}
impl FixedArgs for () {
    const COUNT: usize = 0;
    const WORDS: usize = 0;
}

macro_rules! tuple_args {
    ($($t:ident $i:tt),+) => {
        impl<$($t: FixedArgs),+> sealed::Sealed for ($($t,)+) {
            #[inline(always)]
            fn encode_to(self, out: &mut [u8]) {
                let mut out = out;
                $(
                    let taken = core::mem::take(&mut out);
                    let (head, tail) = taken.split_at_mut(($t::WORDS * 8).min(taken.len()));
                    self.$i.encode_to(head);
                    out = tail;
                )+
                let _ = out;
            }
        }
        impl<$($t: FixedArgs),+> FixedArgs for ($($t,)+) {
            const COUNT: usize = 0 $(+ $t::COUNT)+;
            const WORDS: usize = 0 $(+ $t::WORDS)+;
        }
    };
}

tuple_args!(A 0);
tuple_args!(A 0, B 1);
tuple_args!(A 0, B 1, C 2);
tuple_args!(A 0, B 1, C 2, D 3);
tuple_args!(A 0, B 1, C 2, D 3, E 4);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);

/// Marker: an event type without trailer (instant, duration begin, duration end).
#[derive(Clone, Copy, Debug)]
pub enum Plain {}
/// Marker: an event type whose trailer is an id (counter, async, flow).
#[derive(Clone, Copy, Debug)]
pub enum WithId {}
/// Marker: a duration complete event (trailer: end timestamp).
#[derive(Clone, Copy, Debug)]
pub enum Complete {}

/// A precomputed event header word for events with argument signature `A` and
/// trailer kind `K`.
///
/// The header's 4-bit argument count holds at most 15 ([`MAX_ARGS`]). Nested tuples
/// can add up to more, so building a header asserts the count at compile time, once
/// per signature; a larger one does not compile (rather than overflowing into the
/// thread ref):
///
/// ```compile_fail,E0080
/// use tracekit_fxt::format::{StringId, ThreadId};
/// use tracekit_fxt::write::fast::{EventHeader, Int32};
///
/// type Eight = (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32);
/// let (t, s) = (ThreadId::new(1).unwrap(), StringId::new(2).unwrap());
/// // 16 arguments: fails with "an FXT event has at most 15 arguments".
/// let _ = EventHeader::<(Eight, Eight)>::instant(t, s, s);
/// ```
///
/// Fifteen, nested or not, is fine:
///
/// ```
/// use tracekit_fxt::format::{StringId, ThreadId};
/// use tracekit_fxt::write::fast::{EventHeader, Int32};
///
/// type Eight = (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32);
/// type Seven = (Int32, Int32, Int32, Int32, Int32, Int32, Int32);
/// let (t, s) = (ThreadId::new(1).unwrap(), StringId::new(2).unwrap());
/// let h = EventHeader::<(Eight, Seven)>::instant(t, s, s);
/// assert_eq!(h.word() >> 20 & 0xF, 15);
/// assert_eq!(h.word() >> 24 & 0xFF, 1);
/// ```
pub struct EventHeader<A, K = Plain> {
    word: u64,
    _sig: PhantomData<fn(A, K)>,
}

impl<A, K> Clone for EventHeader<A, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, K> Copy for EventHeader<A, K> {}

impl<A, K> core::fmt::Debug for EventHeader<A, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "EventHeader({:#018x})", self.word)
    }
}

impl<A: FixedArgs, K> EventHeader<A, K> {
    /// Evaluated at compile time for each `A` whose header is built (a post-
    /// monomorphization error: `cargo check` does not see it, `cargo build` does).
    const ARGS_FIT: () = assert!(
        A::COUNT <= MAX_ARGS,
        "an FXT event has at most 15 arguments"
    );

    const fn build(ty: EventType, thread: ThreadId, category: StringId, name: StringId) -> Self {
        // Every header is built here, so no signature over 15 arguments compiles.
        let () = Self::ARGS_FIT;
        // At most 15 arguments of at most 2 words each, so the size always fits 12 bits.
        let trailer = if ty.has_trailer() { 1 } else { 0 };
        let size = (2 + A::WORDS + trailer) as u64;
        Self {
            word: RecordType::Event as u64
                | size << 4
                | (ty as u64) << 16
                | (A::COUNT as u64) << 20
                | (thread.get() as u64) << 24
                | (category.get() as u64) << 32
                | (name.get() as u64) << 48,
            _sig: PhantomData,
        }
    }

    /// The same header with another name (`header_set_name` in Jane Street's
    /// `tracing` writer).
    pub const fn with_name(self, name: StringId) -> Self {
        Self {
            word: (self.word & 0x0000_FFFF_FFFF_FFFF) | (name.get() as u64) << 48,
            _sig: PhantomData,
        }
    }

    /// The header word.
    pub const fn word(self) -> u64 {
        self.word
    }

    /// Bytes of a record written with this header.
    #[inline(always)]
    pub const fn byte_size(self) -> usize {
        ((self.word & 0xFFF0) >> 1) as usize
    }
}

/// Constructors. They live on `EventHeader<A>` (the default marker) so that
/// `EventHeader::<(Int32,)>::counter(..)` names the signature once; each returns the
/// marker its event type needs.
impl<A: FixedArgs> EventHeader<A, Plain> {
    /// An instant event header.
    pub const fn instant(thread: ThreadId, category: StringId, name: StringId) -> Self {
        Self::build(EventType::Instant, thread, category, name)
    }
    /// A duration begin header.
    pub const fn duration_begin(thread: ThreadId, category: StringId, name: StringId) -> Self {
        Self::build(EventType::DurationBegin, thread, category, name)
    }
    /// A duration end header.
    pub const fn duration_end(thread: ThreadId, category: StringId, name: StringId) -> Self {
        Self::build(EventType::DurationEnd, thread, category, name)
    }
    /// A counter header (id given per event).
    pub const fn counter(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::Counter, thread, category, name)
    }
    /// An async begin header.
    pub const fn async_begin(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::AsyncBegin, thread, category, name)
    }
    /// An async instant header.
    pub const fn async_instant(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::AsyncInstant, thread, category, name)
    }
    /// An async end header.
    pub const fn async_end(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::AsyncEnd, thread, category, name)
    }
    /// A flow begin header.
    pub const fn flow_begin(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::FlowBegin, thread, category, name)
    }
    /// A flow step header.
    pub const fn flow_step(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::FlowStep, thread, category, name)
    }
    /// A flow end header.
    pub const fn flow_end(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, WithId> {
        EventHeader::build(EventType::FlowEnd, thread, category, name)
    }
    /// A duration complete header.
    pub const fn duration_complete(
        thread: ThreadId,
        category: StringId,
        name: StringId,
    ) -> EventHeader<A, Complete> {
        EventHeader::build(EventType::DurationComplete, thread, category, name)
    }
}

impl<D: Destination> Writer<D> {
    /// Writes an instant, duration begin or duration end event from a precomputed
    /// header: one capacity check, then header, `ticks` and `args`.
    #[inline(always)]
    pub fn emit<A: FixedArgs>(
        &mut self,
        header: &EventHeader<A, Plain>,
        ticks: u64,
        args: A,
    ) -> Result<(), WriteError> {
        let bytes = 16 + A::WORDS * 8;
        let out = self.reserve(bytes)?.into_slice();
        if let Some((head, rest)) = out.split_first_chunk_mut::<16>() {
            head[..8].copy_from_slice(&header.word.to_le_bytes());
            head[8..].copy_from_slice(&ticks.to_le_bytes());
            args.encode_to(rest);
        }
        Ok(())
    }

    /// Writes an instant, duration begin or duration end event from the header of
    /// the event without arguments, with `args` encoded beforehand: their count and
    /// size go into the header word here, so one header serves arguments known
    /// only at run time (a span's fields, written on each of its entries).
    #[inline(always)]
    pub fn emit_encoded(
        &mut self,
        header: &EventHeader<(), Plain>,
        ticks: u64,
        args: &EncodedArgs,
    ) -> Result<(), WriteError> {
        let words = 2 + args.words();
        if words > MAX_RECORD_WORDS {
            return Err(WriteError::RecordTooLarge {
                words,
                max: MAX_RECORD_WORDS,
            });
        }
        // The header of `()` says 2 words and no arguments.
        let word = header.word + ((args.words() as u64) << 4) + ((args.count() as u64 & 0xF) << 20);
        let out = self.reserve(words * 8)?.into_slice();
        if let Some((head, rest)) = out.split_first_chunk_mut::<16>() {
            head[..8].copy_from_slice(&word.to_le_bytes());
            head[8..].copy_from_slice(&ticks.to_le_bytes());
            if rest.len() == args.as_bytes().len() {
                rest.copy_from_slice(args.as_bytes());
            }
        }
        Ok(())
    }

    /// Writes a counter, async or flow event; `id` is the counter, correlation or flow
    /// id.
    #[inline(always)]
    pub fn emit_with_id<A: FixedArgs>(
        &mut self,
        header: &EventHeader<A, WithId>,
        ticks: u64,
        args: A,
        id: u64,
    ) -> Result<(), WriteError> {
        self.emit_trailer(header.word, ticks, args, id)
    }

    /// Writes a duration complete event; fails with [`WriteError::EndBeforeStart`]
    /// rather than writing one that ends before it starts.
    #[inline(always)]
    pub fn emit_complete<A: FixedArgs>(
        &mut self,
        header: &EventHeader<A, Complete>,
        start_ticks: u64,
        end_ticks: u64,
        args: A,
    ) -> Result<(), WriteError> {
        if end_ticks < start_ticks {
            return Err(WriteError::EndBeforeStart {
                start: start_ticks,
                end: end_ticks,
            });
        }
        self.emit_trailer(header.word, start_ticks, args, end_ticks)
    }

    #[inline(always)]
    fn emit_trailer<A: FixedArgs>(
        &mut self,
        word: u64,
        ticks: u64,
        args: A,
        trailer: u64,
    ) -> Result<(), WriteError> {
        let bytes = 24 + A::WORDS * 8;
        let out = self.reserve(bytes)?.into_slice();
        if let Some((head, rest)) = out.split_first_chunk_mut::<16>() {
            head[..8].copy_from_slice(&word.to_le_bytes());
            head[8..].copy_from_slice(&ticks.to_le_bytes());
            if let Some((body, tail)) = rest.split_at_mut_checked(A::WORDS * 8) {
                args.encode_to(body);
                put(tail, trailer);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::format::{Arg, ArgValue, EventKind, StringRef};
    use crate::write::VecDestination;

    fn ids() -> (ThreadId, StringId, StringId, StringId) {
        (
            ThreadId::new(1).unwrap(),
            StringId::new(200).unwrap(),
            StringId::new(201).unwrap(),
            StringId::new(202).unwrap(),
        )
    }

    /// The fast path and the general path must produce identical bytes.
    #[test]
    fn fast_path_matches_general_path() {
        let (t, c, n, k) = ids();
        let mut fast = Writer::without_header(VecDestination::new()).unwrap();
        let mut slow = Writer::without_header(VecDestination::new()).unwrap();

        let h = EventHeader::<(Int32, Int64, Double, Str, Bool)>::instant(t, c, n);
        fast.emit(
            &h,
            7,
            (
                Int32(k, -3),
                Int64(k, -1 << 40),
                Double(k, 0.5),
                Str(k, c),
                Bool(k, true),
            ),
        )
        .unwrap();
        let args = [
            Arg::new(k, ArgValue::Int32(-3)),
            Arg::new(k, ArgValue::Int64(-1 << 40)),
            Arg::new(k, ArgValue::Double(0.5)),
            Arg::new(k, ArgValue::String(StringRef::Index(c))),
            Arg::new(k, ArgValue::Bool(true)),
        ];
        slow.instant(t, c, n, 7, &args).unwrap();

        let h = EventHeader::<(UInt32, UInt64, Pointer, KoidArg, Null)>::counter(t, c, n);
        fast.emit_with_id(
            &h,
            9,
            (
                UInt32(k, 5),
                UInt64(k, u64::MAX),
                Pointer(k, 0xdead),
                KoidArg(k, Koid(3)),
                Null(k),
            ),
            42,
        )
        .unwrap();
        let args = [
            Arg::new(k, ArgValue::UInt32(5)),
            Arg::new(k, ArgValue::UInt64(u64::MAX)),
            Arg::new(k, ArgValue::Pointer(0xdead)),
            Arg::new(k, ArgValue::Koid(Koid(3))),
            Arg::new(k, ArgValue::Null),
        ];
        slow.counter(t, c, n, 9, 42, &args).unwrap();

        let h = EventHeader::<()>::duration_complete(t, c, n);
        fast.emit_complete(&h, 10, 20, ()).unwrap();
        slow.write_event(
            EventKind::DurationComplete { end_ticks: 20 },
            t,
            c,
            n,
            10,
            &[],
        )
        .unwrap();
        assert_eq!(
            fast.emit_complete(&h, 30, 20, ()),
            Err(WriteError::EndBeforeStart { start: 30, end: 20 })
        );

        let fast = fast.finish().unwrap().into_vec();
        let slow = slow.finish().unwrap().into_vec();
        assert_eq!(fast, slow);
        assert!(!fast.is_empty());
    }

    /// Arguments encoded beforehand, written through a header without them, give
    /// the general path's bytes; too many words is an error that writes nothing.
    #[test]
    fn encoded_arguments_match_general_path() {
        let (t, c, n, k) = ids();
        let args = [
            Arg::new(k, ArgValue::Int32(-3)),
            Arg::new(k, ArgValue::String(StringRef::inline("a value"))),
            Arg::new(StringRef::inline("inline name"), ArgValue::Double(0.5)),
        ];
        let encoded = crate::write::EncodedArgs::encode(&args).unwrap();
        let mut fast = Writer::without_header(VecDestination::new()).unwrap();
        let mut slow = Writer::without_header(VecDestination::new()).unwrap();
        fast.emit_encoded(&EventHeader::duration_begin(t, c, n), 7, &encoded)
            .unwrap();
        slow.duration_begin(t, c, n, 7, &args).unwrap();
        let none = crate::write::EncodedArgs::new();
        fast.emit_encoded(&EventHeader::duration_end(t, c, n), 9, &none)
            .unwrap();
        slow.duration_end(t, c, n, 9, &[]).unwrap();
        let long = "x".repeat(crate::format::MAX_STRING_LEN);
        let big: Vec<_> = (0..15)
            .map(|_| Arg::new(k, ArgValue::String(StringRef::inline(&long))))
            .collect();
        let big = crate::write::EncodedArgs::encode(&big).unwrap();
        let header = EventHeader::instant(t, c, n);
        assert!(matches!(
            fast.emit_encoded(&header, 11, &big),
            Err(WriteError::RecordTooLarge { .. })
        ));
        let fast = fast.finish().unwrap().into_vec();
        assert_eq!(fast, slow.finish().unwrap().into_vec());
        assert_eq!(fast.len(), 16 + encoded.words() * 8 + 16);
    }

    /// Nested tuples of 15 arguments in all (the most a header holds) encode as 15
    /// flat ones: count 15, thread ref intact.
    #[test]
    fn nested_fifteen_arguments_match_general_path() {
        type Eight = (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32);
        type Seven = (Int64, Int64, Int64, Int64, Int64, Int64, Int64);
        let (t, c, n, k) = ids();
        let h = EventHeader::<(Eight, Seven)>::instant(t, c, n);
        assert_eq!(h.word() >> 20 & 0xF, 15);
        assert_eq!(h.word() >> 24 & 0xFF, u64::from(t.get()));
        let mut fast = Writer::without_header(VecDestination::new()).unwrap();
        let i = |v| Int32(k, v);
        let l = |v| Int64(k, v);
        fast.emit(
            &h,
            5,
            (
                (i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7)),
                (l(8), l(9), l(10), l(11), l(12), l(13), l(14)),
            ),
        )
        .unwrap();
        let mut args: Vec<_> = (0..8).map(|v| Arg::new(k, ArgValue::Int32(v))).collect();
        args.extend((8..15).map(|v| Arg::new(k, ArgValue::Int64(v))));
        let mut slow = Writer::without_header(VecDestination::new()).unwrap();
        slow.instant(t, c, n, 5, &args).unwrap();
        let fast = fast.finish().unwrap().into_vec();
        assert_eq!(fast, slow.finish().unwrap().into_vec());
        assert_eq!(fast.len(), h.byte_size());
    }

    #[test]
    fn header_sizes() {
        let (t, c, n, _) = ids();
        assert_eq!(EventHeader::<()>::instant(t, c, n).byte_size(), 16);
        assert_eq!(
            EventHeader::<(Int64, Int32)>::duration_begin(t, c, n).byte_size(),
            40
        );
        assert_eq!(EventHeader::<()>::async_begin(t, c, n).byte_size(), 24);
        let renamed = EventHeader::<()>::instant(t, c, n).with_name(c);
        assert_eq!(renamed.word() >> 48, u64::from(c.get()));
    }
}
