//! mlxr-tokenizer: tokenizers built from GGUF metadata that reproduce
//! llama.cpp's token ids.
//!
//! Two tokenizer families are supported, as llama.cpp implements them:
//!
//! * **BPE** (`tokenizer.ggml.model = "gpt2"`): special-token partition,
//!   pre-tokenizer regexes chosen by `tokenizer.ggml.pre`, GPT-2 byte-level
//!   encoding, merges by rank (SmolLM, Llama 3, Qwen 2, GPT-2, ...). Also
//!   `"gemma4"` (SentencePiece-style BPE on raw UTF-8).
//! * **SPM** (`tokenizer.ggml.model = "llama"`): special-token partition, then
//!   llama.cpp's score-ordered bigram merging with `<0xNN>` byte fallback
//!   (Llama 2, Gemma 1-3, Mistral v1, ...).
//!
//! Checked against llama.cpp as vendored by llama-cpp-python 0.3.36 (commit
//! 0c1e57098): `tests/llamacpp_parity.rs` (the real models' fixtures) and
//! `tests/llamacpp_vocab_suite.rs` (llama.cpp's own `ggml-vocab-*` test
//! vectors, when a llama.cpp checkout is at hand). Not supported: WordPiece
//! (`bert`), Unigram (`t5`), RWKV and PLaMo-2 models, and the pre-tokenizer
//! types whose llama.cpp splitters are bespoke or whose patterns are not
//! transcribed here (`deepseek-llm`, `kimi-k2`, `afmoe`, `tiny_aya`, ...):
//! those fail to load with a clear error instead of tokenizing differently.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mlxr_tokenizer::{StreamDecoder, Tokenizer};
//! let file = mlxr_formats::gguf::GgufFile::open("model.gguf")?;
//! let tok = Tokenizer::from_gguf(file.metadata())?;
//! let ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n", true, true);
//! let text = tok.decode(&ids, true);
//! let mut stream = StreamDecoder::new();
//! for &id in &ids {
//!     print!("{}", stream.push(&tok, id));
//! }
//! print!("{}", stream.finish());
//! # Ok(()) }
//! ```

mod bpe;
mod build;
mod hash;
mod hf_json;
mod pretokenize;
mod special;
mod spm;
mod stdmap;
mod stream;
mod strtable;
mod unicode;
mod vocab;

use std::borrow::Cow;
use std::fmt;

use mlxr_formats::gguf::{GgufError, Metadata};

use bpe::{BpeRanks, BpeWork};
use pretokenize::PreTokenizer;
use special::{Fragment, SpecialTokens};
use spm::SpmWork;
use strtable::StrTable;
use vocab::attr;

pub use hf_json::chat_template as hf_chat_template;
pub use stream::StreamDecoder;
pub use vocab::{SpecialTokenIds, TokenAttrs, TokenType, TokenizerConfig};

/// A token id (index into the vocabulary).
pub type TokenId = u32;

/// The tokenizer algorithm family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenizerKind {
    /// Byte-pair encoding with a regex pre-tokenizer (`tokenizer.ggml.model = "gpt2"` or `"gemma4"`).
    Bpe,
    /// llama.cpp's SentencePiece-style bigram merging (`tokenizer.ggml.model = "llama"`).
    SentencePiece,
}

/// Why a tokenizer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A required metadata key is absent.
    #[error("missing tokenizer metadata: '{0}'")]
    MissingKey(String),
    /// A metadata key has the wrong type or an impossible value.
    #[error("invalid tokenizer metadata '{key}': {reason}")]
    InvalidMetadata { key: String, reason: String },
    /// A tokenizer model llama.cpp has but MLXR does not implement.
    #[error("tokenizer model '{0}' is not supported (supported: gpt2, llama, gemma4)")]
    UnsupportedModel(String),
    /// A tokenizer model llama.cpp does not know either.
    #[error("unknown tokenizer model '{0}'")]
    UnknownModel(String),
    /// A BPE pre-tokenizer type MLXR does not know (llama.cpp refuses unknown ones too).
    #[error("unknown pre-tokenizer type '{0}' (tokenizer.ggml.pre)")]
    UnknownPreTokenizer(String),
    /// The same token text appears twice.
    #[error("duplicate token in vocabulary: '{text}' has ids {first} and {second}")]
    DuplicateToken {
        text: String,
        first: u32,
        second: u32,
    },
    /// `add_*_token` is set but the token id is not.
    #[error("{flag} is true, but {id_key} is not set")]
    MissingSpecialToken { flag: String, id_key: String },
    /// Any other inconsistency (e.g. a pre-tokenizer regex that does not compile).
    #[error("tokenizer: {0}")]
    Other(String),
    /// Reading the GGUF metadata failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
}

