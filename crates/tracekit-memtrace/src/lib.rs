//! Memtrace (OCaml allocation trace, CTF) reader and writer.
