//! The reader-compatibility matrix of `fxt check`.
//!
//! For every issue [`check`] can detect, a small trace exhibits it; the test asserts
//! that the finding is reported at the byte offset of the offending record, and that
//! [`Issue::breaks`] / [`Issue::ignored_by`] name the readers that the matrix in
//! `docs/fxt-readers.md` (at the repository root) says. `CASES` below is that matrix,
//! row for row under the same names; the notes there say why each cell is what it
//! is. The cells are copied from the document, not from `check.rs`.
//!
//! Vocabulary for a cell (one reader, one issue):
//! - `Breaks`: the reader fails, reports an error and drops the data, mis-frames, or
//!   mis-reads it (truncates, mis-attributes, collapses): "**breaks**" in the matrix.
//! - `Ignores`: the reader skips the record or value: `ignored_by` must name it,
//!   `breaks` not ("skips").
//! - `Fine`: the reader accepts it: neither set ("ok").
//! - `Silent`: not known ("?"); not asserted.
//!
//! [`Readers::FUCHSIA`] stands for both Fuchsia readers (C++ and Rust); its expected
//! cell is: `Breaks` if either breaks, else `Silent` if either is silent, else
//! `Ignores` if either ignores, else `Fine`.
//!
//! The test first found 24 cells where `check.rs` left out readers that skip a
//! record or value; `Issue::ignored_by` now names them, and every asserted cell
//! agrees.

#![allow(clippy::unwrap_used)]

use tracekit_fxt::check::{Finding, Issue, Readers, Report, check};
use tracekit_fxt::format::{
    Arg, ArgValue, BlobType, Koid, MAGIC, ObjectType, StringId, StringRef, ThreadId, ThreadRef,
    ThreadState,
};
use tracekit_fxt::read::Problem;
use tracekit_fxt::write::metadata::ProviderEvent;
use tracekit_fxt::write::scheduling::LegacySwitchThread;
use tracekit_fxt::write::{Initialization, VecDestination, Writer, WriterOptions};

// ---------------------------------------------------------------------------------
// Building traces.

type W = Writer<VecDestination>;

/// Magic, provider info and section (provider 0), a 2-word init record, string 1.
fn writer() -> W {
    Writer::new(VecDestination::new()).unwrap()
}

/// The header without the initialization record.
fn writer_without_init() -> W {
    Writer::with_options(
        VecDestination::new(),
        &WriterOptions {
            initialization: None,
            ..WriterOptions::default()
        },
    )
    .unwrap()
}

/// The byte offset the next record will have.
fn at(w: &mut W) -> u64 {
    w.flush().unwrap();
    w.destination().as_slice().len() as u64
}

fn done(w: W) -> Vec<u8> {
    w.finish().unwrap().into_vec()
}

/// Binds thread index 1 to (pid 1, tid 2).
fn thread(w: &mut W) -> ThreadId {
    w.set_thread_slot(0, Koid(1), Koid(2)).unwrap()
}

