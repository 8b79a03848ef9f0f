//! Which tokens a draft model scores (FR-Spec): the most frequent ones of
//! its vocabulary in a mixed code and English corpus, ranked once by
//! `scripts/frequent-tokens/rank.sh`, plus its control tokens. A draft can
//! only propose these; the target still verifies every token, so output is
//! unchanged and only the drafts' acceptance can suffer.
//!
//! Rankings are lists of vocabulary strings, so one serves every model of a
//! tokenizer family (Qwen2, Qwen2.5 and Qwen3 share theirs).

use mlxr_tokenizer::Tokenizer;

/// The draft head's tokens unless configured otherwise: 32,768 of Qwen2's
/// cover 98.3% of the 1.5B Coder's greedy replies to the completion
/// prompts in bench/prompts (40,960: 99.0%; 16,384: 94.1%), at about a
/// fifth of the whole head's bytes.
pub const DEFAULT_DRAFT_VOCAB: usize = 32_768;

/// Rankings shipped, most frequent token first.
const RANKINGS: &[&str] = &[include_str!("frequent_tokens/qwen2.txt")];

/// A ranking applies to a vocabulary that has all but this share of its
/// first [`MATCH_PROBE`] strings.
const MATCH_MISSING: usize = 20; // of 1,000
const MATCH_PROBE: usize = 1_000;

/// The rows a kernel handles at once: the head keeps whole tiles.
const ROW_MULTIPLE: usize = 16;

/// The ids of `tokenizer`'s `n` most frequent tokens (rounded up to a
/// multiple of 16) and of its control and end-of-generation tokens,
/// ascending; `None` when no ranking ships for this vocabulary or `n`
/// would leave out too little of it to pay.
pub fn frequent_tokens(tokenizer: &Tokenizer, n: usize) -> Option<Vec<u32>> {
    let vocab = tokenizer.vocab_size();
    if n == 0 || n >= vocab / 2 {
        return None;
    }
    let ranked = RANKINGS.iter().find_map(|r| ranked_ids(tokenizer, r))?;
    let mut member = vec![false; vocab];
    let mut add = |id: u32| !std::mem::replace(&mut member[id as usize], true);
    let mut count = (0..vocab as u32)
        .filter(|&id| tokenizer.is_control(id))
        .chain(tokenizer.eog_ids().iter().copied())
        .filter(|&id| add(id))
        .count();
    // Then whole tiles: the next ranked tokens, or any left after them.
    let mut more = ranked.into_iter().chain(0..vocab as u32);
    let mut taken = 0;
    while taken < n || !count.is_multiple_of(ROW_MULTIPLE) {
        if add(more.next()?) {
            count += 1;
            taken += 1;
        }
    }
    let ids = (0..vocab as u32)
        .filter(|&id| member[id as usize])
        .collect();
    Some(ids)
}

/// `ranking`'s strings as `tokenizer`'s ids, most frequent first, when it
/// is this vocabulary's ranking.
fn ranked_ids(tokenizer: &Tokenizer, ranking: &str) -> Option<Vec<u32>> {
    let strings = ranking.lines();
    let missing = strings
        .clone()
        .take(MATCH_PROBE)
        .filter(|s| tokenizer.token_id(s).is_none())
        .count();
    if missing > MATCH_MISSING {
        return None;
    }
    Some(strings.filter_map(|s| tokenizer.token_id(s)).collect())
}
