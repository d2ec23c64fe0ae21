//! What an object file says about itself beyond its program headers: its
//! function symbols with their sizes, whether it has line tables, and where
//! its separate debug file is.
//!
//! A symbol names an address only if the address is inside it (`st_size`).
//! Taking the nearest preceding symbol, as a plain symbol map does, names
//! every frame of a stripped library after whatever exported function comes
//! before it in memory: thread roots in a stripped libc come out as
//! `__xmknodat` or `pthread_condattr_setpshared`.
//!
//! addr2line's `Loader` (0.26) reads the symbols of the file it was given
//! only (`.symtab`, else `.dynsym`), guessing a size for a symbol without
//! one, and it does not follow `.gnu_debuglink` or build ids (only macOS
//! dSYM bundles and DWARF packages). This module finds the debug file and
//! reads the symbols of the debug file, else of the object; the `Loader` is
//! then opened on the debug file for the DWARF.
//!
//! Separate debug files are found as GDB finds them: first by build id,
//! `<debug dir>/.build-id/xx/yyyy.debug` in each debug directory in turn,
//! then by `.gnu_debuglink` name, next to the object, in its `.debug`
//! directory, and under each debug directory at the object's own path; a
//! file found by name must match the object's build id or the link's CRC.
//! The debug directories are a [`DebugDirs`], by default `/usr/lib/debug`
//! (where Debian's `-dbg` and `-dbgsym` packages install); with none, no
//! separate debug file is used at all. A debug file's supplementary DWARF
//! file (`.gnu_debugaltlink`, as `dwz` makes) is found by its recorded name,
//! relative to the debug file's directory unless absolute, then by its build
//! id in each debug directory.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolKind};

/// The default directory of separate debug files.
const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// How many symbols before an address are tried for one that contains it:
/// more than one only when symbols overlap.
const LOOKBACK: usize = 32;

/// Where separate debug files are looked for, in order.
///
/// The default is `/usr/lib/debug` alone; an empty list means that no
/// separate debug file is used, only what an object holds itself.
///
/// A debug file is found as GDB finds it: by the object's build id,
/// `<dir>/.build-id/xx/yyyy.debug`, in each directory in turn; else by its
/// `.gnu_debuglink` name, next to the object, in the object's `.debug`
/// directory, then under each directory at the object's own path (a file
/// found by name must match the object's build id or the link's CRC). A
/// `dwz` supplementary file is found by the name the debug file records,
/// else by its build id in each directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugDirs(pub Vec<PathBuf>);

impl Default for DebugDirs {
    fn default() -> DebugDirs {
        DebugDirs(vec![PathBuf::from(DEFAULT_DEBUG_DIR)])
    }
}

impl DebugDirs {
    /// No separate debug files at all.
    pub fn none() -> DebugDirs {
        DebugDirs(Vec::new())
    }
}

/// A read-only map of a whole file.
pub(crate) struct Mapped(memmap2::Mmap);

impl Mapped {
    pub(crate) fn open(path: &Path) -> Option<Mapped> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the map is private and read-only, so nothing done through
        // it changes the file; reading it is undefined only if the file is
        // changed in place while mapped. The files mapped here are object
        // files (executables and shared libraries) and their debug files,
        // mapped only while `ObjectSymbols::load` runs: builds and package
        // managers replace such files (a new inode) rather than rewrite them,
        // and `ObjectSymbols::load` documents that it relies on this.
        // addr2line's `Loader` maps the same files on the same assumption.
        unsafe { memmap2::Mmap::map(&file) }.ok().map(Mapped)
    }

    pub(crate) fn parse(&self) -> Option<object::File<'_>> {
        object::File::parse(&*self.0).ok()
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// One function symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sym {
    address: u64,
    size: u64,
    name_start: u32,
    name_len: u32,
    /// Higher is preferred among symbols at one address.
    rank: u8,
}

/// The function symbols of an object, with their sizes.
#[derive(Default)]
pub(crate) struct Symbols {
    /// Sorted by address, then rank: the preferred alias comes last.
    entries: Vec<Sym>,
    names: String,
}

/// The index of a symbol in a [`Symbols`].
pub(crate) type SymbolIndex = u32;

impl Symbols {
    /// The function symbols of `file`: its full symbol table, or else its
    /// dynamic one (all a stripped library has).
    pub(crate) fn of(file: &object::File<'_>) -> Symbols {
        let mut s = Symbols::default();
        if let Some(table) = file.symbol_table() {
            s.add(table.symbols());
        }
        if s.entries.is_empty()
            && let Some(table) = file.dynamic_symbol_table()
        {
            s.add(table.symbols());
        }
        s.entries.sort_by_key(|e| (e.address, e.rank));
        s
    }

