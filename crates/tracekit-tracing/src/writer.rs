//! The writer thread and how records reach it: each thread's buffer is a
//! [`Destination`] that sends itself, once full, over a channel to the writer
//! thread, which appends it to the output after the registry's new records. A
//! flush (the guard, or the panic hook) hands over every live thread's partial
//! buffer, idle threads' included, through their locks.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak, mpsc};
use std::time::Duration;

use tracekit_fxt::write::{Destination, DestinationError};

use crate::Shared;
use crate::local::{LOCAL, Local};
use crate::lock::Slot;

/// Bytes of a thread's buffer.
pub(crate) const BUFFER: usize = 64 * 1024;

/// What goes to the writer thread.
pub(crate) enum Message {
    /// A thread's records.
    Records(Vec<u8>),
    /// Write everything received so far to the file, then answer.
    Flush(mpsc::Sender<()>),
    /// Write everything received so far and end, though threads the guard could
    /// not reach may still hold senders.
    Stop,
}

/// Spare buffers kept at most.
pub(crate) const SPARE: usize = 32;

/// A thread's buffer: a [`Destination`] that hands each full buffer to the writer
/// thread.
pub(crate) struct ThreadBuffer {
    pub(crate) bytes: Vec<u8>,
    pub(crate) sender: Option<mpsc::Sender<Message>>,
    pub(crate) shared: Arc<Shared>,
}

impl Destination for ThreadBuffer {
    #[inline(always)]
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn next_buffer(
        &mut self,
        filled: usize,
        min_capacity: usize,
    ) -> Result<usize, DestinationError> {
        let size = BUFFER.max(min_capacity);
        if filled > 0 {
            let spare = (self.shared.spare.lock().ok())
                .and_then(|mut s| s.pop())
                .filter(|b| b.len() >= size)
                .unwrap_or_else(|| vec![0; size]);
            let mut full = std::mem::replace(&mut self.bytes, spare);
            full.truncate(filled);
            if let Some(s) = &self.sender
                && s.send(Message::Records(full)).is_err()
            {
                self.sender = None;
            }
        } else if self.bytes.len() < size {
            self.bytes.resize(size, 0);
        }
        Ok(0)
    }
}

/// The writer thread's end: the output, and whether it failed.
pub(crate) struct FileWriter<W> {
    pub(crate) out: W,
    pub(crate) shared: Arc<Shared>,
    pub(crate) failed: bool,
}

impl<W: Write> FileWriter<W> {
    /// Writes what the threads send until they are all gone, then what is left.
    pub(crate) fn run(mut self, receiver: mpsc::Receiver<Message>) {
        for message in receiver {
            match message {
                Message::Records(bytes) => {
                    self.write(&bytes, false);
                    self.recycle(bytes);
                }
                Message::Flush(ack) => {
                    self.write(&[], true);
                    let _ = ack.send(());
                }
                Message::Stop => break,
            }
        }
        self.write(&[], true);
    }

    /// Writes the records registered since the last write, then `records`, in one
    /// write (so that a killed process leaves only whole records), and flushes if
    /// `flush`. The first error stops the trace, with one warning.
    pub(crate) fn write(&mut self, records: &[u8], flush: bool) {
        if self.failed {
            return;
        }
        let mut all = (self.shared.registry.lock().ok())
            .map(|mut r| r.take())
            .unwrap_or_default();
        let written = if all.is_empty() {
            self.out.write_all(records)
        } else {
            all.extend_from_slice(records);
            self.out.write_all(&all)
        };
        let result = written.and_then(|()| if flush { self.out.flush() } else { Ok(()) });
        if let Err(e) = result {
            self.failed = true;
            self.shared.stopped.store(true, Ordering::Release);
            eprintln!("tracekit-tracing: cannot write the trace: {e}; tracing stops");
        }
    }

    /// Keeps a written buffer for a thread to fill again.
    pub(crate) fn recycle(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() >= BUFFER
            && let Ok(mut spare) = self.shared.spare.lock()
            && spare.len() < SPARE
        {
            bytes.resize(BUFFER, 0);
            spare.push(bytes);
        }
    }
}

/// How long a flush waits for a thread that is writing a record: far longer than
/// any record takes, short enough that a thread stuck inside the layer (a panic
/// there) cannot hold the program's exit.
pub(crate) const PATIENCE: Duration = Duration::from_millis(100);

/// Hands every thread's partial buffer to the writer thread (and, when
/// `disconnect`, closes each thread's way to it).
pub(crate) fn hand_over_threads(shared: &Shared, disconnect: bool) {
    let Ok(_one_flusher) = shared.flushing.lock() else {
        return;
    };
    let slots: Vec<Arc<Slot<Local>>> = match shared.threads.lock() {
        Ok(mut threads) => {
            threads.retain(|t| t.strong_count() > 0);
            threads.iter().filter_map(Weak::upgrade).collect()
        }
        Err(_) => Vec::new(),
    };
    // The calling thread's own state needs no fence.
    let own = LOCAL
        .try_with(|l| {
            l.try_borrow()
                .ok()
                .and_then(|l| l.as_ref().map(|l| l.1.clone()))
        })
        .ok()
        .flatten();
    for slot in slots {
        let locked = match &own {
            // SAFETY: the calling thread's own slot (see `LOCAL`).
            Some(own) if Arc::ptr_eq(own, &slot) => unsafe { slot.lock() },
            _ => slot.lock_from_elsewhere(PATIENCE),
        };
        if let Some(mut local) = locked {
            let _ = local.writer.flush();
            if disconnect {
                local.writer.destination_mut().sender = None;
            }
        }
    }
}

/// Hands every thread's partial buffer over and waits for the writer thread to
/// write all it has.
pub(crate) fn flush(shared: &Shared) {
    hand_over_threads(shared, false);
    let sender = shared.sender.lock().ok().and_then(|s| s.clone());
    if let Some(s) = sender {
        let (ack, done) = mpsc::channel();
        if s.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv();
        }
    }
}

pub(crate) fn install_panic_hook(shared: &Arc<Shared>) {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    let weak = Arc::downgrade(shared);
    let previous = std::panic::take_hook();
    if INSTALLED.swap(true, Ordering::AcqRel) {
        std::panic::set_hook(previous);
    } else {
        std::panic::set_hook(Box::new(move |info| {
            if let Some(shared) = weak.upgrade() {
                flush(&shared);
            }
            previous(info);
        }));
    }
}
