//! Property tests: random record streams, with string and thread slots rebound along
//! the way, write and read back to exactly the records a model of the tables predicts.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use tracekit_fxt::format::{
    Arg, ArgValue, EventKind, Koid, StringId, StringRef, ThreadId, ThreadRef,
};
use tracekit_fxt::read::{ReadOptions, Reader, Record, StreamReader};
use tracekit_fxt::write::{VecDestination, Writer};

#[derive(Clone, Debug)]
enum SRef {
    Empty,
    Index(u16),
    Inline(String),
}

#[derive(Clone, Debug)]
enum TRef {
    Index(u8),
    Inline(u64, u64),
}

#[derive(Clone, Debug)]
enum Val {
    Null,
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F64(u64),
    Str(SRef),
    Ptr(u64),
    Koid(u64),
    Bool(bool),
    Blob(Vec<u8>),
}

#[derive(Clone, Debug)]
enum Op {
    SetString(u16, String),
    SetThread(u8, u64, u64),
    Event {
        kind: EventKind,
        thread: TRef,
        category: SRef,
        name: SRef,
        ticks: u64,
        args: Vec<(SRef, Val)>,
    },
    Log(TRef, u64, String),
}

// Ids 2..=12 (id 1 is the header's "process"), threads 1..=4: small ranges, so
// slots are rebound often.
fn sref() -> impl Strategy<Value = SRef> {
    prop_oneof![
        Just(SRef::Empty),
        (2u16..=12).prop_map(SRef::Index),
        "[a-z é]{1,12}".prop_map(SRef::Inline),
    ]
}

fn tref() -> impl Strategy<Value = TRef> {
    prop_oneof![
        (1u8..=4).prop_map(TRef::Index),
        (any::<u64>(), any::<u64>()).prop_map(|(p, t)| TRef::Inline(p, t)),
    ]
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        Just(Val::Null),
        any::<i32>().prop_map(Val::I32),
        any::<u32>().prop_map(Val::U32),
        any::<i64>().prop_map(Val::I64),
        any::<u64>().prop_map(Val::U64),
        any::<u64>().prop_map(Val::F64),
        sref().prop_map(Val::Str),
        any::<u64>().prop_map(Val::Ptr),
        any::<u64>().prop_map(Val::Koid),
        any::<bool>().prop_map(Val::Bool),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Val::Blob),
    ]
}

fn kind() -> impl Strategy<Value = EventKind> {
    (0u8..11, any::<u64>()).prop_map(|(t, x)| {
        EventKind::from_parts(tracekit_fxt::format::EventType::from_code(t).unwrap(), x)
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => ((2u16..=12), "[a-z]{0,10}").prop_map(|(i, s)| Op::SetString(i, s)),
        2 => ((1u8..=4), any::<u64>(), any::<u64>()).prop_map(|(i, p, t)| Op::SetThread(i, p, t)),
        6 => (kind(), tref(), sref(), sref(), any::<u64>(), proptest::collection::vec((sref(), val()), 0..=15))
            .prop_map(|(kind, thread, category, name, ticks, args)| {
                // A complete event must not end before it starts.
                let kind = match kind {
                    EventKind::DurationComplete { end_ticks } => {
                        EventKind::DurationComplete { end_ticks: end_ticks.max(ticks) }
                    }
                    k => k,
                };
                Op::Event { kind, thread, category, name, ticks, args }
            }),
        1 => (tref(), any::<u64>(), "[ -~]{0,30}").prop_map(|(t, ticks, m)| Op::Log(t, ticks, m)),
    ]
}

fn to_ref(s: &SRef) -> StringRef<'_> {
    match s {
        SRef::Empty => StringRef::Empty,
        SRef::Index(i) => StringRef::Index(StringId::new(*i).unwrap()),
        SRef::Inline(s) => StringRef::inline(s),
    }
}

fn to_thread(t: &TRef) -> ThreadRef {
    match t {
        TRef::Index(i) => ThreadRef::Index(ThreadId::new(*i).unwrap()),
        TRef::Inline(p, t) => ThreadRef::Inline {
            process: Koid(*p),
            thread: Koid(*t),
        },
    }
}

