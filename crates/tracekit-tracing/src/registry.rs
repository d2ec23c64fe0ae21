//! The trace's string table and thread records: registered under a lock by any
//! thread (FXT string records and thread records, which every thread's event
//! records refer to by index), and written by the writer thread ahead of the
//! buffers that use them.

use rustc_hash::FxHashMap as HashMap;
use tracekit_fxt::format::{ArgValue, Koid, ObjectType, RawArg, StringId, StringRef, ThreadRef};
use tracekit_fxt::write::{VecDestination, Writer};

/// The string table and thread records, encoded as they are registered.
pub(crate) struct Registry {
    pub(crate) writer: Option<Writer<VecDestination>>,
    pub(crate) strings: HashMap<Box<str>, StringId>,
    pub(crate) full: bool,
    /// The next thread-table slot (255 of them; later threads are written inline).
    pub(crate) next_slot: u16,
}

impl Registry {
    /// The id of `s`, registering it; `None` once the table is full.
    pub(crate) fn intern(&mut self, s: &str) -> Option<StringId> {
        if let Some(&id) = self.strings.get(s) {
            return Some(id);
        }
        if self.full {
            return None;
        }
        let id = self.writer.as_mut()?.intern(s).ok();
        match id {
            Some(id) => {
                self.strings.insert(s.into(), id);
                Some(id)
            }
            None => {
                self.full = true;
                None
            }
        }
    }

    /// A new thread's ref: named (an interned name: Jane Street's reader refuses
    /// inline ones) and given a thread-table slot while there are some (the same
    /// reader refuses inline thread refs).
    pub(crate) fn thread(&mut self, pid: u64, tid: u64, name: &str) -> ThreadRef {
        let inline = ThreadRef::Inline {
            process: Koid(pid),
            thread: Koid(tid),
        };
        let name = match self.intern(name) {
            Some(id) => StringRef::Index(id),
            None => StringRef::inline(name),
        };
        let Some(w) = self.writer.as_mut() else {
            return inline;
        };
        match crate::alloc::thread_domain() {
            None => {
                let _ = w.set_thread_name(Koid(pid), Koid(tid), name);
            }
            // The thread's heap in tracekit-alloc's trace, for a viewer to join.
            Some(domain) => {
                let args = [
                    RawArg::new(StringRef::inline("process"), ArgValue::Koid(Koid(pid))),
                    RawArg::new(
                        StringRef::inline("memtrace_domain"),
                        ArgValue::UInt64(u64::from(domain)),
                    ),
                ];
                let _ = w.kernel_object(ObjectType::THREAD, Koid(tid), name, &args);
            }
        }
        let Ok(slot) = u8::try_from(self.next_slot) else {
            return inline;
        };
        match w.set_thread_slot(slot, Koid(pid), Koid(tid)) {
            Ok(id) => {
                self.next_slot += 1;
                ThreadRef::Index(id)
            }
            Err(_) => inline,
        }
    }

    /// The records registered since the last call.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        let Some(w) = self.writer.as_mut() else {
            return Vec::new();
        };
        let _ = w.flush();
        let bytes = std::mem::take(w.destination_mut());
        bytes.into_vec()
    }
}
