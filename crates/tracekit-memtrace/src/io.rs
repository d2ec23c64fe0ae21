//! Opening traces from files and streams: the I/O edge of the reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::OpenError;
use crate::read::Reader;

impl Reader<'static> {
    /// Reads the trace file at `path` into memory.
    ///
    /// To read a large trace without copying it, map the file and pass the
    /// map to [`Reader::from_owner`], which says what mapping it takes.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader<'static>, OpenError> {
        let file = File::open(path)?;
        if file.metadata()?.is_dir() {
            return Err(
                std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory").into(),
            );
        }
        Reader::from_read(file)
    }

    /// Reads a whole trace from `input` (a pipe, say) into memory.
    pub fn from_read(mut input: impl Read) -> Result<Reader<'static>, OpenError> {
        let mut data = Vec::new();
        input.read_to_end(&mut data)?;
        Ok(Reader::from_vec(data)?)
    }
}
