//! Names of an object's addresses kept across runs, one file per build id, so
//! that reading a second recording of the same binaries names its addresses
//! without loading (and inflating) their DWARF.
//!
//! The caller says where the files go (a tool uses `$XDG_CACHE_HOME/tracekit`);
//! this crate reads no environment variable. A file is named by the object's
//! build id in hex, with `.names` after it, and is text:
//!
//! | line | what it holds |
//! |---|---|
//! | 1 | `tracekit-names 1` (the version of this layout) |
//! | 2 | `debug <size> <mtime ns> <path>` of the separate debug file that named the addresses, or `debug -` for none |
//! | each after | an address as a file offset in the object (hex), then each frame's function name after a tab, innermost (inlined callee) first; none when nothing names it |
//!
//! Keys are file offsets, not run-time addresses, so a file serves every
//! process that maps the object wherever it lands. A file whose second line
//! does not match the debug file found now (installed, removed or rebuilt since)
//! is stale and read as empty; so is a damaged one. A name holding a tab or a
//! line break is not kept. Files are replaced whole (written aside, then
//! renamed), so a reader never sees half of one.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use tracekit_columns::rename::RenameFile;

use crate::object_symbols::ObjectIdentity;

/// The first line of a names file.
const MAGIC: &str = "tracekit-names 1";

/// Files larger than this are not read (a cache that grew so large costs more
/// to parse than it saves).
const MAX_FILE: u64 = 256 << 20;

/// The names kept for one object: by file offset, the frames' function names,
/// innermost first.
#[derive(Debug, Default)]
pub struct CachedNames {
    entries: HashMap<u64, Box<[Box<str>]>>,
    /// Entries added since the file was read.
    added: usize,
}

impl CachedNames {
    /// The names kept under `dir` for the object `id`; empty when there are none,
    /// or when the file is stale or damaged.
    pub fn load(dir: &Path, id: &ObjectIdentity) -> CachedNames {
        let file = path(dir, id);
        let text = match std::fs::metadata(&file) {
            Ok(m) if m.len() <= MAX_FILE => std::fs::read_to_string(&file).ok(),
            _ => None,
        };
        text.and_then(|t| parse(&t, &debug_line(id)))
            .unwrap_or_default()
    }

    /// The names kept for the address at `file_offset`: `Some(&[])` when nothing
    /// names it, `None` when it is not kept.
    pub fn get(&self, file_offset: u64) -> Option<&[Box<str>]> {
        self.entries.get(&file_offset).map(|n| &**n)
    }

    /// Keeps `names` (innermost first) for the address at `file_offset`, unless a
    /// name holds a tab or a line break.
    pub fn insert(&mut self, file_offset: u64, names: &[&str]) {
        if names.iter().any(|n| n.contains(['\t', '\n', '\r'])) {
            return;
        }
        let names = names.iter().map(|&n| n.into()).collect();
        if self.entries.insert(file_offset, names).is_none() {
            self.added += 1;
        }
    }

    /// How many addresses are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no address is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the names under `dir` (made when missing) if any were added since
    /// they were read, replacing the file whole.
    pub fn save(&self, dir: &Path, id: &ObjectIdentity) -> std::io::Result<()> {
        if self.added == 0 {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        let mut text = String::with_capacity(self.entries.len() * 48);
        text.push_str(MAGIC);
        text.push('\n');
        text.push_str(&debug_line(id));
        text.push('\n');
        let mut offsets: Vec<u64> = self.entries.keys().copied().collect();
        offsets.sort_unstable();
        for offset in offsets {
            text.push_str(&format!("{offset:x}"));
            for name in &*self.entries[&offset] {
                text.push('\t');
                text.push_str(name);
            }
            text.push('\n');
        }
        // Written beside its destination, readable as a new file made with
        // `open(2)` is (0666 less the umask), and synced before the rename so
        // that a crash leaves the old file or the whole new one.
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o666);
        let mut aside = RenameFile::create(&path(dir, id), ".names.", ".tmp", Some(mode))?;
        aside.write_all(text.as_bytes())?;
        aside.file().sync_all()?;
        aside.commit()
    }
}

/// The file of object `id` under `dir`.
fn path(dir: &Path, id: &ObjectIdentity) -> PathBuf {
    let mut name = String::with_capacity(id.build_id.len() * 2 + 6);
    for b in &id.build_id {
        name.push_str(&format!("{b:02x}"));
    }
    name.push_str(".names");
    dir.join(name)
}

/// The second line of the file of `id`: which debug file named its addresses.
fn debug_line(id: &ObjectIdentity) -> String {
    use std::os::unix::fs::MetadataExt;
    let Some(debug) = &id.debug_file else {
        return "debug -".to_string();
    };
    match std::fs::metadata(debug) {
        Ok(m) => {
            let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            format!("debug {} {} {}", m.len(), mtime, debug.display())
        }
        Err(_) => "debug ?".to_string(),
    }
}

/// The entries of a file's text, if its header says it was written with the
/// debug file `debug` and every line reads.
fn parse(text: &str, debug: &str) -> Option<CachedNames> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC || lines.next()? != debug {
        return None;
    }
    let mut entries = HashMap::new();
    for line in lines {
        let mut fields = line.split('\t');
        let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
        let names: Box<[Box<str>]> = fields.map(Box::from).collect();
        if names.iter().any(|n| n.is_empty()) {
            return None;
        }
        entries.insert(offset, names);
    }
    Some(CachedNames { entries, added: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(debug: Option<PathBuf>) -> ObjectIdentity {
        ObjectIdentity {
            build_id: vec![0xab, 0x01, 0xff],
            debug_file: debug,
        }
    }

    #[test]
    fn names_kept_are_read_back_by_the_same_identity_only() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let debug = dir.path().join("libx.debug");
        std::fs::write(&debug, b"debug info").expect("a debug file");
        let id = identity(Some(debug.clone()));
        let mut names = CachedNames::load(dir.path(), &id);
        assert!(names.is_empty());
        names.insert(0x1234, &["inlined", "outer"]);
        names.insert(0x99, &[]);
        names.insert(0x5, &["has\ttab"]);
        names.save(dir.path(), &id).expect("saved");
        assert!(dir.path().join("ab01ff.names").is_file());

        let back = CachedNames::load(dir.path(), &id);
        assert_eq!(back.len(), 2);
        let got: Vec<&str> = back
            .get(0x1234)
            .expect("kept")
            .iter()
            .map(|n| &**n)
            .collect();
        assert_eq!(got, ["inlined", "outer"]);
        assert_eq!(back.get(0x99).map(<[_]>::len), Some(0));
        assert!(back.get(0x5).is_none());

        // Another debug file (or none) named them: stale.
        assert!(CachedNames::load(dir.path(), &identity(None)).is_empty());
        std::fs::write(&debug, b"rebuilt debug info").expect("a new debug file");
        assert!(CachedNames::load(dir.path(), &id).is_empty());
    }

    #[test]
    fn a_damaged_file_reads_as_empty_and_nothing_added_writes_nothing() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let id = identity(None);
        for text in [
            "tracekit-names 1\ndebug -\nzz\tname\n",
            "tracekit-names 1\ndebug -\n10\t\n",
            "tracekit-names 2\ndebug -\n10\tname\n",
            "",
        ] {
            std::fs::write(dir.path().join("ab01ff.names"), text).expect("written");
            assert!(CachedNames::load(dir.path(), &id).is_empty(), "{text:?}");
        }
        let empty = dir.path().join("empty");
        CachedNames::default()
            .save(&empty, &id)
            .expect("nothing to save");
        assert!(!empty.exists());
    }
}