fn to_value(v: &Val) -> ArgValue<'_, StringRef<'_>> {
    match v {
        Val::Null => ArgValue::Null,
        Val::I32(x) => ArgValue::Int32(*x),
        Val::U32(x) => ArgValue::UInt32(*x),
        Val::I64(x) => ArgValue::Int64(*x),
        Val::U64(x) => ArgValue::UInt64(*x),
        Val::F64(bits) => ArgValue::Double(f64::from_bits(*bits)),
        Val::Str(s) => ArgValue::String(to_ref(s)),
        Val::Ptr(x) => ArgValue::Pointer(*x),
        Val::Koid(x) => ArgValue::Koid(Koid(*x)),
        Val::Bool(b) => ArgValue::Bool(*b),
        Val::Blob(b) => ArgValue::Blob(b),
    }
}

/// What the tables hold, as the reader should see them.
#[derive(Default)]
struct Model {
    strings: std::collections::HashMap<u16, String>,
    threads: std::collections::HashMap<u8, (u64, u64)>,
}

impl Model {
    fn s(&self, r: &SRef) -> String {
        match r {
            SRef::Empty => String::new(),
            SRef::Index(i) => self
                .strings
                .get(i)
                .cloned()
                .unwrap_or_else(|| "<unknown>".into()),
            SRef::Inline(s) => s.clone(),
        }
    }
    fn t(&self, r: &TRef) -> (u64, u64) {
        match r {
            TRef::Index(i) => self.threads.get(i).copied().unwrap_or((0, 0)),
            TRef::Inline(p, t) => (*p, *t),
        }
    }
    fn v(&self, v: &Val) -> String {
        match v {
            Val::Str(s) => format!("String({:?})", self.s(s)),
            Val::F64(bits) => format!("Double({})", bits),
            other => format!("{:?}", to_value(other)),
        }
    }
}

fn describe_value(v: &ArgValue<'_, tracekit_fxt::read::Str<'_>>) -> String {
    match v {
        ArgValue::String(s) => format!("String({:?})", s.to_string()),
        ArgValue::Double(d) => format!("Double({})", d.to_bits()),
        ArgValue::Null => "Null".into(),
        ArgValue::Int32(x) => format!("Int32({x})"),
        ArgValue::UInt32(x) => format!("UInt32({x})"),
        ArgValue::Int64(x) => format!("Int64({x})"),
        ArgValue::UInt64(x) => format!("UInt64({x})"),
        ArgValue::Pointer(x) => format!("Pointer({x})"),
        ArgValue::Koid(x) => format!("Koid({x:?})"),
        ArgValue::Bool(x) => format!("Bool({x})"),
        ArgValue::Blob(b) => format!("Blob({b:?})"),
    }
}

fn expected(ops: &[Op]) -> Vec<String> {
    let mut m = Model::default();
    let mut out = Vec::new();
    for op in ops {
        out.push(match op {
            Op::SetString(i, s) => {
                m.strings.insert(*i, s.clone());
                format!("string {i} {s:?}")
            }
            Op::SetThread(i, p, t) => {
                m.threads.insert(*i, (*p, *t));
                format!("thread {i} {p} {t}")
            }
            Op::Event {
                kind,
                thread,
                category,
                name,
                ticks,
                args,
            } => {
                let args: Vec<String> = args
                    .iter()
                    .map(|(n, v)| format!("{:?}={}", m.s(n), m.v(v)))
                    .collect();
                format!(
                    "event {kind:?} {ticks} {:?} {:?} {:?} [{}]",
                    m.t(thread),
                    m.s(category),
                    m.s(name),
                    args.join(", ")
                )
            }
            Op::Log(t, ticks, msg) => format!("log {:?} {ticks} {msg:?}", m.t(t)),
        });
    }
    out
}

fn describe(rec: &Record<'_>) -> Option<String> {
    Some(match rec {
        Record::String { id, value } => {
            format!("string {} {:?}", id.get(), String::from_utf8_lossy(value))
        }
        Record::Thread {
            id,
            process,
            thread,
        } => format!("thread {} {} {}", id.get(), process.0, thread.0),
        Record::Event(e) => {
            let args: Vec<String> = e
                .args
                .iter()
                .map(|a| format!("{:?}={}", a.name.to_string(), describe_value(&a.value)))
                .collect();
            format!(
                "event {:?} {} {:?} {:?} {:?} [{}]",
                e.kind,
                e.ticks,
                (e.thread.process.0, e.thread.thread.0),
                e.category.to_string(),
                e.name.to_string(),
                args.join(", ")
            )
        }
        Record::Log(l) => format!(
            "log {:?} {} {:?}",
            (l.thread.process.0, l.thread.thread.0),
            l.ticks,
            String::from_utf8_lossy(l.message)
        ),
        _ => return None,
    })
}

