//! The iteration order of llama.cpp's `std::unordered_map<std::string, int>
//! token_to_id` as built by GNU libstdc++ (the C++ library of the Linux
//! builds the reference outputs come from).
//!
//! llama.cpp finds some special tokens (end of turn, fill-in-the-middle ...)
//! by walking that map and keeping the first token whose text matches. When a
//! vocabulary has several matching texts (Llama 3 has both `<|eot_id|>` and
//! `<|end_of_text|>`), which one wins depends on the map's internal order. To
//! give the same answer we replay the map's construction: libstdc++'s string
//! hash, its prime bucket counts and growth policy, and where it links each
//! new node. This runs only when a choice has to be made.

/// libstdc++'s bucket counts (`std::__detail::__prime_list`), up to 2^32.
const PRIMES: &[u64] = &[
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97,
    103, 109, 113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313,
    337, 359, 383, 409, 439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109,
    1193, 1289, 1381, 1493, 1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739,
    4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011,
    12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223,
    35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203,
    99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897,
    256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903,
    658753, 712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153,
    1565659, 1693859, 1832561, 1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303,
    3439651, 3721303, 4026031, 4355707, 4712381, 5098259, 5515729, 5967347, 6456007, 6984629,
    7556579, 8175383, 8844859, 9569143, 10352717, 11200489, 12117689, 13109983, 14183539, 15345007,
    16601593, 17961079, 19431899, 21023161, 22744717, 24607243, 26622317, 28802401, 31160981,
    33712729, 36473443, 39460231, 42691603, 46187573, 49969847, 54061849, 58488943, 63278561,
    68460391, 74066549, 80131819, 86693767, 93793069, 101473717, 109783337, 118773397, 128499677,
    139022417, 150406843, 162723577, 176048909, 190465427, 206062531, 222936881, 241193053,
    260944219, 282312799, 305431229, 330442829, 357502601, 386778277, 418451333, 452718089,
    489790921, 529899637, 573292817, 620239453, 671030513, 725980837, 785430967, 849749479,
    919334987, 994618837, 1076067617, 1164186217, 1259520799, 1362662261, 1474249943, 1594975441,
    1725587117, 1866894511, 2019773507, 2185171673, 2364114217, 2557710269, 2767159799, 2993761039,
    3238918481, 3504151727, 3791104843, 4101556399, 4294967291,
];

/// Small bucket counts libstdc++ picks without searching the prime list.
const FAST_BUCKETS: [u64; 14] = [2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13];

