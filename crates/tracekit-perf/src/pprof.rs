//! Sampled call stacks as a pprof CPU profile, as Go's CPU profiles are:
//!
//! | sample type | unit | per stack and thread |
//! | --- | --- | --- |
//! | `samples` | `count` | the samples of that stack |
//! | `cpu` | `nanoseconds` | samples times the sampling period |
//!
//! The stacks are [`crate::fold`]'s, a frame a location named as the
//! timeline names it (no file or line: perf's symbols carry none); each
//! sample carries its thread, `comm [tid]`, as the label `thread`. `cpu` is
//! there only when the recording says its period (perf.data recorded at a
//! frequency or with a clock event's period); `perf script` text does not.

use tracekit_pprof::{Builder, Frame, proto};

use crate::fold::Folded;

/// The CPU profile of `folded`, folded per thread (each stack's first frame
/// its thread), each sample standing for `period_ns` nanoseconds when known.
pub fn cpu_profile(folded: &Folded, period_ns: Option<u64>) -> proto::Profile {
    let types: &[(&str, &str)] = match period_ns {
        Some(_) => &[("samples", "count"), ("cpu", "nanoseconds")],
        None => &[("samples", "count")],
    };
    let mut b = Builder::new(types);
    if let Some(ns) = period_ns {
        b.period("cpu", "nanoseconds", i64::try_from(ns).unwrap_or(i64::MAX));
        b.default_sample_type("cpu");
    }
    let mut stack = Vec::new();
    for (line, n) in &folded.lines {
        let mut frames = line.split(';');
        let thread = frames.next().unwrap_or_default();
        stack.clear();
        for f in frames.rev() {
            stack.push(b.location(Frame {
                function: f,
                file: "",
                line: 0,
            }));
        }
        let count = i64::try_from(*n).unwrap_or(i64::MAX);
        let mut values = vec![count];
        if let Some(ns) = period_ns {
            values.push(count.saturating_mul(i64::try_from(ns).unwrap_or(i64::MAX)));
        }
        b.sample(&stack, &values, &[("thread", thread)]);
    }
    b.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stacks_become_samples_of_their_thread_innermost_first() {
        let folded = Folded {
            samples: 5,
            lines: vec![
                ("app [7];main;work".to_owned(), 3),
                ("app [8];main".to_owned(), 2),
            ],
            read: None,
        };
        let p = cpu_profile(&folded, Some(100_000));
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.sample[0].value, vec![3, 300_000]);
        let leaf = &p.location[(p.sample[0].location_id[0] - 1) as usize];
        let f = &p.function[(leaf.line[0].function_id - 1) as usize];
        assert_eq!(s(f.name), "work");
        assert_eq!(s(p.sample[1].label[0].str), "app [8]");
        assert_eq!(s(p.default_sample_type), "cpu");
        let text_only = cpu_profile(&folded, None);
        assert_eq!(text_only.sample_type.len(), 1);
        assert_eq!(text_only.sample[1].value, vec![2]);
    }
}
