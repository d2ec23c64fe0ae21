//! Turning location codes (return addresses) into source locations.
//!
//! Runs on the background thread, never on an allocating thread's fast path,
//! and each code is symbolized once (the result is cached for the session).
//!
//! An address is mapped to its object file through `/proc/self/maps` rather
//! than `dl_iterate_phdr`, so that symbolizing never takes the dynamic
//! loader's lock (a thread inside `dlopen` may be blocked in the allocator).
//! The file offset is turned into the object's own virtual address with its
//! `PT_LOAD` program headers, then `addr2line` gives the frames, inlined ones
//! included, from the object's DWARF or from its separate debug file (see
//! [`crate::symbols`]). Rust names are demangled (without the hash suffix),
//! then C++ names (from C++ code linked into the program); other names are
//! kept as they are.
//!
//! The function that contains the address is named from the symbol table
//! when the DWARF gives no path (line-tables-only DWARF names functions
//! bare), but only by a symbol whose extent (`st_size`) contains the
//! address. When nothing names it, as in a stripped library without its
//! debug file, the frame is called `<object>+0x<address>` (`libc.so.6+0x94ac3`):
//! the object's file name and the return address as an address of the
//! object, the one `nm`, `objdump -d` and `addr2line -e <object>` use (for a
//! shared library, the offset from its load base). Inlined functions get
//! their paths as [`crate::inlined`] explains.
//!
//! A program without line tables (a plain `cargo build --release`) gets one
//! warning on stderr the first time a code in its executable is symbolized.
//!
//! A return address points after the call instruction, so `code - 1` is
//! looked up, which lands on the call itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::inlined::{self, InlinePaths};
use crate::symbols::{self, Mapped, Symbols};

/// Set once the warning about missing line tables is written.
static WARNED_NO_LINE_TABLES: AtomicBool = AtomicBool::new(false);

/// One source location of a code, in memtrace's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    /// Source file path as recorded in the debug information.
    pub(crate) filename: String,
    /// Line number (1-based; 0 when unknown).
    pub(crate) line: u32,
    /// Column (1-based; 0 when unknown).
    pub(crate) column: u32,
    /// Demangled function name, without the hash suffix.
    pub(crate) defname: String,
}

/// What a code stands for.
#[derive(Debug)]
pub(crate) struct CodeInfo {
    /// Locations, outermost (caller) first, innermost (inlined callee) last,
    /// as memtrace lists them.
    pub(crate) locations: Vec<Location>,
    /// True for the tracer's own frames and the allocator shims, which are
    /// trimmed off the innermost end of backtraces.
    pub(crate) internal: bool,
}

struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    object: usize,
}

struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

struct Object {
    path: PathBuf,
    /// Loaded on first use; `None` once loading failed.
    state: Option<Option<Loaded>>,
}

struct Loaded {
    segments: Vec<Segment>,
    /// The DWARF, from the separate debug file when there is one.
    dwarf: Option<addr2line::Loader>,
    /// Function symbols, from the separate debug file's full table when
    /// there is one.
    symbols: Symbols,
    /// Built on the first inlined frame with a bare name.
    inline_paths: Option<InlinePaths>,
}

/// The per-session symbolizer.
pub(crate) struct Symbolizer {
    mappings: Vec<Mapping>,
    objects: Vec<Object>,
    object_index: HashMap<PathBuf, usize>,
    cache: HashMap<u64, Arc<CodeInfo>>,
    /// True once the maps were re-read for an address they did not cover.
    maps_fresh: bool,
    /// Where separate debug files are looked for; `None`: nowhere.
    debug_dir: Option<PathBuf>,
    /// The main executable, whose lack of line tables is worth a warning.
    exe: Option<PathBuf>,
}

impl Symbolizer {
    /// A symbolizer that finds debug files as `TRACEKIT_ALLOC_DEBUG_DIR`
    /// says (read now, on the thread that starts the session).
    pub(crate) fn new() -> Symbolizer {
        Symbolizer::with_debug_dir(symbols::debug_dir_from_env())
    }

    pub(crate) fn with_debug_dir(debug_dir: Option<PathBuf>) -> Symbolizer {
        let exe = std::env::current_exe().ok().map(|p| {
            let s = p.to_string_lossy();
            match s.strip_suffix(" (deleted)") {
                Some(s) => PathBuf::from(s),
                None => p,
            }
        });
        let mut s = Symbolizer {
            mappings: Vec::new(),
            objects: Vec::new(),
            object_index: HashMap::new(),
            cache: HashMap::new(),
            maps_fresh: false,
            debug_dir,
            exe,
        };
        s.read_maps();
        s
    }

