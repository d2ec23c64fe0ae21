//! FNV-1a, 64 bits: a hash that is the same in every build and on every
//! platform (the standard library's is seeded per process), for what outlives
//! a process: cache keys, cache file names, trace ids.

/// The hash of no bytes: where a hash starts.
pub const START: u64 = 0xcbf2_9ce4_8422_2325;

const PRIME: u64 = 0x0000_0100_0000_01b3;

/// `h` (a hash so far, [`START`] for none) continued over `bytes`.
pub fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// A hash being computed, a piece at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(START)
    }
}

impl Fnv {
    /// A hash of nothing yet.
    pub fn new() -> Fnv {
        Fnv::default()
    }

    /// Hashes `bytes` after what was hashed before.
    pub fn write(&mut self, bytes: &[u8]) -> &mut Fnv {
        self.0 = fnv1a(bytes, self.0);
        self
    }

    /// The hash of everything written.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_pieces_hash_as_the_whole() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b"", START), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a", START), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar", START), 0x8594_4171_f739_67e8);
        let mut h = Fnv::new();
        h.write(b"foo").write(b"bar");
        assert_eq!(h.finish(), fnv1a(b"foobar", START));
    }
}
