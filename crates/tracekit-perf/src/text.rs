//! `perf script` text, from wherever it comes, cut into pieces of whole records.
//! The caller opens the input (a file's bytes, a stream, or a perf.data file's
//! path for `perf script`) and says which it is.
//!
//! A record is a header line followed by its call-chain lines (sampling), or one
//! line (Intel PT branches); the decoder needs each piece to end at a record's
//! end, which [`complete_prefix`] finds. Pieces are about [`CHUNK`] bytes: large
//! enough to keep a second core busy parsing, small enough for progress to move.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use tracekit_callstack::script::complete_prefix;

use crate::script::PerfScript;
use crate::{Error, Mode, Result};

/// Text is decoded in pieces of about this size (progress granularity, pipe
/// buffering).
pub const CHUNK: usize = 8 << 20;

/// Where `perf script` text comes from.
pub enum TextSource {
    /// A stream read once (standard input); `None` once it has been read.
    Stream(Option<Box<dyn Read + Send>>),
    /// A file of `perf script` text, whole in memory (mapped or read).
    File {
        /// The file.
        path: PathBuf,
        /// Its bytes.
        text: Box<dyn AsRef<[u8]> + Send>,
    },
    /// A `perf.data` file, read through `perf script`.
    PerfData {
        /// The recording.
        path: PathBuf,
        /// The perf executable.
        perf: PathBuf,
        /// How it was recorded.
        mode: Mode,
        /// Its bytes, when the caller has read them: the direct reader takes
        /// its records from them rather than open the file again.
        bytes: Option<crate::data::RecordingBytes>,
    },
}

/// What a pass over a source reports as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The input's size, when it is known upfront.
    Total(u64),
    /// A perf.data file is read directly (without `perf script`): its size; the
    /// positions that follow are bytes of it read.
    Recording(u64),
    /// `perf script` was started on a recording in this mode.
    PerfScriptStarted(Mode),
    /// Bytes of text handed on so far.
    Position(u64),
}

impl TextSource {
    /// Where an FXT trace of this source goes when no output is named: beside the
    /// input file, with the extension `.fxt`; `trace.fxt` for standard input.
    pub fn default_fxt_output(&self) -> PathBuf {
        match self.path() {
            Some(p) => p.with_extension("fxt"),
            None => PathBuf::from("trace.fxt"),
        }
    }

    /// The input's name in messages.
    pub fn name(&self) -> String {
        match self {
            TextSource::Stream(_) => "standard input".to_string(),
            TextSource::File { path: p, .. } | TextSource::PerfData { path: p, .. } => {
                p.display().to_string()
            }
        }
    }

    /// The input file, if it is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            TextSource::Stream(_) => None,
            TextSource::File { path: p, .. } | TextSource::PerfData { path: p, .. } => Some(p),
        }
    }

    /// Whether the source can be read more than once.
    pub fn rereadable(&self) -> bool {
        !matches!(self, TextSource::Stream(_))
    }

    /// Calls `f` on the source's text, in pieces of whole records, with each
    /// piece's byte offset; `progress` hears how far it got.
    pub fn for_each_piece(
        &mut self,
        mut progress: impl FnMut(Progress),
        mut f: impl FnMut(&str, u64),
    ) -> Result<()> {
        match self {
            TextSource::Stream(stream) => {
                let stream = stream.take().ok_or(Error::StdinTwice)?;
                for_each_chunk(stream, |text, off| {
                    f(text, off);
                    progress(Progress::Position(off + text.len() as u64));
                })
                .map_err(|source| Error::Read {
                    name: "standard input".into(),
                    source,
                })
            }
            TextSource::File { text, .. } => {
                let bytes = (**text).as_ref();
                progress(Progress::Total(bytes.len() as u64));
                for_each_piece_of(bytes, |text, off| {
                    f(text, off);
                    progress(Progress::Position(off + text.len() as u64));
                });
                Ok(())
            }
            TextSource::PerfData {
                path, perf, mode, ..
            } => {
                let mut script = PerfScript::spawn(perf, path, *mode)?;
                progress(Progress::PerfScriptStarted(script.mode()));
                let stdout = script.take_stdout();
                for_each_chunk(stdout, |text, off| {
                    f(text, off);
                    progress(Progress::Position(off + text.len() as u64));
                })
                .map_err(|source| Error::Read {
                    name: format!("the output of perf script on {}", path.display()),
                    source,
                })?;
                script.finish()
            }
        }
    }
}

/// Calls `f` on successive pieces of `bytes` that hold only complete records,
/// with each piece's offset. Invalid UTF-8 is replaced, as `perf script` text
/// may carry raw symbol bytes.
pub fn for_each_piece_of(bytes: &[u8], mut f: impl FnMut(&str, u64)) {
    let mut pos = 0usize;
    while pos < bytes.len() {
        let end = (pos + CHUNK).min(bytes.len());
        let cut = if end == bytes.len() {
            end - pos
        } else {
            // A record longer than a piece is cut where the piece ends.
            match complete_prefix(&bytes[pos..end], false) {
                0 => end - pos,
                c => c,
            }
        };
        let piece = &bytes[pos..pos + cut];
        match std::str::from_utf8(piece) {
            Ok(text) => f(text, pos as u64),
            Err(_) => f(&String::from_utf8_lossy(piece), pos as u64),
        }
        pos += cut;
    }
}

