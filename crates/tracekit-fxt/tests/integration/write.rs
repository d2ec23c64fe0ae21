//! Writer behaviour: destinations never split records, limits are errors (nothing is
//! written), every record type reads back.

#![allow(clippy::unwrap_used)]

use tracekit_fxt::format::{
    Arg, ArgValue, BlobType, EventKind, Koid, MAX_RECORD_WORDS, ObjectType, StringRef, ThreadRef,
    ThreadState,
};
use tracekit_fxt::io::IoDestination;
use tracekit_fxt::read::{ReadOptions, Reader, Record, Str};
use tracekit_fxt::write::scheduling::LegacySwitchThread;
use tracekit_fxt::write::{
    Destination, DestinationError, SliceDestination, VecDestination, WriteError, Writer,
};

fn records(bytes: &[u8]) -> Vec<String> {
    let mut r = Reader::with_options(bytes, ReadOptions::strict());
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(format!("{rec:?}"));
    }
    out
}

/// Records each buffer handed over, so tests can check every buffer holds whole
/// records.
#[derive(Default)]
struct Chunks {
    buf: Vec<u8>,
    chunks: Vec<Vec<u8>>,
}

impl Destination for Chunks {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }
    fn next_buffer(&mut self, filled: usize, min: usize) -> Result<usize, DestinationError> {
        if filled > 0 {
            self.chunks.push(self.buf[..filled].to_vec());
        }
        self.buf = vec![0xAA; min.max(64)];
        Ok(0)
    }
}

#[test]
fn buffers_hold_whole_records() {
    let mut w = Writer::new(Chunks::default()).unwrap();
    let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
    for i in 0..200u64 {
        let name = format!("event {i} {}", "x".repeat((i % 40) as usize));
        let args = [Arg::new(StringRef::inline("i"), ArgValue::UInt64(i))];
        w.instant(t, "cat", name.as_str(), i, &args).unwrap();
    }
    let chunks = w.finish().unwrap().chunks;
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    let mut all = Vec::new();
    for c in &chunks {
        assert!(c.len() <= 64 || c.len() % 8 == 0);
        // Each chunk frames exactly: its records end at its end.
        let mut pos = 0;
        while pos < c.len() {
            let h = u64::from_le_bytes(c[pos..pos + 8].try_into().unwrap());
            pos += ((h >> 4) & 0xFFF) as usize * 8;
        }
        assert_eq!(pos, c.len(), "a record crosses a buffer boundary");
        all.extend_from_slice(c);
    }
    let recs = records(&all);
    assert_eq!(recs.iter().filter(|r| r.starts_with("Event")).count(), 200);
}

#[test]
fn a_full_slice_rejects_the_record_whole() {
    let mut buf = [0u8; 200];
    let mut w = Writer::new(SliceDestination::new(&mut buf)).unwrap();
    let t = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    let mut written = 0;
    let err = loop {
        match w.instant(t, "c", "n", written, &[]) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, WriteError::Destination(DestinationError::Full { .. })),
        "{err:?}"
    );
    // What was written before is intact and complete.
    w.flush().unwrap();
    let len = w.destination().len();
    drop(w);
    let recs = records(&buf[..len]);
    assert_eq!(
        recs.iter().filter(|r| r.starts_with("Event")).count() as u64,
        written
    );
}

#[test]
fn io_destination_flushes_whole_buffers() {
    let mut out = Vec::new();
    {
        let dest = IoDestination::with_buffer_size(&mut out, 128);
        let mut w = Writer::new(dest).unwrap();
        for i in 0..50 {
            w.instant(
                ThreadRef::Inline {
                    process: Koid(1),
                    thread: Koid(1),
                },
                "c",
                "n",
                i,
                &[],
            )
            .unwrap();
        }
        // Before close, only whole buffers reached the writer.
        let pending = w.pending_bytes();
        assert!(pending > 0 && pending <= 128);
        w.close().unwrap();
        assert_eq!(
            w.instant(
                ThreadRef::Inline {
                    process: Koid(1),
                    thread: Koid(1)
                },
                "c",
                "n",
                0,
                &[]
            ),
            Err(WriteError::Closed)
        );
    }
    assert_eq!(records(&out).len(), 5 + 50);
}

