//! Turning location codes (return addresses) into source locations.
//!
//! Runs on the background thread, never on an allocating thread's fast path,
//! and each code is symbolized once (the result is cached for the session).
//!
//! An address is mapped to its object file through `/proc/self/maps` rather
//! than `dl_iterate_phdr`, so that symbolizing never takes the dynamic
//! loader's lock (a thread inside `dlopen` may be blocked in the allocator).
//! The object, loaded once per session, is a [`tracekit_symbols::ObjectSymbols`]:
//! it turns the file offset into the object's own virtual address and gives
//! the frames there, inlined ones included, named as that crate's
//! `object_symbols` module says. Separate debug files are looked for under
//! `/usr/lib/debug`, or under `TRACEKIT_ALLOC_DEBUG_DIR` when it is set; set
//! to the empty string, no separate debug file is used at all.
//!
//! A return address points after the call instruction, so `code - 1` is
//! looked up, which lands on the call itself. A frame that nothing names,
//! as in a stripped library without its debug file, is called
//! `<object>+0x<address>` (`libc.so.6+0x94ac3`) with the return address
//! itself, `code`, as an address of the object: the one `nm`, `objdump -d`
//! and `addr2line -e <object>` use (for a shared library, the offset from
//! its load base).
//!
//! A program without line tables (a plain `cargo build --release`) gets one
//! warning on stderr the first time a code in its executable is symbolized.
//!
//! Frames of the tracer itself and of the allocator's plumbing are left out
//! here ([`is_internal`], [`is_allocator_plumbing`]): they say where the
//! allocator is, not who allocated.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tracekit_symbols::{DebugDirs, ObjectSymbols};

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

struct Object {
    path: PathBuf,
    /// Loaded on first use; `None` once loading failed.
    state: Option<Option<ObjectSymbols>>,
}

/// The per-session symbolizer.
pub(crate) struct Symbolizer {
    mappings: Vec<Mapping>,
    objects: Vec<Object>,
    object_index: HashMap<PathBuf, usize>,
    cache: HashMap<u64, Arc<CodeInfo>>,
    /// True once the maps were re-read for an address they did not cover.
    maps_fresh: bool,
    /// Where separate debug files are looked for.
    debug_dirs: DebugDirs,
    /// The main executable, whose lack of line tables is worth a warning.
    exe: Option<PathBuf>,
}

impl Symbolizer {
    /// A symbolizer that finds debug files as `TRACEKIT_ALLOC_DEBUG_DIR`
    /// says (read now, on the thread that starts the session).
    pub(crate) fn new() -> Symbolizer {
        Symbolizer::with_debug_dirs(debug_dirs_from_env())
    }

    pub(crate) fn with_debug_dirs(debug_dirs: DebugDirs) -> Symbolizer {
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
            debug_dirs,
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
        // The mark of a stack cut at the tracer's depth: the root of the
        // stacks it ends, so that none shows as a root of its own.
        if let Some(cut) = crate::unwind::cut_frames(code) {
            let more = if cut as usize >= crate::unwind::CUT_LIMIT - 1 {
                " or more"
            } else {
                ""
            };
            return vec![Location {
                filename: String::new(),
                line: 0,
                column: 0,
                defname: format!("[truncated {cut}{more} frames]"),
            }];
        }
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
        let loaded = object
            .state
            .get_or_insert_with(|| load(&object.path, &self.debug_dirs, self.exe.as_deref()));
        let Some(loaded) = loaded else {
            return Vec::new();
        };
        let Some(svma) = loaded.file_offset_to_svma(file_offset) else {
            return Vec::new();
        };
        let mut frames = loaded.frames(svma);
        // Nothing names the function: it is called by the return address,
        // not by the address before it that was looked up.
        if let Some(f) = frames.last_mut()
            && f.function == loaded.unnamed(svma)
        {
            f.function = loaded.unnamed(svma.wrapping_add(1));
        }
        let mut out: Vec<Location> = frames
            .into_iter()
            .map(|f| Location {
                filename: f.file,
                line: f.line,
                column: f.column,
                defname: f.function,
            })
            .collect();
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
        // The frames come innermost (inlined) first; memtrace lists a code's
        // locations caller first.
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

/// The directories of separate debug files, from `TRACEKIT_ALLOC_DEBUG_DIR`:
/// unset, the default (`/usr/lib/debug`); empty, none at all.
pub(crate) fn debug_dirs_from_env() -> DebugDirs {
    match std::env::var_os("TRACEKIT_ALLOC_DEBUG_DIR") {
        None => DebugDirs::default(),
        Some(d) if d.is_empty() => DebugDirs(Vec::new()),
        Some(d) => DebugDirs(vec![PathBuf::from(d)]),
    }
}

/// Loads the object at `path` with its debug files from `debug_dirs`, and
/// warns if it is `exe` and has no line tables.
fn load(path: &Path, debug_dirs: &DebugDirs, exe: Option<&Path>) -> Option<ObjectSymbols> {
    let loaded = ObjectSymbols::load(path, debug_dirs)?;
    if !loaded.has_line_tables()
        && exe == Some(path)
        && !WARNED_NO_LINE_TABLES.swap(true, Ordering::Relaxed)
    {
        crate::session::report(&no_line_tables_warning(path));
    }
    Some(loaded)
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
        // Above the codes of cut marks, below any mapping.
        assert!(s.code(0x5000).locations.is_empty());
    }

    #[test]
    fn a_cut_mark_says_how_many_frames_were_left_out() {
        let mut s = Symbolizer::new();
        let name = |s: &mut Symbolizer, code| s.code(code).locations[0].defname.clone();
        assert_eq!(name(&mut s, 16), "[truncated 16 frames]");
        assert_eq!(name(&mut s, 4095), "[truncated 4095 or more frames]");
        assert!(!s.code(16).internal);
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
