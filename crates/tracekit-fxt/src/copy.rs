//! Copying a trace record by record: read each record, write it back through the
//! [`Writer`] with the same string and thread refs. A well-formed trace comes out
//! byte-identical; other traces come out repaired so that every reader in the
//! compatibility matrix accepts them, with the same meaning as [`crate::read`] gives
//! the input:
//!
//! - the magic number is put first if the input lacks it;
//! - a provider that the input uses without a provider info record gets one (with
//!   the empty name the reader gives it); a second provider info for the same id
//!   becomes a provider section (PyPI `fxt` rejects duplicates);
//! - a provider whose timestamped records come before any initialization record gets
//!   a 2-word one with 1e9 ticks per second (the default the format's documentation
//!   gives, which the reader also applies);
//! - a string or thread ref that is unbound where it is used is written inline, as
//!   the placeholder the reader resolved it to;
//! - records the reader skips (unknown types, malformed content) are dropped, and
//!   arguments of unknown types are dropped from their records.

use crate::format::{Arg, ArgValue, RawArg, StringRef, ThreadRef};
use crate::read::tables::UNKNOWN_STRING;
use crate::read::{RawArgs, RawRecord, ReadError, ReadOptions, Reader, Record, Warning};
use crate::write::scheduling::LegacySwitchThread;
use crate::write::{Destination, Initialization, WriteError, Writer};
use thiserror::Error;

/// Why a copy stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CopyError {
    /// The input could not be read further.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A record could not be written.
    #[error("writing the record at byte {offset}: {error}")]
    Write {
        /// Offset of the input record.
        offset: u64,
        /// What failed.
        error: WriteError,
    },
}

/// What a copy did.
#[derive(Clone, Debug, Default)]
pub struct CopyReport {
    /// Records read (and written).
    pub records: u64,
    /// Records added to repair the input (magic, provider info, initialization).
    pub inserted: u64,
    /// Refs written inline because they were unbound.
    pub inlined_refs: u64,
    /// The reader's warnings (records dropped or repaired).
    pub warnings: Vec<Warning>,
    /// Number of warnings, including those not kept.
    pub warning_count: u64,
}

#[derive(Clone, Copy, Debug)]
struct ProviderState {
    id: u32,
    announced: bool,
    initialized: bool,
}

/// Copies `input` into `writer`, which should have been made with
/// [`Writer::without_header`].
pub fn copy<D: Destination>(input: &[u8], writer: &mut Writer<D>) -> Result<CopyReport, CopyError> {
    let mut reader = Reader::with_options(input, ReadOptions::default());
    let mut report = CopyReport::default();
    let mut providers = vec![ProviderState {
        id: 0,
        announced: false,
        initialized: false,
    }];
    let mut current = 0usize;
    let mut first = true;

    while let Some(raw) = reader.next_raw()? {
        let offset = reader.record_offset();
        let w = |error| CopyError::Write { offset, error };
        if first && !matches!(raw, Record::Magic) {
            writer.write_magic().map_err(w)?;
            report.inserted += 1;
        }
        first = false;
        report.records += 1;

        // Provider bookkeeping, mirroring the reader's.
        let find = |providers: &mut Vec<ProviderState>, id| match providers
            .iter()
            .position(|p| p.id == id)
        {
            Some(i) => i,
            None => {
                providers.push(ProviderState {
                    id,
                    announced: false,
                    initialized: false,
                });
                providers.len() - 1
            }
        };
        match raw {
            Record::Magic => {
                writer.write_magic().map_err(w)?;
                continue;
            }
            Record::ProviderInfo { id, name } => {
                current = find(&mut providers, id);
                if providers[current].announced {
                    writer.write_provider_section(id).map_err(w)?;
                } else {
                    writer.write_provider_info(id, name).map_err(w)?;
                    providers[current].announced = true;
                }
                continue;
            }
            Record::ProviderSection { id } => {
                current = find(&mut providers, id);
                if providers[current].announced {
                    writer.write_provider_section(id).map_err(w)?;
                } else {
                    writer.write_provider_info(id, b"").map_err(w)?;
                    providers[current].announced = true;
                    report.inserted += 1;
                }
                continue;
            }
            Record::ProviderEvent { id, event } => {
                let target = find(&mut providers, id);
                if !providers[target].announced {
                    writer.write_provider_info(id, b"").map_err(w)?;
                    providers[target].announced = true;
                    let back = providers[current].id;
                    if providers[current].announced {
                        writer.write_provider_section(back).map_err(w)?;
                    }
                    report.inserted += 1;
                }
                writer.write_provider_event(id, event).map_err(w)?;
                continue;
            }
            Record::TraceInfo { .. } => {
                // Only the magic number is a known trace info; others are metadata
                // readers may reject, and carry nothing the reader interprets.
                continue;
            }
            _ => {}
        }
        let p = &mut providers[current];
        if !p.announced {
            writer.write_provider_info(p.id, b"").map_err(w)?;
            p.announced = true;
            report.inserted += 1;
        }
        if let Record::Initialization(init) = raw {
            p.initialized = true;
            writer.write_initialization(&init).map_err(w)?;
            continue;
        }
        if raw.ticks().is_some() && !p.initialized {
            writer
                .write_initialization(&Initialization::new(1_000_000_000))
                .map_err(w)?;
            p.initialized = true;
            report.inserted += 1;
        }
        let fixed = Fixer {
            reader: &reader,
            inlined: 0,
        };
        write_record(writer, raw, fixed, &mut report.inlined_refs).map_err(w)?;
    }
    report.warnings = reader.warnings().to_vec();
    report.warning_count = reader.warning_count();
    Ok(report)
}

