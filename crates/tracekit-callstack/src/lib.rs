//! Call-stack timelines from `perf script` text: magic-trace's decoder and trace writer.
//!
//! The pipeline is magic-trace's (janestreet/magic-trace: `src/perf_decode.ml`, then
//! `src/trace_writer.ml`): [`script`] splits `perf script` output
//! into records and parses each into an [`event::Event`] (branches from Intel PT,
//! sampled call stacks, power events, decode errors); the [`writer::TraceWriter`] state
//! machine turns those into begin/end slices per thread and hands them to a
//! [`sink::Sink`]: the [`transcript`] printer used by the conformance tests, or an FXT
//! writer. [`decode::Decoder`] runs the whole pipeline over text fed in chunks; it is
//! what `tracekit perf decode` runs, and what the transcript harness runs too, so that
//! the conformance tests go through the same path.
//!
//! [`folded`] writes folded stacks (the text flame graph tools read), by one rule
//! for every crate that makes them: perf samples, exported samples and memtrace
//! backtraces alike. The rule lives in `tracekit-stacks`, beneath this crate and
//! the memtrace analysis.
//!
//! ```
//! use tracekit_callstack::script::{Parsed, Records, parse_record};
//! use tracekit_callstack::sink::RecordingSink;
//! use tracekit_callstack::writer::{Config, TraceWriter};
//! use tracekit_callstack::event::Time;
//!
//! let text = "1/1 0.000000001: 1 branches:u: call 10 main+0x0 (a) => 20 f+0x0 (a)\n\
//!             1/1 0.000000005: 1 branches:u: return 24 f+0x4 (a) => 14 main+0x4 (a)\n";
//! let mut writer = TraceWriter::new(RecordingSink::default(), Config::default(), Time(1));
//! for rec in Records::new(text) {
//!     if let Ok(Parsed::Event(event)) = parse_record(&rec, 0) {
//!         writer.write_event(&event, true);
//!     }
//! }
//! let sink = writer.finish();
//! assert!(sink.outputs.len() > 2);
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod decode;
pub mod event;
pub mod events_output;
pub mod filter;
pub use tracekit_stacks::folded;
pub mod fxt_sink;
pub mod ocaml;
mod resolved;
pub mod script;
mod sexp;
pub mod sink;
// Public only for the FXT-versus-transcript test, which prints times as transcripts do.
#[doc(hidden)]
pub mod span;
pub mod symbol;
pub mod transcript;
pub mod writer;
