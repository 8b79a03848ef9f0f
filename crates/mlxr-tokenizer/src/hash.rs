//! A small, fast, non-cryptographic hasher for the vocabulary maps (string
//! keys from a model file, not attacker-chosen input on a server path that
//! needs DoS resistance).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher {
    hash: u64,
}

const P1: u64 = 0x9E37_79B9_7F4A_7C15;
const P2: u64 = 0xA076_1D64_78BD_642F;
const P3: u64 = 0xE703_7ED1_A0B4_28DB;

/// 64x64 -> 128-bit multiply, folded to 64 bits (the wyhash mixing step).
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.hash = fold(
                self.hash ^ u64::from_le_bytes(c.try_into().expect("8 bytes")),
                P1,
            );
        }
        let rest = chunks.remainder();
        let mut tail = (rest.len() as u64) << 56;
        for (i, &b) in rest.iter().enumerate() {
            tail |= (b as u64) << (8 * i);
        }
        self.hash = fold(self.hash ^ tail, P2);
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.hash = fold(self.hash ^ i as u64, P2);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.hash = fold(self.hash ^ i as u64, P1);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.hash = fold(self.hash ^ i, P1);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.hash = fold(self.hash ^ i as u64, P1);
    }
    #[inline]
    fn finish(&self) -> u64 {
        fold(self.hash, P3)
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    #[test]
    fn hashes_spread() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let b = BuildHasherDefault::<super::FastHasher>::default();
        let mut seen = std::collections::HashSet::new();
        let mut low = std::collections::HashSet::new();
        for i in 0..262144u32 {
            let s = format!("tok{i}");
            let h = b.hash_one(s.as_str());
            seen.insert(h);
            low.insert(h & 0x3FFFF);
        }
        // No full collisions, and the low bits (hashbrown's buckets) spread well.
        assert_eq!(seen.len(), 262144);
        assert!(low.len() > 160_000, "{}", low.len());
    }
}
