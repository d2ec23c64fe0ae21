//! FXT traces opened from a path: a file read whole (mapped when large) and read
//! in place, standard input streamed a record at a time, so that output starts at
//! once and memory does not grow with the input.

use std::path::Path;

use tracekit_fxt::read::{Reader, Records, StreamReader};

use crate::Error;
use crate::input::{self, Family};
use crate::output::InteractiveStdout;

/// Runs `f` over the records of the trace at `path` (`-`: standard input,
/// streamed; `flush`, when given, is flushed before each read). `f` gets the
/// input's size when it is known.
pub fn with_records<T, E: From<Error>>(
    path: &Path,
    flush: Option<&InteractiveStdout>,
    f: impl FnOnce(&mut dyn Records, Option<u64>) -> Result<T, E>,
) -> Result<T, E> {
    if input::is_stdin(path) {
        let stream = input::open_stream(path, Family::Fxt)?;
        return match flush {
            Some(out) => f(&mut StreamReader::new(out.reader(stream)), None),
            None => f(&mut StreamReader::new(stream), None),
        };
    }
    let bytes = input::read_all(path, Family::Fxt)?;
    f(&mut Reader::new(&bytes), Some(bytes.len() as u64))
}

/// The reader's warnings about the trace at `path`, a line each, and a count of
/// those it did not keep.
pub fn warning_lines(path: &Path, reader: &dyn Records) -> Vec<String> {
    let name = input::display(path);
    let mut lines: Vec<String> = (reader.warnings().iter())
        .map(|w| format!("warning: {name}: {w}"))
        .collect();
    let more = reader
        .warning_count()
        .saturating_sub(reader.warnings().len() as u64);
    if more > 0 {
        lines.push(format!("warning: {name}: {more} more warnings"));
    }
    lines
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_fxt::read::ReadOptions;

    #[test]
    fn a_file_s_records_come_with_its_size_and_warnings_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.fxt");
        let mut bytes =
            tracekit_fxt::write::Writer::new(tracekit_fxt::write::VecDestination::new())
                .unwrap()
                .finish()
                .unwrap()
                .into_vec();
        let size = bytes.len() as u64;
        std::fs::write(&path, &bytes).unwrap();
        let (n, got) = with_records(&path, None, |r, size| {
            let mut n = 0;
            while r.next_entry().unwrap().is_some() {
                n += 1;
            }
            Ok::<_, Error>((n, size))
        })
        .unwrap();
        assert!(n > 0);
        assert_eq!(got, Some(size));
        // Cut inside the last record: one warning, kept.
        bytes.truncate(bytes.len() - 3);
        let mut reader = Reader::with_options(&bytes, ReadOptions::default());
        while reader.next_entry().unwrap().is_some() {}
        let lines = warning_lines(&path, &reader);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("warning: "), "{lines:?}");
    }
}
