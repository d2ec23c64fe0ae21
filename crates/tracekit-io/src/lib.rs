//! The I/O edge of the `tracekit` command: where inputs come from and where results
//! go, with the guarantees a user relies on.
//!
//! - [`input`]: files (mapped when large) or `-` for standard input; what kind of
//!   file an input is, told by its first bytes, so that a command given the wrong
//!   kind names it instead of reading it as data.
//! - [`output`]: files written atomically (a temporary file renamed into place
//!   when complete; never an input; removed on error or interrupt), standard output
//!   whose errors say so, and output flushed before a streamed input is read.
//! - [`fxt`]: FXT traces opened from a path, read in place or streamed.
//! - [`follow`]: a file read as a program writes it.
//! - [`memtrace`]: memtrace traces opened from a path, mapped or streamed.
//! - [`priority`]: batch threads run after those that answer a user.
//! - [`names`]: which file a command writes without `-o`, and which format, so
//!   that an output's name and contents agree.
//!
//! The format crates do no I/O; this crate is their edge.

pub mod follow;
pub mod fxt;
pub mod guard;
pub mod input;
pub mod memtrace;
pub mod names;
pub mod output;
pub mod priority;

use std::io;
use std::path::PathBuf;

/// What went wrong at the edge. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input could not be opened.
    #[error("cannot open {path}")]
    Open {
        /// The input, as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// An input could not be read.
    #[error("cannot read {name}")]
    Read {
        /// The input's name (`standard input` for `-`).
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// An input is a folder.
    #[error("{} is a directory, not a trace file", .0.display())]
    Directory(PathBuf),
    /// An input is not of the kind the command reads.
    #[error("{name}: {expected}; {found}")]
    WrongKind {
        /// The input's name.
        name: String,
        /// What the command wanted (`not an FXT file (no magic record)`).
        expected: &'static str,
        /// What the input is instead.
        found: &'static str,
    },
    /// An input is of the right kind but damaged where its reading must start.
    #[error("{name}: {what}")]
    Damaged {
        /// The input's name.
        name: String,
        /// What is damaged, and how.
        what: String,
    },
    /// An output is one of the inputs.
    #[error("refusing to write {}: it is the same file as the input {}", .output.display(), .input.display())]
    SameFile {
        /// The output, as given.
        output: PathBuf,
        /// The input it is.
        input: PathBuf,
    },
    /// An output could not be created (or moved into place).
    #[error("cannot write {}: {reason}", .path.display())]
    Create {
        /// The output, as given.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A write failed; the error names its file (`writing out.json: ...`) and keeps
    /// its kind (a closed pipe is `BrokenPipe`).
    #[error(transparent)]
    Write(#[from] io::Error),
}

impl Error {
    /// Whether this is a write to a closed pipe: the reader of the output went
    /// away (`| head`), which is a normal way for a command to stop.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Write(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// The edge's result.
pub type Result<T> = std::result::Result<T, Error>;