/// Calls `f` on successive pieces of `r` that hold only complete records.
///
/// A thread reads `r`, so that a piece goes to `f` as soon as it is complete: a
/// slow producer (a pipe, `perf script`) gets its records decoded as they come,
/// while a fast one is batched into pieces of up to [`CHUNK`] bytes.
pub fn for_each_chunk(mut r: impl Read + Send, mut f: impl FnMut(&str, u64)) -> io::Result<()> {
    const READ: usize = 1 << 20;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(16);
        scope.spawn(move || {
            loop {
                let mut piece = vec![0u8; READ];
                let n = loop {
                    match r.read(&mut piece) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        other => break other,
                    }
                };
                let done = !matches!(n, Ok(k) if k > 0);
                let sent = tx.send(n.map(|k| {
                    piece.truncate(k);
                    piece
                }));
                if done || sent.is_err() {
                    return;
                }
            }
        });
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + READ);
        let mut offset = 0u64;
        let mut eof = false;
        while !eof {
            // One piece, waiting for it; then whatever else is already there.
            let mut next = rx.recv().map_err(|_| ());
            loop {
                match next {
                    Ok(Ok(piece)) if piece.is_empty() => eof = true,
                    Ok(Ok(piece)) => buf.extend_from_slice(&piece),
                    Ok(Err(e)) => return Err(e),
                    Err(()) => eof = true,
                }
                if eof || buf.len() >= CHUNK {
                    break;
                }
                next = match rx.try_recv() {
                    Ok(x) => Ok(x),
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(()),
                };
            }
            let cut = complete_prefix(&buf, eof);
            if cut > 0 {
                match std::str::from_utf8(&buf[..cut]) {
                    Ok(text) => f(text, offset),
                    Err(_) => f(&String::from_utf8_lossy(&buf[..cut]), offset),
                }
                offset += cut as u64;
                buf.drain(..cut);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Sampled records: a header line, call-chain lines, a blank line.
    fn records(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!(
                    "prog 1/1 {}.{:09}: 1 cpu-clock:u:\n\t    401000 f+0x0 (/bin/prog)\n\t    402000 main+0x10 (/bin/prog)\n\n",
                    i / 1000,
                    i % 1000
                )
            })
            .collect()
    }

    #[test]
    fn a_text_file_is_read_whole_with_its_size_first_and_can_be_read_again() {
        let text = records(3);
        let mut source = TextSource::File {
            path: PathBuf::from("dir/out.txt"),
            text: Box::new(text.clone().into_bytes()),
        };
        assert_eq!(source.name(), "dir/out.txt");
        assert_eq!(source.default_fxt_output(), Path::new("dir/out.fxt"));
        for _ in 0..2 {
            let (mut heard, mut got) = (Vec::new(), String::new());
            source
                .for_each_piece(|p| heard.push(p), |piece, _| got.push_str(piece))
                .unwrap();
            assert_eq!(got, text);
            let len = text.len() as u64;
            assert_eq!(heard, [Progress::Total(len), Progress::Position(len)]);
        }
        let stdin = TextSource::Stream(None);
        assert_eq!(stdin.name(), "standard input");
        assert_eq!(stdin.default_fxt_output(), PathBuf::from("trace.fxt"));
        assert!(source.rereadable() && !stdin.rereadable());
    }

    #[test]
    fn streamed_pieces_hold_whole_records_and_every_byte() {
        let text = records(200_000);
        // A reader that hands out odd-sized reads, as a pipe does.
        struct Dribble<'a>(&'a [u8]);
        impl Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(77_777);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut got = String::new();
        let mut pieces = 0;
        for_each_chunk(Dribble(text.as_bytes()), |piece, off| {
            assert_eq!(off as usize, got.len());
            assert!(
                !piece.starts_with(char::is_whitespace) || piece.starts_with("\n"),
                "a piece starts with a call-chain line"
            );
            got.push_str(piece);
            pieces += 1;
        })
        .unwrap();
        assert_eq!(got, text);
        assert!(pieces > 1, "{} bytes in one piece", text.len());
    }

    #[test]
    fn mapped_pieces_hold_whole_records_and_every_byte() {
        let text = records(200_000);
        assert!(text.len() > 2 * CHUNK);
        let mut got = String::new();
        for_each_piece_of(text.as_bytes(), |piece, off| {
            assert_eq!(off as usize, got.len());
            assert!(
                !piece.starts_with(char::is_whitespace) || piece.starts_with("\n"),
                "a piece starts with a call-chain line"
            );
            got.push_str(piece);
        });
        assert_eq!(got, text);
    }

    #[test]
    fn standard_input_is_read_once() {
        let mut s = TextSource::Stream(Some(Box::new(io::empty())));
        s.for_each_piece(|_| {}, |_, _| {}).unwrap();
        let again = s.for_each_piece(|_| {}, |_, _| {});
        assert!(matches!(again, Err(Error::StdinTwice)));
    }
}
