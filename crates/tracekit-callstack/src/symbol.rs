//! Interned symbols: the trace writer keeps call stacks as small [`SymbolId`]s and
//! compares them with incoming locations without allocating.

use crate::event::{Address, Location, Symbol};

/// A symbol interned in a [`SymbolTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolId(pub u32);

impl SymbolId {
    /// `[unknown]`: a location perf could not resolve.
    pub(crate) const UNKNOWN: SymbolId = SymbolId(0);
    /// `[untraced]`.
    pub(crate) const UNTRACED: SymbolId = SymbolId(1);
    /// `[returned]`.
    pub(crate) const RETURNED: SymbolId = SymbolId(2);
    /// `[syscall]`.
    pub(crate) const SYSCALL: SymbolId = SymbolId(3);
}

/// What an interned symbol is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Perf,
    UnknownInDso { ip: Address, dso: Box<str> },
    Synthetic,
}

pub(crate) use rustc_hash::FxHashMap;

/// Symbols seen so far, with their display names.
#[derive(Clone, Debug)]
pub struct SymbolTable {
    entries: Vec<(Entry, Box<str>)>,
    perf: FxHashMap<Box<str>, SymbolId>,
    unknown_in_dso: FxHashMap<u64, Vec<SymbolId>>,
}

impl Default for SymbolTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SymbolTable {
    /// A table holding only the synthetic symbols.
    pub(crate) fn new() -> Self {
        let synthetic = |name: &str| (Entry::Synthetic, Box::from(name));
        SymbolTable {
            entries: vec![
                synthetic("[unknown]"),
                synthetic("[untraced]"),
                synthetic("[returned]"),
                synthetic("[syscall]"),
            ],
            perf: FxHashMap::default(),
            unknown_in_dso: FxHashMap::default(),
        }
    }

    /// Number of symbols, synthetic ones included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: the synthetic symbols are always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn push(&mut self, entry: Entry, display: Box<str>) -> SymbolId {
        let id = SymbolId(u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        self.entries.push((entry, display));
        id
    }

    /// Interns a location's symbol. `hint` is checked first (usually the symbol on top
    /// of the stack, which most branches stay within).
    #[inline]
    pub(crate) fn intern(&mut self, loc: &Location<'_>, hint: Option<SymbolId>) -> SymbolId {
        if let Some(h) = hint.filter(|&h| self.matches(h, loc)) {
            return h;
        }
        match loc.symbol {
            Symbol::Perf(name) => {
                if let Some(&id) = self.perf.get(name) {
                    return id;
                }
                let id = self.push(Entry::Perf, Box::from(name));
                self.perf.insert(Box::from(name), id);
                id
            }
            Symbol::UnknownInDso(dso) => {
                if let Some(ids) = self.unknown_in_dso.get(&loc.ip.0) {
                    for &id in ids {
                        if matches!(&self.entries[id.0 as usize].0, Entry::UnknownInDso { dso: d, .. } if &**d == dso)
                        {
                            return id;
                        }
                    }
                }
                let id = self.push(
                    Entry::UnknownInDso {
                        ip: loc.ip,
                        dso: Box::from(dso),
                    },
                    loc.display_name().into_boxed_str(),
                );
                self.unknown_in_dso.entry(loc.ip.0).or_default().push(id);
                id
            }
            Symbol::Unknown => SymbolId::UNKNOWN,
            Symbol::Untraced => SymbolId::UNTRACED,
            Symbol::Returned => SymbolId::RETURNED,
            Symbol::Syscall => SymbolId::SYSCALL,
        }
    }

    /// Whether `id` is the symbol of `loc` (magic-trace's symbol equality).
    #[inline]
    pub(crate) fn matches(&self, id: SymbolId, loc: &Location<'_>) -> bool {
        let Some((entry, display)) = self.entries.get(id.0 as usize) else {
            return false;
        };
        match (entry, loc.symbol) {
            (Entry::Perf, Symbol::Perf(name)) => &**display == name,
            (Entry::UnknownInDso { ip, dso }, Symbol::UnknownInDso(d)) => {
                *ip == loc.ip && &**dso == d
            }
            (Entry::Synthetic, Symbol::Unknown) => id == SymbolId::UNKNOWN,
            (Entry::Synthetic, Symbol::Untraced) => id == SymbolId::UNTRACED,
            (Entry::Synthetic, Symbol::Returned) => id == SymbolId::RETURNED,
            (Entry::Synthetic, Symbol::Syscall) => id == SymbolId::SYSCALL,
            _ => false,
        }
    }

    /// The display name of a symbol (`[unknown @ 0x.. (dso)]` for unknown symbols in a DSO).
    #[inline]
    pub fn name(&self, id: SymbolId) -> &str {
        self.entries
            .get(id.0 as usize)
            .map_or("[unknown]", |e| &e.1)
    }

    /// True if `id` is the perf symbol named `name`.
    pub(crate) fn is_perf_named(&self, id: SymbolId, name: &str) -> bool {
        matches!(self.entries.get(id.0 as usize), Some((Entry::Perf, n)) if &**n == name)
    }

    /// S-expression of the symbol as magic-trace's `Symbol.t` (for event dumps).
    pub(crate) fn sexp(&self, id: SymbolId) -> String {
        match self.entries.get(id.0 as usize) {
            Some((Entry::Synthetic, _)) => match id {
                SymbolId::UNTRACED => "Untraced".into(),
                SymbolId::RETURNED => "Returned".into(),
                SymbolId::SYSCALL => "Syscall".into(),
                _ => "Unknown".into(),
            },
            Some((_, name)) => format!("(From_perf {})", crate::sexp::atom(name)),
            None => "Unknown".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_and_matches() {
        let mut t = SymbolTable::new();
        let a = Location {
            ip: Address(5),
            symbol: Symbol::Perf("main"),
            offset: 0,
            inlined: false,
        };
        let id = t.intern(&a, None);
        assert_eq!(t.intern(&a, Some(SymbolId::UNKNOWN)), id);
        assert_eq!(t.intern(&a, Some(id)), id);
        assert_eq!(t.name(id), "main");
        assert!(t.is_perf_named(id, "main"));
        let u = Location {
            ip: Address(0xffff_ffff_9720_1100),
            symbol: Symbol::UnknownInDso("[unknown]"),
            offset: 0,
            inlined: false,
        };
        let uid = t.intern(&u, None);
        assert_eq!(t.name(uid), "[unknown @ -0x68dfef00 ([unknown])]");
        assert_eq!(t.intern(&u, None), uid);
        let u2 = Location {
            ip: Address(1),
            ..u
        };
        assert_ne!(t.intern(&u2, None), uid);
        assert!(!t.matches(uid, &u2));
        assert!(t.matches(SymbolId::UNKNOWN, &Location::synthetic(Symbol::Unknown)));
        assert!(!t.matches(SymbolId::UNKNOWN, &Location::synthetic(Symbol::Untraced)));
        assert!(!t.matches(SymbolId(999), &a));
        assert_eq!(t.sexp(SymbolId::UNTRACED), "Untraced");
        assert_eq!(t.sexp(id), "(From_perf main)");
    }
}
