//! Memtrace analysis: what memtrace_viewer shows, as data. Top allocation sites, the
//! live heap at a time or at its peak, the live heap and allocation rate over time,
//! folded stacks and flame graphs.
//!
//! The core is one pass over a trace's events ([`Analyzer`], fed the codec's
//! [`Event`](tracekit_memtrace::Event)s with their times, from a reader or any other
//! source) that keeps each live sampled object's allocation until it is collected and
//! aggregates per interned backtrace ([`Backtraces`]). Folded stacks, flame graphs and
//! the backtrace report come from the trie relabelled by printed frames
//! ([`frames::FrameTree`]). It does no I/O: the reports and the SVG writers render into
//! strings or any `io::Write`.
//!
//! Sizes are estimates in bytes. Memtrace samples allocated words at a rate of
//! `sample_rate`, so each sample stands for `1 / sample_rate` words, times the trace's
//! word size ([`Sampling::bytes_per_sample`]).

mod allocations;
pub mod analyzer;
pub mod backtrace;
pub mod curve;
pub mod diff;
pub mod filter;
pub mod frames;
pub mod fxt;
pub mod live;
pub mod passes;
pub mod paths;
pub mod pprof;
pub mod query;
pub mod render;
pub mod report;
pub mod sampling;
pub mod sites;
pub mod svg;
pub mod symbols;
pub mod tables;
pub mod time;
pub mod units;

pub use analyzer::{Analyzer, BigAlloc, EventCounts, Options, Profile, analyze_events};
pub use backtrace::{BacktraceId, Backtraces};
pub use curve::{Peak, PeakTracker, Timeline, TimelinePoint};
pub use filter::{Filter, FilterError};
pub use passes::{Pass, Threads, analyze};
pub use sampling::Sampling;
pub use sites::{PerSite, SiteCounts, SiteTable, Weight};
pub use time::{TimeParseError, parse_time, parse_time_ns};
pub use units::{SizeParseError, parse_bytes};
