//! Folded stacks from sampled call stacks, for flame graphs: one line per distinct
//! stack, `root;caller;...;leaf COUNT`, the format inferno and Brendan Gregg's
//! `flamegraph.pl` read.
//!
//! A frame is named as in the timeline (magic-trace's display names; inlined
//! functions are frames of their own), frames outside the trace scope are left
//! out as the timeline leaves them out, and with `per_thread` each stack starts
//! with its thread, `comm [tid]`, so that a flame graph shows threads side by side.
//! A `;` inside a name would split the frame, so it becomes `:`.

use std::collections::HashMap;
use std::fmt::Write as _;

use tracekit_callstack::event::{Event, SampleData};
use tracekit_callstack::writer::TraceScope;

/// Counts the distinct stacks of the samples it is shown.
#[derive(Debug)]
pub struct Folder {
    per_thread: bool,
    scope: TraceScope,
    stacks: HashMap<String, u64>,
    line: String,
    name: String,
    samples: u64,
}

impl Folder {
    /// A folder keeping frames of `scope`, with each thread apart if `per_thread`.
    pub fn new(per_thread: bool, scope: TraceScope) -> Folder {
        Folder {
            per_thread,
            scope,
            stacks: HashMap::new(),
            line: String::new(),
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
        self.line.clear();
        if self.per_thread {
            let comm = s.comm.unwrap_or("?");
            match s.thread.tid {
                Some(tid) => {
                    let _ = write!(self.line, "{} [{tid}]", comm.replace(';', ":"));
                }
                None => self.line.push_str(&comm.replace(';', ":")),
            }
        }
        for f in frames {
            if !self.scope.keeps(f.ip) {
                continue;
            }
            if !self.line.is_empty() {
                self.line.push(';');
            }
            self.name.clear();
            f.write_display_name(&mut self.name);
            if self.name.contains(';') {
                self.line.push_str(&self.name.replace(';', ":"));
            } else {
                self.line.push_str(&self.name);
            }
        }
        if self.line.is_empty() {
            self.line.push_str("[no frames in scope]");
        }
        match self.stacks.get_mut(self.line.as_str()) {
            Some(n) => *n += 1,
            None => {
                self.stacks.insert(self.line.clone(), 1);
            }
        }
    }

    /// Samples counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The folded stacks, sorted by stack.
    pub fn into_lines(self) -> Vec<(String, u64)> {
        let mut v: Vec<_> = self.stacks.into_iter().collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tracekit_callstack::script::{Parsed, Records, parse_record};

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

    fn fold(per_thread: bool, scope: TraceScope) -> Vec<(String, u64)> {
        let mut f = Folder::new(per_thread, scope);
        for r in Records::new(TEXT) {
            if let Ok(Parsed::Event(e)) = parse_record(&r, 0) {
                f.add(&e);
            }
        }
        assert_eq!(f.samples(), 3);
        f.into_lines()
    }

    #[test]
    fn stacks_are_counted_root_first_in_scope() {
        assert_eq!(
            fold(false, TraceScope::User),
            [("main".to_string(), 1), ("main;leaf".to_string(), 2)]
        );
        assert_eq!(
            fold(false, TraceScope::UserAndKernel),
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
            fold(true, TraceScope::User),
            [
                ("a [1];main;leaf".to_string(), 1),
                ("a [2];main;leaf".to_string(), 1),
                ("b [3];main".to_string(), 1)
            ]
        );
    }
}
