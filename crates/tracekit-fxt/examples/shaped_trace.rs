//! Writes the benches' real-shaped FXT trace to a file, for measuring the command-line
//! tools on it: `shaped_trace OUT.fxt [EVENTS]` (default 5,000,000 events).

#[path = "../benches/common/mod.rs"]
mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: shaped_trace OUT.fxt [EVENTS]")?;
    let events = match args.next() {
        Some(n) => n.parse()?,
        None => 5_000_000,
    };
    let bytes = common::shaped_trace(events)?;
    std::fs::write(&out, &bytes)?;
    println!("{out}: {} bytes, about {events} events", bytes.len());
    Ok(())
}
