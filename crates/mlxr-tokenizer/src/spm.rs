//! llama.cpp's SentencePiece-style tokenizer ("SPM"): greedy bigram merging
//! by vocabulary score with byte fallback. This is not SentencePiece's
//! Unigram/Viterbi search: starting from one symbol per UTF-8 character, the
//! adjacent pair whose concatenation is a vocabulary token with the highest
//! score is merged first (ties go to the left-most pair), until no adjacent
//! pair forms a token. Symbols that are not tokens become `<0xNN>` tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: the highest score, then the left-most pair, comes first.
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Reusable buffers for SPM tokenization.
#[derive(Default)]
pub(crate) struct SpmWork {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

impl SpmWork {
    /// Tokenizes `text` (spaces already escaped as `▁`). `lookup` gives the
    /// id and score of a vocabulary string; `emit` receives each final
    /// symbol's text and its id if it is a token (else the caller falls back
    /// to byte tokens).
    pub(crate) fn tokenize<'t>(
        &mut self,
        text: &'t str,
        lookup: impl Fn(&str) -> Option<(u32, f32)>,
        mut emit: impl FnMut(&'t str, Option<u32>),
    ) {
        self.symbols.clear();
        self.queue.clear();
        let n = text.len();
        for (i, (start, c)) in text.char_indices().enumerate() {
            let len = c.len_utf8();
            self.symbols.push(Symbol {
                start: start as u32,
                len: len as u32,
                prev: i as i32 - 1,
                next: if start + len == n { -1 } else { i as i32 + 1 },
            });
        }
        for i in 1..self.symbols.len() {
            self.push_pair(text, &lookup, i as i32 - 1, i as i32);
        }
        while let Some(b) = self.queue.pop() {
            let (l, r) = (b.left as usize, b.right as usize);
            let (left, right) = (self.symbols[l], self.symbols[r]);
            // One side already merged, or the pair changed since it was queued.
            if left.len == 0 || right.len == 0 || left.len + right.len != b.size {
                continue;
            }
            self.symbols[l].len += right.len;
            self.symbols[r].len = 0;
            self.symbols[l].next = right.next;
            if right.next >= 0 {
                self.symbols[right.next as usize].prev = b.left;
            }
            self.push_pair(text, &lookup, left.prev, b.left);
            self.push_pair(text, &lookup, b.left, right.next);
        }
        if self.symbols.is_empty() {
            return;
        }
        let mut i = 0i32;
        while i != -1 {
            let s = self.symbols[i as usize];
            let piece = &text[s.start as usize..(s.start + s.len) as usize];
            emit(piece, lookup(piece).map(|(id, _)| id));
            i = s.next;
        }
    }

    fn push_pair(
        &mut self,
        text: &str,
        lookup: &impl Fn(&str) -> Option<(u32, f32)>,
        left: i32,
        right: i32,
    ) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (self.symbols[left as usize], self.symbols[right as usize]);
        // Adjacent symbols are contiguous in the text.
        let size = l.len + r.len;
        let joined = &text[l.start as usize..(l.start + size) as usize];
        if let Some((_, score)) = lookup(joined) {
            self.queue.push(Bigram {
                score,
                left,
                right,
                size,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(vocab: &[(&str, f32)], text: &str) -> Vec<String> {
        let map: HashMap<&str, (u32, f32)> = vocab
            .iter()
            .enumerate()
            .map(|(i, &(t, s))| (t, (i as u32, s)))
            .collect();
        let mut out = Vec::new();
        SpmWork::default().tokenize(
            text,
            |s| map.get(s).copied(),
            |p, id| {
                out.push(match id {
                    Some(_) => p.to_string(),
                    None => format!("?{p}"),
                })
            },
        );
        out
    }

    #[test]
    fn highest_score_first() {
        let v = [
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
            ("abc", -3.0),
        ];
        assert_eq!(run(&v, "abc"), ["abc"]);
        let v = [
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
        ];
        assert_eq!(run(&v, "abc"), ["a", "bc"]);
    }

    #[test]
    fn ties_go_left_and_unknown_symbols_surface() {
        let v = [("a", 0.0), ("aa", -1.0)];
        assert_eq!(run(&v, "aaa"), ["aa", "a"]);
        assert_eq!(run(&v, "aéa"), ["a", "?é", "a"]);
    }
}