/// The writer's output followed by one hand-built record (for what the writer
/// refuses to write); the record's offset.
fn then_raw(w: W, words: &[u64]) -> (Vec<u8>, u64) {
    let mut bytes = done(w);
    let offset = bytes.len() as u64;
    for word in words {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    (bytes, offset)
}

/// A trace whose record at `offset` is the one with `issue`.
fn found(bytes: Vec<u8>, offset: u64, issue: Issue) -> (Vec<u8>, Finding) {
    (bytes, Finding { offset, issue })
}

// Record header fields (`docs/fxt-format.md` §1, §3 and §8).
const EVENT: u64 = 4;
const fn size(words: u64) -> u64 {
    words << 4
}
/// An event header: type `ty`, `nargs` arguments, thread index 1, category and name
/// refs 0 (the empty string).
const fn event_header(words: u64, ty: u64, nargs: u64) -> u64 {
    EVENT | size(words) | ty << 16 | nargs << 20 | 1 << 24
}

// ---------------------------------------------------------------------------------
// One builder per issue. Each returns the trace and the finding it must produce.

fn zero_size_record() -> (Vec<u8>, Finding) {
    // An instant-event header with size 0: framing cannot go on.
    let (b, off) = then_raw(writer(), &[EVENT]);
    found(b, off, Issue::Problem(Problem::ZeroSizeRecord))
}

fn truncated() -> (Vec<u8>, Finding) {
    // A 3-word event of which the input holds only the header word.
    let (b, off) = then_raw(writer(), &[event_header(3, 0, 0)]);
    found(
        b,
        off,
        Issue::Problem(Problem::Truncated {
            needed: 24,
            available: 8,
        }),
    )
}

fn field_out_of_record() -> (Vec<u8>, Finding) {
    // An instant event of size 1: its timestamp word lies past the record's end.
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(1, 0, 0)]);
    found(b, off, Issue::Problem(Problem::FieldOutOfRecord))
}

fn arg_out_of_record() -> (Vec<u8>, Finding) {
    // An int64 argument (2 words) with only its header word left in the record.
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(3, 0, 1), 100, 3 | size(2)]);
    found(b, off, Issue::Problem(Problem::ArgOutOfRecord))
}

fn arg_size_zero() -> (Vec<u8>, Finding) {
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(3, 0, 1), 100, 1]);
    found(b, off, Issue::Problem(Problem::ArgSizeZero))
}

fn arg_padding() -> (Vec<u8>, Finding) {
    // An int32 argument (1 word of content) whose size field says 2.
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(4, 0, 1), 100, 1 | size(2) | 7 << 32, 0]);
    found(
        b,
        off,
        Issue::Problem(Problem::ArgPadding {
            declared: 2,
            used: 1,
        }),
    )
}

fn missing_magic() -> (Vec<u8>, Finding) {
    // Everything of a good header except the magic record.
    let mut w = Writer::without_header(VecDestination::new()).unwrap();
    w.write_provider_info(0, b"tracekit").unwrap();
    w.write_provider_section(0).unwrap();
    w.write_initialization(&Initialization::new(1_000_000_000))
        .unwrap();
    let t = thread(&mut w);
    w.instant(t, "cat", "name", 100, &[]).unwrap();
    found(done(w), 0, Issue::Problem(Problem::MissingMagic))
}

fn bad_magic() -> (Vec<u8>, Finding) {
    // A trace-info record of type 0 (the magic number's) with one bit of the magic
    // value flipped, first in the file.
    let mut b = done(writer());
    let word = MAGIC ^ 1 << 24;
    b[..8].copy_from_slice(&word.to_le_bytes());
    found(b, 0, Issue::Problem(Problem::BadMagic { word }))
}

fn zero_ticks_per_second() -> (Vec<u8>, Finding) {
    let (b, off) = then_raw(writer_without_init(), &[1 | size(2), 0]);
    found(b, off, Issue::Problem(Problem::ZeroTicksPerSecond))
}

fn unknown_record_type() -> (Vec<u8>, Finding) {
    let (b, off) = then_raw(writer(), &[10 | size(1)]);
    found(b, off, Issue::Problem(Problem::UnknownRecordType(10)))
}

fn unknown_metadata_type() -> (Vec<u8>, Finding) {
    let (b, off) = then_raw(writer(), &[size(1) | 7 << 16]);
    found(b, off, Issue::Problem(Problem::UnknownMetadataType(7)))
}

fn unknown_event_type() -> (Vec<u8>, Finding) {
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(2, 11, 0), 100]);
    found(b, off, Issue::Problem(Problem::UnknownEventType(11)))
}

fn unknown_arg_type() -> (Vec<u8>, Finding) {
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(3, 0, 1), 100, 12 | size(1)]);
    found(b, off, Issue::Problem(Problem::UnknownArgType(12)))
}

