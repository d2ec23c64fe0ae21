//! Opening traces from files and streams: the I/O edge of the reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::OpenError;
use crate::read::{Data, Reader};

impl Reader<'static> {
    /// Opens the trace file at `path`, memory-mapped.
    ///
    /// The file must not be modified while the reader exists (a trace still
    /// being written by a live process should be copied first).
    /// Pipes and other files that cannot be mapped are read into memory.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader<'static>, OpenError> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(
                std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory").into(),
            );
        }
        if !meta.is_file() {
            return Reader::from_read(file);
        }
        if meta.len() == 0 {
            return Ok(Reader::new(Data::Owned(Vec::new()))?);
        }
        // SAFETY: the map is only read. Its contents can change if another
        // process writes the file meanwhile; that can only yield a decoding
        // error, since every read is bounds-checked against the map's length.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Reader::new(Data::Mapped(map))?)
    }

    /// Reads a whole trace from `input` (a pipe, say) into memory.
    pub fn from_read(mut input: impl Read) -> Result<Reader<'static>, OpenError> {
        let mut data = Vec::new();
        input.read_to_end(&mut data)?;
        Ok(Reader::new(Data::Owned(data))?)
    }

    /// A reader that owns the trace's bytes.
    pub fn from_vec(data: Vec<u8>) -> Result<Reader<'static>, crate::ReadError> {
        Reader::new(Data::Owned(data))
    }
}
