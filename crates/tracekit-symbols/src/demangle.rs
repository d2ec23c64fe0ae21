//! Symbol names as people read them: Rust names (legacy or v0) without the
//! hash suffix, then Itanium C++ names (from C++ code linked into a Rust
//! program, or C++ programs); any other name as it is.

/// Demangles a Rust symbol name (legacy or v0), without its hash suffix, or
/// else an Itanium C++ name; any other name is returned as it is.
///
/// Rust comes first: a legacy Rust name is also a well-formed C++ name, which
/// C++ demangling would show with its hash.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle()
    {
        return d;
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_then_cpp() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(demangle("_Z3addii"), "add(int, int)");
        assert_eq!(demangle("main"), "main");
        // Not well-formed as either: kept as it is.
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }
}