fn unknown_scheduling_type() -> (Vec<u8>, Finding) {
    let (b, off) = then_raw(writer(), &[8 | size(2) | 3 << 60, 100]);
    found(b, off, Issue::Problem(Problem::UnknownSchedulingType(3)))
}

fn unknown_large_record_type() -> (Vec<u8>, Finding) {
    // Large type 1 (bits 36–39); 2 words, so 12- and 32-bit framing agree.
    let (b, off) = then_raw(writer(), &[15 | size(2) | 1 << 36, 0]);
    found(b, off, Issue::Problem(Problem::UnknownLargeRecordType(1)))
}

fn unknown_large_blob_format() -> (Vec<u8>, Finding) {
    // Large blob (type 0) of format 2 (bits 40–43).
    let (b, off) = then_raw(writer(), &[15 | size(2) | 2 << 40, 0]);
    found(b, off, Issue::Problem(Problem::UnknownLargeBlobFormat(2)))
}

fn unknown_string_ref() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    let unbound = StringId::new(30000).unwrap();
    w.instant(t, "cat", unbound, 100, &[]).unwrap();
    found(
        done(w),
        off,
        Issue::Problem(Problem::UnknownStringRef(30000)),
    )
}

fn unknown_thread_ref() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.instant(ThreadId::new(7).unwrap(), "cat", "name", 100, &[])
        .unwrap();
    found(done(w), off, Issue::Problem(Problem::UnknownThreadRef(7)))
}

fn string_index_zero() -> (Vec<u8>, Finding) {
    // A string record for index 0, "abc".
    let (b, off) = then_raw(writer(), &[2 | size(2) | 3 << 32, 0x63_6261]);
    found(b, off, Issue::Problem(Problem::StringIndexZero))
}

fn thread_index_zero() -> (Vec<u8>, Finding) {
    let (b, off) = then_raw(writer(), &[3 | size(3), 1, 2]);
    found(b, off, Issue::Problem(Problem::ThreadIndexZero))
}

fn too_many_providers() -> (Vec<u8>, Finding) {
    // Provider 0 and 63 more fill the reader's 64 providers; the 65th is refused.
    let mut w = writer();
    for id in 1..=63 {
        w.write_provider_info(id, b"p").unwrap();
    }
    let off = at(&mut w);
    w.write_provider_info(64, b"p").unwrap();
    found(done(w), off, Issue::Problem(Problem::TooManyProviders))
}

fn no_provider_info() -> (Vec<u8>, Finding) {
    // Magic, then an initialization record: data before any provider info.
    let mut w = Writer::without_header(VecDestination::new()).unwrap();
    w.write_magic().unwrap();
    let off = at(&mut w);
    w.write_initialization(&Initialization::new(1_000_000_000))
        .unwrap();
    found(done(w), off, Issue::NoProviderInfo)
}

fn no_initialization() -> (Vec<u8>, Finding) {
    let mut w = writer_without_init();
    let t = thread(&mut w);
    let off = at(&mut w);
    w.instant(t, "cat", "name", 100, &[]).unwrap();
    found(done(w), off, Issue::NoInitialization)
}

fn extended_initialization() -> (Vec<u8>, Finding) {
    let mut w = Writer::without_header(VecDestination::new()).unwrap();
    w.write_magic().unwrap();
    w.write_provider_info(0, b"tracekit").unwrap();
    w.write_provider_section(0).unwrap();
    let off = at(&mut w);
    w.write_initialization(&Initialization::extended(1_000_000_000, 0, 1))
        .unwrap();
    found(done(w), off, Issue::ExtendedInitialization)
}

fn duplicate_provider_info() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.write_provider_info(0, b"again").unwrap();
    found(done(w), off, Issue::DuplicateProviderInfo(0))
}

fn unannounced_provider() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.write_provider_section(5).unwrap();
    found(done(w), off, Issue::UnannouncedProvider(5))
}

