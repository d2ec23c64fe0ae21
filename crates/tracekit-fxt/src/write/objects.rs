//! Kernel object (type 7) and userspace object (type 6) records; the reader's
//! `objects` module decodes them. The whole format: `docs/fxt-format.md` at the
//! repository root, §9, §11 and §12.
//!
//! | bits  | kernel object (type 7) | userspace object (type 6)  |
//! |-------|------------------------|----------------------------|
//! | 0–3   | 7                      | 6                          |
//! | 4–15  | size in words          | size in words              |
//! | 16–23 | object type            | *process* (a thread ref)   |
//! | 24–39 | name ref               | name ref                   |
//! | 40–43 | argument count         | argument count             |
//!
//! Kernel object body: koid, \[name stream\], arguments. Process and thread names are
//! kernel objects of type 1 and 2; a thread object carries a koid argument `process`
//! with its pid, which Perfetto, Tracy and Jane Street's parser need to attach it to
//! its process.
//!
//! Userspace object body: pointer, \[process koid (one word) if the ref is inline\],
//! \[name stream\], arguments. Perfetto and Jane Street's parser ignore these records.

use super::args::{args_words, count, ref_words, write_args};
use super::{Destination, WriteError, Writer};
use crate::format::{
    Arg, ArgValue, Koid, ObjectType, RawArg, RecordType, StringId, StringRef, ThreadRef,
};

impl<D: Destination> Writer<D> {
    /// A kernel object record.
    pub fn kernel_object<'s>(
        &mut self,
        object_type: ObjectType,
        koid: Koid,
        name: impl Into<StringRef<'s>>,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let name = name.into();
        let size = 2 + ref_words(name)? + args_words(args)?;
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::KernelObject as u64
                | (size as u64) << 4
                | u64::from(object_type.0) << 16
                | u64::from(name.encode()) << 24
                | count(args) << 40,
        );
        w.word(koid.0);
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        write_args(&mut w, args);
        Ok(())
    }

    /// Names process `pid` (a kernel object of type 1 without arguments).
    pub fn set_process_name<'s>(
        &mut self,
        pid: Koid,
        name: impl Into<StringRef<'s>>,
    ) -> Result<(), WriteError> {
        self.kernel_object(ObjectType::PROCESS, pid, name, &[])
    }

    /// Names thread `tid` of process `pid` (a kernel object of type 2 with the koid
    /// argument `process` = `pid`). The argument name is string id 1 when the header
    /// reserved it, else an inline `"process"`.
    pub fn set_thread_name<'s>(
        &mut self,
        pid: Koid,
        tid: Koid,
        name: impl Into<StringRef<'s>>,
    ) -> Result<(), WriteError> {
        let arg_name = if self.parts.strings.process_reserved() {
            StringRef::Index(StringId::PROCESS)
        } else {
            StringRef::inline("process")
        };
        let args = [Arg {
            name: arg_name,
            value: ArgValue::Koid(pid),
        }];
        self.kernel_object(ObjectType::THREAD, tid, name, &args)
    }

    /// A userspace object record: names the object at `pointer` in `process` (only the
    /// process koid of an inline ref is written).
    pub fn userspace_object<'s>(
        &mut self,
        process: impl Into<ThreadRef>,
        pointer: u64,
        name: impl Into<StringRef<'s>>,
        args: &[RawArg<'_>],
    ) -> Result<(), WriteError> {
        let process = process.into();
        let name = name.into();
        let inline_process = matches!(process, ThreadRef::Inline { .. });
        let size = 2 + usize::from(inline_process) + ref_words(name)? + args_words(args)?;
        let mut w = self.reserve_words(size)?;
        w.word(
            RecordType::UserspaceObject as u64
                | (size as u64) << 4
                | u64::from(process.encode()) << 16
                | u64::from(name.encode()) << 24
                | count(args) << 40,
        );
        w.word(pointer);
        if let ThreadRef::Inline { process, .. } = process {
            w.word(process.0);
        }
        if let StringRef::Inline(s) = name {
            w.stream(s);
        }
        write_args(&mut w, args);
        Ok(())
    }
}
