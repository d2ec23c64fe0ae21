//! Instantiates the fast path on its own, to read its machine code
//! (`objdump -d target/release/examples/emit_asm | less`).

use tracekit_fxt::format::Koid;
use tracekit_fxt::write::fast::{EventHeader, Int32};
use tracekit_fxt::write::{DiscardDestination, WriteError, Writer};

/// One duration-begin event with two int32 arguments.
#[inline(never)]
pub fn emit_begin(
    w: &mut Writer<DiscardDestination>,
    h: &EventHeader<(Int32, Int32)>,
    ts: u64,
    a: Int32,
    b: Int32,
) -> Result<(), WriteError> {
    w.emit(h, ts, (a, b))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut w = Writer::new(DiscardDestination::new(1 << 16))?;
    let t = w.set_thread_slot(0, Koid(1), Koid(2))?;
    let k = w.intern("k")?;
    let h = EventHeader::<(Int32, Int32)>::duration_begin(t, k, k);
    for i in 0..10 {
        emit_begin(&mut w, &h, i, Int32(k, 1), Int32(k, 2))?;
    }
    Ok(())
}
