//! Rust function names as people read them in a report: without generic
//! arguments by default, closures called closures.
//!
//! Debug information names an inlined function with its generic arguments
//! (`collect<core::iter::adapters::map::Map<core::ops::range::Range<u32>,
//! heapdemo::churn::{closure_env#0}>, alloc::vec::Vec<u8>>`), which makes a
//! frame unreadable and splits one function into as many frames as it has
//! instances. [`short_name`] drops the arguments (`collect`); [`full_name`]
//! keeps them but writes a closure's type, `{closure_env#0}`, as the closure
//! it is, `{closure#0}`. A legacy symbol's `{{closure}}` is `{closure}` in
//! both.

/// `name` without generic arguments: `alloc::vec::Vec<T,A>::push` and
/// `<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop::<u8>` become
/// `alloc::vec::Vec::push` and `<alloc::vec::Vec as core::ops::drop::Drop>::drop`.
/// A `<` that opens a path segment (`<T as Trait>`) is kept.
pub fn strip_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.char_indices();
    while let Some((i, c)) = chars.next() {
        // `<impl Trait for T>` (a legacy symbol's impl segment) is a path
        // segment, whatever precedes it.
        let impl_segment = c == '<' && name.get(i + 1..).is_some_and(|r| r.starts_with("impl "));
        let arguments = c == '<'
            && !impl_segment
            && out
                .chars()
                .next_back()
                .is_some_and(|p| p.is_alphanumeric() || matches!(p, '_' | '}' | ':'));
        if !arguments {
            out.push(c);
            continue;
        }
        if out.ends_with("::") {
            // A turbofish, `f::<T>`.
            out.truncate(out.len() - 2);
        }
        let mut depth = 1usize;
        let mut prev = c;
        for (_, c) in chars.by_ref() {
            match c {
                '<' => depth += 1,
                // `->` in a function type is no bracket.
                '>' if prev != '-' => depth -= 1,
                _ => {}
            }
            prev = c;
            if depth == 0 {
                break;
            }
        }
    }
    out
}

/// `name` as a report shows it by default: without generic arguments, a
/// legacy symbol's `{{closure}}` written `{closure}`, and an inherent
/// method's type as a path segment (`<alloc::vec::Vec>::push` is
/// `alloc::vec::Vec::push`), so that a function has one name whether its
/// symbol is mangled the legacy way (the precompiled standard library) or
/// the v0 way.
pub fn short_name(name: &str) -> String {
    unwrap_self_types(&full_name(&strip_generics(name)))
}

/// Writes `<p>::` as `p::` where `p` is a plain path (an inherent impl's
/// type, its generic arguments gone): `<T as Trait>`, `<impl ..>`, `<&T>` and
/// `<[T]>` stay.
fn unwrap_self_types(name: &str) -> String {
    if !name.contains('<') {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(open) = rest.find('<') {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        let segment_start = out.is_empty() || out.ends_with("::");
        let inner = from[1..].find('>').map(|close| &from[1..1 + close]);
        match inner {
            Some(p)
                if segment_start
                    && !p.is_empty()
                    && p.chars().all(|c| {
                        c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | '}' | '#')
                    })
                    && from[p.len() + 2..].starts_with("::") =>
            {
                out.push_str(p);
                rest = &from[p.len() + 2..];
            }
            _ => {
                out.push('<');
                rest = &from[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `name` with its generic arguments, closures' types (`{closure_env#0}`)
/// written as closures (`{closure#0}`) and `{{closure}}` as `{closure}`.
pub fn full_name(name: &str) -> String {
    if !name.contains("{closure_env#") && !name.contains("{{closure}}") {
        return name.to_owned();
    }
    name.replace("{closure_env#", "{closure#")
        .replace("{{closure}}", "{closure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_arguments_go_qualified_paths_stay() {
        assert_eq!(
            strip_generics("alloc::raw_vec::RawVecInner<A>::reserve::do_reserve_and_handle"),
            "alloc::raw_vec::RawVecInner::reserve::do_reserve_and_handle"
        );
        assert_eq!(
            strip_generics("<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop"),
            "<alloc::vec::Vec as core::ops::drop::Drop>::drop"
        );
        assert_eq!(
            strip_generics("<alloc::vec::Vec<u8>>::push::<u8>"),
            "<alloc::vec::Vec>::push"
        );
        assert_eq!(
            strip_generics("reserve<u64, alloc::alloc::Global>"),
            "reserve"
        );
        assert_eq!(strip_generics("call_once<fn() -> u8, ()>"), "call_once");
        assert_eq!(strip_generics("{closure#0}<u64>"), "{closure#0}");
        assert_eq!(
            strip_generics("core::array::<impl core::fmt::Debug for alloc::vec::Vec<T>>::fmt"),
            "core::array::<impl core::fmt::Debug for alloc::vec::Vec>::fmt"
        );
        assert_eq!(
            strip_generics("<&T as core::fmt::Debug>::fmt"),
            "<&T as core::fmt::Debug>::fmt"
        );
    }

    #[test]
    fn short_and_full_names() {
        assert_eq!(
            short_name(
                "collect<core::iter::adapters::map::Map<core::ops::range::Range<u32>, \
                 heapdemo::churn::{closure_env#0}>, alloc::vec::Vec<u8>>"
            ),
            "collect"
        );
        assert_eq!(
            short_name("alloc::vec::Vec<T,A>::with_capacity"),
            "alloc::vec::Vec::with_capacity"
        );
        assert_eq!(short_name("app::main::{{closure}}"), "app::main::{closure}");
        assert_eq!(
            full_name("call_once<app::main::{closure_env#1}, ()>"),
            "call_once<app::main::{closure#1}, ()>"
        );
        assert_eq!(full_name("app::run"), "app::run");
    }

    #[test]
    fn an_inherent_method_is_named_alike_in_both_manglings() {
        // v0 and legacy symbols of one method.
        assert_eq!(
            short_name("<alloc::raw_vec::RawVecInner<A>>::try_allocate_in"),
            "alloc::raw_vec::RawVecInner::try_allocate_in"
        );
        assert_eq!(
            short_name("alloc::raw_vec::RawVecInner<A>::try_allocate_in"),
            "alloc::raw_vec::RawVecInner::try_allocate_in"
        );
        assert_eq!(
            short_name("<alloc::vec::Vec<u8>>::push::{closure#0}"),
            "alloc::vec::Vec::push::{closure#0}"
        );
        // Trait impls, impl blocks of other types and references stay.
        for kept in [
            "<alloc::vec::Vec as core::ops::drop::Drop>::drop",
            "alloc::slice::<impl [T]>::repeat",
            "<&T as core::fmt::Debug>::fmt",
            "<[u8]>::to_vec",
            "core::ptr::drop_in_place<alloc::vec::Vec>",
        ] {
            assert_eq!(short_name(kept), strip_generics(kept), "{kept}");
        }
        // Full names keep what the symbol says.
        assert_eq!(
            full_name("<alloc::vec::Vec<u8>>::push"),
            "<alloc::vec::Vec<u8>>::push"
        );
    }
}
