//! Write-then-read round trips: random multi-domain event streams (deep and
//! repeated backtraces, gaps over 30 s, 25-bit timestamp wraps, every vint
//! width, collects across domains) and a stream with more distinct locations
//! than the backtrace cache holds come back exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::collections::HashMap;

use proptest::prelude::*;
use tracekit_memtrace::synth::Rng;
use tracekit_memtrace::*;

fn info(start: i64, domain: u16) -> Info {
    Info {
        sample_rate: 1e-5,
        word_size: 64,
        executable_name: "roundtrip".into(),
        host_name: Name::new(b"h\xffst"),
        ocaml_runtime_params: "".into(),
        pid: 77,
        initial_domain: DomainId::new(domain),
        start_time: Timestamp::from_micros(start),
        context: Some("ctx λ".into()),
    }
}

/// The source locations of a code: 0 to 3 of them, names from small pools
/// (so the move-to-front tables both hit and miss), some not UTF-8.
fn locations_of(code: LocationCode) -> Vec<Location> {
    let c = code.get().unsigned_abs();
    let files: [&[u8]; 5] = [
        b"a.ml",
        b"src/caf\xc3\xa9_\xce\xbb.ml",
        b"",
        b"bad\xff\xfe.ml",
        b"lib/x.ml",
    ];
    (0..c % 4)
        .map(|i| {
            let k = c / 4 + i;
            Location {
                filename: Name::new(files[(k % 5) as usize]),
                line: (k % 0xfffff) as u32,
                start_char: (k % 256) as u32,
                end_char: (k % 1024) as u32,
                defname: Name::new(format!("F{}.f{}", k % 7, k % 45)),
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        stack: usize,
        length: u64,
        nsamples: u64,
        source: AllocationSource,
    },
    Promote {
        back: usize,
    },
    Collect {
        back: usize,
    },
}

#[derive(Clone, Debug)]
struct Case {
    start: i64,
    domains: Vec<u16>,
    stacks: Vec<Vec<LocationCode>>,
    ops: Vec<(usize, i64, Op)>,
}

fn length() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..=16,
        prop::sample::select(vec![
            0u64,
            17,
            252,
            253,
            254,
            255,
            65535,
            65536,
            (1 << 31) - 1,
            1 << 31,
            (1 << 32) - 1,
            1 << 40,
            (1 << 62) - 1,
        ]),
        any::<u64>().prop_map(|v| v >> 2),
    ]
}

fn time_step() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        6 => 1i64..200,
        1 => 1i64..(1 << 25),
        1 => 30_000_000i64..40_000_000,
        1 => Just(30_000_000i64),
        1 => Just(1i64 << 25),
    ]
}

/// Backtraces outermost first: random walks over a code pool, deep ones
/// built from repeated cycles (long prediction runs), and variations sharing
/// prefixes.
fn stacks() -> impl Strategy<Value = Vec<Vec<LocationCode>>> {
    (any::<u64>(), 1usize..12).prop_map(|(seed, n)| {
        let mut rng = Rng::new(seed);
        let mut out: Vec<Vec<LocationCode>> = vec![vec![]];
        for _ in 0..n {
            let kind = rng.below(4);
            let mut s: Vec<LocationCode> = match (kind, out.last()) {
                (0, Some(prev)) => {
                    let keep = rng.below(prev.len() as u64 + 1) as usize;
                    prev[..keep].to_vec()
                }
                _ => Vec::new(),
            };
            let (len, distinct) = match kind {
                1 => (200 + rng.below(200) as usize, 1 + rng.below(5)),
                _ => (rng.below(40) as usize, 1000),
            };
            let base = rng.next_u64() as i64 >> 20;
            for i in 0..len {
                let v = if distinct < 1000 {
                    base + (i as i64 % distinct as i64)
                } else {
                    base.wrapping_add(rng.below(distinct) as i64)
                };
                // Codes are never 0 in real traces (0 is the cache's empty value).
                s.push(LocationCode::new(if v == 0 { 1 } else { v }));
            }
            out.push(s);
        }
        out
    })
}

