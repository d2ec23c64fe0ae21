//! Which allocations count: the one filter every query, pass and scan of the trace
//! tables takes, as the command line and the viewer name its clauses.
//!
//! A filter's clauses combine with "and". They fall in three kinds, by what it
//! takes to decide them for an allocation:
//!
//! | clauses | decided from | when |
//! | --- | --- | --- |
//! | source, size, domain, allocated between | the allocation event alone | as it is met |
//! | location and function (`require`/`forbid`) | the locations of its backtrace | once per distinct backtrace, a bit per clause |
//! | collected between, never collected, lifetime, live between | its object's whole life | before the pass: a pass without backtraces over a reader, a scan of the tables' end column |
//!
//! The pass that decides the last kind gives the set of allocations (by ordinal, the
//! n-th allocation event of the trace) whose objects pass them,
//! `AllocationSet`, which the analysis then
//! consults (`Options::objects`).

use tracekit_memtrace::{AllocationSource, LocationCode, LocationTable, Timedelta};

/// Which allocations count; every clause must hold. [`Filter::default`] keeps
/// everything.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Filter {
    /// Keep only allocations from this source (repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub source: Vec<AllocationSource>,
    /// Keep only objects at least this large (the object's own size, length x word size;
    /// e.g. 4096, 64k, 1MiB).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SIZE", value_parser = crate::units::size_arg))]
    pub min_size: Option<u64>,
    /// Keep only objects at most this large (the object's own size).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SIZE", value_parser = crate::units::size_arg))]
    pub max_size: Option<u64>,
    /// Keep only allocations whose backtrace has a location containing this text
    /// (locations print as defname@file:line:start-end; repeatable: one for each).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SUBSTRING"))]
    pub location: Vec<String>,
    /// Leave out allocations whose backtrace has a location containing this text
    /// (repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SUBSTRING"))]
    pub forbid: Vec<String>,
    /// Keep only allocations whose backtrace has a frame in this function (its
    /// defname exactly; repeatable: a frame in each).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub function: Vec<String>,
    /// Leave out allocations whose backtrace has a frame in this function
    /// (repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub forbid_function: Vec<String>,
    /// Keep only allocations made by this domain (repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "ID"))]
    pub domain: Vec<u16>,
    /// Keep only allocations made between two times (inclusive).
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = crate::time::time_arg)
    )]
    pub between: Option<Vec<Timedelta>>,
    /// Keep only objects collected between two times (inclusive).
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = crate::time::time_arg)
    )]
    pub collected_between: Option<Vec<Timedelta>>,
    /// Keep only objects never collected.
    #[cfg_attr(feature = "clap", arg(long))]
    pub never_collected: bool,
    /// Keep only objects that lived this long (e.g. `0 10ms`; an object never
    /// collected lives until the end of the trace).
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 2, value_names = ["D1", "D2"], value_parser = crate::time::time_arg)
    )]
    pub lifetime: Option<Vec<Timedelta>>,
    /// Keep only objects live at some time between two times.
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = crate::time::time_arg)
    )]
    pub live_between: Option<Vec<Timedelta>>,
}

/// A filter that keeps nothing by construction, or more clauses than a pass follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// `between` ends before it starts.
    #[error("--between: {0} is after {1}")]
    EmptyRange(Timedelta, Timedelta),
    /// A time range of the option named ends before it starts.
    #[error("{0}: {1} is after {2}")]
    EmptyRangeOf(&'static str, Timedelta, Timedelta),
    /// More location and function clauses than a pass can follow.
    #[error("at most {MAX_LOCATION_CLAUSES} location and function clauses, not {0}")]
    TooManyClauses(usize),
    /// The size range's least size (bytes) is above its largest.
    #[error("--min-size {0} is above --max-size {1}")]
    EmptySizeRange(u64, u64),
}

/// Most location and function clauses a filter holds: a bit each in the masks a
/// pass keeps per backtrace.
pub const MAX_LOCATION_CLAUSES: usize = 8;

/// A pair of times from a two-value option.
fn pair(v: &Option<Vec<Timedelta>>) -> Option<(Timedelta, Timedelta)> {
    v.as_ref().and_then(|v| Some((*v.first()?, *v.get(1)?)))
}

