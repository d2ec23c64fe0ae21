//! A recording (perf.data) or `perf script` text decoded into an FXT trace,
//! whichever reader it takes, for `perf decode` (into a file) and a viewer
//! (into memory); and where the names of objects' addresses are kept between
//! runs.
//!
//! A perf.data file of sampled stacks is read directly, anything else through
//! `perf script` ([`crate::decode::direct`] says which). What the caller shows
//! arrives by callbacks, in the order a user reads it: progress, then each
//! warning as the decoder makes it, then the notes on the whole input (the
//! reader's findings, records skipped, names cut); an input with no event is
//! an error only after its notes are out.

use std::io::Write;
use std::path::{Path, PathBuf};

use tracekit_callstack::writer::Warning;

use crate::Result;
use crate::data::{PerfData, ReadStats};
use crate::decode::{
    DecodeOptions, FxtDecoded, decode_data_to_fxt, decode_to_fxt, direct, require_events,
};
use crate::text::{Progress, TextSource};

/// The folder of the names cache in tracekit's cache folder.
pub const NAMES_DIR: &str = "names";

/// Where the names of objects' addresses are kept across runs (by build id),
/// in tracekit's cache folder `cache_dir` (none without one).
pub fn names_cache(cache_dir: Option<&Path>) -> Option<PathBuf> {
    cache_dir.map(|d| d.join(NAMES_DIR))
}

impl DecodeOptions {
    /// These options, their names kept under tracekit's cache folder
    /// `cache_dir` ([`names_cache`]).
    pub fn with_names_in(self, cache_dir: Option<&Path>) -> DecodeOptions {
        DecodeOptions {
            name_cache: names_cache(cache_dir),
            ..self
        }
    }
}

/// What a decode into FXT did: the trace written, and what the direct reader
/// found (none for text read through `perf script`).
#[derive(Debug)]
pub struct Decoded {
    /// The trace written.
    pub fxt: FxtDecoded,
    /// What the direct reader found.
    pub read: Option<ReadStats>,
}

impl std::fmt::Display for Decoded {
    /// `read 900 samples (930 records; named 40 addresses, 38 from the
    /// cache)` for a recording read directly, else [`FxtDecoded`]'s line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(read) = &self.read else {
            return self.fxt.fmt(f);
        };
        let cached = match read.named_from_cache {
            0 => String::new(),
            n => format!(", {n} from the cache"),
        };
        write!(
            f,
            "read {} samples ({} records; named {} addresses{cached})",
            read.samples, read.records, read.named
        )
    }
}

/// Decodes `source` with `options` into an FXT trace written to `out` (named
/// `out_name` in errors), through the direct reader when `data` (the
/// recording [`direct`] opened) is given, else as text. `progress` hears a
/// direct read as [`Progress::Recording`] and positions, text as
/// [`TextSource::for_each_piece`] tells it, and is dropped once the input is
/// read (a bar it holds clears); `warn` gets each warning as it is made, and
/// is dropped before the notes; `note` then gets each line a user should know
/// about the whole input (naming it where the reader's findings do). Returns
/// `out` once the trace is complete and flushed; fails when there is no event.
pub fn decode_into<W: Write>(
    source: &mut TextSource,
    data: Option<PerfData>,
    options: &DecodeOptions,
    (out, out_name): (W, &str),
    mut progress: impl FnMut(Progress),
    warn: impl FnMut(&Warning),
    mut note: impl FnMut(&str),
) -> Result<(W, Decoded)> {
    let config = options.config(false)?;
    let name = source.name();
    let (out, fxt, read) = match data {
        Some(data) => {
            progress(Progress::Recording(data.size()));
            let (out, fxt, read) = decode_data_to_fxt(
                data,
                &options.read_options(),
                config,
                (out, out_name),
                |n| progress(Progress::Position(n)),
                warn,
            )?;
            drop(progress);
            for w in read.warnings() {
                note(&format!("{name}: {w}"));
            }
            (out, fxt, Some(read))
        }
        None => {
            let filter = options.filter.clone();
            let out = (out, out_name);
            let (out, fxt) = decode_to_fxt(source, config, filter, out, progress, warn)?;
            for w in fxt.warnings() {
                note(&w);
            }
            (out, fxt, None)
        }
    };
    require_events(&name, &fxt.stats)?;
    Ok((out, Decoded { fxt, read }))
}

/// [`decode_into`] memory, with the reader [`direct`] chooses.
pub fn decode_in_memory(
    source: &mut TextSource,
    options: &DecodeOptions,
    progress: impl FnMut(Progress),
    warn: impl FnMut(&Warning),
    note: impl FnMut(&str),
) -> Result<Vec<u8>> {
    let data = direct(source, options)?;
    let name = source.name();
    let out = (Vec::new(), name.as_str());
    Ok(decode_into(source, data, options, out, progress, warn, note)?.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Error;

    /// Two samples of one thread, as `perf script` prints sampled stacks.
    const TEXT: &str = "prog 7/7 1.000000000: 1 cpu-clock:u:\n\t401000 leaf+0x0 (/bin/prog)\n\t402000 main+0x10 (/bin/prog)\n\nprog 7/7 1.000100000: 1 cpu-clock:u:\n\t401000 leaf+0x0 (/bin/prog)\n\t402000 main+0x10 (/bin/prog)\n\n";

    fn text_source(text: &str) -> TextSource {
        TextSource::File {
            path: PathBuf::from("t.txt"),
            text: Box::new(text.as_bytes().to_vec()),
        }
    }

    #[test]
    fn names_are_kept_in_their_own_folder_of_the_cache() {
        assert_eq!(
            names_cache(Some(Path::new("/c/tracekit"))),
            Some(PathBuf::from("/c/tracekit/names"))
        );
        assert_eq!(names_cache(None), None);
        let options = DecodeOptions::default().with_names_in(Some(Path::new("/c")));
        assert_eq!(options.name_cache, Some(PathBuf::from("/c/names")));
        assert_eq!(options.read_options().name_cache, options.name_cache);
    }

    #[test]
    fn text_decodes_into_an_fxt_trace_in_memory() {
        let mut heard = Vec::new();
        let mut notes = Vec::new();
        let fxt = decode_in_memory(
            &mut text_source(TEXT),
            &DecodeOptions::default(),
            |p| heard.push(p),
            |_| {},
            |n| notes.push(n.to_string()),
        )
        .unwrap();
        assert_eq!(heard.first(), Some(&Progress::Total(TEXT.len() as u64)));
        assert!(fxt.starts_with(&tracekit_fxt::format::MAGIC.to_le_bytes()));
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn an_input_without_events_is_an_error_after_its_notes() {
        let mut notes = Vec::new();
        let e = decode_in_memory(
            &mut text_source("not perf script output\n\n"),
            &DecodeOptions::default(),
            |_| {},
            |_| {},
            |n| notes.push(n.to_string()),
        )
        .unwrap_err();
        assert!(matches!(e, Error::NothingDecoded { .. }), "{e}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("skipped 1 of 1 records"), "{notes:?}");
    }
}