fn unknown_provider_event() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.write_provider_event(0, ProviderEvent(3)).unwrap();
    found(done(w), off, Issue::UnknownProviderEvent(3))
}

fn trace_info() -> (Vec<u8>, Finding) {
    // Metadata type 4 (trace info), trace-info type 1 (bits 20–23).
    let (b, off) = then_raw(writer(), &[size(1) | 4 << 16 | 1 << 20]);
    found(b, off, Issue::TraceInfo(1))
}

fn inline_thread() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    let t = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    w.instant(t, "cat", "name", 100, &[]).unwrap();
    found(done(w), off, Issue::InlineThread)
}

fn inline_kernel_object_name() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.set_process_name(Koid(1), StringRef::inline("proc"))
        .unwrap();
    found(done(w), off, Issue::InlineKernelObjectName)
}

fn huge_large_record() -> (Vec<u8>, Finding) {
    // A large blob with metadata (format 0) of 5000 words: over the 12-bit size. The
    // writer refuses it (it keeps large records under 4096 words), so by hand.
    let mut w = writer();
    thread(&mut w);
    const WORDS: u64 = 5000;
    let payload_words = WORDS - 4; // header, format word, timestamp, size word
    let mut rec = vec![
        15 | size(WORDS),
        1 << 36, // format word: category and name empty, no args, thread index 1
        100,
        payload_words * 8,
    ];
    rec.resize(WORDS as usize, 0x5a5a_5a5a_5a5a_5a5a);
    let (b, off) = then_raw(w, &rec);
    found(b, off, Issue::HugeLargeRecord(WORDS))
}

fn large_blob_without_metadata() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.large_blob("cat", "name", b"payload").unwrap();
    found(done(w), off, Issue::LargeBlobWithoutMetadata)
}

fn large_record() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    w.large_blob_event(t, "cat", "name", 100, &[], b"payload")
        .unwrap();
    found(done(w), off, Issue::LargeRecord)
}

fn log() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    w.log(t, 100, b"hello").unwrap();
    found(done(w), off, Issue::Log)
}

fn userspace_object() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    w.userspace_object(t, 0x1000, "obj", &[]).unwrap();
    found(done(w), off, Issue::UserspaceObject)
}

fn blob() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.blob("data", BlobType::DATA, b"payload").unwrap();
    found(done(w), off, Issue::Blob)
}

fn scheduling_context_switch() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.context_switch(100, 0, ThreadState::BLOCKED, Koid(2), Koid(3), &[])
        .unwrap();
    found(done(w), off, Issue::Scheduling)
}

fn scheduling_thread_wakeup() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.thread_wakeup(100, 0, Koid(2), &[]).unwrap();
    found(done(w), off, Issue::Scheduling)
}

fn legacy_context_switch() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let u = w.set_thread_slot(1, Koid(1), Koid(3)).unwrap();
    let off = at(&mut w);
    let side = |id: ThreadId| LegacySwitchThread {
        thread: id.into(),
        priority: 1,
    };
    w.legacy_context_switch(100, 0, ThreadState::BLOCKED, side(t), side(u))
        .unwrap();
    found(done(w), off, Issue::LegacyContextSwitch)
}

fn blob_arg() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    let args = [Arg::new("b", ArgValue::Blob(b"xyz"))];
    w.instant(t, "cat", "name", 100, &args).unwrap();
    found(done(w), off, Issue::BlobArg)
}

fn kernel_object_type() -> (Vec<u8>, Finding) {
    // 250 is no Zircon object type at all, so "unknown" to every reader.
    let mut w = writer();
    let off = at(&mut w);
    w.kernel_object(ObjectType(250), Koid(9), "obj", &[])
        .unwrap();
    found(done(w), off, Issue::KernelObjectType(250))
}

