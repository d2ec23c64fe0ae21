//! The Jane Street demo trace (`jst_tracing_demo.fxt`, the trace of the demo program
//! in janestreet/tracing's writer tests): its records decode to exactly the list in
//! `golden_decodes_to_the_demo_records`, and the writer given the demo's calls
//! reproduces its 832 bytes.

#![allow(clippy::unwrap_used)]

use tracekit_fxt::format::{ArgValue, EventKind, Koid, ObjectType, StringId, StringRef, ThreadId};
use tracekit_fxt::read::{Reader, Record, Str, Thread};
use tracekit_fxt::write::fast::{Double, EventHeader, Int32, Int64, Pointer, Str as StrArg};
use tracekit_fxt::write::{Initialization, VecDestination, Writer, WriterOptions};

/// What [`demo_start`] leaves for the rest of the demo.
struct DemoStart {
    w: Writer<VecDestination>,
    proc_name: StringId,
    thread: ThreadId,
    category: StringId,
    name: StringId,
}

/// The opening both demo writers share: the initialization record, the process and
/// thread names, thread slot 0, and the category and name strings.
fn demo_start() -> DemoStart {
    let opts = WriterOptions {
        provider_name: "jane_tracing",
        initialization: None,
        ..WriterOptions::default()
    };
    let mut w = Writer::with_options(VecDestination::new(), &opts).unwrap();
    w.write_initialization(&Initialization::extended(1_000_000_000, 0, 1))
        .unwrap();
    let proc_name = w.intern("myproc").unwrap();
    w.set_process_name(Koid(1), proc_name).unwrap();
    let thread_name = w.intern("mythread").unwrap();
    w.set_thread_name(Koid(1), Koid(2), thread_name).unwrap();
    let thread = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
    let category = w.intern("stuff").unwrap();
    let name = w.intern("my_funct").unwrap();
    DemoStart {
        w,
        proc_name,
        thread,
        category,
        name,
    }
}

/// The demo, through the general API, exactly as `Tracing_demo.write_demo_trace`.
fn write_demo() -> Vec<u8> {
    let DemoStart {
        mut w,
        proc_name,
        thread,
        category,
        name,
    } = demo_start();
    let s = |id: StringId| ArgValue::String(StringRef::Index(id));
    let arg = |n: StringId, v| tracekit_fxt::format::Arg::new(n, v);

    w.duration_complete(
        thread,
        category,
        name,
        10_000,
        5_000_000,
        &[arg(name, s(category))],
    )
    .unwrap();
    let wow = w.set_temp_string(1, "wow").unwrap();
    let cool = w.set_temp_string(2, "cool").unwrap();
    w.duration_complete(
        thread,
        category,
        name,
        7_000_000,
        15_000_000,
        &[arg(name, s(wow)), arg(category, s(cool))],
    )
    .unwrap();
    w.async_begin(
        thread,
        category,
        name,
        23_000_000,
        1,
        &[arg(category, ArgValue::Int32(2))],
    )
    .unwrap();
    w.flow_begin(thread, 2_000_000, 1).unwrap();
    w.instant(thread, category, name, 17_000_000, &[]).unwrap();
    w.async_begin(
        thread,
        category,
        name,
        24_000_000,
        2,
        &[arg(category, ArgValue::Int32(1))],
    )
    .unwrap();
    w.duration_begin(thread, category, name, 20_000_000, &[])
        .unwrap();
    w.flow_step(thread, 15_000_000, 1).unwrap();
    w.duration_end(
        thread,
        category,
        name,
        40_000_000,
        &[
            // OCaml's Int.min_value: -2^62 on 63-bit ints.
            arg(name, ArgValue::Int64(-(1 << 62))),
            arg(category, ArgValue::Int32(-1)),
            arg(proc_name, ArgValue::Double(-1.0)),
        ],
    )
    .unwrap();
    w.async_instant(
        thread,
        category,
        name,
        25_000_000,
        2,
        &[arg(category, ArgValue::Int32(1))],
    )
    .unwrap();
    w.async_instant(
        thread,
        category,
        name,
        26_000_000,
        1,
        &[arg(category, ArgValue::Int32(2))],
    )
    .unwrap();
    w.flow_end(thread, 20_000_000, 1).unwrap();
    w.counter(
        thread,
        category,
        name,
        7_000_000,
        1,
        &[arg(category, ArgValue::Int32(1))],
    )
    .unwrap();
    w.async_end(
        thread,
        category,
        name,
        29_000_000,
        1,
        &[arg(category, ArgValue::Int32(2))],
    )
    .unwrap();
    w.async_end(
        thread,
        category,
        name,
        31_000_000,
        2,
        &[arg(category, ArgValue::Int32(1))],
    )
    .unwrap();
    w.counter(
        thread,
        category,
        name,
        20_000_000,
        1,
        &[arg(category, ArgValue::Double(2.5))],
    )
    .unwrap();
    w.counter(
        thread,
        category,
        name,
        20_000_000,
        1,
        &[arg(category, ArgValue::Int64(i64::MAX))],
    )
    .unwrap();
    w.counter(
        thread,
        category,
        name,
        20_000_000,
        1,
        &[arg(category, ArgValue::Pointer(i64::MAX as u64))],
    )
    .unwrap();
    w.finish().unwrap().into_vec()
}

