//! The frames of a `SAMPLE` record, leaf first: the addresses of its call chain
//! (after the context markers that say kernel or user), and for DWARF recordings
//! (`--call-graph dwarf`) its copied user stack unwound with `framehop` from the
//! user registers, with the unwinding sections of each mapped object.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use framehop::x86_64::{UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use linux_perf_data::linux_perf_event_reader::SampleRecord;
use object::{Object, ObjectSection};

use super::process::{Mapping, State, regular_file};

/// Call-chain values at or above this are context markers, not addresses.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// The marker before kernel addresses.
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// The marker before user addresses.
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// perf's register numbers on x86_64 (`arch/x86/include/uapi/asm/perf_regs.h`).
const PERF_REG_X86_BP: u64 = 6;
const PERF_REG_X86_SP: u64 = 7;
const PERF_REG_X86_IP: u64 = 8;

/// The unwinding sections of an object, shared by every process that maps it.
pub(super) type Sections = ExplicitModuleSectionInfo<Arc<[u8]>>;

/// One frame of a sample before naming.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawFrame {
    pub(super) address: u64,
    /// A return address (looked up one byte back).
    pub(super) returns: bool,
    pub(super) kernel: bool,
    /// Unwound here from the copied stack: shown at its lookup address, as perf
    /// shows what its own DWARF unwinder finds.
    pub(super) unwound: bool,
}

impl State {
    /// Adds the object of mapping `m` to process `pid`'s unwinder.
    pub(super) fn add_unwind_module(&mut self, pid: i32, m: Mapping) {
        let entry = &mut self.objects[m.object];
        let sections = entry
            .sections
            .get_or_insert_with(|| unwind_sections(Path::new(&*entry.path)))
            .clone();
        let Some(sections) = sections else { return };
        let path = Path::new(&*entry.path);
        let Some(segments) = entry
            .segments
            .get_or_insert_with(|| tracekit_symbols::elf::read_load_segments(path))
        else {
            return;
        };
        // The bias between the process's addresses and the object's, from the
        // middle of the mapping: its first page may hold the end of the segment
        // before (linkers share pages between segments), which has another bias.
        let half = (m.end - m.start) / 2;
        let Some(svma) = m
            .offset
            .checked_add(half)
            .and_then(|o| tracekit_symbols::elf::file_offset_to_svma(segments, o))
        else {
            return;
        };
        let base = (m.start + half).wrapping_sub(svma);
        let name = entry.path.to_string();
        let process = self.processes.entry(pid).or_default();
        let unwinder = process.unwinder.get_or_insert_with(UnwinderX86_64::new);
        unwinder.add_module(Module::new(name, m.start..m.end, base, sections));
    }

    /// The raw frames of sample `s`, leaf first; false when a DWARF unwind stopped
    /// before the stack's end.
    pub(super) fn stack(&mut self, s: &SampleRecord<'_>, out: &mut Vec<RawFrame>) -> bool {
        let mut kernel = false;
        let mut first_user = true;
        let mut complete = true;
        if let Some(chain) = &s.callchain {
            let mut first = true;
            for i in 0..chain.len() {
                let Some(a) = chain.get(i) else { break };
                if a >= PERF_CONTEXT_MAX {
                    kernel = a == PERF_CONTEXT_KERNEL;
                    if a == PERF_CONTEXT_USER {
                        kernel = false;
                    }
                    continue;
                }
                if !kernel {
                    first_user = false;
                }
                out.push(RawFrame {
                    address: a,
                    returns: !first,
                    kernel,
                    unwound: false,
                });
                first = false;
            }
        } else if let Some(ip) = s.ip {
            out.push(RawFrame {
                address: ip,
                returns: false,
                kernel: s.cpu_mode == linux_perf_data::linux_perf_event_reader::CpuMode::Kernel,
                unwound: false,
            });
            first_user = false;
        }
        // DWARF recordings: the user part comes from unwinding the copied stack.
        if first_user
            && let (Some(regs), Some((stack, _))) = (&s.user_regs, &s.user_stack)
            && let (Some(ip), Some(sp), Some(bp)) = (
                regs.get(PERF_REG_X86_IP),
                regs.get(PERF_REG_X86_SP),
                regs.get(PERF_REG_X86_BP),
            )
        {
            let pid = s.pid.unwrap_or(0);
            let bytes = stack.as_slice();
            let mut read_stack = |addr: u64| {
                let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
                let word = bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
                let mut b = [0u8; 8];
                b.copy_from_slice(word);
                Ok(u64::from_le_bytes(b))
            };
            match self.processes.get(&pid).and_then(|p| p.unwinder.as_ref()) {
                Some(unwinder) => {
                    let regs = UnwindRegsX86_64::new(ip, sp, bp);
                    let mut frames =
                        unwinder.iter_frames(ip, regs, &mut self.unwind_cache, &mut read_stack);
                    loop {
                        match frames.next() {
                            Ok(Some(f)) => out.push(RawFrame {
                                address: f.address(),
                                returns: matches!(f, FrameAddress::ReturnAddress(_)),
                                kernel: false,
                                unwound: true,
                            }),
                            Ok(None) => break,
                            Err(_) => {
                                complete = false;
                                break;
                            }
                        }
                    }
                }
                None => out.push(RawFrame {
                    address: ip,
                    returns: false,
                    kernel: false,
                    unwound: true,
                }),
            }
        }
        complete
    }
}

/// The sections framehop unwinds with, read from the object at `path`.
fn unwind_sections(path: &Path) -> Option<Sections> {
    if !regular_file(path) {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    let section = |name: &str| -> Option<(Range<u64>, Arc<[u8]>)> {
        let s = file.section_by_name(name)?;
        let data = s.uncompressed_data().ok()?;
        let start = s.address();
        Some((start..start.checked_add(s.size())?, Arc::from(&*data)))
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
    let debug_frame = section(".debug_frame");
    let got = file
        .section_by_name(".got")
        .and_then(|s| Some(s.address()..s.address().checked_add(s.size())?));
    Some(ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: text.as_ref().map(|t| t.0.clone()),
        text: text.map(|t| t.1),
        got_svma: got,
        eh_frame_svma: eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: eh_frame.map(|t| t.1),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|t| t.1),
        debug_frame: debug_frame.map(|t| t.1),
        ..ExplicitModuleSectionInfo::default()
    })
}