#[test]
fn limits_are_errors_and_write_nothing() {
    let mut w = Writer::new(VecDestination::new()).unwrap();
    w.flush().unwrap();
    let before = w.destination().as_slice().len();
    let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
    let base = before + 24;
    let sixteen: Vec<_> = (0..16)
        .map(|i| Arg::new(StringRef::Empty, ArgValue::Int32(i)))
        .collect();
    assert_eq!(
        w.instant(t, "c", "n", 0, &sixteen),
        Err(WriteError::TooManyArgs { count: 16 })
    );
    let long = "y".repeat(32001);
    assert_eq!(
        w.instant(t, long.as_str(), "n", 0, &[]),
        Err(WriteError::StringTooLong { len: 32001 })
    );
    // 15 inline strings of 4000 bytes: each fits, the record does not.
    let big = "z".repeat(4000);
    let args: Vec<_> = (0..15)
        .map(|_| Arg::new(StringRef::Empty, ArgValue::String(StringRef::inline(&big))))
        .collect();
    assert!(matches!(
        w.instant(t, "c", "n", 0, &args),
        Err(WriteError::RecordTooLarge {
            max: MAX_RECORD_WORDS,
            ..
        })
    ));
    assert_eq!(
        w.duration_complete(t, "c", "n", 10, 9, &[]),
        Err(WriteError::EndBeforeStart { start: 10, end: 9 })
    );
    assert!(w.blob("b", BlobType::DATA, &[0; 40000]).is_err());
    assert!(w.large_blob("c", "n", &[0; 40000]).is_err());
    assert!(w.log(t, 0, &[b'a'; 40000]).is_err());
    assert!(w.write_provider_info(1, &[b'p'; 256]).is_err());
    w.flush().unwrap();
    assert_eq!(
        w.destination().as_slice().len(),
        base,
        "a refused record left bytes behind"
    );
}

#[test]
fn every_record_type_reads_back() {
    let mut w = Writer::new(VecDestination::new()).unwrap();
    let proc_name = w.intern("proc").unwrap();
    w.set_process_name(Koid(10), proc_name).unwrap();
    w.set_thread_name(Koid(10), Koid(11), StringRef::inline("main"))
        .unwrap();
    let t = w.set_thread_slot(4, Koid(10), Koid(11)).unwrap();
    let k = w.intern("k").unwrap();
    let all_args = [
        Arg::new(k, ArgValue::Null),
        Arg::new(k, ArgValue::Int32(i32::MIN)),
        Arg::new(k, ArgValue::UInt32(u32::MAX)),
        Arg::new(k, ArgValue::Int64(i64::MIN)),
        Arg::new(k, ArgValue::UInt64(u64::MAX)),
        Arg::new(k, ArgValue::Double(-0.0)),
        Arg::new(k, ArgValue::String(StringRef::inline("v"))),
        Arg::new("inline name", ArgValue::String(k.into())),
        Arg::new(k, ArgValue::Pointer(1 << 63)),
        Arg::new(k, ArgValue::Koid(Koid(7))),
        Arg::new(k, ArgValue::Bool(false)),
        Arg::new(k, ArgValue::Blob(b"blob!")),
    ];
    let kinds = [
        EventKind::Instant,
        EventKind::Counter { id: 3 },
        EventKind::DurationBegin,
        EventKind::DurationEnd,
        EventKind::DurationComplete { end_ticks: 99 },
        EventKind::AsyncBegin { id: 1 },
        EventKind::AsyncInstant { id: 1 },
        EventKind::AsyncEnd { id: 1 },
        EventKind::FlowBegin { id: 2 },
        EventKind::FlowStep { id: 2 },
        EventKind::FlowEnd { id: 2 },
    ];
    for kind in kinds {
        w.write_event(kind, t, "cat", k, 50, &all_args).unwrap();
    }
    let inline = ThreadRef::Inline {
        process: Koid(1 << 40),
        thread: Koid(3),
    };
    w.blob("b", BlobType::PERFETTO, b"payload").unwrap();
    w.userspace_object(inline, 0x1000, "obj", &all_args[..2])
        .unwrap();
    w.kernel_object(ObjectType(5), Koid(77), k, &[]).unwrap();
    w.context_switch(
        60,
        2,
        ThreadState::BLOCKED,
        Koid(11),
        Koid(12),
        &all_args[1..2],
    )
    .unwrap();
    w.thread_wakeup(61, 3, Koid(12), &[]).unwrap();
    let side = |thread, priority| LegacySwitchThread { thread, priority };
    w.legacy_context_switch(
        62,
        1,
        ThreadState::RUNNING,
        side(t.into(), 3),
        side(inline, 4),
    )
    .unwrap();
    w.log(inline, 63, b"hello log").unwrap();
    w.large_blob_event(t, k, "lb", 64, &all_args[..3], &[7; 100])
        .unwrap();
    w.large_blob("c", "n", &[8; 9]).unwrap();
    w.write_provider_event(0, tracekit_fxt::write::metadata::ProviderEvent(0))
        .unwrap();
    let bytes = w.finish().unwrap().into_vec();

    let mut r = Reader::with_options(&bytes, ReadOptions::strict());
    let mut n = 0;
    while let Some(rec) = r.next_record().unwrap() {
        n += 1;
        match rec {
            Record::Event(e) => {
                assert_eq!(e.thread.thread, Koid(11));
                assert_eq!(e.category, "cat");
                assert_eq!(e.name, "k");
                let args: Vec<_> = e.args.iter().collect();
                assert_eq!(args.len(), all_args.len());
                assert_eq!(args[1].value, ArgValue::Int32(i32::MIN));
                assert_eq!(args[6].value, ArgValue::String(Str(b"v")));
                assert_eq!(args[7].name, "inline name");
                assert_eq!(args[7].value, ArgValue::String(Str(b"k")));
                assert_eq!(args[11].value, ArgValue::Blob(b"blob!"));
                assert!(
                    matches!(args[5].value, ArgValue::Double(d) if d == 0.0 && d.is_sign_negative())
                );
            }
            Record::UserspaceObject(o) => {
                assert_eq!(o.process.process, Koid(1 << 40));
                assert_eq!(o.pointer, 0x1000);
            }
            Record::LegacyContextSwitch(c) => {
                assert_eq!(c.outgoing.thread, Koid(11));
                assert_eq!(c.incoming.process, Koid(1 << 40));
                assert_eq!((c.outgoing_priority, c.incoming_priority), (3, 4));
            }
            Record::Log(l) => assert_eq!(l.message, b"hello log"),
            Record::LargeBlob(b) => match b.meta {
                Some(m) => {
                    assert_eq!(m.ticks, 64);
                    assert_eq!(b.payload, &[7; 100][..]);
                    assert_eq!(m.args.iter().count(), 3);
                }
                None => assert_eq!(b.payload, &[8; 9][..]),
            },
            _ => {}
        }
    }
    // Header 5, setup 5 (two strings, two names, one thread), 11 events, 10 others.
    assert_eq!(n, 5 + 5 + 11 + 10);
}

