//! The symbolizer: from an address in an ELF object, or in the kernel, to
//! the functions, files and lines there, inlined frames included.
//!
//! It exists once and serves both `tracekit-alloc` (return addresses of
//! sampled allocations, mapped through `/proc/self/maps`) and perf.data
//! reading (sampled instruction pointers and return addresses, mapped
//! through the recording's mmap events). Callers map a run-time address to
//! an object and a file offset; this crate does the rest:
//!
//! * [`ObjectSymbols`] loads one ELF object: its `PT_LOAD` program headers
//!   ([`elf`]) turn file offsets into the object's own addresses (SVMAs),
//!   its DWARF gives the frames at an address, from its separate debug file
//!   when there is one (found by build id, `.gnu_debuglink` and `dwz`
//!   supplementary files under [`DebugDirs`]), and its symbol table, with
//!   symbol sizes, names the functions that the DWARF leaves bare or that
//!   have no DWARF. The rules are written in the source, atop the modules
//!   that apply them: `src/object_symbols.rs` (which name a frame gets),
//!   `src/symbols.rs` (symbol sizes, debug files) and `src/inlined.rs`
//!   (paths of inlined functions, which line-tables-only DWARF leaves out).
//! * [`demangle()`] gives Rust names without their hash, then C++ names.
//! * [`names`] writes Rust names as reports show them (generic arguments
//!   dropped, closures called closures).
//! * [`Kallsyms`] names kernel addresses from `/proc/kallsyms`.
//! * [`cache`] keeps an object's names across runs, by build id
//!   ([`ObjectIdentity`]).
//!
//! The crate reads no environment variable and prints nothing: where the
//! debug files are is the caller's to say ([`DebugDirs`]), and what is
//! missing (an object without line tables:
//! [`ObjectSymbols::has_line_tables`]) the caller's to report.
//!
//! Addresses are looked up exactly as given: a caller holding a return
//! address, which points after its call instruction, looks up the address
//! before it.

pub mod cache;
pub mod elf;

mod demangle;
mod inlined;
mod kallsyms;
pub mod names;
mod object_symbols;
mod symbols;

pub use demangle::demangle;
pub use kallsyms::Kallsyms;
pub use object_symbols::{Frame, ObjectIdentity, ObjectSymbols};
pub use symbols::DebugDirs;
