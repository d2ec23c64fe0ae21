//! One ELF object loaded for symbolization: from an address of the object
//! (its own virtual address, SVMA) to the source-level frames there.
//!
//! A file offset is turned into the object's own virtual address with its
//! `PT_LOAD` program headers ([`crate::elf`]), then `addr2line` gives the
//! frames, inlined ones included, from the object's DWARF or from its
//! separate debug file (see [`crate::symbols`] for how that is found). Rust
//! names are demangled (without the hash suffix), then C++ names; other
//! names are kept as they are ([`crate::demangle()`]).
//!
//! The function that contains the address is named from the symbol table
//! when the DWARF gives no path (line-tables-only DWARF names functions
//! bare), but only by a symbol whose extent (`st_size`) contains the
//! address. When nothing names it, as in a stripped library without its
//! debug file, the frame is called `<object>+0x<address>`
//! (`libc.so.6+0x94ac3`): the object's file name and the address as an
//! address of the object, the one `nm`, `objdump -d` and
//! `addr2line -e <object>` use (for a shared library, the offset from its
//! load base). Inlined functions get their paths as [`crate::inlined`]
//! explains. A frame whose function is still unknown (DWARF that gives a
//! file and line but no name) is called `??`.
//!
//! Addresses are looked up exactly as given. A return address points after
//! its call instruction, so a caller holding one looks up the address before
//! it, which lands on the call itself; that choice is the caller's.

use std::path::Path;

use object::Object;

use crate::demangle::demangle;
use crate::elf::{self, LoadSegment};
use crate::inlined::{self, InlinePaths};
use crate::symbols::{self, DebugDirs, Mapped, Symbols};

/// One source-level frame at an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name (Rust names without their hash suffix), `??`
    /// when unknown, or `<file name>+0x<address>` when nothing names the
    /// address.
    pub function: String,
    /// Source file path as recorded in the debug information; the object's
    /// file name when the frame comes from the symbol table alone.
    pub file: String,
    /// Line number (1-based; 0 when unknown).
    pub line: u32,
    /// Column (1-based; 0 when unknown).
    pub column: u32,
}

/// One ELF file loaded for symbolization: its program headers, its DWARF
/// (from itself or from its separate debug file, found by build id or
/// `.gnu_debuglink`, with a `dwz` supplementary file) and its function
/// symbols with their sizes.
pub struct ObjectSymbols {
    /// The object's file name, for frames that nothing names.
    name: String,
    segments: Vec<LoadSegment>,
    /// The object's own build id.
    build_id: Option<Vec<u8>>,
    /// Whether the DWARF used has line tables.
    line_tables: bool,
    /// The DWARF, from the separate debug file when there is one.
    dwarf: Option<addr2line::Loader>,
    /// Function symbols, from the separate debug file's full table when
    /// there is one.
    symbols: Symbols,
    /// Built on the first inlined frame with a bare name.
    inline_paths: Option<InlinePaths>,
}

impl ObjectSymbols {
    /// Loads the 64-bit little-endian ELF object at `path`: its program
    /// headers, its DWARF and its symbols, from its separate debug file in
    /// `debug` when there is one. `None` when `path` cannot be read or is no
    /// such ELF file; an object without DWARF or symbols loads, and names
    /// less.
    ///
    /// The object and its debug files are memory-mapped (the DWARF's for as
    /// long as the `ObjectSymbols` lives): they must not be rewritten in
    /// place meanwhile. Replacing them with new files, as builds and package
    /// managers do, is fine.
    pub fn load(path: &Path, debug: &DebugDirs) -> Option<ObjectSymbols> {
        let segments = elf::read_load_segments(path)?;
        let own = Mapped::open(path);
        let own_file = own.as_ref().and_then(Mapped::parse);
        let build_id = own_file
            .as_ref()
            .and_then(|f| f.build_id().ok().flatten())
            .map(<[u8]>::to_vec);
        let debug_path = own_file
            .as_ref()
            .and_then(|file| symbols::find_debug_file(path, file, debug));
        let debug_map = debug_path.as_deref().and_then(Mapped::open);
        let debug_file = debug_map.as_ref().and_then(Mapped::parse);

        let mut dwarf = None;
        if let (Some(dpath), Some(dfile)) = (&debug_path, &debug_file) {
            let sup = symbols::find_supplementary_file(dpath, dfile, debug);
            dwarf = addr2line::Loader::new_with_sup(dpath, sup.as_deref()).ok();
        }
        let line_tables = match (&dwarf, &debug_file) {
            (Some(_), Some(dfile)) => symbols::has_line_tables(dfile),
            _ => {
                dwarf = addr2line::Loader::new(path).ok();
                own_file.as_ref().is_some_and(symbols::has_line_tables)
            }
        };
        let mut symbols = debug_file.as_ref().map(Symbols::of).unwrap_or_default();
        if symbols.is_empty() {
            symbols = own_file.as_ref().map(Symbols::of).unwrap_or_default();
        }
        Some(ObjectSymbols {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            segments,
            build_id,
            line_tables,
            dwarf,
            symbols,
            inline_paths: None,
        })
    }