    /// The code's locations and whether it is internal; symbolizes on first
    /// sight.
    pub(crate) fn code(&mut self, code: u64) -> Arc<CodeInfo> {
        if let Some(info) = self.cache.get(&code) {
            return info.clone();
        }
        let locations = self.symbolize(code);
        // Whatever is left of an allocator frame above is all allocator.
        let internal = !locations.is_empty()
            && locations
                .iter()
                .all(|l| is_internal(l) || is_allocator_plumbing(l));
        let info = Arc::new(CodeInfo {
            locations,
            internal,
        });
        self.cache.insert(code, info.clone());
        info
    }

    fn read_maps(&mut self) {
        self.maps_fresh = true;
        let Ok(text) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        self.mappings.clear();
        for line in text.lines() {
            if let Some((start, end, offset, path)) = parse_maps_line(line) {
                let object = match self.object_index.get(path) {
                    Some(&i) => i,
                    None => {
                        self.objects.push(Object {
                            path: path.to_path_buf(),
                            state: None,
                        });
                        self.object_index
                            .insert(path.to_path_buf(), self.objects.len() - 1);
                        self.objects.len() - 1
                    }
                };
                self.mappings.push(Mapping {
                    start,
                    end,
                    offset,
                    object,
                });
            }
        }
        self.mappings.sort_by_key(|m| m.start);
    }

    fn mapping(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    fn symbolize(&mut self, code: u64) -> Vec<Location> {
        let addr = code.wrapping_sub(1);
        if self.mapping(addr).is_none() && !self.maps_fresh {
            // A library loaded since the maps were read.
            self.read_maps();
        }
        let Some(m) = self.mapping(addr) else {
            return Vec::new();
        };
        let (Some(file_offset), object_index) = ((addr - m.start).checked_add(m.offset), m.object)
        else {
            return Vec::new();
        };
        let object = &mut self.objects[object_index];
        let debug_dir = self.debug_dir.as_deref();
        let loaded = object
            .state
            .get_or_insert_with(|| load(&object.path, debug_dir, self.exe.as_deref()));
        let Some(loaded) = loaded else {
            return Vec::new();
        };
        let Some(svma) = loaded
            .segments
            .iter()
            .find(|s| file_offset >= s.offset && file_offset - s.offset < s.filesz)
            .and_then(|s| (file_offset - s.offset).checked_add(s.vaddr))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(dwarf) = &loaded.dwarf
            && let Ok(mut frames) = dwarf.find_frames(svma)
        {
            while let Ok(Some(frame)) = frames.next() {
                let defname = match &frame.function {
                    Some(f) => f.raw_name().map(|n| demangle(&n)).unwrap_or_default(),
                    None => String::new(),
                };
                let (filename, line, column) = match &frame.location {
                    Some(l) => (
                        l.file.unwrap_or_default().to_owned(),
                        l.line.unwrap_or(0),
                        l.column.unwrap_or(0),
                    ),
                    None => (String::new(), 0, 0),
                };
                if defname.is_empty() && filename.is_empty() {
                    continue;
                }
                out.push(Location {
                    filename,
                    line,
                    column,
                    defname,
                });
            }
        }
        // The frames before the last one are inlined into it.
        if let Some(dwarf) = &loaded.dwarf
            && out.len() > 1
        {
            let last = out.len() - 1;
            for l in &mut out[..last] {
                if l.defname.is_empty() || !inlined::is_bare(&l.defname) {
                    continue;
                }
                let paths = loaded
                    .inline_paths
                    .get_or_insert_with(|| InlinePaths::new(&loaded.symbols));
                if let Some(full) =
                    paths.qualify(dwarf, &loaded.symbols, &l.defname, &l.filename, l.line)
                {
                    l.defname = full;
                }
            }
        }
        // The symbol table names the function that contains the address with
        // its full path, which line-tables-only debug information lacks; the
        // outermost frame (last, before the reversal below) is that function.
        let symbol = loaded
            .symbols
            .containing(svma)
            .map(|i| demangle(loaded.symbols.name(i)));
        // Nothing names the function: say where it is.
        let anonymous = || format!("{}+{:#x}", object_name(&object.path), svma.wrapping_add(1));
        match (out.last_mut(), symbol) {
            (Some(l), Some(name)) if l.defname.is_empty() || inlined::is_bare(&l.defname) => {
                l.defname = name
            }
            (Some(l), None) if l.defname.is_empty() => l.defname = anonymous(),
            (Some(_), _) => {}
            (None, name) => out.push(Location {
                filename: object_name(&object.path),
                line: 0,
                column: 0,
                defname: name.unwrap_or_else(anonymous),
            }),
        }
        for l in &mut out {
            if l.defname.is_empty() {
                l.defname = "??".to_owned();
            }
        }
        // A call made from inside the tracer, the allocator shims or std's
        // allocator functions is a call into the allocator: those inlined
        // frames say "the allocator", not who allocated, so they go (memtrace
        // drops its `ext_alloc` frames the same way). The allocator is often
        // inlined into the program's function, so this is per location, not
        // per code.
        let strip = out
            .iter()
            .take_while(|l| is_internal(l) || is_allocator_plumbing(l))
            .count();
        if strip < out.len() {
            out.drain(..strip);
        }
        // addr2line lists the innermost (inlined) frame first; memtrace lists
        // a code's locations caller first.
        out.reverse();
        out
    }

    /// Number of codes symbolized so far.
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }
}