/// Which location clauses a backtrace must pass, a bit per clause as
/// [`Filter::clause_matches`] numbers them: it is kept when its frames match every
/// `required` clause and no `forbidden` one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LocationMask {
    pub(crate) required: u8,
    pub(crate) forbidden: u8,
}

impl LocationMask {
    /// Whether a backtrace whose frames match the clauses `matched` is kept.
    #[inline]
    pub(crate) fn keeps(self, matched: u8) -> bool {
        matched & self.required == self.required && matched & self.forbidden == 0
    }
}

impl Filter {
    /// True when the filter keeps everything.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Checks that the filter can keep something (no time or size range ends before
    /// it starts) and that a pass can follow its clauses.
    pub fn check(&self) -> Result<(), FilterError> {
        if let Some((a, b)) = self.allocated_between()
            && a > b
        {
            return Err(FilterError::EmptyRange(a, b));
        }
        for (option, range) in [
            ("--collected-between", pair(&self.collected_between)),
            ("--lifetime", pair(&self.lifetime)),
            ("--live-between", pair(&self.live_between)),
        ] {
            if let Some((a, b)) = range
                && a > b
            {
                return Err(FilterError::EmptyRangeOf(option, a, b));
            }
        }
        if let Some(max) = self.max_size
            && self.min_size.unwrap_or(0) > max
        {
            return Err(FilterError::EmptySizeRange(self.min_size.unwrap_or(0), max));
        }
        let n = self.location_clauses();
        if n > MAX_LOCATION_CLAUSES {
            return Err(FilterError::TooManyClauses(n));
        }
        Ok(())
    }