/// The same demo through the precomputed-header fast path.
fn write_demo_fast() -> Vec<u8> {
    let DemoStart {
        mut w,
        proc_name,
        thread: t,
        category: c,
        name: n,
    } = demo_start();

    w.emit_complete(
        &EventHeader::<(StrArg,)>::duration_complete(t, c, n),
        10_000,
        5_000_000,
        (StrArg(n, c),),
    )
    .unwrap();
    let wow = w.set_temp_string(1, "wow").unwrap();
    let cool = w.set_temp_string(2, "cool").unwrap();
    w.emit_complete(
        &EventHeader::<(StrArg, StrArg)>::duration_complete(t, c, n),
        7_000_000,
        15_000_000,
        (StrArg(n, wow), StrArg(c, cool)),
    )
    .unwrap();
    let async_begin = EventHeader::<(Int32,)>::async_begin(t, c, n);
    w.emit_with_id(&async_begin, 23_000_000, (Int32(c, 2),), 1)
        .unwrap();
    // Flow events: empty category and name, as Jane Street's `tracing` writes them.
    w.flow_begin(t, 2_000_000, 1).unwrap();
    w.emit(&EventHeader::<()>::instant(t, c, n), 17_000_000, ())
        .unwrap();
    w.emit_with_id(&async_begin, 24_000_000, (Int32(c, 1),), 2)
        .unwrap();
    w.emit(&EventHeader::<()>::duration_begin(t, c, n), 20_000_000, ())
        .unwrap();
    w.flow_step(t, 15_000_000, 1).unwrap();
    w.emit(
        &EventHeader::<(Int64, Int32, Double)>::duration_end(t, c, n),
        40_000_000,
        (Int64(n, -(1 << 62)), Int32(c, -1), Double(proc_name, -1.0)),
    )
    .unwrap();
    let async_instant = EventHeader::<(Int32,)>::async_instant(t, c, n);
    w.emit_with_id(&async_instant, 25_000_000, (Int32(c, 1),), 2)
        .unwrap();
    w.emit_with_id(&async_instant, 26_000_000, (Int32(c, 2),), 1)
        .unwrap();
    w.flow_end(t, 20_000_000, 1).unwrap();
    w.emit_with_id(
        &EventHeader::<(Int32,)>::counter(t, c, n),
        7_000_000,
        (Int32(c, 1),),
        1,
    )
    .unwrap();
    let async_end = EventHeader::<(Int32,)>::async_end(t, c, n);
    w.emit_with_id(&async_end, 29_000_000, (Int32(c, 2),), 1)
        .unwrap();
    w.emit_with_id(&async_end, 31_000_000, (Int32(c, 1),), 2)
        .unwrap();
    w.emit_with_id(
        &EventHeader::<(Double,)>::counter(t, c, n),
        20_000_000,
        (Double(c, 2.5),),
        1,
    )
    .unwrap();
    w.emit_with_id(
        &EventHeader::<(Int64,)>::counter(t, c, n),
        20_000_000,
        (Int64(c, i64::MAX),),
        1,
    )
    .unwrap();
    w.emit_with_id(
        &EventHeader::<(Pointer,)>::counter(t, c, n),
        20_000_000,
        (Pointer(c, i64::MAX as u64),),
        1,
    )
    .unwrap();
    w.finish().unwrap().into_vec()
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[test]
fn writer_reproduces_golden_bytes() {
    let Some(golden) = tracekit_testutil::corpus_bytes("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    assert_eq!(golden.len(), 832);
    let ours = write_demo();
    assert_eq!(
        first_difference(&ours, &golden),
        None,
        "general path differs"
    );
    let fast = write_demo_fast();
    assert_eq!(first_difference(&fast, &golden), None, "fast path differs");
}

/// One line per record, in the form of the expected list below.
fn describe(r: &Record<'_>) -> String {
    let args = |a: tracekit_fxt::read::Args<'_>| {
        a.iter()
            .map(|a| format!("{}={:?}", a.name, a.value))
            .collect::<Vec<_>>()
            .join(",")
    };
    match r {
        Record::Event(e) => format!(
            "{:?} t={} {} {}/{} [{}]",
            e.kind,
            e.ticks,
            e.thread,
            e.category,
            e.name,
            args(e.args)
        ),
        Record::KernelObject(k) => format!(
            "kobj {:?} {} {} [{}]",
            k.object_type,
            k.koid,
            k.name,
            args(k.args)
        ),
        Record::String { id, value } => format!("string {} {}", id.get(), Str(value)),
        Record::ProviderInfo { id, name } => format!("provider_info {id} {}", Str(name)),
        other => format!("{other:?}"),
    }
}

#[test]
fn golden_decodes_to_the_demo_records() {
    let Some(golden) = tracekit_testutil::corpus_bytes("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let mut r = Reader::with_options(&golden, tracekit_fxt::read::ReadOptions::strict());
    let mut lines = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        lines.push(describe(&rec));
    }
    assert_eq!(r.warning_count(), 0);
    let t = Thread {
        process: Koid(1),
        thread: Koid(2),
    };
    let ev = |k: &str, ticks: u64, cn: &str, args: &str| format!("{k} t={ticks} {t} {cn} [{args}]");
    let sm = "stuff/my_funct";
    let expected = vec![
        "Magic".to_string(),
        "provider_info 0 jane_tracing".into(),
        "ProviderSection { id: 0 }".into(),
        "string 1 process".into(),
        "Initialization(Initialization { ticks_per_second: 1000000000, base: Some(ClockAnchor { ticks: 0, unix_ns: 1 }) })".into(),
        "string 119 myproc".into(),
        format!("kobj {:?} 1 myproc []", ObjectType::PROCESS),
        "string 120 mythread".into(),
        format!("kobj {:?} 2 mythread [process=Koid(Koid(1))]", ObjectType::THREAD),
        "Thread { id: ThreadId(1), process: Koid(1), thread: Koid(2) }".into(),
        "string 121 stuff".into(),
        "string 122 my_funct".into(),
        ev("DurationComplete { end_ticks: 5000000 }", 10_000, sm, "my_funct=String(\"stuff\")"),
        "string 20 wow".into(),
        "string 21 cool".into(),
        ev("DurationComplete { end_ticks: 15000000 }", 7_000_000, sm, "my_funct=String(\"wow\"),stuff=String(\"cool\")"),
        ev("AsyncBegin { id: 1 }", 23_000_000, sm, "stuff=Int32(2)"),
        ev("FlowBegin { id: 1 }", 2_000_000, "/", ""),
        ev("Instant", 17_000_000, sm, ""),
        ev("AsyncBegin { id: 2 }", 24_000_000, sm, "stuff=Int32(1)"),
        ev("DurationBegin", 20_000_000, sm, ""),
        ev("FlowStep { id: 1 }", 15_000_000, "/", ""),
        ev("DurationEnd", 40_000_000, sm, "my_funct=Int64(-4611686018427387904),stuff=Int32(-1),myproc=Double(-1.0)"),
        ev("AsyncInstant { id: 2 }", 25_000_000, sm, "stuff=Int32(1)"),
        ev("AsyncInstant { id: 1 }", 26_000_000, sm, "stuff=Int32(2)"),
        ev("FlowEnd { id: 1 }", 20_000_000, "/", ""),
        ev("Counter { id: 1 }", 7_000_000, sm, "stuff=Int32(1)"),
        ev("AsyncEnd { id: 1 }", 29_000_000, sm, "stuff=Int32(2)"),
        ev("AsyncEnd { id: 2 }", 31_000_000, sm, "stuff=Int32(1)"),
        ev("Counter { id: 1 }", 20_000_000, sm, "stuff=Double(2.5)"),
        ev("Counter { id: 1 }", 20_000_000, sm, "stuff=Int64(9223372036854775807)"),
        ev("Counter { id: 1 }", 20_000_000, sm, "stuff=Pointer(9223372036854775807)"),
    ];
    assert_eq!(lines, expected);
    // All 11 event types appear.
    let kinds: std::collections::BTreeSet<_> = lines
        .iter()
        .filter(|l| l.contains(" t="))
        .map(|l| l.split([' ', '{']).next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds.len(), 11, "{kinds:?}");
    let _ = EventKind::Instant;
}

#[test]
fn golden_reads_the_same_from_a_stream() {
    let Some(golden) = tracekit_testutil::corpus_bytes("fxt/jst_tracing_demo.fxt") else {
        return;
    };
    let mut a = Reader::new(&golden);
    // A reader that gets the bytes 7 at a time must see the same records.
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut b = tracekit_fxt::read::StreamReader::new(Trickle(&golden));
    let mut n = 0;
    loop {
        let x = a.next_record().unwrap().map(|r| describe(&r));
        let y = b.next_record().unwrap().map(|r| describe(&r));
        assert_eq!(x, y);
        if x.is_none() {
            break;
        }
        n += 1;
    }
    assert_eq!(n, 32);
}
