//! One program in two versions, traced as FXT, whose traces the timeline's
//! comparison test views side by side:
//!
//! ```sh
//! TRACEKIT_FXT=a.fxt cargo run --release -p tracekit-tracing --example versions base
//! TRACEKIT_FXT=b.fxt cargo run --release -p tracekit-tracing --example versions grown
//! tracekit view b.fxt --compare a.fxt
//! ```
//!
//! Twenty `request` spans, each a `parse_records` then a `render_pages`; in
//! the `grown` version `parse_records` does four times the work. The spans
//! are the same in both, one by one: only that function's time changes.

use std::hint::black_box;

use tracing::info_span;

/// Work for `units` units (about 20 µs each), the same every run.
fn spin(units: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..units * 20_000 {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

fn parse_records(units: u64) -> u64 {
    let _span = info_span!("parse_records").entered();
    spin(units)
}

fn render_pages() -> u64 {
    let _span = info_span!("render_pages").entered();
    spin(2)
}

fn main() {
    let grown = match std::env::args().nth(1).as_deref() {
        Some("base") => false,
        Some("grown") => true,
        _ => {
            eprintln!("usage: versions base|grown");
            std::process::exit(2);
        }
    };
    let _guard = tracekit_tracing::init_if_requested();
    let mut sum = 0;
    for _ in 0..20 {
        let _request = info_span!("request").entered();
        sum += parse_records(if grown { 8 } else { 2 });
        sum += render_pages();
    }
    black_box(sum);
}
