//! Byte-pair merging of one pre-tokenized word (llama.cpp's BPE session).
//!
//! The word starts as one symbol per UTF-8 character (for byte-level BPE each
//! character stands for one byte). The adjacent pair with the lowest merge
//! rank is merged first, ties going to the left-most pair; merged symbols do
//! not have to be vocabulary tokens. A finished symbol that is not a token
//! falls back to per-byte tokens, silently dropping bytes that have none.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::hash::FastMap;

/// Merge ranks: `left right` strings from `tokenizer.ggml.merges`, rank =
/// position (the first occurrence wins for duplicates).
#[derive(Debug, Default)]
pub(crate) struct BpeRanks {
    /// Interned merge operands.
    parts: FastMap<Box<str>, u32>,
    ranks: FastMap<(u32, u32), u32>,
}

impl BpeRanks {
    pub(crate) fn new(merges: &[String]) -> BpeRanks {
        let mut r = BpeRanks::default();
        r.parts.reserve(merges.len() + 512);
        r.ranks.reserve(merges.len());
        for (rank, merge) in merges.iter().enumerate() {
            // Split at the first space after the first byte (so that a merge
            // whose left part is a literal space still parses).
            let (left, right) = match merge.as_bytes().iter().skip(1).position(|&b| b == b' ') {
                Some(p) => (&merge[..p + 1], &merge[p + 2..]),
                None => ("", ""),
            };
            let l = r.intern(left);
            let rr = r.intern(right);
            r.ranks.entry((l, rr)).or_insert(rank as u32);
        }
        r
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.parts.get(s) {
            return id;
        }
        let id = self.parts.len() as u32;
        self.parts.insert(s.into(), id);
        id
    }

    #[inline]
    pub(crate) fn rank(&self, left: &str, right: &str) -> Option<u32> {
        let l = *self.parts.get(left)?;
        let r = *self.parts.get(right)?;
        self.ranks.get(&(l, r)).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.ranks.len()
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

#[derive(PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: i32,
    right: i32,
    left_len: u32,
    right_len: u32,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: the lowest rank, then the left-most pair, comes first.
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Reusable buffers for merging words.
#[derive(Default)]
pub(crate) struct BpeWork {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

impl BpeWork {
    /// Merges `word` and calls `emit(piece)` for every final symbol, in order.
    pub(crate) fn merge<'w>(
        &mut self,
        ranks: &BpeRanks,
        word: &'w str,
        mut emit: impl FnMut(&'w str),
    ) {
        self.symbols.clear();
        self.queue.clear();
        let n = word.len();
        for (i, (start, c)) in word.char_indices().enumerate() {
            let len = c.len_utf8();
            self.symbols.push(Symbol {
                start: start as u32,
                len: len as u32,
                prev: i as i32 - 1,
                next: if start + len == n { -1 } else { i as i32 + 1 },
            });
        }
        for i in 1..self.symbols.len() {
            self.push_pair(ranks, word, i as i32 - 1, i as i32);
        }
        while let Some(b) = self.queue.pop() {
            let (l, r) = (b.left as usize, b.right as usize);
            let (left, right) = (self.symbols[l], self.symbols[r]);
            // Outdated: one side was merged away or has grown since.
            if left.len == 0 || right.len == 0 || left.len != b.left_len || right.len != b.right_len
            {
                continue;
            }
            self.symbols[l].len += right.len;
            self.symbols[r].len = 0;
            self.symbols[l].next = right.next;
            if right.next >= 0 {
                self.symbols[right.next as usize].prev = b.left;
            }
            self.push_pair(ranks, word, left.prev, b.left);
            self.push_pair(ranks, word, b.left, right.next);
        }
        if self.symbols.is_empty() {
            return;
        }
        let mut i = 0i32;
        while i != -1 {
            let s = self.symbols[i as usize];
            if s.len > 0 {
                emit(&word[s.start as usize..(s.start + s.len) as usize]);
            }
            i = s.next;
        }
    }

    fn push_pair(&mut self, ranks: &BpeRanks, word: &str, left: i32, right: i32) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (self.symbols[left as usize], self.symbols[right as usize]);
        let ls = &word[l.start as usize..(l.start + l.len) as usize];
        let rs = &word[r.start as usize..(r.start + r.len) as usize];
        if let Some(rank) = ranks.rank(ls, rs) {
            self.queue.push(Bigram {
                rank,
                left,
                right,
                left_len: l.len,
                right_len: r.len,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(merges: &[&str], word: &str) -> Vec<String> {
        let merges: Vec<String> = merges.iter().map(|s| s.to_string()).collect();
        let ranks = BpeRanks::new(&merges);
        let mut out = Vec::new();
        BpeWork::default().merge(&ranks, word, |p| out.push(p.to_string()));
        out
    }

    #[test]
    fn lowest_rank_first() {
        assert_eq!(merged(&["b c", "a b", "a bc"], "abc"), ["abc"]);
        assert_eq!(merged(&["a b", "b c"], "abc"), ["ab", "c"]);
        assert_eq!(merged(&[], "abc"), ["a", "b", "c"]);
    }

    #[test]
    fn ties_go_left() {
        // "a a" applies to both pairs of "aaa": the left one merges.
        assert_eq!(merged(&["a a"], "aaa"), ["aa", "a"]);
        assert_eq!(merged(&["a a", "aa aa"], "aaaa"), ["aaaa"]);
    }

    #[test]
    fn merge_split_at_first_space_after_first_byte() {
        let ranks = BpeRanks::new(&["Ġ t".to_string(), "  x".to_string(), "nospace".to_string()]);
        assert_eq!(ranks.rank("Ġ", "t"), Some(0));
        assert_eq!(ranks.rank(" ", "x"), Some(1));
        assert_eq!(ranks.len(), 3);
    }
}