    /// The object's own build id (`NT_GNU_BUILD_ID`), if it has one.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// True when the DWARF used (the separate debug file's, else the
    /// object's own) has line tables: without them, frames have no files
    /// and lines.
    pub fn has_line_tables(&self) -> bool {
        self.line_tables
    }

    /// The object's own virtual address (SVMA) of the byte at `offset` in
    /// the file, from its `PT_LOAD` program headers; `None` when no segment
    /// holds that byte.
    pub fn file_offset_to_svma(&self, offset: u64) -> Option<u64> {
        elf::file_offset_to_svma(&self.segments, offset)
    }

    /// The frames at `svma`, innermost (inlined callee) first, outermost
    /// (the function whose code it is) last, with demangled names.
    ///
    /// The outermost frame is named from the symbol table when the DWARF
    /// gives no path, by a symbol that contains `svma` only; an inlined
    /// frame with a bare name gets its path from an out-of-line copy of the
    /// function when one vouches for it; a frame whose function is still
    /// unknown is `??`. When a `PT_LOAD` segment holds `svma` but nothing
    /// else is known of it, the one frame is named
    /// [`unnamed(svma)`](Self::unnamed), in the object's file name, line 0.
    /// Empty when no segment holds `svma`.
    pub fn frames(&mut self, svma: u64) -> Vec<Frame> {
        if !self
            .segments
            .iter()
            .any(|s| svma >= s.vaddr && svma - s.vaddr < s.filesz)
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some(dwarf) = &self.dwarf
            && let Ok(mut frames) = dwarf.find_frames(svma)
        {
            while let Ok(Some(frame)) = frames.next() {
                let function = match &frame.function {
                    Some(f) => f.raw_name().map(|n| demangle(&n)).unwrap_or_default(),
                    None => String::new(),
                };
                let (file, line, column) = match &frame.location {
                    Some(l) => (
                        l.file.unwrap_or_default().to_owned(),
                        l.line.unwrap_or(0),
                        l.column.unwrap_or(0),
                    ),
                    None => (String::new(), 0, 0),
                };
                if function.is_empty() && file.is_empty() {
                    continue;
                }
                out.push(Frame {
                    function,
                    file,
                    line,
                    column,
                });
            }
        }
        // The frames before the last one are inlined into it.
        if let Some(dwarf) = &self.dwarf
            && out.len() > 1
        {
            let last = out.len() - 1;
            // Closures first, from the other frames' names as the debug
            // information gives them.
            let closures: Vec<(usize, String)> = (0..last)
                .filter_map(|i| Some((i, inlined::closure_path(&out, i)?)))
                .collect();
            for (i, full) in closures {
                out[i].function = full;
            }
            for f in &mut out[..last] {
                if f.function.is_empty() || !inlined::is_bare(&f.function) {
                    continue;
                }
                let paths = self
                    .inline_paths
                    .get_or_insert_with(|| InlinePaths::new(&self.symbols));
                if let Some(full) =
                    paths.qualify(dwarf, &self.symbols, &f.function, &f.file, f.line)
                {
                    f.function = full;
                }
            }
        }
        // The symbol table names the function that contains the address with
        // its full path, which line-tables-only debug information lacks; the
        // outermost frame (last) is that function.
        let symbol = self
            .symbols
            .containing(svma)
            .map(|i| demangle(self.symbols.name(i)));
        match (out.last_mut(), symbol) {
            (Some(f), Some(name)) if f.function.is_empty() || inlined::is_bare(&f.function) => {
                f.function = name
            }
            // Nothing names the function: say where it is.
            (Some(f), None) if f.function.is_empty() => f.function = self.unnamed(svma),
            (Some(_), _) => {}
            (None, name) => out.push(Frame {
                file: self.name.clone(),
                line: 0,
                column: 0,
                function: name.unwrap_or_else(|| self.unnamed(svma)),
            }),
        }
        self.closures_by_enclosure(svma, &mut out);
        for f in &mut out {
            if f.function.is_empty() {
                f.function = "??".to_owned();
            }
        }
        out
    }

