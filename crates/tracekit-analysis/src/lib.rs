//! Memtrace analysis: top allocation sites, live heap over time, folded stacks.