/// Tokens for the 256 byte values used when a piece is not a token.
type ByteTokens = [Option<u32>; 256];

/// A tokenizer built from GGUF metadata (`Send + Sync`; build it once and share it).
pub struct Tokenizer {
    kind: TokenizerKind,
    model: String,
    pre: Option<String>,
    vocab: StrTable,
    scores: Vec<f32>,
    attrs: Vec<u16>,
    ids: SpecialTokenIds,
    add_bos: bool,
    add_eos: bool,
    add_sep: bool,
    add_space_prefix: bool,
    remove_extra_whitespaces: bool,
    clean_spaces: bool,
    ignore_merges: bool,
    escape_whitespaces: bool,
    byte_encode: bool,
    gemma4_newlines: bool,
    byte_tokens: Box<ByteTokens>,
    special: SpecialTokens,
    eog: Vec<u32>,
    ranks: Option<BpeRanks>,
    pre_tokenizer: Option<PreTokenizer>,
    warnings: Vec<String>,
    /// Set for `tokenizer.json` folders: encoding goes through it.
    hf: Option<Box<tokenizers::Tokenizer>>,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("pre", &self.pre)
            .field("vocab_size", &self.vocab.len())
            .field("merges", &self.ranks.as_ref().map(BpeRanks::len))
            .field("special_ids", &self.ids)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("add_space_prefix", &self.add_space_prefix)
            .field("eog", &self.eog)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds the tokenizer described by a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(meta: &Metadata) -> Result<Tokenizer, TokenizerError> {
        build::build(build::read_gguf(meta)?)
    }

    /// Reads the tokenizer description from GGUF metadata without building it.
    pub fn config_from_gguf(meta: &Metadata) -> Result<TokenizerConfig, TokenizerError> {
        Ok(build::read_gguf(meta)?.to_config())
    }

    /// Builds a tokenizer from an in-memory description, applying llama.cpp's
    /// loading rules (defaults per model type, pre-tokenizer flags, special
    /// tokens detected by text, end-of-generation set, ...).
    pub fn from_config(cfg: &TokenizerConfig) -> Result<Tokenizer, TokenizerError> {
        build::build(cfg.source())
    }