    fn add<'d: 'f, 'f>(&mut self, symbols: impl Iterator<Item = object::Symbol<'d, 'f>>) {
        for sym in symbols {
            if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.size() == 0 {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            // `__libc_start_main@GLIBC_2.2.5`: the version is no part of the
            // function's name (and `@` is in no Rust or C++ mangled name).
            let name = name.split('@').next().unwrap_or(name);
            if name.is_empty() {
                continue;
            }
            let (Ok(name_start), Ok(name_len)) =
                (u32::try_from(self.names.len()), u32::try_from(name.len()))
            else {
                return;
            };
            if name_start.checked_add(name_len).is_none() {
                return;
            }
            self.names.push_str(name);
            let visibility = if sym.is_global() {
                2
            } else if sym.is_weak() {
                1
            } else {
                0
            };
            let underscores = name.bytes().take_while(|&b| b == b'_').count().min(15) as u8;
            self.entries.push(Sym {
                address: sym.address(),
                size: sym.size(),
                name_start,
                name_len,
                // Global before weak before local, then the fewest leading
                // underscores: `malloc` rather than `__libc_malloc`.
                rank: visibility * 16 + (15 - underscores),
            });
        }
    }

    /// True when there is no function symbol at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The symbol that contains `addr`, if any.
    pub(crate) fn containing(&self, addr: u64) -> Option<SymbolIndex> {
        let end = self.entries.partition_point(|e| e.address <= addr);
        let start = end.saturating_sub(LOOKBACK);
        (start..end)
            .rev()
            .find(|&i| addr - self.entries[i].address < self.entries[i].size)
            .and_then(|i| SymbolIndex::try_from(i).ok())
    }

    /// The raw (mangled) name of symbol `i`.
    pub(crate) fn name(&self, i: SymbolIndex) -> &str {
        self.entries
            .get(i as usize)
            .and_then(|e| {
                let start = e.name_start as usize;
                self.names.get(start..start + e.name_len as usize)
            })
            .unwrap_or("")
    }

    /// The address range `[start, end)` of symbol `i`.
    pub(crate) fn range(&self, i: SymbolIndex) -> Option<(u64, u64)> {
        let e = self.entries.get(i as usize)?;
        Some((e.address, e.address.checked_add(e.size)?))
    }

    /// Every symbol, as (index, raw name).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (SymbolIndex, &str)> {
        (0..self.entries.len()).filter_map(|i| {
            let i = SymbolIndex::try_from(i).ok()?;
            Some((i, self.name(i)))
        })
    }

    #[cfg(test)]
    fn from_list(list: &[(u64, u64, &str, u8)]) -> Symbols {
        let mut s = Symbols::default();
        for &(address, size, name, rank) in list {
            s.entries.push(Sym {
                address,
                size,
                name_start: s.names.len() as u32,
                name_len: name.len() as u32,
                rank,
            });
            s.names.push_str(name);
        }
        s.entries.sort_by_key(|e| (e.address, e.rank));
        s
    }
}

/// True when `file` has DWARF line tables.
pub(crate) fn has_line_tables(file: &object::File<'_>) -> bool {
    [".debug_line", ".zdebug_line"]
        .iter()
        .any(|name| file.section_by_name(name).is_some_and(|s| s.size() > 0))
}

/// The separate debug file of the object at `path` (parsed as `file`) in
/// debug directories `dirs`, if there is one.
pub(crate) fn find_debug_file(
    path: &Path,
    file: &object::File<'_>,
    dirs: &DebugDirs,
) -> Option<PathBuf> {
    if dirs.0.is_empty() {
        return None;
    }
    let build_id = file.build_id().ok().flatten().filter(|id| id.len() >= 2);
    if let Some(id) = build_id {
        for dir in &dirs.0 {
            let candidate = build_id_path(dir, id);
            if Mapped::open(&candidate)
                .and_then(|m| Some(m.parse()?.build_id().ok()?? == id))
                .unwrap_or(false)
            {
                return Some(candidate);
            }
        }
    }
    let (name, crc) = file.gnu_debuglink().ok().flatten()?;
    let name = Path::new(OsStr::from_bytes(name));
    // A plain file name, never a path that leads elsewhere.
    if name.components().count() != 1 || name.file_name().is_none() {
        return None;
    }
    let object_dir = path.parent()?;
    let relative_dir = object_dir.strip_prefix("/").unwrap_or(object_dir);
    let candidates = [object_dir.join(name), object_dir.join(".debug").join(name)]
        .into_iter()
        .chain(dirs.0.iter().map(|dir| dir.join(relative_dir).join(name)));
    candidates.into_iter().find(|candidate| {
        candidate != path
            && Mapped::open(candidate).is_some_and(|m| {
                let other_id = m.parse().and_then(|f| f.build_id().ok().flatten());
                match (build_id, other_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => crc32(m.bytes()) == crc,
                }
            })
    })
}