    /// Names the closures still bare in `frames` (at `svma`) after the
    /// function whose body holds them: the nearest frame outward in the
    /// closure's file whose own code there spans the closure's line. A
    /// closure bound to a name and called in place (`let make = |i| ..;
    /// make(i)`) is passed through nothing that would name its type, and
    /// line-tables-only debug information gives it no namespace; its caller
    /// in the same file is the function it is written in, unless the caller
    /// is another function of that file that was handed the closure, whose
    /// lines then lie elsewhere.
    fn closures_by_enclosure(&mut self, svma: u64, frames: &mut [Frame]) {
        let Some(dwarf) = &self.dwarf else {
            return;
        };
        let last = frames.len().saturating_sub(1);
        for i in 0..last {
            let Some(bare) = inlined::bare_closure(&frames[i].function) else {
                continue;
            };
            let (file, line) = (frames[i].file.clone(), frames[i].line);
            if file.is_empty() || line == 0 {
                continue;
            }
            for j in i + 1..=last {
                let f = &frames[j];
                if f.file != file || inlined::is_bare(&f.function) {
                    continue;
                }
                let paths = self
                    .inline_paths
                    .get_or_insert_with(|| InlinePaths::new(&self.symbols));
                let encloses = if j == last {
                    self.symbols.containing(svma).is_some_and(|s| {
                        paths.symbol_encloses(dwarf, &self.symbols, s, &file, line)
                    })
                } else {
                    paths.named_encloses(dwarf, &self.symbols, &f.function, &file, line)
                };
                if encloses {
                    let owner = crate::names::strip_generics(&f.function);
                    frames[i].function = format!("{owner}::{bare}");
                    break;
                }
            }
        }
    }

    /// The name [`frames`](Self::frames) gives a function that nothing
    /// names, at `svma`: `<file name>+0x<svma>`.
    pub fn unnamed(&self, svma: u64) -> String {
        format!("{}+{:#x}", self.name, svma)
    }

    /// The function that contains `svma` by the symbol table alone
    /// (demangled), and the offset of `svma` in it.
    pub fn symbol(&self, svma: u64) -> Option<(String, u64)> {
        let i = self.symbols.containing(svma)?;
        let (start, _) = self.symbols.range(i)?;
        Some((demangle(self.symbols.name(i)), svma.checked_sub(start)?))
    }
}

/// What names an object's addresses, known without loading its DWARF: its
/// build id and the separate debug file [`ObjectSymbols::load`] would read.
/// Names kept across runs stay valid while both are the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectIdentity {
    /// The object's own build id (`NT_GNU_BUILD_ID`).
    pub build_id: Vec<u8>,
    /// The separate debug file found for it under the [`DebugDirs`] given.
    pub debug_file: Option<std::path::PathBuf>,
}