/// Parses one `/proc/self/maps` line into (start, end, file offset, path),
/// keeping only executable mappings of files.
pub(crate) fn parse_maps_line(line: &str) -> Option<(u64, u64, u64, &Path)> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next()?.trim_start();
    if !perms.contains('x') || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let offset = u64::from_str_radix(offset, 16).ok()?;
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    Some((start, end, offset, Path::new(path)))
}

fn object_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Loads the object at `path`: its program headers, its DWARF and symbols
/// (from its separate debug file in `debug_dir` when there is one), and
/// warns if it is `exe` and has no line tables.
fn load(path: &Path, debug_dir: Option<&Path>, exe: Option<&Path>) -> Option<Loaded> {
    let bytes = read_program_headers(path)?;
    let segments = crate::elf::load_segments(&bytes)
        .ok()?
        .into_iter()
        .map(|s| Segment {
            offset: s.offset,
            vaddr: s.vaddr,
            filesz: s.filesz,
        })
        .collect();
    let own = Mapped::open(path);
    let own_file = own.as_ref().and_then(Mapped::parse);
    let debug_path = debug_dir
        .zip(own_file.as_ref())
        .and_then(|(dir, file)| symbols::find_debug_file(path, file, dir));
    let debug = debug_path.as_deref().and_then(Mapped::open);
    let debug_file = debug.as_ref().and_then(Mapped::parse);

    let mut dwarf = None;
    if let (Some(dpath), Some(dfile)) = (&debug_path, &debug_file) {
        let sup = debug_dir.and_then(|dir| symbols::find_supplementary_file(dpath, dfile, dir));
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
    if !line_tables && exe == Some(path) && !WARNED_NO_LINE_TABLES.swap(true, Ordering::Relaxed) {
        crate::session::report(&no_line_tables_warning(path));
    }
    Some(Loaded {
        segments,
        dwarf,
        symbols,
        inline_paths: None,
    })
}

fn no_line_tables_warning(exe: &Path) -> String {
    let speed = match crate::unwind::unwinder() {
        crate::Unwinder::Dwarf => {
            " (and RUSTFLAGS=\"-C force-frame-pointers=yes\" for faster sampling)"
        }
        crate::Unwinder::FramePointers => "",
    };
    format!(
        "{} has no line tables, so allocation sites will lack source lines; \
         add [profile.release] debug = \"line-tables-only\" to Cargo.toml{speed}",
        exe.display()
    )
}

/// Reads the start of an ELF file: enough for its program headers.
fn read_program_headers(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64];
    f.read_exact(&mut head).ok()?;
    let need = crate::elf::program_headers_end(&head).ok()?;
    if need > 1 << 20 {
        return None;
    }
    let mut rest = vec![0u8; need.saturating_sub(64)];
    f.read_exact(&mut rest).ok()?;
    head.extend_from_slice(&rest);
    Some(head)
}

/// Demangles a Rust symbol name (legacy or v0), without its hash suffix, or
/// else an Itanium C++ name; any other name is returned as it is.
///
/// Rust comes first: a legacy Rust name is also a well-formed C++ name, which
/// C++ demangling would show with its hash.
pub(crate) fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle()
    {
        return d;
    }
    name.to_owned()
}

/// This crate's source directory, as compiled into its debug information.
const OWN_SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");

