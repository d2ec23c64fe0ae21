//! Parquet files checked before the engine reads them, so that a damaged file in
//! a dataset (copied from another machine, cut short by a full disk) is an error
//! naming it rather than a panic inside the parquet or bytes crates.
//!
//! A dataset is a folder of files from anywhere, so the engine is never trusted
//! with a footer it has not seen checked: the magic `PAR1` at both ends, a
//! metadata length within the file, metadata that the parquet crate's own reader
//! decodes, and column chunks that lie between the leading magic and the
//! metadata. What the engine still does with a file that passes (its pages are
//! read only by the query) is contained by [`contain`]: a panic becomes an
//! error, and [`find_damaged`] then names the file by reading each one alone.

use std::any::Any;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader,
};

use crate::Error;

/// `PAR1`, at the start and at the end of every (unencrypted) Parquet file.
const MAGIC: &[u8; 4] = b"PAR1";
/// The footer: the metadata's length (u32, little-endian) and the magic.
const FOOTER: u64 = 8;

/// The Parquet files of `dir` (`*.parquet`), in name order.
pub(crate) fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    files
}

fn damaged(path: &Path, reason: impl Into<String>) -> Error {
    Error::Parquet {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Checks the footer of the Parquet file at `path`: what the engine trusts when
/// it plans a query (the schema, the row groups, where each column chunk is).
pub(crate) fn check_footer(path: &Path) -> Result<(), Error> {
    let io = |e: std::io::Error| damaged(path, e.to_string());
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len < MAGIC.len() as u64 + FOOTER {
        return Err(damaged(
            path,
            format!("{len} bytes, too short for a Parquet file"),
        ));
    }
    let mut head = [0u8; 4];
    file.read_exact(&mut head).map_err(io)?;
    if &head != MAGIC {
        return Err(damaged(path, "not a Parquet file (no PAR1 at its start)"));
    }
    let mut footer = [0u8; FOOTER as usize];
    file.seek(SeekFrom::Start(len - FOOTER)).map_err(io)?;
    file.read_exact(&mut footer).map_err(io)?;
    let (length, magic) = footer.split_at(4);
    if magic != MAGIC {
        return Err(damaged(
            path,
            "damaged Parquet footer (no PAR1 at its end: cut short?)",
        ));
    }
    let mut metadata_len = [0u8; 4];
    metadata_len.copy_from_slice(length);
    let metadata_len = u64::from(u32::from_le_bytes(metadata_len));
    // Between the leading magic and the footer.
    let room = len - MAGIC.len() as u64 - FOOTER;
    if metadata_len == 0 || metadata_len > room {
        return Err(damaged(
            path,
            format!(
                "damaged Parquet footer: {metadata_len} bytes of metadata, but the file has room for {room}"
            ),
        ));
    }
    let metadata_start = len - FOOTER - metadata_len;
    file.seek(SeekFrom::Start(metadata_start)).map_err(io)?;
    let mut buf = vec![0u8; metadata_len as usize];
    file.read_exact(&mut buf).map_err(io)?;
    let metadata = contain(|| ParquetMetaDataReader::decode_metadata(&buf))
        .map_err(|panic| damaged(path, format!("damaged Parquet metadata ({panic})")))?
        .map_err(|e| damaged(path, format!("damaged Parquet metadata: {e}")))?;
    check_chunks(&metadata, metadata_start).map_err(|reason| damaged(path, reason))
}

/// Checks that every column chunk of `metadata` lies within the data, between
/// the leading magic and `data_end` (where the metadata starts): the engine
/// reads the chunks at these offsets, and the parquet crate asserts, rather
/// than checks, that they are not negative.
fn check_chunks(metadata: &ParquetMetaData, data_end: u64) -> Result<(), String> {
    let leaves = metadata.file_metadata().schema_descr().num_columns();
    for (i, group) in metadata.row_groups().iter().enumerate() {
        if group.num_columns() != leaves {
            return Err(format!(
                "damaged Parquet metadata: row group {i} has {} columns, the schema {leaves}",
                group.num_columns()
            ));
        }
        if group.num_rows() < 0 {
            return Err(format!(
                "damaged Parquet metadata: row group {i} has {} rows",
                group.num_rows()
            ));
        }
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let size = column.compressed_size();
            if !within_data(start, size, data_end) {
                return Err(format!(
                    "damaged Parquet metadata: row group {i}, column {}: {size} bytes at {start}, \
                     outside the data (bytes 4 to {data_end})",
                    column.column_path()
                ));
            }
            // The page indexes and bloom filters the engine reads lie between the
            // data and the metadata too; an offset without its length (or the
            // reverse) is a damaged entry.
            let extras = [
                (
                    "column index",
                    column.column_index_offset(),
                    column.column_index_length(),
                ),
                (
                    "offset index",
                    column.offset_index_offset(),
                    column.offset_index_length(),
                ),
                (
                    "bloom filter",
                    column.bloom_filter_offset(),
                    column.bloom_filter_length(),
                ),
            ];
            for (what, offset, length) in extras {
                let within = match (offset, length) {
                    (None, None) => true,
                    (Some(o), Some(l)) => within_data(o, l.into(), data_end),
                    // parquet-rs writes a bloom filter's offset without a length:
                    // its first byte, at least, is in the data.
                    (Some(o), None) => what == "bloom filter" && within_data(o, 1, data_end),
                    (None, Some(_)) => false,
                };
                if !within {
                    return Err(format!(
                        "damaged Parquet metadata: row group {i}, column {}: its {what} \
                         ({offset:?}, {length:?} bytes) is outside the data (bytes 4 to {data_end})",
                        column.column_path()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether `length` bytes at `offset` lie within the data: after the leading
/// magic, and ending by `data_end` (where the metadata starts). Negative values,
/// which the metadata's signed fields can hold, are not within.
fn within_data(offset: i64, length: i64, data_end: u64) -> bool {
    let (Ok(start), Ok(length)) = (u64::try_from(offset), u64::try_from(length)) else {
        return false;
    };
    start >= MAGIC.len() as u64 && start.checked_add(length).is_some_and(|end| end <= data_end)
}

/// Reads every row of the Parquet file at `path` with the parquet crate alone:
/// the error, or the panic, that its pages cause.
fn read_whole(path: &Path) -> Result<(), Error> {
    check_footer(path)?;
    let read = || -> Result<(), String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        // With the page indexes, which the engine reads as well.
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let reader = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
            .and_then(|b| b.build())
            .map_err(|e| e.to_string())?;
        for batch in reader {
            batch.map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    match contain(read) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(damaged(path, format!("damaged Parquet data: {e}"))),
        Err(panic) => Err(damaged(path, format!("damaged Parquet data ({panic})"))),
    }
}

/// The first of `files` that cannot be read whole, and why: after the engine
/// failed (or panicked) reading a dataset, which file it was. `None` if each
/// reads alone.
pub(crate) fn find_damaged<'a>(files: impl IntoIterator<Item = &'a Path>) -> Option<Error> {
    files.into_iter().find_map(|f| read_whole(f).err())
}

/// Runs `f`, turning a panic on this thread (or one that the engine's tasks
/// resume on it) into `Err` with the panic's message, which is then not printed.
///
/// The last line of defence, not a way of reading: the checks above keep the
/// known panics of the parquet and bytes crates (a negative or out-of-range
/// chunk, a length past the end of a buffer) from being reached, but a crate that
/// asserts on its input can still panic on a file damaged in a new way, and one
/// bad file among a fleet's must not take the whole command down.
pub(crate) fn contain<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let caught = CaughtPanics::install();
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    let messages = caught.uninstall();
    result.map_err(|payload| {
        messages
            .into_iter()
            .next()
            .unwrap_or_else(|| format!("panicked: {}", payload_text(payload.as_ref())))
    })
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Send + Sync + 'static>;

/// While installed, the panic hook records, instead of printing, the panics of
/// the installing thread and of the engine's worker threads (named
/// `tracekit-sql`); other threads' panics go to the previous hook.
struct CaughtPanics {
    messages: Arc<Mutex<Vec<String>>>,
    previous: Arc<Hook>,
}

impl CaughtPanics {
    fn install() -> CaughtPanics {
        let previous: Arc<Hook> = Arc::new(std::panic::take_hook());
        let messages = Arc::new(Mutex::new(Vec::new()));
        let here = std::thread::current().id();
        let (keep, pass) = (Arc::clone(&messages), Arc::clone(&previous));
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if thread.id() == here || thread.name() == Some(crate::WORKER_NAME) {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let text = format!("panicked{at}: {}", payload_text(info.payload()));
                keep.lock().unwrap_or_else(|e| e.into_inner()).push(text);
            } else {
                pass(info);
            }
        }));
        CaughtPanics { messages, previous }
    }

    /// Puts the previous hook back; the messages recorded.
    fn uninstall(self) -> Vec<String> {
        let previous = self.previous;
        std::panic::set_hook(Box::new(move |info| previous(info)));
        let mut messages = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dataset, query};
    use tracekit_export::{ExportOptions, Input};
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};

    /// An export of a small synthetic trace in a fresh folder; the folder and
    /// the file of its `traces` table.
    fn export() -> (tempfile::TempDir, PathBuf) {
        let config = SynthConfig {
            allocs: 2000,
            ..SynthConfig::default()
        };
        let trace = write_synthetic(Vec::new(), &config).unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        tracekit_export::export(
            &trace,
            Input::Memtrace,
            dir.path(),
            &ExportOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let traces = parquet_files(&dir.path().join("traces"));
        assert_eq!(traces.len(), 1);
        (dir, traces[0].clone())
    }

    /// Rows of `SELECT count(*) FROM table` over the export in `dir`.
    fn count(dir: &Path, table: &str) -> Result<usize, Error> {
        let datasets = [Dataset::parse(&dir.display().to_string())];
        query(&datasets, &format!("SELECT count(*) FROM {table}")).map(|a| a.rows())
    }

    /// `file`'s bytes passed through `damage`, written back.
    fn damage(file: &Path, damage: impl FnOnce(&mut Vec<u8>)) {
        let mut bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{e}"));
        damage(&mut bytes);
        std::fs::write(file, bytes).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The metadata's length, from the footer of `bytes`.
    fn metadata_len(bytes: &[u8]) -> usize {
        let n = bytes.len();
        let mut len = [0u8; 4];
        len.copy_from_slice(&bytes[n - 8..n - 4]);
        u32::from_le_bytes(len) as usize
    }

    /// The query fails with an error naming `file`, whose reason contains `why`.
    fn assert_named(dir: &Path, file: &Path, why: &str) {
        match count(dir, "traces") {
            Err(Error::Parquet { path, reason }) => {
                assert_eq!(path, file);
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("expected an error naming {}: {other:?}", file.display()),
        }
    }

    #[test]
    fn an_intact_export_answers() {
        let (dir, _) = export();
        assert_eq!(count(dir.path(), "traces").ok(), Some(1));
    }

    #[test]
    fn a_file_cut_short_is_named() {
        for keep in [0, 3, 11, 100] {
            let (dir, file) = export();
            damage(&file, |b| b.truncate(keep));
            assert_named(
                dir.path(),
                &file,
                if keep < 12 { "too short" } else { "PAR1" },
            );
        }
        // Cut by a few bytes: the footer's magic is gone.
        let (dir, file) = export();
        damage(&file, |b| b.truncate(b.len() - 3));
        assert_named(dir.path(), &file, "no PAR1 at its end");
    }

    #[test]
    fn a_footer_length_out_of_the_file_is_named() {
        for len in [0u32, u32::MAX, 1 << 20] {
            let (dir, file) = export();
            damage(&file, |b| {
                let n = b.len();
                b[n - 8..n - 4].copy_from_slice(&len.to_le_bytes());
            });
            assert_named(dir.path(), &file, "damaged Parquet footer");
        }
    }

    #[test]
    fn a_footer_length_within_the_file_but_wrong_is_named() {
        // Shorter or longer than the metadata: decoding starts inside it, or
        // inside the data before it.
        for delta in [-1i64, -7, -100, 1, 9, 300] {
            let (dir, file) = export();
            damage(&file, |b| {
                let n = b.len();
                let len = (metadata_len(b) as i64 + delta) as u32;
                b[n - 8..n - 4].copy_from_slice(&len.to_le_bytes());
            });
            assert_named(dir.path(), &file, "damaged Parquet");
        }
    }

    #[test]
    fn every_byte_of_the_metadata_flipped_is_an_answer_or_names_the_file() {
        let (dir, file) = export();
        let intact = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let n = intact.len();
        let start = n - 8 - metadata_len(&intact);
        let mut named = 0;
        for at in start..n - 8 {
            let mut bytes = intact.clone();
            bytes[at] ^= 0xff;
            std::fs::write(&file, &bytes).unwrap_or_else(|e| panic!("{e}"));
            match count(dir.path(), "traces") {
                Ok(_) => {}
                Err(Error::Parquet { path, .. }) if path == file => named += 1,
                Err(e) => panic!("byte {at} flipped: {e}"),
            }
        }
        // Most flips damage the structure; some only change a value.
        assert!(named > (n - 8 - start) / 2, "{named} of {}", n - 8 - start);
    }

    #[test]
    fn the_file_is_named_whichever_table_is_queried() {
        // A damaged `traces` file stops a query of `allocations` too: the views
        // are made over every table.
        let (dir, file) = export();
        damage(&file, |b| b.truncate(b.len() / 2));
        match count(dir.path(), "allocations") {
            Err(Error::Parquet { path, .. }) => assert_eq!(path, file),
            other => panic!("{other:?}"),
        }
    }
}
