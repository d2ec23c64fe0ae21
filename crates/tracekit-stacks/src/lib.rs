//! Stacks and call trees, as every front end of tracekit makes them: the folded
//! stacks flame graph tools read ([`folded`]), and the one call-tree builder
//! ([`tree::CallTree`]) that memtrace frame trees, timeline flame graphs and perf
//! samples' folds grow, with the child table it finds callees by ([`IdTable`]).
//!
//! No I/O beyond writing folded lines to an `io::Write`, and nothing of any trace
//! format: the crates that read traces build on this one.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod folded;
pub mod id_table;
pub mod tree;

pub use id_table::IdTable;
pub use tree::{CallTree, Names, Node};
