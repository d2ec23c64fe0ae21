//! Sets of allocations by ordinal (the n-th allocation event of a trace): what a
//! filter's clauses on objects' lives select. A quick pass finds the set
//! (`passes::objects`) and the analysis consults it (`Options::objects`), so the
//! type lives beneath both.

/// Allocations by ordinal (the n-th allocation event of the trace, from 0): a
/// bit each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocationSet {
    bits: Vec<u64>,
}

impl AllocationSet {
    pub(crate) fn insert(&mut self, n: u64) {
        let (word, bit) = ((n / 64) as usize, n % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << bit;
    }

    /// Whether allocation `n` is in the set.
    #[inline]
    pub fn contains(&self, n: u64) -> bool {
        self.bits
            .get((n / 64) as usize)
            .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }

    /// How many allocations are in the set.
    pub fn len(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