fn thread_without_process() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let name = w.intern("worker").unwrap();
    let off = at(&mut w);
    w.kernel_object(ObjectType::THREAD, Koid(2), name, &[])
        .unwrap();
    found(done(w), off, Issue::ThreadWithoutProcess)
}

fn non_numeric_counter() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    let args = [Arg::new("v", ArgValue::String(StringRef::inline("x")))];
    w.counter(t, "cat", "name", 100, 1, &args).unwrap();
    found(done(w), off, Issue::NonNumericCounter)
}

fn duplicate_arg_name() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    let args = [
        Arg::new("x", ArgValue::Int32(1)),
        Arg::new("x", ArgValue::Int32(2)),
    ];
    w.instant(t, "cat", "name", 100, &args).unwrap();
    found(done(w), off, Issue::DuplicateArgName)
}

fn wide_koid() -> (Vec<u8>, Finding) {
    // pid 2^40: over 32 bits, well under OCaml's 63.
    let mut w = writer();
    let off = at(&mut w);
    w.set_thread_slot(0, Koid(1 << 40), Koid(2)).unwrap();
    found(done(w), off, Issue::WideKoid)
}

fn end_before_start() -> (Vec<u8>, Finding) {
    // The writer refuses it: a complete event from 100 to 50.
    let mut w = writer();
    thread(&mut w);
    let (b, off) = then_raw(w, &[event_header(3, 4, 0), 100, 50]);
    found(b, off, Issue::EndBeforeStart)
}

fn not_utf8() -> (Vec<u8>, Finding) {
    let mut w = writer();
    let off = at(&mut w);
    w.intern_bytes(b"\xff\xfe").unwrap();
    found(done(w), off, Issue::NotUtf8)
}

fn unparsed_arg(value: ArgValue<'static, StringRef<'static>>) -> (Vec<u8>, Finding) {
    let mut w = writer();
    let t = thread(&mut w);
    let off = at(&mut w);
    let ty = value.arg_type();
    w.instant(t, "cat", "name", 100, &[Arg::new("a", value)])
        .unwrap();
    found(done(w), off, Issue::UnparsedArgType(ty))
}

fn uint32_arg() -> (Vec<u8>, Finding) {
    unparsed_arg(ArgValue::UInt32(7))
}

fn uint64_arg() -> (Vec<u8>, Finding) {
    unparsed_arg(ArgValue::UInt64(7))
}

fn koid_arg() -> (Vec<u8>, Finding) {
    unparsed_arg(ArgValue::Koid(Koid(7)))
}

fn null_arg() -> (Vec<u8>, Finding) {
    unparsed_arg(ArgValue::Null)
}

fn empty() -> (Vec<u8>, Finding) {
    found(Vec::new(), 0, Issue::Empty)
}

// ---------------------------------------------------------------------------------
// The expected matrix, from `docs/fxt-readers.md`.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Breaks,
    Ignores,
    Fine,
    Silent,
}
use Cell::{Breaks, Fine, Ignores, Silent};

struct Case {
    name: &'static str,
    build: fn() -> (Vec<u8>, Finding),
    perfetto: Cell,
    pyfxt: Cell,
    fuchsia_cpp: Cell,
    fuchsia_rust: Cell,
    jst: Cell,
}

const fn case(
    name: &'static str,
    build: fn() -> (Vec<u8>, Finding),
    [perfetto, pyfxt, fuchsia_cpp, fuchsia_rust, jst]: [Cell; 5],
) -> Case {
    Case {
        name,
        build,
        perfetto,
        pyfxt,
        fuchsia_cpp,
        fuchsia_rust,
        jst,
    }
}