/// Replaces unbound refs with their inline placeholders.
struct Fixer<'r, 'a> {
    reader: &'r Reader<'a>,
    inlined: u64,
}

impl<'a> Fixer<'_, 'a> {
    fn s(&mut self, r: StringRef<'a>) -> StringRef<'a> {
        if self.reader.provider().strings.knows(r) {
            r
        } else {
            self.inlined += 1;
            StringRef::Inline(UNKNOWN_STRING)
        }
    }

    fn t(&mut self, r: ThreadRef) -> ThreadRef {
        if self.reader.provider().threads.knows(r) {
            r
        } else {
            self.inlined += 1;
            let t = self.reader.provider().threads.resolve(r);
            ThreadRef::Inline {
                process: t.process,
                thread: t.thread,
            }
        }
    }

    fn args(&mut self, args: RawArgs<'a>) -> Vec<RawArg<'a>> {
        args.iter()
            .map(|a| Arg {
                name: self.s(a.name),
                value: match a.value {
                    ArgValue::String(v) => ArgValue::String(self.s(v)),
                    other => other,
                },
            })
            .collect()
    }
}

fn write_record<'a, D: Destination>(
    w: &mut Writer<D>,
    raw: RawRecord<'a>,
    mut f: Fixer<'_, 'a>,
    inlined: &mut u64,
) -> Result<(), WriteError> {
    let result = match raw {
        Record::Magic
        | Record::ProviderInfo { .. }
        | Record::ProviderSection { .. }
        | Record::ProviderEvent { .. }
        | Record::TraceInfo { .. } => Ok(()),
        Record::Initialization(init) => w.write_initialization(&init),
        Record::String { id, value } => w.set_string(id, value),
        Record::Thread {
            id,
            process,
            thread,
        } => w.set_thread(id, process, thread),
        Record::Event(e) => {
            let args = f.args(e.args);
            let (thread, category, name) = (f.t(e.thread), f.s(e.category), f.s(e.name));
            w.write_event(e.kind, thread, category, name, e.ticks, &args)
        }
        Record::Blob(b) => {
            let name = f.s(b.name);
            w.blob(name, b.blob_type, b.payload)
        }
        Record::UserspaceObject(o) => {
            let args = f.args(o.args);
            let (process, name) = (f.t(o.process), f.s(o.name));
            w.userspace_object(process, o.pointer, name, &args)
        }
        Record::KernelObject(o) => {
            let args = f.args(o.args);
            let name = f.s(o.name);
            w.kernel_object(o.object_type, o.koid, name, &args)
        }
        Record::ContextSwitch(c) => {
            let args = f.args(c.args);
            w.context_switch(
                c.ticks,
                c.cpu,
                c.outgoing_state,
                c.outgoing_tid,
                c.incoming_tid,
                &args,
            )
        }
        Record::ThreadWakeup(c) => {
            let args = f.args(c.args);
            w.thread_wakeup(c.ticks, c.cpu, c.waking_tid, &args)
        }
        Record::LegacyContextSwitch(c) => {
            let outgoing = LegacySwitchThread {
                thread: f.t(c.outgoing),
                priority: c.outgoing_priority,
            };
            let incoming = LegacySwitchThread {
                thread: f.t(c.incoming),
                priority: c.incoming_priority,
            };
            w.legacy_context_switch(c.ticks, c.cpu, c.outgoing_state, outgoing, incoming)
        }
        Record::Log(l) => {
            let thread = f.t(l.thread);
            w.log(thread, l.ticks, l.message)
        }
        Record::LargeBlob(b) => {
            let (category, name) = (f.s(b.category), f.s(b.name));
            match b.meta {
                Some(m) => {
                    let args = f.args(m.args);
                    let thread = f.t(m.thread);
                    w.large_blob_event(thread, category, name, m.ticks, &args, b.payload)
                }
                None => w.large_blob(category, name, b.payload),
            }
        }
    };
    *inlined += f.inlined;
    result
}
