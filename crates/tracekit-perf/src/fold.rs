//! Folded stacks from sampled call stacks, for flame graphs: one line per distinct
//! stack, `root;caller;...;leaf COUNT`, written by `tracekit_stacks::folded`'s
//! rule (the format inferno and Brendan Gregg's `flamegraph.pl` read). Samples are
//! counted in a call tree (`tracekit_stacks::CallTree`), a node per distinct
//! stack, so that a sample costs a lookup per frame and no string of its own.
//!
//! A frame is named as in the timeline (magic-trace's display names; inlined
//! functions are frames of their own), frames outside the trace scope are left
//! out as the timeline leaves them out, and with `per_thread` each stack starts
//! with its thread, `comm [tid]`, so that a flame graph shows threads side by side.
//!
//! [`fold`] reads the samples where they are: a perf.data file directly (see
//! [`crate::decode::direct`]) or through `perf script`, text as it is.

use std::fmt::Write as _;
use std::io;

use tracekit_callstack::event::{Event, SampleData};
use tracekit_callstack::script::{Parsed, Records, parse_record};
use tracekit_callstack::writer::TraceScope;
use tracekit_stacks::{CallTree, Names, folded};

use crate::data::ReadStats;
use crate::decode::{DecodeOptions, direct};
use crate::text::{Progress, TextSource};
use crate::{Error, Result};

/// Counts the distinct stacks of the samples it is shown.
#[derive(Debug)]
pub struct Folder {
    per_thread: bool,
    scope: TraceScope,
    /// Frame names, escaped for folded stacks.
    names: Names,
    /// Per node, the samples of exactly its stack.
    stacks: CallTree<u64>,
    name: String,
    samples: u64,
}

/// What a stack without a frame in scope folds to.
const NO_FRAMES: &str = "[no frames in scope]";

impl Folder {
    /// A folder keeping frames of `scope`, with each thread apart if `per_thread`.
    pub fn new(per_thread: bool, scope: TraceScope) -> Folder {
        Folder {
            per_thread,
            scope,
            stacks: CallTree::new(u32::MAX),
            names: Names::new(),
            name: String::new(),
            samples: 0,
        }
    }

    /// Counts `event` if it is a sampled call stack.
    pub fn add(&mut self, event: &Event<'_>) {
        let Event::Sample(s) = event else { return };
        let SampleData::Callstack(frames) = &s.data else {
            return;
        };
        self.samples += 1;
        let mut node = CallTree::<u64>::ROOT;
        if self.per_thread {
            self.name.clear();
            self.name.push_str(s.comm.unwrap_or("?"));
            if let Some(tid) = s.thread.tid {
                let _ = write!(self.name, " [{tid}]");
            }
            node = self.frame(node);
        }
        for f in frames {
            if !self.scope.keeps(f.ip) {
                continue;
            }
            self.name.clear();
            f.write_display_name(&mut self.name);
            node = self.frame(node);
        }
        if node == CallTree::<u64>::ROOT {
            let name = self.names.id(NO_FRAMES);
            node = self.stacks.child(node, name);
        }
        if let Some(n) = self.stacks.data_mut(node) {
            *n += 1;
        }
    }

    /// `node`'s callee named as `self.name` says, escaped for folded stacks.
    fn frame(&mut self, node: u32) -> u32 {
        let name = self.names.id(&folded::frame(&self.name));
        self.stacks.child(node, name)
    }

    /// Samples counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The folded stacks, sorted by stack.
    pub fn into_lines(self) -> Vec<(String, u64)> {
        let nodes = self.stacks.nodes();
        let mut path: Vec<&str> = Vec::new();
        let mut v: Vec<(String, u64)> = Vec::new();
        for (i, n) in nodes.iter().enumerate().skip(1) {
            if n.data == 0 {
                continue;
            }
            path.clear();
            let mut at = i;
            while at != 0 {
                let Some(node) = nodes.get(at) else { break };
                path.push(self.names.get(node.name).unwrap_or_default());
                at = node.parent as usize;
            }
            path.reverse();
            // The names are escaped already: joined as they are.
            v.push((path.join(";"), n.data));
        }
        v.sort_unstable();
        v
    }
}

/// The folded stacks of a source, with what was read.
#[derive(Debug)]
pub struct Folded {
    /// Samples counted.
    pub samples: u64,
    /// The distinct stacks and their counts, sorted by stack.
    pub lines: Vec<(String, u64)>,
    /// What the direct reader found, when the recording was read directly.
    pub read: Option<ReadStats>,
}

impl Folded {
    /// Writes the folded stacks as text, a line each.
    pub fn write(&self, out: &mut impl io::Write) -> io::Result<()> {
        for (stack, n) in &self.lines {
            folded::write_stack(out, stack, *n)?;
        }
        Ok(())
    }

    /// Fails when the source `name` held no sampled call stack.
    pub fn require_samples(&self, name: &str) -> Result<()> {
        if self.samples > 0 {
            return Ok(());
        }
        Err(Error::NothingToFold {
            name: name.to_string(),
        })
    }
}

