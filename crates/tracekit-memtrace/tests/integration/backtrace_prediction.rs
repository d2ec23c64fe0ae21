//! The backtrace decoder's cache update after a truncated backtrace: when an allocation's `common_prefix` is longer than the backtrace the
//! reader holds (the writer truncated the previous one), the reader does not decode
//! the frames but still walks the codewords to keep its cache in step with the
//! writer's (`docs/memtrace-format.md` §7 "Backtraces" and §9). A codeword "hit,
//! then N predicted frames" moves the decoder's `pred` along N predictions (N times
//! `pred = predicted[pred]`), and the next codeword records itself as the
//! prediction of *that* bucket (`predicted[pred] = bucket`). Skipping the walk
//! records it as the prediction of the hit bucket instead, and a later backtrace
//! that follows the chain decodes to the wrong frames.

#![allow(clippy::unwrap_used)]

use tracekit_memtrace::synth::{synth_info, synth_locations};
use tracekit_memtrace::*;

/// A code `synth_locations` knows.
fn code(n: i64) -> LocationCode {
    LocationCode::new(0x5555_0000_0000 + n * 8)
}

fn events(trace: &[u8]) -> Vec<Alloc<'static>> {
    let mut r = Reader::from_bytes(trace).unwrap();
    r.events(true)
        .owned()
        .map(|e| match e.unwrap().1 {
            Event::Alloc(a) => a,
            other => panic!("not an alloc: {other:?}"),
        })
        .collect()
}

/// Writes, on one domain (backtraces caller first here; the writer takes them
/// innermost first):
///
/// 0. `X1 .. Xk`: all misses; the writer's and reader's caches learn the chain
///    X1 -> X2 -> ... -> Xk.
/// 1. `F1 .. F500`: 500 new frames, 5000 bytes of codewords, over the 4086-byte
///    limit, so the writer truncates it; the reader holds only its outer part.
/// 2. `F1 .. F500, X1 .. Xk, Y`: common prefix 500, more than the reader holds,
///    so the reader only updates its cache. The new frames are coded as "hit X1,
///    then k-1 predicted frames" and a miss for Y, which makes Y the prediction
///    after Xk.
/// 3. `X1 .. Xk, Y`: no common prefix; coded as one codeword "hit X1, then k
///    predicted frames", whose last prediction (Xk -> Y) exists only if step 2's
///    cache update walked the k-1 predictions.
fn chain_after_truncation(k: i64) -> (Vec<LocationCode>, Vec<Alloc<'static>>) {
    let info = synth_info();
    let mut w = Writer::new(Vec::new(), &info).unwrap();
    let t = info.start_time;
    let chain: Vec<LocationCode> = (1..=k).map(code).collect();
    let fillers: Vec<LocationCode> = (1000..1500).map(code).collect();
    let y = code(100);
    let mut put = |caller_first: &[LocationCode]| {
        let innermost_first: Vec<LocationCode> = caller_first.iter().rev().copied().collect();
        w.put_alloc(
            t,
            2,
            1,
            AllocationSource::Minor,
            &innermost_first,
            synth_locations,
        )
        .unwrap();
    };
    put(&chain);
    put(&fillers);
    let mut extended = fillers.clone();
    extended.extend(&chain);
    extended.push(y);
    put(&extended);
    let mut last = chain.clone();
    last.push(y);
    put(&last);
    let trace = w.into_inner().unwrap();
    (last, events(&trace))
}

#[test]
fn predictions_walked_during_a_cache_only_update_are_followed_later() {
    // k = 2: step 2 codes "hit, 1 predicted frame" (tag 1); k = 3 and 20: "hit, N
    // predicted frames" with N in a byte (tag 2). Step 3's result for every k is
    // collected, so that a failure shows all of them.
    let mut wrong = Vec::new();
    for k in [2, 3, 20] {
        let (expected, allocs) = chain_after_truncation(k);
        assert_eq!(allocs.len(), 4, "k = {k}");
        let chain: Vec<LocationCode> = expected[..expected.len() - 1].to_vec();
        assert_eq!(&*allocs[0].backtrace, &chain[..], "k = {k}");
        // Step 1 was truncated: the reader holds fewer than its 500 frames.
        let truncated = &allocs[1].backtrace;
        assert!(truncated.len() < 500, "k = {k}: {} frames", truncated.len());
        assert_eq!(truncated[0], code(1000), "k = {k}");
        // Step 2 took the cache-only path: its common prefix is beyond what the
        // reader holds, and it repeats the previous backtrace.
        assert_eq!(allocs[2].common_prefix, 500, "k = {k}");
        assert_eq!(allocs[2].backtrace, allocs[1].backtrace, "k = {k}");
        // Step 3 follows the chain through the prediction step 2 recorded.
        assert_eq!(allocs[3].common_prefix, 0, "k = {k}");
        if *allocs[3].backtrace != expected[..] {
            wrong.push(format!(
                "k = {k}: decoded {:?}, written {:?}",
                allocs[3].backtrace, expected
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