#[test]
fn fast_path_fills_a_fixed_buffer_exactly_then_fails_cleanly() {
    use tracekit_fxt::write::fast::EventHeader;
    let mut buf = vec![0u8; 1024];
    let written;
    let events;
    {
        let mut w = Writer::new(SliceDestination::new(&mut buf)).unwrap();
        let t = w.set_thread_slot(0, Koid(1), Koid(2)).unwrap();
        let (c, n) = (w.intern("c").unwrap(), w.intern("n").unwrap());
        let h = EventHeader::<()>::instant(t, c, n);
        let before = w.pending_bytes();
        let mut ok = 0u64;
        let err = loop {
            match w.emit(&h, ok, ()) {
                Ok(()) => ok += 1,
                Err(e) => break e,
            }
        };
        assert!(
            matches!(err, WriteError::Destination(DestinationError::Full { .. })),
            "{err:?}"
        );
        // Every 16-byte event that fit was written, and the failed one wrote nothing.
        assert_eq!(before + 16 * ok as usize, w.pending_bytes());
        assert!(w.pending_bytes() + 16 > 1024);
        written = w.pending_bytes();
        events = ok;
        w.close().unwrap();
        assert_eq!(w.emit(&h, 0, ()), Err(WriteError::Closed));
        assert_eq!(w.pending_bytes(), 0);
    }
    let instants = records(&buf[..written])
        .iter()
        .filter(|r| r.contains("Instant"))
        .count();
    assert_eq!(instants as u64, events);
}