/// Columns: Perfetto, PyPI fxt 0.3.0, Fuchsia C++, Fuchsia Rust, Jane Street parser
/// (the columns of the matrix in `docs/fxt-readers.md`, without the notes).
#[rustfmt::skip]
const CASES: &[Case] = &[
    case("zero size record", zero_size_record, [Breaks, Silent, Breaks, Breaks, Silent]),
    case("truncated", truncated, [Silent, Silent, Silent, Silent, Breaks]),
    case("field out of record", field_out_of_record, [Silent, Breaks, Silent, Silent, Breaks]),
    case("arg out of record", arg_out_of_record, [Silent, Breaks, Silent, Silent, Breaks]),
    case("arg size zero", arg_size_zero, [Silent, Breaks, Silent, Breaks, Silent]),
    case("arg padding", arg_padding, [Fine, Breaks, Silent, Breaks, Silent]),
    case("missing magic", missing_magic, [Breaks, Silent, Fine, Breaks, Fine]),
    case("bad magic", bad_magic, [Breaks, Breaks, Silent, Breaks, Silent]),
    case("zero ticks per second", zero_ticks_per_second, [Silent, Silent, Breaks, Silent, Breaks]),
    case("unknown record type", unknown_record_type, [Ignores, Breaks, Ignores, Ignores, Ignores]),
    case("unknown metadata type", unknown_metadata_type, [Silent, Breaks, Ignores, Ignores, Ignores]),
    case("unknown event type", unknown_event_type, [Silent, Breaks, Ignores, Silent, Silent]),
    case("unknown arg type", unknown_arg_type, [Ignores, Breaks, Ignores, Ignores, Ignores]),
    case("unknown scheduling type", unknown_scheduling_type, [Silent, Breaks, Ignores, Ignores, Ignores]),
    case("unknown large record type", unknown_large_record_type, [Ignores, Breaks, Ignores, Silent, Ignores]),
    case("unknown large blob format", unknown_large_blob_format, [Ignores, Silent, Ignores, Silent, Ignores]),
    case("unknown string ref", unknown_string_ref, [Breaks, Breaks, Silent, Fine, Breaks]),
    case("unknown thread ref", unknown_thread_ref, [Breaks, Breaks, Silent, Fine, Breaks]),
    case("string index zero", string_index_zero, [Ignores, Silent, Silent, Silent, Ignores]),
    case("thread index zero", thread_index_zero, [Ignores, Silent, Silent, Silent, Ignores]),
    case("too many providers", too_many_providers, [Silent, Silent, Silent, Silent, Silent]),
    case("no provider info", no_provider_info, [Fine, Breaks, Fine, Fine, Fine]),
    case("no initialization", no_initialization, [Fine, Breaks, Fine, Breaks, Fine]),
    case("extended initialization", extended_initialization, [Fine, Fine, Fine, Breaks, Fine]),
    case("duplicate provider info", duplicate_provider_info, [Silent, Breaks, Silent, Silent, Silent]),
    case("unannounced provider", unannounced_provider, [Silent, Silent, Silent, Silent, Silent]),
    case("unknown provider event", unknown_provider_event, [Ignores, Silent, Silent, Silent, Ignores]),
    case("trace info", trace_info, [Silent, Silent, Silent, Silent, Ignores]),
    case("inline thread", inline_thread, [Fine, Fine, Fine, Fine, Breaks]),
    case("inline kernel object name", inline_kernel_object_name, [Fine, Fine, Fine, Fine, Breaks]),
    case("huge large record", huge_large_record, [Breaks, Fine, Silent, Silent, Silent]),
    case("large blob without metadata", large_blob_without_metadata, [Silent, Fine, Fine, Silent, Silent]),
    case("large record", large_record, [Ignores, Fine, Fine, Silent, Ignores]),
    case("log", log, [Ignores, Fine, Fine, Fine, Ignores]),
    case("userspace object", userspace_object, [Ignores, Fine, Fine, Fine, Ignores]),
    case("blob", blob, [Ignores, Fine, Fine, Fine, Ignores]),
    case("context switch", scheduling_context_switch, [Fine, Fine, Fine, Fine, Ignores]),
    case("thread wakeup", scheduling_thread_wakeup, [Fine, Fine, Fine, Fine, Ignores]),
    case("legacy context switch", legacy_context_switch, [Fine, Breaks, Fine, Fine, Ignores]),
    case("blob arg", blob_arg, [Ignores, Breaks, Ignores, Ignores, Ignores]),
    case("kernel object type", kernel_object_type, [Ignores, Breaks, Silent, Silent, Silent]),
    case("thread without process", thread_without_process, [Breaks, Silent, Silent, Silent, Breaks]),
    case("non-numeric counter", non_numeric_counter, [Breaks, Silent, Silent, Silent, Silent]),
    case("duplicate arg name", duplicate_arg_name, [Fine, Breaks, Fine, Fine, Fine]),
    case("wide koid", wide_koid, [Breaks, Fine, Fine, Fine, Fine]),
    case("end before start", end_before_start, [Breaks, Silent, Silent, Silent, Silent]),
    case("not UTF-8", not_utf8, [Silent, Silent, Silent, Silent, Silent]),
    case("uint32 arg", uint32_arg, [Fine, Fine, Fine, Fine, Ignores]),
    case("uint64 arg", uint64_arg, [Fine, Fine, Fine, Fine, Ignores]),
    case("koid arg", koid_arg, [Fine, Fine, Fine, Fine, Ignores]),
    case("null arg", null_arg, [Silent, Fine, Fine, Fine, Silent]),
    case("empty", empty, [Breaks, Breaks, Silent, Breaks, Silent]),
];