    /// The filter in words, a clause each (`source minor`, `objects of at least 64.0
    /// KiB`, ...), for report headers.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.source {
            out.push(format!("source {}", s.name()));
        }
        if let Some(min) = self.min_size.filter(|&m| m > 0) {
            out.push(format!(
                "objects of at least {}",
                crate::units::human_bytes(min as f64)
            ));
        }
        if let Some(max) = self.max_size {
            out.push(format!(
                "objects of at most {}",
                crate::units::human_bytes(max as f64)
            ));
        }
        out.extend(
            self.location
                .iter()
                .map(|t| format!("backtrace location contains {t:?}")),
        );
        out.extend(
            self.function
                .iter()
                .map(|f| format!("a frame in function {f:?}")),
        );
        out.extend(
            self.forbid
                .iter()
                .map(|t| format!("no backtrace location contains {t:?}")),
        );
        out.extend(
            self.forbid_function
                .iter()
                .map(|f| format!("no frame in function {f:?}")),
        );
        if let Some((a, b)) = pair(&self.collected_between) {
            out.push(format!("collected between {a} and {b}"));
        }
        if self.never_collected {
            out.push("never collected".to_string());
        }
        if let Some((a, b)) = pair(&self.lifetime) {
            out.push(format!("living between {a} and {b}"));
        }
        if let Some((a, b)) = pair(&self.live_between) {
            out.push(format!("live at some time between {a} and {b}"));
        }
        for d in &self.domain {
            out.push(format!("domain {d}"));
        }
        if let Some((a, b)) = self.allocated_between() {
            out.push(format!("allocated between {a} and {b}"));
        }
        out
    }

    /// The time range allocations must be made in, if any.
    pub fn allocated_between(&self) -> Option<(Timedelta, Timedelta)> {
        pair(&self.between)
    }

    /// How many location and function clauses there are.
    pub fn location_clauses(&self) -> usize {
        self.location.len() + self.function.len() + self.forbid.len() + self.forbid_function.len()
    }

    /// The location and function clauses as the bits of a mask, the required ones
    /// first; `None` without clauses, or with more than a mask holds (which
    /// [`Filter::check`] refuses; a pass then follows none).
    pub(crate) fn location_mask(&self) -> Option<LocationMask> {
        let n = self.location_clauses();
        if n == 0 || n > MAX_LOCATION_CLAUSES {
            return None;
        }
        let bits = |from: usize, k: usize| ((1u16 << (from + k)) - (1u16 << from)) as u8;
        let required = self.location.len() + self.function.len();
        Some(LocationMask {
            required: bits(0, required),
            forbidden: bits(required, n - required),
        })
    }

    /// The location and function clauses that `code`'s locations match, a bit each
    /// in the order of [`Filter::location_mask`]: `location`, `function`, `forbid`,
    /// `forbid_function`. Locations print as `defname@file:line:start-end`, or
    /// `$code` for a code without any.
    pub(crate) fn clause_matches(&self, table: &LocationTable, code: LocationCode) -> u8 {
        let locs = table.get(code).unwrap_or(&[]);
        let printed: Vec<String> = match locs.is_empty() {
            true => vec![format!("${}", code.get())],
            false => locs.iter().map(|l| l.to_string()).collect(),
        };
        let contains = |text: &String| printed.iter().any(|p| p.contains(text.as_str()));
        let function = |name: &String| locs.iter().any(|l| l.defname.to_string() == *name);
        let hits = (self.location.iter().map(contains))
            .chain(self.function.iter().map(function))
            .chain(self.forbid.iter().map(contains))
            .chain(self.forbid_function.iter().map(function));
        hits.enumerate()
            .take(MAX_LOCATION_CLAUSES)
            .fold(0, |mask, (i, hit)| if hit { mask | 1 << i } else { mask })
    }

    /// The filter without its location and function clauses, for a pass told by
    /// other means which backtraces pass them.
    pub(crate) fn without_location_clauses(&self) -> Filter {
        Filter {
            location: Vec::new(),
            function: Vec::new(),
            forbid: Vec::new(),
            forbid_function: Vec::new(),
            ..self.clone()
        }
    }

    /// Whether there are clauses on the objects' lives.
    pub fn has_life_clauses(&self) -> bool {
        self.collected_between.is_some()
            || self.never_collected
            || self.lifetime.is_some()
            || self.live_between.is_some()
    }

    /// Whether an object allocated at `alloc` and collected at `collect` (`None`:
    /// never; the trace ends at `end`) passes every clause on objects' lives.
    pub fn keeps_life(&self, alloc: Timedelta, collect: Option<Timedelta>, end: Timedelta) -> bool {
        let within = |t: Timedelta, (a, b): (Timedelta, Timedelta)| a <= t && t <= b;
        if let Some(range) = pair(&self.collected_between)
            && !collect.is_some_and(|c| within(c, range))
        {
            return false;
        }
        if self.never_collected && collect.is_some() {
            return false;
        }
        if let Some((lo, hi)) = pair(&self.lifetime) {
            let until = collect.unwrap_or(end).max(alloc);
            let life = Timedelta::from_micros(until.as_micros().saturating_sub(alloc.as_micros()));
            if !(lo <= life && life <= hi) {
                return false;
            }
        }
        if let Some((from, to)) = pair(&self.live_between)
            && !(alloc <= to && collect.is_none_or(|c| c > from))
        {
            return false;
        }
        true
    }
}

/// The object lengths, in words, the size clauses keep (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WordRange {
    pub(crate) min: u64,
    pub(crate) max: u64,
}

