//! Partitioning text on special tokens (llama.cpp's `tokenizer_st_partition`).
//!
//! Special tokens (control, user-defined and unknown types) are taken longest
//! first. For each one, every text fragment is split at all of its
//! occurrences, left to right; the token becomes a fragment of its own and
//! the text around it stays text (minus adjacent whitespace where the token
//! has the lstrip/rstrip attribute). Control and unknown tokens only count
//! when special tokens are parsed; user-defined ones always do.
//!
//! Scanning every fragment for each of Gemma's ~6400 special tokens would be
//! slow, so an Aho-Corasick pass first finds which special tokens occur in the
//! text at all; only those are partitioned on, in the same order, which gives
//! the same fragments.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::vocab::attr;

/// A piece of the input: raw text (byte range) or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text { start: usize, end: usize },
    Token(u32),
}

/// Special tokens in partition order plus a matcher over their texts.
#[derive(Debug)]
pub(crate) struct SpecialTokens {
    /// Ids, longest text first (ties by id).
    pub(crate) order: Vec<u32>,
    matcher: Option<AhoCorasick>,
}

impl SpecialTokens {
    pub(crate) fn new(
        order: Vec<u32>,
        text_of: impl Fn(u32) -> String,
    ) -> Result<SpecialTokens, String> {
        let matcher = if order.is_empty() {
            None
        } else {
            let patterns: Vec<String> = order.iter().map(|&id| text_of(id)).collect();
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&patterns)
                    .map_err(|e| format!("cannot index special tokens: {e}"))?,
            )
        };
        Ok(SpecialTokens { order, matcher })
    }

    /// Splits `text` into fragments. `token_text` and `token_attr` describe
    /// vocabulary entries.
    pub(crate) fn partition<'v>(
        &self,
        text: &str,
        parse_special: bool,
        token_text: impl Fn(u32) -> &'v str,
        token_attr: impl Fn(u32) -> u16,
    ) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text {
            start: 0,
            end: text.len(),
        }];
        let Some(matcher) = &self.matcher else {
            return frags;
        };
        // Which special tokens occur anywhere (overlapping matches included).
        let mut present = vec![false; self.order.len()];
        let mut any = false;
        for m in matcher.find_overlapping_iter(text) {
            present[m.pattern().as_usize()] = true;
            any = true;
        }
        if !any {
            return frags;
        }
        let bytes = text.as_bytes();
        let mut next = Vec::new();
        for (idx, &id) in self.order.iter().enumerate() {
            if !present[idx] {
                continue;
            }
            let a = token_attr(id);
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = token_text(id);
            next.clear();
            for &frag in &frags {
                let Fragment::Text { start, end } = frag else {
                    next.push(frag);
                    continue;
                };
                let mut base = start;
                loop {
                    let Some(found) = text[base..end].find(needle) else {
                        if base < end {
                            next.push(Fragment::Text { start: base, end });
                        }
                        break;
                    };
                    let m = base + found;
                    if m > base {
                        let mut left_end = m;
                        if a & attr::LSTRIP != 0 {
                            while left_end > base && is_c_space(bytes[left_end - 1]) {
                                left_end -= 1;
                            }
                        }
                        if left_end > base {
                            next.push(Fragment::Text {
                                start: base,
                                end: left_end,
                            });
                        }
                    }
                    next.push(Fragment::Token(id));
                    let mut right = m + needle.len();
                    if right >= end {
                        break;
                    }
                    if a & attr::RSTRIP != 0 {
                        while right < end && is_c_space(bytes[right]) {
                            right += 1;
                        }
                    }
                    base = right;
                }
            }
            std::mem::swap(&mut frags, &mut next);
        }
        frags
    }
}

/// C's `isspace` in the "C" locale.
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    struct V {
        texts: Vec<&'static str>,
        attrs: Vec<u16>,
    }

    fn setup(tokens: &[(&'static str, u16)]) -> (V, SpecialTokens) {
        let v = V {
            texts: tokens.iter().map(|t| t.0).collect(),
            attrs: tokens.iter().map(|t| t.1).collect(),
        };
        let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(v.texts[i as usize].len()));
        let st = SpecialTokens::new(order, |i| v.texts[i as usize].to_string()).unwrap();
        (v, st)
    }

    fn parts(v: &V, st: &SpecialTokens, text: &str, parse: bool) -> Vec<String> {
        st.partition(
            text,
            parse,
            |i| v.texts[i as usize],
            |i| v.attrs[i as usize],
        )
        .into_iter()
        .map(|f| match f {
            Fragment::Text { start, end } => text[start..end].to_string(),
            Fragment::Token(id) => format!("<{id}>"),
        })
        .collect()
    }

    #[test]
    fn splits_longest_first() {
        let (v, st) = setup(&[
            ("<a>", attr::CONTROL),
            ("<a><b>", attr::CONTROL),
            ("\n\n", attr::USER_DEFINED),
        ]);
        assert_eq!(
            parts(&v, &st, "x<a><b>y<a>z", true),
            ["x", "<1>", "y", "<0>", "z"]
        );
        assert_eq!(parts(&v, &st, "<a>", true), ["<0>"]);
        assert_eq!(
            parts(&v, &st, "x<a><b>y\n\n\nz", false),
            ["x<a><b>y", "<2>", "\nz"]
        );
        assert_eq!(parts(&v, &st, "", true), Vec::<String>::new());
        assert_eq!(parts(&v, &st, "plain", true), ["plain"]);
    }

    #[test]
    fn strip_attributes() {
        let (v, st) = setup(&[("<m>", attr::CONTROL | attr::LSTRIP | attr::RSTRIP)]);
        assert_eq!(parts(&v, &st, "a  <m>  b", true), ["a", "<0>", "b"]);
        assert_eq!(parts(&v, &st, "  <m>  ", true), ["<0>"]);
    }
}