/// `std::hash<std::string>` of libstdc++ on 64-bit targets (`_Hash_bytes`
/// with seed 0xc70f6907: a MurmurHash2 variant).
pub(crate) fn std_string_hash(bytes: &[u8]) -> u64 {
    const MUL: u64 = (0xc6a4_a793u64 << 32) + 0x5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let len = bytes.len();
    let mut hash = 0xc70f_6907u64 ^ (len as u64).wrapping_mul(MUL);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let data = shift_mix(u64::from_le_bytes(c.try_into().expect("8 bytes")).wrapping_mul(MUL))
            .wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut data = 0u64;
        for &b in rest.iter().rev() {
            data = (data << 8) + b as u64;
        }
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

const NIL: u32 = u32::MAX;
/// A bucket whose "node before" is the list head.
const BEFORE_BEGIN: u32 = u32::MAX - 1;

/// A replay of a libstdc++ unordered map with unique keys.
struct Replay {
    hashes: Vec<u64>,
    next: Vec<u32>,
    head: u32,
    buckets: Vec<u32>,
    next_resize: u64,
    count: u64,
}

impl Replay {
    fn next_of(&self, before: u32) -> u32 {
        if before == BEFORE_BEGIN {
            self.head
        } else {
            self.next[before as usize]
        }
    }

    fn set_next(&mut self, before: u32, node: u32) {
        if before == BEFORE_BEGIN {
            self.head = node;
        } else {
            self.next[before as usize] = node;
        }
    }

    fn bucket(&self, node: u32) -> usize {
        (self.hashes[node as usize] % self.buckets.len() as u64) as usize
    }

    /// `_Prime_rehash_policy::_M_next_bkt` (max load factor 1).
    fn next_bucket_count(&mut self, n: u64) -> u64 {
        if n < FAST_BUCKETS.len() as u64 {
            if n == 0 {
                return 1;
            }
            let b = FAST_BUCKETS[n as usize];
            self.next_resize = b;
            return b;
        }
        // Search from the 7th prime; the last one is never passed.
        let last = PRIMES.len() - 1;
        let i = 6 + PRIMES[6..last].partition_point(|&p| p < n);
        if i == last {
            self.next_resize = u64::MAX;
        } else {
            self.next_resize = PRIMES[i];
        }
        PRIMES[i]
    }

    /// `_Prime_rehash_policy::_M_need_rehash` for one insertion.
    fn need_rehash(&mut self) -> Option<u64> {
        let n_bkt = self.buckets.len() as u64;
        if self.count + 1 > self.next_resize {
            let min_bkts = (self.count + 1).max(if self.next_resize == 0 { 11 } else { 0 });
            if min_bkts >= n_bkt {
                return Some(self.next_bucket_count((min_bkts + 1).max(n_bkt * 2)));
            }
            self.next_resize = n_bkt;
        }
        None
    }

    fn rehash(&mut self, n: u64) {
        self.buckets = vec![NIL; n as usize];
        let mut p = self.head;
        self.head = NIL;
        let mut bbegin_bkt = 0usize;
        while p != NIL {
            let following = self.next[p as usize];
            let bkt = self.bucket(p);
            if self.buckets[bkt] == NIL {
                self.next[p as usize] = self.head;
                self.head = p;
                self.buckets[bkt] = BEFORE_BEGIN;
                if self.next[p as usize] != NIL {
                    self.buckets[bbegin_bkt] = p;
                }
                bbegin_bkt = bkt;
            } else {
                let before = self.buckets[bkt];
                let after = self.next_of(before);
                self.next[p as usize] = after;
                self.set_next(before, p);
            }
            p = following;
        }
    }

    fn insert(&mut self, node: u32) {
        if let Some(n) = self.need_rehash() {
            self.rehash(n);
        }
        let bkt = self.bucket(node);
        if self.buckets[bkt] != NIL {
            let before = self.buckets[bkt];
            self.next[node as usize] = self.next_of(before);
            self.set_next(before, node);
        } else {
            self.next[node as usize] = self.head;
            self.head = node;
            let old_first = self.next[node as usize];
            if old_first != NIL {
                let b = self.bucket(old_first);
                self.buckets[b] = node;
            }
            self.buckets[bkt] = BEFORE_BEGIN;
        }
        self.count += 1;
    }
}

/// The position of every key in the iteration order of a libstdc++
/// `unordered_map` into which `keys` (distinct) were inserted in order.
pub(crate) fn iteration_positions<'a>(keys: impl ExactSizeIterator<Item = &'a str>) -> Vec<u32> {
    let n = keys.len();
    let mut r = Replay {
        hashes: keys.map(|k| std_string_hash(k.as_bytes())).collect(),
        next: vec![NIL; n],
        head: NIL,
        buckets: vec![NIL; 1],
        next_resize: 0,
        count: 0,
    };
    for id in 0..n as u32 {
        r.insert(id);
    }
    let mut pos = vec![0u32; n];
    let mut p = r.head;
    let mut i = 0u32;
    while p != NIL {
        pos[p as usize] = i;
        i += 1;
        p = r.next[p as usize];
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_matches_libstdcxx() {
        // Values printed by `std::hash<std::string>{}` with GCC 12's libstdc++.
        assert_eq!(std_string_hash(b""), 6142509188972423790);
        assert_eq!(std_string_hash(b"hello"), 2762169579135187400);
        assert_eq!(std_string_hash(b"<|eot_id|>"), 16025401802141084834);
    }

    #[test]
    fn small_map_order() {
        // Order printed by iterating an unordered_map<string,int> filled with
        // "a".."j" in order, with GCC 12's libstdc++.
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
        let pos = iteration_positions(keys.iter().copied());
        let mut order: Vec<&str> = keys.to_vec();
        order.sort_by_key(|k| pos[keys.iter().position(|x| x == k).unwrap()]);
        assert_eq!(order.concat(), EXPECTED_SMALL_ORDER);
    }

    const EXPECTED_SMALL_ORDER: &str = "jgfiechbda";
}