impl WordRange {
    /// The lengths whose size in bytes, at `word_bytes` a word, `filter` keeps.
    pub(crate) fn of(filter: &Filter, word_bytes: u64) -> WordRange {
        let word_bytes = word_bytes.max(1);
        WordRange {
            min: filter.min_size.unwrap_or(0).div_ceil(word_bytes),
            max: filter.max_size.map_or(u64::MAX, |b| b / word_bytes),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn us(t: i64) -> Timedelta {
        Timedelta::from_micros(t)
    }

    #[test]
    fn filters_in_words() {
        assert!(Filter::default().describe().is_empty());
        let f = Filter {
            source: vec![AllocationSource::Minor, AllocationSource::External],
            min_size: Some(65536),
            max_size: Some(1 << 20),
            domain: vec![2],
            between: Some(vec![us(1_500_000), us(2_000_000)]),
            location: vec!["Hashtbl".into()],
            never_collected: true,
            ..Filter::default()
        };
        assert_eq!(
            f.describe(),
            [
                "source minor",
                "source external",
                "objects of at least 64.0 KiB",
                "objects of at most 1.00 MiB",
                "backtrace location contains \"Hashtbl\"",
                "never collected",
                "domain 2",
                "allocated between 1.5s and 2s",
            ]
        );
        assert!(f.check().is_ok());
    }

    #[test]
    fn a_filter_that_keeps_nothing_is_refused() {
        let check = |f: fn(&mut Filter)| {
            let mut filter = Filter::default();
            f(&mut filter);
            filter.check()
        };
        assert_eq!(
            check(|f| f.between = Some(vec![us(2), us(1)])),
            Err(FilterError::EmptyRange(us(2), us(1)))
        );
        assert_eq!(
            check(|f| f.lifetime = Some(vec![us(2), us(1)])),
            Err(FilterError::EmptyRangeOf("--lifetime", us(2), us(1)))
        );
        assert_eq!(
            check(|f| (f.min_size, f.max_size) = (Some(49), Some(48))),
            Err(FilterError::EmptySizeRange(49, 48))
        );
        assert_eq!(
            check(|f| f.forbid = vec!["a".into(); MAX_LOCATION_CLAUSES + 1]),
            Err(FilterError::TooManyClauses(MAX_LOCATION_CLAUSES + 1))
        );
        assert_eq!(
            check(|f| f.forbid = vec!["a".into(); MAX_LOCATION_CLAUSES]),
            Ok(())
        );
    }

    #[test]
    fn clauses_are_numbered_required_first() {
        let f = Filter {
            forbid_function: vec!["g".into()],
            location: vec!["a.ml".into()],
            forbid: vec!["b.ml".into()],
            function: vec!["f".into()],
            ..Filter::default()
        };
        // location, function | forbid, forbid_function.
        assert_eq!(
            f.location_mask(),
            Some(LocationMask {
                required: 0b0011,
                forbidden: 0b1100,
            })
        );
        let table = LocationTable::default();
        // A code without locations prints as `$code`.
        let only = Filter {
            forbid: vec!["$7".into()],
            location: vec!["$".into()],
            ..Filter::default()
        };
        assert_eq!(only.clause_matches(&table, LocationCode::new(7)), 0b11);
        assert_eq!(only.clause_matches(&table, LocationCode::new(8)), 0b01);
        assert_eq!(Filter::default().location_mask(), None);
    }

    #[test]
    fn clauses_decide_on_the_whole_life() {
        let end = us(100);
        let c = |f: fn(&mut Filter)| {
            let mut l = Filter::default();
            f(&mut l);
            assert!(l.has_life_clauses());
            l
        };
        let collected = c(|l| l.collected_between = Some(vec![us(20), us(30)]));
        assert!(collected.keeps_life(us(0), Some(us(20)), end));
        assert!(collected.keeps_life(us(0), Some(us(30)), end));
        assert!(!collected.keeps_life(us(0), Some(us(31)), end));
        assert!(!collected.keeps_life(us(0), None, end));
        let never = c(|l| l.never_collected = true);
        assert!(never.keeps_life(us(5), None, end));
        assert!(!never.keeps_life(us(5), Some(us(6)), end));
        let lifetime = c(|l| l.lifetime = Some(vec![us(10), us(50)]));
        assert!(lifetime.keeps_life(us(0), Some(us(10)), end));
        assert!(!lifetime.keeps_life(us(0), Some(us(9)), end));
        assert!(lifetime.keeps_life(us(60), None, end), "40 until the end");
        assert!(!lifetime.keeps_life(us(20), None, end), "80 until the end");
        let live = c(|l| l.live_between = Some(vec![us(40), us(50)]));
        assert!(live.keeps_life(us(10), Some(us(41)), end));
        assert!(
            !live.keeps_life(us(10), Some(us(40)), end),
            "collected at the start"
        );
        assert!(live.keeps_life(us(50), None, end));
        assert!(!live.keeps_life(us(51), None, end));
        assert!(!Filter::default().has_life_clauses());
        assert!(Filter::default().keeps_life(us(1), None, end));
    }
}