/// Folds the sampled call stacks of `source`, frames of `options.scope`, each
/// thread apart if `per_thread`. A perf.data file is read directly unless
/// [`direct`] says otherwise (`options.via_perf_script`), then through `perf
/// script`; text is parsed as it comes, records that are not samples left out.
/// `progress` hears how far it got: a direct read as [`Progress::Recording`] and
/// then the bytes read.
pub fn fold(
    source: &mut TextSource,
    options: &DecodeOptions,
    per_thread: bool,
    mut progress: impl FnMut(Progress),
) -> Result<Folded> {
    let mut folder = Folder::new(per_thread, options.scope);
    let read = match direct(source, options)? {
        Some(data) => {
            progress(Progress::Recording(data.size()));
            let read = data.samples(
                &options.read_options(),
                |n| progress(Progress::Position(n)),
                |e| folder.add(e),
            )?;
            Some(read)
        }
        None => {
            source.for_each_piece(progress, |text, offset| {
                for r in Records::new(text) {
                    if let Ok(Parsed::Event(e)) = parse_record(&r, offset) {
                        folder.add(&e);
                    }
                }
            })?;
            None
        }
    };
    Ok(Folded {
        samples: folder.samples(),
        lines: folder.into_lines(),
        read,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Mode;

    const TEXT: &str = "\
a 1/1 1.0: 1 cpu-clock:
\t  ffffffff81000000 kfn+0x0 ([kernel.kallsyms])
\t  401000 leaf+0x0 (/x)
\t  402000 main+0x0 (/x)

a 1/2 1.1: 1 cpu-clock:
\t  401000 leaf+0x0 (/x)
\t  402000 main+0x0 (/x)

b 3/3 1.2: 1 cpu-clock:
\t  402000 main+0x0 (/x)
";

    fn text(text: &str) -> TextSource {
        TextSource::File {
            path: "perf.txt".into(),
            text: Box::new(text.as_bytes().to_vec()),
        }
    }

    fn fold_text(per_thread: bool, scope: TraceScope) -> Vec<(String, u64)> {
        let options = DecodeOptions {
            scope,
            ..DecodeOptions::default()
        };
        let folded = fold(&mut text(TEXT), &options, per_thread, |_| {}).unwrap();
        assert_eq!(folded.samples, 3);
        assert!(folded.read.is_none());
        folded.lines
    }

    #[test]
    fn stacks_are_counted_root_first_in_scope() {
        assert_eq!(
            fold_text(false, TraceScope::User),
            [("main".to_string(), 1), ("main;leaf".to_string(), 2)]
        );
        assert_eq!(
            fold_text(false, TraceScope::UserAndKernel),
            [
                ("main".to_string(), 1),
                ("main;leaf".to_string(), 1),
                ("main;leaf;kfn".to_string(), 1)
            ]
        );
    }

    #[test]
    fn threads_apart() {
        assert_eq!(
            fold_text(true, TraceScope::User),
            [
                ("a [1];main;leaf".to_string(), 1),
                ("a [2];main;leaf".to_string(), 1),
                ("b [3];main".to_string(), 1)
            ]
        );
    }

    #[test]
    fn a_separator_in_a_name_does_not_split_its_frame() {
        let text =
            "a;b 1/1 1.0: 1 cpu-clock:\n\t  401000 operator;+0x0 (/x)\n\t  402000 main+0x0 (/x)\n";
        let mut folder = Folder::new(true, TraceScope::User);
        for r in Records::new(text) {
            if let Ok(Parsed::Event(e)) = parse_record(&r, 0) {
                folder.add(&e);
            }
        }
        assert_eq!(
            folder.into_lines(),
            [("a:b [1];main;operator:".to_string(), 1)]
        );
    }

    #[test]
    fn a_recording_is_read_directly_and_its_stacks_written_a_line_each() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/recording_dwarf.data");
        let mut source = TextSource::PerfData {
            path,
            perf: "perf".into(),
            mode: Mode::Sampling,
            bytes: None,
        };
        let mut heard = Vec::new();
        let options = DecodeOptions {
            no_debug_files: true,
            ..DecodeOptions::default()
        };
        let folded = fold(&mut source, &options, false, |p| heard.push(p)).unwrap();
        let read = folded.read.clone().unwrap();
        assert!(folded.samples > 0 && folded.samples == read.samples);
        assert_eq!(
            folded.lines.iter().map(|l| l.1).sum::<u64>(),
            folded.samples
        );
        assert!(matches!(heard.first(), Some(Progress::Recording(n)) if *n == read.bytes));
        let mut out = Vec::new();
        folded.write(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().count(), folded.lines.len());
        let (stack, n) = &folded.lines[0];
        assert!(out.starts_with(&format!("{stack} {n}\n")), "{out}");
    }

    #[test]
    fn nothing_to_fold_is_an_error_that_names_the_input() {
        let options = DecodeOptions::default();
        let folded = fold(&mut text("hello\n"), &options, false, |_| {}).unwrap();
        assert_eq!(folded.samples, 0);
        let e = folded.require_samples("perf.txt").unwrap_err();
        assert_eq!(e.to_string(), "perf.txt: no sampled call stacks to fold");
        let some = fold(&mut text(TEXT), &options, false, |_| {}).unwrap();
        assert!(some.require_samples("perf.txt").is_ok());
    }
}