#[test]
fn a_dropped_writer_hands_over_what_it_holds() {
    let t = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    let mut out = Vec::new();
    {
        // A buffer much larger than what is written: nothing reaches `out` before
        // the drop.
        let mut w = Writer::new(IoDestination::with_buffer_size(&mut out, 1 << 16)).unwrap();
        for i in 0..10 {
            w.instant(t, "c", "n", i, &[]).unwrap();
        }
        assert!(w.pending_bytes() > 0);
    }
    let recs = records(&out);
    assert_eq!(recs.iter().filter(|r| r.starts_with("Event")).count(), 10);

    // A closed writer writes nothing more when dropped, and `finish` hands back the
    // destination with everything in it.
    let mut w = Writer::new(VecDestination::new()).unwrap();
    w.instant(t, "c", "n", 1, &[]).unwrap();
    let bytes = w.finish().unwrap().into_vec();
    assert_eq!(
        records(&bytes)
            .iter()
            .filter(|r| r.starts_with("Event"))
            .count(),
        1
    );
}

/// A destination that counts its drops.
struct DropCounted {
    inner: VecDestination,
    drops: std::rc::Rc<std::cell::Cell<u32>>,
}

impl Destination for DropCounted {
    fn buffer(&mut self) -> &mut [u8] {
        self.inner.buffer()
    }
    fn next_buffer(&mut self, filled: usize, min: usize) -> Result<usize, DestinationError> {
        self.inner.next_buffer(filled, min)
    }
}

impl Drop for DropCounted {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
    }
}

#[test]
fn finish_hands_the_destination_over_and_drop_drops_it_once() {
    let t = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    let drops = std::rc::Rc::new(std::cell::Cell::new(0));
    let dest = || DropCounted {
        inner: VecDestination::new(),
        drops: drops.clone(),
    };

    // `finish` moves the destination out: the writer does not drop it too.
    let mut w = Writer::new(dest()).unwrap();
    w.intern("a string the writer keeps track of").unwrap();
    w.instant(t, "c", "n", 1, &[]).unwrap();
    let d = w.finish().unwrap();
    assert_eq!(drops.get(), 0);
    assert_eq!(
        records(d.inner.as_slice())
            .iter()
            .filter(|r| r.starts_with("Event"))
            .count(),
        1
    );
    drop(d);
    assert_eq!(drops.get(), 1);

    // A writer dropped open, or closed, drops its destination exactly once.
    drop(Writer::new(dest()).unwrap());
    assert_eq!(drops.get(), 2);
    let mut w = Writer::new(dest()).unwrap();
    w.close().unwrap();
    drop(w);
    assert_eq!(drops.get(), 3);
}

#[test]
fn encoded_arguments_write_the_same_bytes_as_arguments() {
    use tracekit_fxt::format::RawArg;
    use tracekit_fxt::write::EncodedArgs;
    let writer = || {
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let id = w.intern("arg").unwrap();
        (w, StringRef::Index(id))
    };
    let name = writer().1;
    let lists: [&[RawArg<'_>]; 4] = [
        &[],
        &[RawArg::new(name, ArgValue::Int32(-5))],
        &[
            RawArg::new(StringRef::inline("big"), ArgValue::Int64(1 << 40)),
            RawArg::new(
                name,
                ArgValue::String(StringRef::inline("a string of 21 bytes")),
            ),
            RawArg::new(name, ArgValue::Double(0.5)),
            RawArg::new(name, ArgValue::Bool(true)),
            RawArg::new(name, ArgValue::UInt64(u64::MAX)),
        ],
        &[RawArg::new(name, ArgValue::Null); 15],
    ];
    let thread = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    for args in lists {
        let (mut plain, mut encoded) = (writer().0, writer().0);
        let e = EncodedArgs::encode(args).unwrap();
        assert_eq!(e.count(), args.len());
        for kind in [EventKind::DurationBegin, EventKind::AsyncBegin { id: 9 }] {
            plain
                .write_event(kind, thread, "cat", "name", 77, args)
                .unwrap();
            encoded
                .write_event_encoded(kind, thread, "cat", "name", 77, &e)
                .unwrap();
        }
        let (plain, encoded) = (plain.finish().unwrap(), encoded.finish().unwrap());
        assert_eq!(plain.as_slice(), encoded.as_slice());
        let header = writer().0.finish().unwrap();
        let header = records(header.as_slice()).len();
        assert_eq!(records(plain.as_slice()).len(), header + 2);
    }
    // Too many arguments is an error when encoding, and the old ones stay.
    let mut e = EncodedArgs::encode(&[RawArg::new(name, ArgValue::Int32(1))]).unwrap();
    let sixteen = [RawArg::new(name, ArgValue::Null); 16];
    assert_eq!(e.set(&sixteen), Err(WriteError::TooManyArgs { count: 16 }));
    assert_eq!((e.count(), e.words()), (1, 1));
}