fn case() -> impl Strategy<Value = Case> {
    (
        1i64..1000,
        prop::collection::btree_set(any::<u16>(), 0..4),
        stacks(),
        prop::collection::vec(
            (
                0usize..4,
                time_step(),
                prop_oneof![
                    6 => (0usize..12, length(), prop_oneof![Just(1u64), 1u64..300, Just(70_000u64), Just(1u64 << 33)],
                          prop::sample::select(vec![AllocationSource::Minor, AllocationSource::Major, AllocationSource::External]))
                        .prop_map(|(stack, length, nsamples, source)| Op::Alloc { stack, length, nsamples, source }),
                    1 => (0usize..400).prop_map(|back| Op::Promote { back }),
                    2 => (0usize..400).prop_map(|back| Op::Collect { back }),
                ],
            ),
            1..250,
        ),
    )
        .prop_map(|(before_wrap, extra, stacks, ops)| {
            let mut domains = vec![0u16];
            domains.extend(extra.into_iter().filter(|&d| d != 0));
            Case {
                start: (50_000_000i64 << 25) - before_wrap,
                domains,
                stacks,
                ops,
            }
        })
}

/// Writes the case and returns the trace and the events it should read back.
fn write_case(case: &Case, version: FormatVersion) -> (Vec<u8>, Vec<(i64, Event<'static>)>) {
    let domains: &[u16] = if version == FormatVersion::V2 {
        &[0]
    } else {
        &case.domains
    };
    let info = info(case.start, domains[0]);
    let options = WriterOptions::new()
        .format_version(version)
        .obj_ids_per_chunk(97);
    let mut w = MultiplexedDomains::with_options(Vec::new(), &info, options).unwrap();
    let mut expected = Vec::new();
    let mut time = case.start;
    // Per domain: its allocations so far, and its previous backtrace.
    let mut allocated: HashMap<u16, Vec<ObjId>> = HashMap::new();
    let mut all: Vec<ObjId> = Vec::new();
    let mut last_bt: HashMap<u16, Vec<LocationCode>> = HashMap::new();
    for (d, step, op) in &case.ops {
        let domain = DomainId::new(domains[d % domains.len()]);
        time += step;
        let event = match op {
            Op::Alloc {
                stack,
                length,
                nsamples,
                source,
            } => {
                let bt = &case.stacks[stack % case.stacks.len()];
                let prev = last_bt.entry(domain.get()).or_default();
                let common = prev.iter().zip(bt).take_while(|(a, b)| a == b).count();
                *prev = bt.clone();
                let id = w.next_alloc_id(domain).unwrap();
                allocated.entry(domain.get()).or_default().push(id);
                all.push(id);
                Event::Alloc(Alloc {
                    obj_id: id,
                    length: *length,
                    domain,
                    nsamples: *nsamples,
                    source: *source,
                    backtrace: Cow::Owned(bt.clone()),
                    common_prefix: common,
                })
            }
            // Promotions refer to the domain's own objects (the reader
            // requires a non-negative delta); collections to anyone's.
            Op::Promote { back } => match allocated.get(&domain.get()) {
                Some(ids) if !ids.is_empty() => {
                    Event::Promote(ids[ids.len() - 1 - back % ids.len()], domain)
                }
                _ => continue,
            },
            Op::Collect { back } => {
                if all.is_empty() {
                    continue;
                }
                Event::Collect(all[all.len() - 1 - back % all.len()], domain)
            }
        };
        w.put_event(locations_of, Timestamp::from_micros(time), &event)
            .unwrap();
        expected.push((time - case.start, event));
    }
    w.flush().unwrap();
    (w.into_inner().unwrap(), expected)
}

fn read_back(trace: &[u8]) -> (Info, Vec<(i64, Event<'static>)>, Reader<'_>) {
    let mut reader = Reader::from_bytes(trace).unwrap();
    let events: Vec<_> = reader
        .events(true)
        .owned()
        .map(|r| r.map(|(t, e)| (t.as_micros(), e)))
        .collect::<Result<_, _>>()
        .unwrap();
    (reader.info().clone(), events, reader)
}

fn check(case: &Case, version: FormatVersion) -> Result<(), TestCaseError> {
    let (trace, expected) = write_case(case, version);
    let (read_info, events, reader) = read_back(&trace);
    let domains: &[u16] = if version == FormatVersion::V2 {
        &[0]
    } else {
        &case.domains
    };
    prop_assert_eq!(read_info, info(case.start, domains[0]));
    prop_assert_eq!(reader.format_version(), version);
    prop_assert_eq!(events.len(), expected.len());
    for (i, (got, want)) in events.iter().zip(&expected).enumerate() {
        prop_assert_eq!(got, want, "event {}", i);
        if let Event::Alloc(a) = &got.1 {
            for &code in a.backtrace.iter() {
                prop_assert_eq!(
                    reader.lookup_location_code(code),
                    Some(&locations_of(code)[..])
                );
            }
        }
    }
    // Without backtraces: the same events with empty backtraces.
    let mut reader = Reader::from_bytes(&trace).unwrap();
    let without: Vec<_> = reader
        .events(false)
        .owned()
        .collect::<Result<_, _>>()
        .unwrap();
    prop_assert_eq!(without.len(), expected.len());
    for ((t, got), (wt, want)) in without.iter().zip(&expected) {
        prop_assert_eq!(t.as_micros(), *wt);
        let mut want = want.clone();
        if let Event::Alloc(a) = &mut want {
            a.backtrace = Cow::Borrowed(&[]);
        }
        prop_assert_eq!(got, &want);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn multi_domain_streams_round_trip(case in case()) {
        check(&case, FormatVersion::V3)?;
    }

    #[test]
    fn single_domain_v2_streams_round_trip(case in case()) {
        check(&case, FormatVersion::V2)?;
    }
}

#[test]
fn more_locations_than_the_cache_holds() {
    // 40k distinct codes in 8k allocations: buckets are evicted and their
    // locations sent again; the reader checks each resend is consistent.
    let info = info(1_000_000, 0);
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let mut rng = Rng::new(5);
    let mut expected = Vec::new();
    let mut codes = 0i64;
    let mut stack: Vec<LocationCode> = Vec::new();
    for i in 0..8000 {
        stack.truncate(rng.below(stack.len() as u64 + 1) as usize);
        for _ in 0..rng.below(10) {
            codes += 1;
            stack.push(LocationCode::new(codes * 7919 % 40_009 + 1));
        }
        let callstack: Vec<_> = stack.iter().rev().copied().collect();
        let t = Timestamp::from_micros(1_000_000 + i);
        let id = w
            .put_alloc(t, 3, 1, AllocationSource::Minor, &callstack, locations_of)
            .unwrap();
        expected.push((id, stack.clone()));
    }
    let trace = w.into_inner().unwrap();
    let (_, events, reader) = read_back(&trace);
    assert_eq!(events.len(), expected.len());
    assert!(
        reader.locations().len() > 1 << 14,
        "{} codes",
        reader.locations().len()
    );
    for ((_, ev), (id, bt)) in events.iter().zip(&expected) {
        let Event::Alloc(a) = ev else {
            panic!("not an alloc")
        };
        assert_eq!(a.obj_id, *id);
        assert_eq!(&*a.backtrace, &bt[..]);
    }
}

#[test]
fn recursion_within_stacks_round_trips() {
    // Deep recursion is a prediction run around a cycle of buckets, which the
    // reader copies once the cycle closes. Cycles of 1 to 4 frames, entered
    // after a few other frames and left for more, at depths that go up and
    // down: the run must end on the right bucket for the frames after it.
    let info = info(0, 0);
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let mut rng = Rng::new(11);
    let mut expected = Vec::new();
    for i in 0..3000u64 {
        let period = 1 + rng.below(4) as i64;
        let base = 100 * (1 + rng.below(3) as i64);
        let mut stack: Vec<LocationCode> = (1..=3).map(LocationCode::new).collect();
        stack.extend((0..rng.below(6)).map(|k| LocationCode::new(50 + k as i64)));
        let depth = rng.below(400) as i64;
        stack.extend((0..depth).map(|d| LocationCode::new(base + d % period)));
        stack.extend((0..rng.below(4)).map(|k| LocationCode::new(900 + k as i64)));
        let callstack: Vec<_> = stack.iter().rev().copied().collect();
        let t = Timestamp::from_micros(i as i64);
        let id = w
            .put_alloc(t, 3, 1, AllocationSource::Minor, &callstack, locations_of)
            .unwrap();
        expected.push((id, stack));
    }
    let trace = w.into_inner().unwrap();
    let (_, events, _) = read_back(&trace);
    assert_eq!(events.len(), expected.len());
    for ((_, ev), (id, bt)) in events.iter().zip(&expected) {
        let Event::Alloc(a) = ev else {
            panic!("not an alloc")
        };
        assert_eq!(a.obj_id, *id);
        assert_eq!(&*a.backtrace, &bt[..], "allocation {id:?}");
    }
}

#[test]
fn truncated_backtrace_repeats_the_previous_one() {
    // 3000 new frames overflow the 4 KiB backtrace encoding; the next
    // allocation shares all of them, so its common prefix is larger than what
    // the reader holds and the reader repeats the truncated backtrace.
    let info = info(0, 0);
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let deep: Vec<LocationCode> = (1..=3000).map(LocationCode::new).collect();
    let t = Timestamp::from_micros(5);
    w.put_alloc(t, 2, 1, AllocationSource::Minor, &deep, locations_of)
        .unwrap();
    let mut deeper = vec![LocationCode::new(99_999)];
    deeper.extend(&deep);
    w.put_alloc(t, 2, 1, AllocationSource::Minor, &deeper, locations_of)
        .unwrap();
    let trace = w.into_inner().unwrap();
    let (_, events, _) = read_back(&trace);
    let (Event::Alloc(a), Event::Alloc(b)) = (&events[0].1, &events[1].1) else {
        panic!()
    };
    assert!(a.backtrace.len() < 3000, "the first backtrace is truncated");
    assert_eq!(
        &a.backtrace[..],
        &deep.iter().rev().copied().collect::<Vec<_>>()[..a.backtrace.len()]
    );
    assert_eq!(b.common_prefix, 3000);
    assert_eq!(b.backtrace, a.backtrace);
}

#[test]
fn pid_change_writes_nothing() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};
    // The reader keeps packets whose header pid is the trace info's pid.
    let pid = Arc::new(AtomicI64::new(77));
    let p = Arc::clone(&pid);
    let info = info(0, 0);
    let sink = SharedBuf::default();
    let w_len = |_: &Writer<SharedBuf>| sink.0.lock().unwrap().len();
    let mut w = Writer::with_options(
        sink.clone(),
        &info,
        WriterOptions::new().getpid(move || p.load(Ordering::SeqCst)),
    )
    .unwrap();
    let t = Timestamp::from_micros(1);
    let id = w
        .put_alloc(
            t,
            1,
            1,
            AllocationSource::Minor,
            &[LocationCode::new(3)],
            locations_of,
        )
        .unwrap();
    w.flush().unwrap();
    let flushed = w.put_collect(t, id);
    assert!(flushed.is_ok());
    pid.store(78, Ordering::SeqCst);
    let len_flushed = w_len(&w);
    assert!(matches!(w.flush(), Err(WriteError::PidChanged)));
    w.put_collect(t, id).unwrap(); // buffered only
    assert!(matches!(w.flush(), Err(WriteError::PidChanged)));
    assert_eq!(
        w_len(&w),
        len_flushed,
        "nothing written after the pid changed"
    );
    pid.store(77, Ordering::SeqCst);
    let len_before = w_len(&w);
    let trace = w.into_inner().unwrap().0.lock().unwrap().clone();
    assert!(trace.len() > len_before);
    let (_, events, _) = read_back(&trace);
    // The alloc, the collect buffered before the fork, and the one after.
    assert_eq!(events.len(), 3);
}

/// A sink whose bytes the test can see while the writer owns it.
#[derive(Clone, Default)]
struct SharedBuf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