impl ObjectIdentity {
    /// The identity of the object at `path` with debug files from `debug`;
    /// `None` when it cannot be read or has no build id. It maps the object
    /// and its candidate debug files, reading their headers and notes only.
    pub fn of(path: &Path, debug: &DebugDirs) -> Option<ObjectIdentity> {
        let own = Mapped::open(path)?;
        let file = own.parse()?;
        let build_id = file.build_id().ok().flatten()?.to_vec();
        let debug_file = symbols::find_debug_file(path, &file, debug);
        Some(ObjectIdentity {
            build_id,
            debug_file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary, loaded, and the SVMA of a run-time address in it
    /// (through `/proc/self/maps`, as a profiler would map it).
    fn this_binary() -> (ObjectSymbols, impl Fn(&ObjectSymbols, usize) -> u64) {
        let exe = std::fs::read_link("/proc/self/exe").expect("own executable");
        let obj = ObjectSymbols::load(&exe, &DebugDirs::default()).expect("load own executable");
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let to_svma = move |obj: &ObjectSymbols, addr: usize| {
            let addr = addr as u64;
            let offset = maps
                .lines()
                .find_map(|l| {
                    let mut f = l.split_whitespace();
                    let (start, end) = f.next()?.split_once('-')?;
                    let start = u64::from_str_radix(start, 16).ok()?;
                    let end = u64::from_str_radix(end, 16).ok()?;
                    let offset = u64::from_str_radix(f.nth(1)?, 16).ok()?;
                    (start..end).contains(&addr).then(|| addr - start + offset)
                })
                .expect("address mapped");
            obj.file_offset_to_svma(offset).expect("in a segment")
        };
        (obj, to_svma)
    }

    #[inline(never)]
    fn marker() -> usize {
        std::hint::black_box(line!() as usize)
    }

    #[test]
    fn frames_of_a_function_of_this_crate() {
        let (mut obj, to_svma) = this_binary();
        assert!(obj.has_line_tables(), "tests are built with line tables");
        let svma = to_svma(&obj, marker as *const () as usize + 1);
        let frames = obj.frames(svma);
        // Innermost first: the function itself is last.
        let outer = frames.last().expect("a frame");
        assert!(outer.function.ends_with("tests::marker"), "{frames:?}");
        assert!(outer.file.ends_with("object_symbols.rs"), "{frames:?}");
        assert!(outer.line > 0, "{frames:?}");
        let (name, offset) = obj.symbol(svma).expect("symbol");
        assert!(name.ends_with("tests::marker"), "{name}");
        assert_eq!(offset, 1);
    }

    /// Data: in a segment, in no function and in no DWARF unit's code.
    static DATA: [u8; 64] = [0x5a; 64];

    #[test]
    fn an_address_nothing_names_is_named_by_where_it_is() {
        let (mut obj, to_svma) = this_binary();
        let svma = to_svma(&obj, std::hint::black_box(&DATA).as_ptr() as usize + 8);
        let frames = obj.frames(svma);
        let name = std::fs::read_link("/proc/self/exe")
            .ok()
            .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .expect("name");
        assert_eq!(
            frames,
            vec![Frame {
                function: format!("{name}+{svma:#x}"),
                file: name,
                line: 0,
                column: 0,
            }]
        );
        assert_eq!(obj.symbol(svma), None);
        // Outside every segment: nothing.
        assert_eq!(obj.frames(u64::MAX - 1), Vec::new());
    }

    #[test]
    fn a_library_without_debug_information_is_named_from_its_symbols() {
        let (_, to_svma) = this_binary();
        let getpid = libc_getpid as *const () as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let path = maps
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (start, end) = f.next()?.split_once('-')?;
                let start = usize::from_str_radix(start, 16).ok()?;
                let end = usize::from_str_radix(end, 16).ok()?;
                let path = f.nth(4)?;
                (start..end).contains(&getpid).then(|| path.to_owned())
            })
            .expect("libc mapped");
        let mut libc =
            ObjectSymbols::load(Path::new(&path), &DebugDirs::none()).expect("load libc");
        let svma = to_svma(&libc, getpid + 1);
        let frames = libc.frames(svma);
        assert!(
            frames.iter().any(|f| f.function.contains("getpid")),
            "{frames:?}"
        );
        assert!(libc.build_id().is_some_and(|id| !id.is_empty()));
    }

    // A function whose code is in libc, not in this binary, so that the test
    // can find libc's mapping by its address (`std::process::id` would point
    // into this binary, and libc is not a dependency of this crate).
    // SAFETY: the declaration is libc's own, `pid_t getpid(void)` (`pid_t` is
    // `int` on Linux), so the symbol is what it says. getpid takes nothing,
    // touches no memory of the caller's and cannot fail, so calling it is
    // safe, which `safe fn` states.
    unsafe extern "C" {
        #[link_name = "getpid"]
        safe fn libc_getpid() -> i32;
    }

    #[test]
    fn not_an_object() {
        assert!(ObjectSymbols::load(Path::new("/proc/self/maps"), &DebugDirs::none()).is_none());
        assert!(ObjectSymbols::load(Path::new("/nonexistent"), &DebugDirs::none()).is_none());
    }
}
