//! OCaml exception (trap) information: the addresses of the compiler's pushtrap,
//! poptrap and entertrap instructions (`.note.ocaml_eh` in OxCaml executables). The
//! trace writer uses them to follow `try ... with` blocks precisely (magic-trace's
//! `src/ocaml_exception_info.ml` and its use in `src/trace_writer.ml`).

use crate::event::Address;

/// Whether a trap address pushes or pops a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TrapKind {
    /// Entering a `try` block.
    Pushtrap,
    /// Leaving it normally.
    Poptrap,
}

/// Trap addresses, sorted for range queries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OcamlExceptionInfo {
    /// Pushtrap and poptrap addresses ordered as signed 64-bit numbers (as magic-trace).
    traps: Vec<(i64, TrapKind)>,
    entertraps: Vec<i64>,
}

impl OcamlExceptionInfo {
    /// Builds the tables.
    pub fn new(pushtraps: &[u64], poptraps: &[u64], entertraps: &[u64]) -> Self {
        let mut traps: Vec<(i64, TrapKind)> = pushtraps
            .iter()
            .map(|&a| (a as i64, TrapKind::Pushtrap))
            .chain(poptraps.iter().map(|&a| (a as i64, TrapKind::Poptrap)))
            .collect();
        // Stable, so equal addresses keep pushtraps first as in magic-trace's concat+sort.
        traps.sort_by_key(|&(a, _)| a);
        let mut entertraps: Vec<i64> = entertraps.iter().map(|&a| a as i64).collect();
        entertraps.sort_unstable();
        OcamlExceptionInfo { traps, entertraps }
    }

    /// The traps with `from <= address <= to`, in ascending order.
    pub(crate) fn traps_in_range(&self, from: Address, to: Address) -> &[(i64, TrapKind)] {
        let (from, to) = (from.as_signed(), to.as_signed());
        let lo = self.traps.partition_point(|&(a, _)| a < from);
        let hi = self.traps.partition_point(|&(a, _)| a <= to);
        self.traps.get(lo..hi).unwrap_or(&[])
    }

    /// Whether `addr` is an entertrap (a handler entry).
    pub(crate) fn is_entertrap(&self, addr: Address) -> bool {
        self.entertraps.binary_search(&addr.as_signed()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_queries() {
        let t = OcamlExceptionInfo::new(&[0, 5, 10], &[2, 100], &[50]);
        let r = |a, b| {
            t.traps_in_range(Address(a), Address(b))
                .iter()
                .map(|&(a, k)| (a, k == TrapKind::Pushtrap))
                .collect::<Vec<_>>()
        };
        assert_eq!(r(0, 1), vec![(0, true)]);
        assert_eq!(r(0, 4), vec![(0, true), (2, false)]);
        assert_eq!(r(3, 7), vec![(5, true)]);
        assert_eq!(r(49, 100), vec![(100, false)]);
        assert_eq!(r(75, 80), vec![]);
        assert_eq!(r(150, 200), vec![]);
        assert_eq!(r(200, 150), vec![]);
        assert!(t.is_entertrap(Address(50)));
        assert!(!t.is_entertrap(Address(51)));
    }
}
