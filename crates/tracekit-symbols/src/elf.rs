//! Just enough ELF to map file offsets to virtual addresses: the `PT_LOAD`
//! program headers of a 64-bit little-endian object.
//!
//! ELF64 header fields read (offsets in bytes):
//!
//! | offset | size | field |
//! | ------ | ---- | ----- |
//! | 0 | 4 | magic `7f 45 4c 46` |
//! | 4 | 1 | class (2 = 64-bit) |
//! | 5 | 1 | data (1 = little-endian) |
//! | 32 | 8 | `e_phoff`: program header table offset |
//! | 54 | 2 | `e_phentsize`: size of one program header (56) |
//! | 56 | 2 | `e_phnum`: number of program headers |
//!
//! Program header fields: `p_type` u32 at 0 (1 = `PT_LOAD`), `p_offset` u64
//! at 8, `p_vaddr` u64 at 16, `p_filesz` u64 at 32.
//!
//! These functions read bytes that come from any file a caller names, so
//! they check every offset and never panic on malformed input (the fuzz
//! target `alloc_parsers` feeds them arbitrary bytes).

/// Why an object's program headers could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// Not a 64-bit little-endian ELF file.
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    /// The header table runs past the given bytes (at this offset).
    #[error("truncated ELF program headers at offset {0}")]
    Truncated(usize),
}

/// One loadable segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    /// Offset of the segment in the file.
    pub offset: u64,
    /// Address the object expects it at (before relocation).
    pub vaddr: u64,
    /// Bytes of the segment present in the file.
    pub filesz: u64,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, ElfError> {
    at.checked_add(2)
        .and_then(|end| b.get(at..end))
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or(ElfError::Truncated(at))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, ElfError> {
    at.checked_add(4)
        .and_then(|end| b.get(at..end))
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or(ElfError::Truncated(at))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64, ElfError> {
    at.checked_add(8)
        .and_then(|end| b.get(at..end))
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(ElfError::Truncated(at))
}

fn table(head: &[u8]) -> Result<(usize, usize, usize), ElfError> {
    if head.get(..4) != Some(b"\x7fELF") || head.get(4) != Some(&2) || head.get(5) != Some(&1) {
        return Err(ElfError::NotElf64);
    }
    let phoff = usize::try_from(u64_at(head, 32)?).map_err(|_| ElfError::Truncated(32))?;
    let entsize = usize::from(u16_at(head, 54)?);
    let count = usize::from(u16_at(head, 56)?);
    if entsize < 40 {
        return Err(ElfError::NotElf64);
    }
    Ok((phoff, entsize, count))
}

/// The number of leading bytes of the file that hold the program headers,
/// from its first 64 bytes (the ELF header) or more.
///
/// Read that many bytes of the file and pass them to [`load_segments`]: the
/// segments are known without reading the whole file.
pub fn program_headers_end(head: &[u8]) -> Result<usize, ElfError> {
    let (phoff, entsize, count) = table(head)?;
    phoff
        .checked_add(entsize * count)
        .ok_or(ElfError::Truncated(32))
}

/// The `PT_LOAD` segments of the object whose first bytes are `bytes` (at
/// least [`program_headers_end`] of them), in the order of its header table.
pub fn load_segments(bytes: &[u8]) -> Result<Vec<LoadSegment>, ElfError> {
    let (phoff, entsize, count) = table(bytes)?;
    let mut out = Vec::new();
    for i in 0..count {
        // A header table placed at the end of the address space must not wrap.
        let at = phoff
            .checked_add(i * entsize)
            .filter(|at| at.checked_add(entsize).is_some())
            .ok_or(ElfError::Truncated(32))?;
        if u32_at(bytes, at)? == 1 {
            out.push(LoadSegment {
                offset: u64_at(bytes, at + 8)?,
                vaddr: u64_at(bytes, at + 16)?,
                filesz: u64_at(bytes, at + 32)?,
            });
        }
    }
    Ok(out)
}

/// The object's own virtual address (SVMA) of the byte at `offset` in the
/// file, through `segments`; `None` when no segment holds that byte.
pub fn file_offset_to_svma(segments: &[LoadSegment], offset: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| offset >= s.offset && offset - s.offset < s.filesz)
        .and_then(|s| (offset - s.offset).checked_add(s.vaddr))
}

/// The `PT_LOAD` segments of the ELF file at `path`, reading only the start of
/// the file that holds its program headers (at most 1 MiB); `None` when it
/// cannot be read or is no 64-bit little-endian ELF file.
pub fn read_load_segments(path: &std::path::Path) -> Option<Vec<LoadSegment>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64];
    f.read_exact(&mut head).ok()?;
    let need = program_headers_end(&head).ok()?;
    if need > 1 << 20 {
        return None;
    }
    let mut rest = vec![0u8; need.saturating_sub(64)];
    f.read_exact(&mut rest).ok()?;
    head.extend_from_slice(&rest);
    load_segments(&head).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        let bytes = std::fs::read("/proc/self/exe").expect("read own executable");
        let segs = load_segments(&bytes).expect("segments");
        assert!(!segs.is_empty());
        assert!(program_headers_end(&bytes).expect("headers") < bytes.len());
    }

    #[test]
    fn rejects_bad_input_without_panicking() {
        assert_eq!(load_segments(b"hello"), Err(ElfError::NotElf64));
        let mut b = std::fs::read("/proc/self/exe").expect("read own executable");
        b.truncate(70);
        assert!(matches!(load_segments(&b), Err(ElfError::Truncated(_))));
        for n in 0..70 {
            let _ = load_segments(&b[..n]);
            let _ = program_headers_end(&b[..n]);
        }
    }

    #[test]
    fn header_table_at_the_end_of_the_address_space() {
        // Found by fuzzing: e_phoff near 2^64 overflowed the offset arithmetic.
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[32..40].copy_from_slice(&(u64::MAX - 20).to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&3u16.to_le_bytes());
        assert!(matches!(load_segments(&b), Err(ElfError::Truncated(_))));
        assert!(program_headers_end(&b).is_err());
    }
}