    /// Tokenizes `text` like `llama_tokenize(text, add_special, parse_special)`.
    ///
    /// `add_special` adds BOS/EOS where the model wants them; `parse_special`
    /// turns control-token texts such as `<|im_start|>` into their ids
    /// (user-defined tokens are always matched).
    ///
    /// A tokenizer from `tokenizer.json` encodes with the `tokenizers` crate,
    /// which always recognises added special tokens.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<TokenId> {
        if let Some(ids) = self
            .hf
            .as_deref()
            .and_then(|hf| Self::encode_hf(hf, text, add_special))
        {
            return ids;
        }
        let frags = self.special.partition(
            text,
            parse_special,
            |id| self.vocab.text(id),
            |id| self.attrs[id as usize],
        );
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            if let Some(bos) = self.ids.bos {
                out.push(bos);
            }
        }
        match self.kind {
            TokenizerKind::SentencePiece => self.encode_spm(text, &frags, &mut out),
            TokenizerKind::Bpe => self.encode_bpe(text, &frags, &mut out),
        }
        if add_special && self.add_eos {
            if let Some(eos) = self.ids.eos {
                out.push(eos);
            }
        }
        out
    }

    fn encode_spm(&self, text: &str, frags: &[Fragment], out: &mut Vec<TokenId>) {
        let mut work = SpmWork::default();
        let mut buf = String::new();
        // A space is prefixed to the first text and to text after a special token.
        let mut prev_special = true;
        let lookup = |s: &str| self.vocab.get(s).map(|id| (id, self.scores[id as usize]));
        for frag in frags {
            match *frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text { start, end } => {
                    buf.clear();
                    if self.add_space_prefix && prev_special {
                        buf.push('\u{2581}');
                    }
                    for c in text[start..end].chars() {
                        buf.push(if c == ' ' { '\u{2581}' } else { c });
                    }
                    work.tokenize(&buf, lookup, |piece, id| match id {
                        Some(id) => out.push(id),
                        None => self.push_bytes(piece, out),
                    });
                    prev_special = false;
                }
            }
        }
    }

    /// Byte fallback for a piece that is not a token.
    fn push_bytes(&self, piece: &str, out: &mut Vec<TokenId>) {
        for &b in piece.as_bytes() {
            match self.byte_tokens[b as usize] {
                Some(id) => out.push(id),
                // llama.cpp throws here (SPM) or skips the byte (BPE).
                None => {
                    if self.kind == TokenizerKind::SentencePiece {
                        if let Some(unk) = self.ids.unk {
                            out.push(unk);
                        }
                    }
                }
            }
        }
    }

    fn encode_bpe(&self, text: &str, frags: &[Fragment], out: &mut Vec<TokenId>) {
        let (Some(ranks), Some(pre)) = (&self.ranks, &self.pre_tokenizer) else {
            return;
        };
        let mut work = BpeWork::default();
        let mut encoded = String::new();
        for frag in frags {
            let (start, end) = match *frag {
                Fragment::Token(id) => {
                    out.push(id);
                    continue;
                }
                Fragment::Text { start, end } => (start, end),
            };
            let raw = &text[start..end];
            let fragment: Cow<str> = if self.escape_whitespaces {
                Cow::Owned(raw.replace(' ', "\u{2581}"))
            } else {
                Cow::Borrowed(raw)
            };
            for range in pre.split(&fragment) {
                let word_raw = &fragment[range];
                let word: &str = if self.byte_encode {
                    encoded.clear();
                    unicode::byte_encode_into(word_raw.as_bytes(), &mut encoded);
                    &encoded
                } else {
                    word_raw
                };
                if self.ignore_merges {
                    if let Some(id) = self.vocab.get(word) {
                        out.push(id);
                        continue;
                    }
                }
                if self.gemma4_newlines && word.bytes().all(|b| b == b'\n') {
                    if let Some(id) = self.vocab.get(word) {
                        out.push(id);
                        continue;
                    }
                }
                work.merge(ranks, word, |piece| match self.vocab.get(piece) {
                    Some(id) => out.push(id),
                    None if self.byte_encode => {
                        for &b in piece.as_bytes() {
                            if b < 0x80 {
                                if let Some(id) = self.byte_tokens[b as usize] {
                                    out.push(id);
                                }
                            }
                        }
                    }
                    None => {
                        for &b in piece.as_bytes() {
                            if let Some(id) = self.byte_tokens[b as usize] {
                                out.push(id);
                            }
                        }
                    }
                });
            }
        }
    }

    /// The bytes of one token as `llama_token_to_piece(id, lstrip = 0, special)`
    /// gives them. Control and unknown tokens are empty unless
    /// `render_special`; user-defined tokens are always their text.
    pub fn token_to_piece(&self, id: TokenId, render_special: bool) -> Vec<u8> {
        let Some(&a) = self.attrs.get(id as usize) else {
            return Vec::new();
        };
        let text = self.vocab.text(id);
        if !render_special && a & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Vec::new();
        }
        if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return text.as_bytes().to_vec();
        }
        if a & attr::NORMAL != 0 {
            return match self.kind {
                TokenizerKind::Bpe if !self.escape_whitespaces => decode_byte_level(text),
                _ => text.replace('\u{2581}', " ").into_bytes(),
            };
        }
        if a & attr::BYTE != 0 {
            return vec![hex_byte(text)];
        }
        Vec::new()
    }

    /// Detokenizes like llama.cpp's `common_detokenize(ids, special)`: the
    /// pieces concatenated (a leading space of the first one removed when the
    /// model adds a space prefix; BPE models with `clean_spaces` also drop
    /// spaces before punctuation), converted to UTF-8 lossily.
    pub fn decode(&self, ids: &[TokenId], render_special: bool) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, render_special)).into_owned()
    }

    /// [`Tokenizer::decode`] without the UTF-8 conversion.
    pub fn decode_bytes(&self, ids: &[TokenId], render_special: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for (i, &id) in ids.iter().enumerate() {
            let piece = self.token_to_piece(id, render_special);
            let skip = usize::from(i == 0 && self.add_space_prefix && piece.first() == Some(&b' '));
            out.extend_from_slice(&piece[skip..]);
        }
        if self.clean_spaces {
            clean_up_spaces(&mut out);
        }
        out
    }

    /// The raw vocabulary entry of a token (e.g. `"Ġworld"`, `"▁world"`, `"<0x0A>"`).
    pub fn token_text(&self, id: TokenId) -> Option<&str> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.text(id))
    }

    /// The id of a raw vocabulary entry.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.vocab.get(text)
    }

    /// The score of a token (SPM merge priority; 0 when the file has none).
    pub fn token_score(&self, id: TokenId) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// A token's attributes (type plus what the loader inferred).
    pub fn token_attrs(&self, id: TokenId) -> Option<TokenAttrs> {
        self.attrs.get(id as usize).map(|&a| TokenAttrs(a))
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn bos(&self) -> Option<TokenId> {
        self.ids.bos
    }
    pub fn eos(&self) -> Option<TokenId> {
        self.ids.eos
    }
    /// End-of-turn token (from metadata, or detected by text like `<|im_end|>`).
    pub fn eot(&self) -> Option<TokenId> {
        self.ids.eot
    }
    pub fn unk(&self) -> Option<TokenId> {
        self.ids.unk
    }
    pub fn pad(&self) -> Option<TokenId> {
        self.ids.pad
    }
    /// All resolved special token ids.
    pub fn special_ids(&self) -> &SpecialTokenIds {
        &self.ids
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }
    /// `add_sep_token` (BERT-style models; not used by BPE/SPM encoding).
    pub fn add_sep(&self) -> bool {
        self.add_sep
    }
    /// Whether SPM text gets a leading space (`add_space_prefix`).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }
    /// Whether [`Tokenizer::decode`] drops spaces before punctuation (llama.cpp's
    /// `clean_spaces`; on for GPT-2-style BPE, off for SmolLM, Qwen, SPM ...).
    pub fn clean_spaces(&self) -> bool {
        self.clean_spaces
    }
    /// `remove_extra_whitespaces` as read (only Unigram tokenizers use it).
    pub fn remove_extra_whitespaces(&self) -> bool {
        self.remove_extra_whitespaces
    }

    /// Whether generation should stop at this token.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }
    /// All end-of-generation tokens, ascending.
    pub fn eog_ids(&self) -> &[TokenId] {
        &self.eog
    }
    /// Whether the token is a control token (rendered only on request).
    pub fn is_control(&self, id: TokenId) -> bool {
        self.attrs
            .get(id as usize)
            .is_some_and(|a| a & attr::CONTROL != 0)
    }

    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
    /// `tokenizer.ggml.model`.
    pub fn model(&self) -> &str {
        &self.model
    }
    /// `tokenizer.ggml.pre`, if given.
    pub fn pre(&self) -> Option<&str> {
        self.pre.as_deref()
    }
    /// Number of BPE merges (0 for SPM).
    pub fn n_merges(&self) -> usize {
        self.ranks.as_ref().map_or(0, BpeRanks::len)
    }
    /// Things llama.cpp would log as warnings while loading this vocabulary.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// The byte of a `<0xNN>` token (like `strtol` on the two hex digits).
fn hex_byte(text: &str) -> u8 {
    let digits = text.get(3..5).unwrap_or("");
    let mut v = 0u32;
    for c in digits.chars() {
        match c.to_digit(16) {
            Some(d) => v = v * 16 + d,
            None => break,
        }
    }
    v as u8
}

/// GPT-2 byte-level text back to bytes; characters outside the byte mapping
/// come out as `[UNK_BYTE_0x..]` markers as in llama.cpp.
fn decode_byte_level(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match unicode::char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// llama.cpp's `clean_spaces` passes over detokenized bytes: drop the space
/// before `?!.,`, collapse ` ' ` to `'`, and drop the space before `'s`,
/// `'m`, `'re` and `'ve`.
fn clean_up_spaces(t: &mut Vec<u8>) {
    if t.is_empty() {
        return;
    }
    // Pass 1: " ?", " !", " .", " ,"
    let n = t.len();
    let mut w = 1;
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            w -= 1;
        }
        t[w] = x;
        w += 1;
    }
    t.truncate(w);
    // Pass 2: " ' " -> "'" (the space after is consumed, in place)
    let n = t.len();
    let mut w = 1;
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            w -= 1;
            i += 1;
            t[i] = 0;
        }
        t[w] = x;
        w += 1;
        i += 1;
    }
    t.truncate(w);
    // Pass 3: " 's", " 'm", " 're", " 've"
    let n = t.len();
    let mut w = 1;
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            if matches!(x1, b's' | b'm') {
                w -= 1;
            } else if !matches!(x1, b't' | b'd') && i + 2 < n {
                let x2 = t[i + 2];
                if (x1 == b'r' || x1 == b'v') && x2 == b'e' {
                    w -= 1;
                }
            }
        }
        t[w] = x;
        w += 1;
    }
    t.truncate(w);
}

#[cfg(test)]
mod tests;
