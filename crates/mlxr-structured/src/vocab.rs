//! A model's vocabulary as llguidance sees it: the bytes each token id
//! stands for, with special tokens out of reach of byte-level grammars.

use llguidance::toktrie::{TokRxInfo, TokTrie, TokenizerEnv};
use std::sync::Arc;

use mlxr_tokenizer::{TokenId, Tokenizer, TokenizerKind};

/// Marks a token that no byte-level grammar can produce (llguidance's
/// convention): control, unknown and unused tokens, added tokens shaped
/// `<...>` (Qwen's `<tool_call>`), and ids past the tokenizer's list up to
/// the logits' width. Lark grammars still name them as `<name>` or `<[id]>`.
const SPECIAL: u8 = TokTrie::SPECIAL_TOKEN_MARKER;

/// Which tokens may spell the bytes a grammar allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tokenization {
    /// The tokenizer's own splits, where it has them (byte-level BPE):
    /// llguidance then forces the canonical tokens of bytes the grammar
    /// determines, and allows only those there.
    Canonical,
    /// Every token whose bytes fit; nothing is forced.
    Any,
}

/// The token trie of one tokenizer, padded to the model's logits width.
pub struct Vocab {
    trie: TokTrie,
    /// Byte-level BPE: our encoder, whose splits llguidance may force.
    encoder: Option<Arc<Tokenizer>>,
}

impl Vocab {
    /// `n_vocab`: the width of the model's logits (at least the
    /// tokenizer's size). End-of-generation tokens end a grammar's output.
    pub fn new(tokenizer: &Arc<Tokenizer>, n_vocab: usize, tokenization: Tokenization) -> Vocab {
        let n_vocab = n_vocab.max(tokenizer.vocab_size());
        let words: Vec<Vec<u8>> = (0..n_vocab as TokenId)
            .map(|id| token_bytes(tokenizer, id))
            .collect();
        let eos = tokenizer
            .eog_ids()
            .first()
            .copied()
            .or(tokenizer.eos())
            .unwrap_or(0);
        let mut trie = TokTrie::from(&TokRxInfo::new(n_vocab as u32, eos), &words);
        if !tokenizer.eog_ids().is_empty() {
            trie = trie.with_eos_tokens(tokenizer.eog_ids());
        }
        // The SentencePiece encoder puts a space before every fragment: its
        // splits of a grammar's bytes are not the model's, so none is forced.
        let canonical =
            tokenization == Tokenization::Canonical && tokenizer.kind() == TokenizerKind::Bpe;
        Vocab {
            trie,
            encoder: canonical.then(|| Arc::clone(tokenizer)),
        }
    }

    pub fn trie(&self) -> &TokTrie {
        &self.trie
    }
}

/// What llguidance matches token `id` against.
fn token_bytes(tokenizer: &Tokenizer, id: TokenId) -> Vec<u8> {
    let marked = |text: &str| {
        let mut bytes = vec![SPECIAL];
        if text.is_empty() {
            bytes.extend_from_slice(format!("<[{id}]>").as_bytes());
        } else {
            bytes.extend_from_slice(text.as_bytes());
        }
        bytes
    };
    let Some(attrs) = tokenizer.token_attrs(id) else {
        return marked("");
    };
    let text = tokenizer.token_text(id).unwrap_or("");
    let tag = text.len() > 2 && text.starts_with('<') && text.ends_with('>');
    if attrs.is_control() || attrs.is_unknown() || attrs.is_unused() {
        return marked(text);
    }
    if attrs.is_user_defined() && tag {
        return marked(text);
    }
    let piece = tokenizer.token_to_piece(id, false);
    if piece.is_empty() {
        return marked(text);
    }
    piece
}

impl TokenizerEnv for Vocab {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        match (&self.encoder, std::str::from_utf8(s)) {
            (Some(encoder), Ok(text)) => encoder.encode(text, false, false),
            _ => self.trie.greedy_tokenize(s),
        }
    }

    fn tokenize_is_canonical(&self) -> bool {
        self.encoder.is_some()
    }
}
