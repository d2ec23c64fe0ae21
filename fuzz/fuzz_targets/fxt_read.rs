//! Every FXT reader on arbitrary bytes: no panic, no hang, and consistent answers.
//!
//! - the slice reader (lenient and strict) and the stream reader (fed in small reads)
//!   must see the same records, also when the input is still being written (a read
//!   at the end of what is written would block, and the reader is asked again
//!   once more is);
//! - `check` must not panic;
//! - a successful `copy` must read back without any warning (it repairs or drops
//!   everything a reader could complain about) and with the same events.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tracekit_fxt::read::{ReadOptions, Reader, Record, StreamReader};
use tracekit_fxt::write::{VecDestination, Writer};

struct Trickle<'a>(&'a [u8], usize);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = self.1 % 13 + 1;
        let n = buf.len().min(self.1).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// An input still being written: every other read would block, until the
/// next piece comes.
struct Written<'a>(Trickle<'a>, bool);

impl std::io::Read for Written<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = !self.1;
        if self.1 && !self.0.0.is_empty() {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        self.0.read(buf)
    }
}

/// A record's identity for comparisons: its Debug form with arguments resolved.
fn describe(r: &Record<'_>) -> String {
    format!("{r:?}")
}

fn events(data: &[u8]) -> Vec<String> {
    let mut r = Reader::new(data);
    let mut out = Vec::new();
    while let Ok(Some((rec, time))) = r.next_timed() {
        if let Record::Event(e) = rec {
            out.push(format!(
                "{:?} {} {} {} {:?}",
                e.kind,
                time.ns(e.ticks),
                e.category,
                e.name,
                e.args
            ));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut slice = Reader::new(data);
    let mut stream = StreamReader::new(Trickle(data, 0));
    loop {
        let a = slice.next_record().map(|r| r.map(|r| describe(&r)));
        let b = stream.next_record().map(|r| r.map(|r| describe(&r)));
        // A record the input cuts short is the same warning for both (the stream
        // reader refuses only records really over its 1 GiB limit, which no fuzz
        // input holds).
        assert!(a == b, "slice and stream readers disagree: {a:?} / {b:?}");
        match a {
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert_eq!(slice.warnings(), stream.warnings());

    // The same, followed while it is written: the records it gives, asked again
    // each time the reader waits, are the slice reader's.
    let mut whole = Reader::new(data);
    let mut followed = StreamReader::new(Written(Trickle(data, 0), false));
    let mut waits = 0usize;
    loop {
        let b = followed.next_record().map(|r| r.map(|r| describe(&r)));
        if matches!(b, Ok(None)) && followed.is_waiting() {
            waits += 1;
            assert!(waits <= 2 * data.len() + 2, "the followed reader does not advance");
            continue;
        }
        let a = whole.next_record().map(|r| r.map(|r| describe(&r)));
        assert!(a == b, "slice and followed readers disagree: {a:?} / {b:?}");
        match a {
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert_eq!(whole.warnings(), followed.warnings());

    let mut strict = Reader::with_options(data, ReadOptions::strict());
    let mut steps = 0usize;
    loop {
        steps += 1;
        assert!(
            steps <= data.len() / 8 + 2,
            "strict reader does not advance"
        );
        match strict.next_raw() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) if e.problem.is_fatal() => break,
            Err(_) => {}
        }
    }

    let _ = tracekit_fxt::check::check(data);

    let Ok(mut w) = Writer::without_header(VecDestination::new()) else {
        return;
    };
    if tracekit_fxt::copy::copy(data, &mut w).is_ok() {
        let Ok(dest) = w.finish() else { return };
        let copied = dest.into_vec();
        let mut r = Reader::with_options(&copied, ReadOptions::strict());
        loop {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => panic!("copy does not read back strictly: {e}"),
            }
        }
        assert_eq!(events(data), events(&copied), "copy changed the events");
    }
});