fn write(ops: &[Op]) -> Vec<u8> {
    let mut w = Writer::new(VecDestination::new()).unwrap();
    for op in ops {
        match op {
            Op::SetString(i, s) => w
                .set_string(StringId::new(*i).unwrap(), s.as_bytes())
                .unwrap(),
            Op::SetThread(i, p, t) => w
                .set_thread(ThreadId::new(*i).unwrap(), Koid(*p), Koid(*t))
                .unwrap(),
            Op::Event {
                kind,
                thread,
                category,
                name,
                ticks,
                args,
            } => {
                let args: Vec<Arg<'_, StringRef<'_>>> = args
                    .iter()
                    .map(|(n, v)| Arg {
                        name: to_ref(n),
                        value: to_value(v),
                    })
                    .collect();
                w.write_event(
                    *kind,
                    to_thread(thread),
                    to_ref(category),
                    to_ref(name),
                    *ticks,
                    &args,
                )
                .unwrap()
            }
            Op::Log(t, ticks, msg) => w.log(to_thread(t), *ticks, msg.as_bytes()).unwrap(),
        }
    }
    w.finish().unwrap().into_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_read_back(ops in proptest::collection::vec(op(), 0..60)) {
        let bytes = write(&ops);
        let want = expected(&ops);

        let mut r = Reader::new(&bytes);
        let mut got = Vec::new();
        let mut n = 0;
        while let Some(rec) = r.next_record().unwrap() {
            n += 1;
            // The header: magic, provider info, section, init, string 1.
            if n > 5 { got.extend(describe(&rec)); }
        }
        prop_assert_eq!(&got, &want);

        // The stream reader, fed in odd-sized pieces, agrees.
        let mut s = StreamReader::new(std::io::BufReader::with_capacity(13, &bytes[..]));
        let mut got2 = Vec::new();
        let mut n = 0;
        while let Some(rec) = s.next_record().unwrap() {
            n += 1;
            if n > 5 { got2.extend(describe(&rec)); }
        }
        prop_assert_eq!(&got2, &want);

        // Copying reproduces the bytes exactly when every ref is bound, and always
        // keeps the events.
        let mut w = Writer::without_header(VecDestination::new()).unwrap();
        let report = tracekit_fxt::copy::copy(&bytes, &mut w).unwrap();
        let copied = w.finish().unwrap().into_vec();
        if report.warning_count == 0 {
            prop_assert_eq!(&copied, &bytes);
        }
        let mut strict = Reader::with_options(&copied, ReadOptions::strict());
        while strict.next_record().unwrap().is_some() {}
    }
}

#[test]
fn slot_reuse_resolves_to_the_binding_at_each_record() {
    let mut w = Writer::new(VecDestination::new()).unwrap();
    let slot = w.set_temp_string(0, "first").unwrap();
    let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
    w.instant(
        t,
        slot,
        slot,
        1,
        &[Arg::new(slot, ArgValue::String(slot.into()))],
    )
    .unwrap();
    w.set_temp_string(0, "second").unwrap();
    w.set_thread_slot(0, Koid(3), Koid(4)).unwrap();
    w.instant(
        t,
        slot,
        slot,
        2,
        &[Arg::new(slot, ArgValue::String(slot.into()))],
    )
    .unwrap();
    let bytes = w.finish().unwrap().into_vec();
    let mut r = Reader::new(&bytes);
    let mut seen = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Event(e) = rec {
            let arg = e.args.iter().next().unwrap();
            seen.push((
                e.thread.thread.0,
                e.name.to_string(),
                arg.name.to_string(),
                format!("{:?}", arg.value),
            ));
        }
    }
    assert_eq!(
        seen,
        vec![
            (
                2,
                "first".into(),
                "first".into(),
                "String(\"first\")".into()
            ),
            (
                4,
                "second".into(),
                "second".into(),
                "String(\"second\")".into()
            ),
        ]
    );
}