/// The supplementary DWARF file (`.gnu_debugaltlink`, as `dwz` makes) of the
/// debug file at `path`, if it exists.
pub(crate) fn find_supplementary_file(
    path: &Path,
    file: &object::File<'_>,
    dirs: &DebugDirs,
) -> Option<PathBuf> {
    let (name, build_id) = file.gnu_debugaltlink().ok().flatten()?;
    let name = Path::new(OsStr::from_bytes(name));
    let by_name = path.parent().map(|d| d.join(name));
    let by_id = dirs
        .0
        .iter()
        .filter(|_| build_id.len() >= 2)
        .map(|dir| build_id_path(dir, build_id));
    by_name
        .into_iter()
        .chain(by_id)
        .find(|candidate| candidate.is_file())
}

fn build_id_path(dir: &Path, id: &[u8]) -> PathBuf {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]))
}

/// CRC-32 (IEEE 802.3, as zlib computes it), which `.gnu_debuglink` records.
fn crc32(bytes: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    let mut crc = !0u32;
    for &b in bytes {
        crc = table[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn a_symbol_names_only_addresses_inside_it() {
        let s = Symbols::from_list(&[
            (0x1000, 0x40, "exported_before", 32),
            (0x2000, 0x10, "small", 32),
            (0x2000, 0x10, "__small_alias", 15),
        ]);
        let name = |a| s.containing(a).map(|i| s.name(i));
        assert_eq!(name(0x1000), Some("exported_before"));
        assert_eq!(name(0x103f), Some("exported_before"));
        // Past its end: a stripped function between two exported ones.
        assert_eq!(name(0x1040), None);
        assert_eq!(name(0x1fff), None);
        assert_eq!(name(0x2008), Some("small"));
        assert_eq!(name(0x2010), None);
        assert_eq!(name(0x10), None);
    }

    #[test]
    fn an_overlapping_symbol_further_back_still_counts() {
        let s = Symbols::from_list(&[(0x1000, 0x100, "outer", 0), (0x1010, 0x8, "inner", 0)]);
        let name = |a| s.containing(a).map(|i| s.name(i));
        assert_eq!(name(0x1012), Some("inner"));
        assert_eq!(name(0x1020), Some("outer"));
    }

    #[test]
    fn reads_this_test_binary() {
        let exe = std::env::current_exe().expect("test executable");
        let m = Mapped::open(&exe).expect("map");
        let f = m.parse().expect("parse");
        let s = Symbols::of(&f);
        assert!(
            (0..s.entries.len() as u32).any(|i| s
                .name(i)
                .contains("a_symbol_names_only_addresses_inside_it")),
            "{} symbols",
            s.entries.len()
        );
        assert!(has_line_tables(&f), "tests are built with line tables");
    }

    #[test]
    fn finds_a_debug_file_by_build_id_in_each_directory_in_turn() {
        let exe = std::env::current_exe().expect("test executable");
        let m = Mapped::open(&exe).expect("map");
        let f = m.parse().expect("parse");
        let Some(id) = f.build_id().ok().flatten().filter(|id| id.len() >= 2) else {
            eprintln!("skipped: the test executable has no build id");
            return;
        };
        // The executable stands in for its own debug file: same build id.
        let dir = tempfile::tempdir().expect("temporary directory");
        let candidate = build_id_path(dir.path(), id);
        let parent = candidate.parent().expect("a parent");
        std::fs::create_dir_all(parent).expect("create .build-id/xx");
        std::os::unix::fs::symlink(&exe, &candidate).expect("link");
        let dirs = DebugDirs(vec![
            dir.path().join("nothing here"),
            dir.path().to_path_buf(),
        ]);
        assert_eq!(find_debug_file(&exe, &f, &dirs), Some(candidate.clone()));
        assert_eq!(find_debug_file(&exe, &f, &DebugDirs::none()), None);
        // Another file at that name does not pass for the debug file.
        std::fs::remove_file(&candidate).expect("unlink");
        std::fs::write(&candidate, b"not the debug file").expect("write");
        assert_eq!(find_debug_file(&exe, &f, &dirs), None);
    }
}
