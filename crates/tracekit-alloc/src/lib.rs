//! A sampling global allocator that writes memtrace traces.