fn fuchsia(cpp: Cell, rust: Cell) -> Cell {
    let either = |c| cpp == c || rust == c;
    if either(Breaks) {
        Breaks
    } else if either(Silent) {
        Silent
    } else if either(Ignores) {
        Ignores
    } else {
        Fine
    }
}

fn reader_cells(c: &Case) -> [(Readers, &'static str, Cell); 4] {
    [
        (Readers::PERFETTO, "Perfetto", c.perfetto),
        (Readers::PYFXT, "PyPI fxt", c.pyfxt),
        (
            Readers::FUCHSIA,
            "Fuchsia",
            fuchsia(c.fuchsia_cpp, c.fuchsia_rust),
        ),
        (Readers::JANE_STREET, "Jane Street", c.jst),
    ]
}

/// What `check` says of `reader` for `issue`, in the table's vocabulary.
fn cell_of(issue: Issue, reader: Readers) -> Cell {
    match (
        issue.breaks().contains(reader),
        issue.ignored_by().contains(reader),
    ) {
        (true, false) => Breaks,
        (false, true) => Ignores,
        (false, false) => Fine,
        // A reader both broken and ignoring: never a cell of the matrix.
        (true, true) => Silent,
    }
}

fn is_reported(report: &Report, want: Finding) -> bool {
    report.findings.contains(&want) || report.fatal == Some(want)
}

/// (case, reader, the matrix's cell, check's cell).
type Disagreement = (&'static str, &'static str, Cell, Cell);

/// Runs every case; returns the failures (a finding missing or at the wrong offset)
/// and the cells where check does not say what the matrix says.
fn run_matrix() -> (Vec<String>, Vec<Disagreement>) {
    let mut failures = Vec::new();
    let mut disagreements = Vec::new();
    for c in CASES {
        let (bytes, want) = (c.build)();
        let report = check(&bytes);
        if !is_reported(&report, want) {
            failures.push(format!(
                "{}: expected {:?} at offset {}; findings {:?}, fatal {:?}",
                c.name, want.issue, want.offset, report.findings, report.fatal
            ));
            continue;
        }
        for (reader, reader_name, expected) in reader_cells(c) {
            if expected == Silent {
                continue;
            }
            let actual = cell_of(want.issue, reader);
            if actual != expected {
                disagreements.push((c.name, reader_name, expected, actual));
            }
        }
    }
    (failures, disagreements)
}

#[test]
fn every_detectable_issue_is_found_at_its_record_and_maps_to_the_documented_readers() {
    let (mut failures, disagreements) = run_matrix();
    for (name, reader, documented, actual) in &disagreements {
        failures.push(format!(
            "{name}: {reader}: docs/fxt-readers.md says {documented:?}, check says {actual:?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------
// Whole-report verdicts.

/// A trace every reader takes: the writer's header, named process and thread, events
/// with int32 args on an indexed thread, a numeric counter.
fn clean_trace() -> W {
    let mut w = writer();
    let (proc_name, thread_name) = (w.intern("proc").unwrap(), w.intern("main").unwrap());
    w.set_process_name(Koid(1), proc_name).unwrap();
    w.set_thread_name(Koid(1), Koid(2), thread_name).unwrap();
    let t = thread(&mut w);
    let (cat, name, n) = (
        w.intern("cat").unwrap(),
        w.intern("step").unwrap(),
        w.intern("n").unwrap(),
    );
    w.duration_begin(t, cat, name, 100, &[Arg::new(n, ArgValue::Int32(1))])
        .unwrap();
    w.counter(t, cat, name, 150, 1, &[Arg::new(n, ArgValue::Int64(5))])
        .unwrap();
    w.duration_end(t, cat, name, 200, &[]).unwrap();
    w
}

#[test]
fn a_clean_trace_is_clean() {
    let report = check(&done(clean_trace()));
    assert_eq!(report.findings, []);
    assert_eq!(report.fatal, None);
    assert!(report.is_clean());
    assert_eq!(report.broken_readers(), Readers::NONE);
    assert!(report.records > 0);
}

#[test]
fn a_log_record_is_a_note_not_a_break() {
    // Log records are skipped by Perfetto and Jane Street's parser and read
    // elsewhere: no reader breaks, so the trace stays clean while the finding is
    // reported.
    let mut w = clean_trace();
    let off = at(&mut w);
    w.log(ThreadId::new(1).unwrap(), 300, b"hello").unwrap();
    let report = check(&done(w));
    assert_eq!(
        report.findings,
        [Finding {
            offset: off,
            issue: Issue::Log
        }]
    );
    assert!(report.is_clean());
    assert_eq!(report.broken_readers(), Readers::NONE);
    assert!(report.to_string().contains("clean"), "{report}");
}

#[test]
fn broken_readers_are_the_union_of_the_findings() {
    // An inline thread (breaks only Jane Street's parser) and duplicate argument names
    // (break only PyPI fxt's argument dictionary).
    let mut w = clean_trace();
    let inline = ThreadRef::Inline {
        process: Koid(1),
        thread: Koid(2),
    };
    let off1 = at(&mut w);
    w.instant(inline, "cat", "i", 300, &[]).unwrap();
    let off2 = at(&mut w);
    let args = [
        Arg::new("x", ArgValue::Int32(1)),
        Arg::new("x", ArgValue::Int32(2)),
    ];
    w.instant(ThreadId::new(1).unwrap(), "cat", "d", 400, &args)
        .unwrap();
    let report = check(&done(w));
    assert!(report.findings.contains(&Finding {
        offset: off1,
        issue: Issue::InlineThread
    }));
    assert!(report.findings.contains(&Finding {
        offset: off2,
        issue: Issue::DuplicateArgName
    }));
    assert!(!report.is_clean());
    assert_eq!(
        report.broken_readers(),
        Readers::JANE_STREET.with(Readers::PYFXT)
    );
}

#[test]
fn a_fatal_problem_makes_the_report_unclean() {
    let (bytes, want) = zero_size_record();
    let report = check(&bytes);
    assert_eq!(report.fatal, Some(want));
    assert!(!report.is_clean());
    // Perfetto and both Fuchsia readers stop at a size-0 record.
    let broken = report.broken_readers();
    assert!(
        broken.contains(Readers::PERFETTO.with(Readers::FUCHSIA)),
        "{broken}"
    );
}
