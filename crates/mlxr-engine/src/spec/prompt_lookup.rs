//! Prompt lookup (n-gram) drafting, as vLLM's `ngram` proposer: find the
//! longest suffix of the sequence, between `min_n` and `max_n` tokens, that
//! also occurs earlier in it (prompt and output alike), and propose up to
//! `k` of the tokens that followed that occurrence; the earliest occurrence
//! wins. No match, no draft: a sequence without one decodes plainly.
//!
//! A scan of the whole sequence per suffix length: O(len · max_n) token
//! comparisons a step, a few microseconds for thousands of tokens.

use crate::TokenId;

/// How prompt lookup drafts: suffix lengths to try and the most tokens to
/// propose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptLookup {
    pub min_n: usize,
    pub max_n: usize,
    pub k: usize,
}

impl PromptLookup {
    /// The draft for `tokens` (the sequence so far, oldest first): a slice
    /// of `tokens`, empty when no suffix recurs.
    pub fn propose<'a>(&self, tokens: &'a [TokenId]) -> &'a [TokenId] {
        let len = tokens.len();
        if self.k == 0 {
            return &[];
        }
        for n in (self.min_n.max(1)..=self.max_n.min(len.saturating_sub(1))).rev() {
            let suffix = &tokens[len - n..];
            // An occurrence at i must leave a token after it (i + n < len)
            // and not be the suffix itself.
            if let Some(i) = (0..len - n).find(|&i| &tokens[i..i + n] == suffix) {
                let from = i + n;
                return &tokens[from..(from + self.k).min(len)];
            }
        }
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOKUP: PromptLookup = PromptLookup {
        min_n: 1,
        max_n: 3,
        k: 4,
    };

    #[test]
    fn proposes_what_followed_the_longest_recurring_suffix() {
        // Suffix [7, 8, 9] recurs at 1; [8, 9] alone would match at 5 too.
        let t = [0, 7, 8, 9, 4, 8, 9, 5, 6, 2, 7, 8, 9];
        assert_eq!(LOOKUP.propose(&t), &[4, 8, 9, 5]);
    }

    #[test]
    fn the_earliest_occurrence_wins_and_drafts_stop_at_the_end() {
        let t = [5, 1, 5, 2, 5];
        // [5] occurs at 0 and 2; 0 wins: [1, 5, 2, 5], cut to k = 4.
        assert_eq!(LOOKUP.propose(&t), &[1, 5, 2, 5]);
        let short = PromptLookup { k: 2, ..LOOKUP };
        assert_eq!(short.propose(&t), &[1, 5]);
        // An occurrence right before the suffix proposes up to the end.
        assert_eq!(LOOKUP.propose(&[3, 3]), &[3]);
    }

    #[test]
    fn no_recurring_suffix_no_draft() {
        assert!(LOOKUP.propose(&[1, 2, 3, 4]).is_empty());
        assert!(LOOKUP.propose(&[]).is_empty());
        assert!(LOOKUP.propose(&[9]).is_empty());
        // Suffixes shorter than min_n do not count.
        let long = PromptLookup { min_n: 2, ..LOOKUP };
        assert!(long.propose(&[1, 2, 3, 2]).is_empty());
        assert!(PromptLookup { k: 0, ..LOOKUP }.propose(&[1, 1]).is_empty());
    }
}
