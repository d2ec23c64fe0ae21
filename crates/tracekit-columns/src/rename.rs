//! Files written whole or not at all: a file is written under a temporary
//! name in its destination's folder, and renamed over the destination only
//! when its writer says it is complete ([`RenameFile::commit`]). Until then a
//! reader of the destination sees the previous file, or none; a write that
//! fails or is dropped removes the temporary file, so that it leaves nothing
//! half-written behind. A rename within one folder is atomic, which is why
//! the temporary file is made there and not in a system temporary folder.
//!
//! This is the file system's side of the formats this crate writes, kept
//! apart from them: the command line's outputs, the trace cache and the
//! symbol names cache all write their files through it.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written beside its destination, renamed into place by
/// [`RenameFile::commit`] and removed when dropped before.
#[derive(Debug)]
pub struct RenameFile {
    temp: tempfile::NamedTempFile,
    target: PathBuf,
}

impl RenameFile {
    /// Starts writing `target`: a new file in its folder, named `prefix`, a
    /// few random characters and `suffix` (a name that says it is not the
    /// destination yet), with `permissions` (less the umask) when given, else
    /// readable by its owner only.
    pub fn create(
        target: &Path,
        prefix: &str,
        suffix: &str,
        permissions: Option<Permissions>,
    ) -> io::Result<RenameFile> {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(prefix).suffix(suffix);
        if let Some(p) = permissions {
            builder.permissions(p);
        }
        Ok(RenameFile {
            temp: builder.tempfile_in(dir)?,
            target: target.to_path_buf(),
        })
    }

    /// The file being written.
    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// The file being written, to write to it.
    pub fn file_mut(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Where the file is being written.
    pub fn temp_path(&self) -> &Path {
        self.temp.path()
    }

    /// Where the file goes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the file over its destination. On an error the temporary file
    /// is removed and the destination left as it was. (A caller that wants
    /// the bytes on disk before the name calls `file().sync_all()` first.)
    pub fn commit(self) -> io::Result<()> {
        // A failed persist hands the temporary file back; dropping it removes it.
        self.temp
            .persist(&self.target)
            .map(drop)
            .map_err(|e| e.error)
    }
}

impl Write for RenameFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_destination_changes_whole_at_commit_and_never_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        std::fs::write(&target, b"old").unwrap();
        let mut f = RenameFile::create(&target, ".out.", ".tmp", None).unwrap();
        f.write_all(b"new, in part").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"old", "not yet");
        assert!(f.temp_path().starts_with(dir.path()));
        // Dropped before commit (an error on the way): the old file stays,
        // and no temporary file is left.
        drop(f);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["out.txt"]);

        let mut f = RenameFile::create(&target, ".out.", ".tmp", None).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn a_rename_that_fails_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        // A folder is in the way: the rename fails.
        let target = dir.path().join("taken");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), b"x").unwrap();
        let mut f = RenameFile::create(&target, ".taken.", "", None).unwrap();
        f.write_all(b"data").unwrap();
        assert!(f.commit().is_err());
        assert_eq!(names(dir.path()), ["taken"]);
        // A folder that does not exist: no file at all.
        assert!(RenameFile::create(&dir.path().join("no/such"), ".x.", "", None).is_err());
    }
}