/// The tracer's own functions and the global-allocator shims: frames that
/// say where the allocator is, not who allocated.
pub(crate) fn is_internal(l: &Location) -> bool {
    if l.filename.starts_with(OWN_SOURCES) {
        return true;
    }
    let name = l.defname.as_str();
    if name.starts_with("tracekit_alloc::") || name.starts_with("<tracekit_alloc::") {
        return true;
    }
    let last = name.rsplit("::").next().unwrap_or(name);
    matches!(
        last,
        "__rust_alloc"
            | "__rust_dealloc"
            | "__rust_realloc"
            | "__rust_alloc_zeroed"
            | "__rg_alloc"
            | "__rg_dealloc"
            | "__rg_realloc"
            | "__rg_alloc_zeroed"
            | "_Unwind_Backtrace"
    )
}

/// Frames of std's `alloc::alloc` module (`alloc`, `Global::allocate`, ...),
/// which only forward to the global allocator.
fn is_allocator_plumbing(l: &Location) -> bool {
    l.filename.ends_with("/library/alloc/src/alloc.rs")
        || l.defname.starts_with("alloc::alloc::")
        || l.defname.starts_with("<alloc::alloc::Global as ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_then_cpp() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(demangle("_Z3addii"), "add(int, int)");
        assert_eq!(demangle("main"), "main");
        // Not well-formed as either: kept as it is.
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[inline(never)]
    fn marker() -> usize {
        // A return address inside this test module: the address right after
        // a call made from `marker`'s caller is what the walk would record.
        std::hint::black_box(line!() as usize)
    }

    #[test]
    fn symbolizes_a_function_of_this_crate() {
        let mut s = Symbolizer::new();
        // Any address inside `marker` (plus one, as a return address would be).
        let code = marker as *const () as usize as u64 + 1 + 1;
        let info = s.code(code);
        assert!(!info.locations.is_empty(), "no location for {code:#x}");
        // Caller first: the function itself, then anything inlined into it.
        let outer = &info.locations[0];
        assert!(outer.defname.ends_with("tests::marker"), "{info:?}");
        assert!(outer.filename.ends_with("symbolize.rs"), "{info:?}");
        assert!(outer.line > 0);
        assert_eq!(info.internal, info.locations.len() == 1, "{info:?}");
        // Cached: a second lookup does not symbolize again.
        let before = s.len();
        s.code(code);
        assert_eq!(s.len(), before);
    }

    #[test]
    fn symbolizes_libc_from_its_symbol_table() {
        let mut s = Symbolizer::new();
        let code = libc::getpid as *const () as usize as u64 + 1 + 1;
        let info = s.code(code);
        assert!(
            info.locations.iter().any(|l| l.defname.contains("getpid")),
            "{info:?}"
        );
        assert!(!info.internal);
    }

    #[test]
    fn unknown_addresses_have_no_location() {
        let mut s = Symbolizer::new();
        assert!(s.code(0x10).locations.is_empty());
    }

    #[test]
    fn parses_maps_lines() {
        let l = "7f0e1c000000-7f0e1c021000 r-xp 00002000 08:01 1234     /usr/lib/libc.so.6";
        assert_eq!(
            parse_maps_line(l),
            Some((
                0x7f0e1c000000,
                0x7f0e1c021000,
                0x2000,
                Path::new("/usr/lib/libc.so.6")
            ))
        );
        assert_eq!(parse_maps_line("7f-80 rw-p 0 00:00 0 [heap]"), None);
        assert_eq!(parse_maps_line("7f-80 r-xp 0 00:00 0 [vdso]"), None);
        assert_eq!(parse_maps_line("garbage"), None);
    }

    #[test]
    fn internal_names() {
        let at = |defname: &str, filename: &str| Location {
            filename: filename.to_owned(),
            line: 1,
            column: 1,
            defname: defname.to_owned(),
        };
        let internal = |d: &str| is_internal(&at(d, "/src/x.rs"));
        assert!(internal("tracekit_alloc::slow::sampled"));
        assert!(internal(
            "<tracekit_alloc::Tracer<std::alloc::System> as core::alloc::global::GlobalAlloc>::alloc"
        ));
        assert!(internal("__rustc::__rust_alloc"));
        assert!(internal("__rg_alloc"));
        assert!(!internal("alloc::raw_vec::finish_grow"));
        assert!(!internal("workload::build_strings"));
        assert!(is_internal(&at(
            "record_alloc",
            concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")
        )));
        assert!(is_allocator_plumbing(&at(
            "alloc_impl",
            "/rustc/abc/library/alloc/src/alloc.rs"
        )));
        assert!(!is_allocator_plumbing(&at(
            "grow_one",
            "/rustc/abc/library/alloc/src/raw_vec/mod.rs"
        )));
    }
}
