//! Building a [`Tokenizer`] from GGUF metadata or a [`TokenizerConfig`],
//! following llama.cpp's `llama_vocab::load`: defaults per model type,
//! pre-tokenizer flags, special ids, special tokens found by their text, the
//! end-of-generation set and per-model token attributes.

use std::borrow::Cow;
use std::collections::BTreeSet;

use mlxr_formats::gguf::{Metadata, MetadataArray, MetadataValue};

use crate::bpe::BpeRanks;
use crate::pretokenize::PreTokenizer;
use crate::special::SpecialTokens;
use crate::stdmap;
use crate::strtable::StrTable;
use crate::vocab::{
    self, attr, bpe_pre_config, PreConfig, SpecialTokenIds, TokenType, TokenizerConfig,
};
use crate::{ByteTokens, Tokenizer, TokenizerError, TokenizerKind};

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_SCORES: &str = "tokenizer.ggml.scores";
const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const KEY_MERGES: &str = "tokenizer.ggml.merges";
const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const KEY_ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
const KEY_ADD_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const KEY_REMOVE_EXTRA_WS: &str = "tokenizer.ggml.remove_extra_whitespaces";
const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";
const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";
const KEY_SEP: &str = "tokenizer.ggml.seperator_token_id";

/// A tokenizer description that borrows from GGUF metadata or a config.
pub(crate) struct Source<'a> {
    pub model: &'a str,
    pub pre: Option<&'a str>,
    pub tokens: &'a [String],
    pub scores: Option<Cow<'a, [f32]>>,
    pub token_types: Option<&'a [i32]>,
    pub merges: Option<&'a [String]>,
    pub special: SpecialTokenIds,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_sep: Option<bool>,
    pub add_space_prefix: Option<bool>,
    pub remove_extra_whitespaces: Option<bool>,
    pub model_name: Option<&'a str>,
    pub architecture: Option<&'a str>,
}

impl TokenizerConfig {
    pub(crate) fn source(&self) -> Source<'_> {
        Source {
            model: &self.model,
            pre: self.pre.as_deref(),
            tokens: &self.tokens,
            scores: self.scores.as_deref().map(Cow::Borrowed),
            token_types: self.token_types.as_deref(),
            merges: self.merges.as_deref(),
            special: self.special.clone(),
            add_bos: self.add_bos,
            add_eos: self.add_eos,
            add_sep: self.add_sep,
            add_space_prefix: self.add_space_prefix,
            remove_extra_whitespaces: self.remove_extra_whitespaces,
            model_name: self.model_name.as_deref(),
            architecture: self.architecture.as_deref(),
        }
    }
}

impl Source<'_> {
    pub(crate) fn to_config(&self) -> TokenizerConfig {
        TokenizerConfig {
            model: self.model.to_string(),
            pre: self.pre.map(str::to_string),
            tokens: self.tokens.to_vec(),
            scores: self.scores.as_ref().map(|s| s.to_vec()),
            token_types: self.token_types.map(<[i32]>::to_vec),
            merges: self.merges.map(<[String]>::to_vec),
            special: self.special.clone(),
            add_bos: self.add_bos,
            add_eos: self.add_eos,
            add_sep: self.add_sep,
            add_space_prefix: self.add_space_prefix,
            remove_extra_whitespaces: self.remove_extra_whitespaces,
            model_name: self.model_name.map(str::to_string),
            architecture: self.architecture.map(str::to_string),
        }
    }
}

fn invalid(key: &str, reason: impl Into<String>) -> TokenizerError {
    TokenizerError::InvalidMetadata {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn wrong_type(key: &str, expected: &str, v: &MetadataValue) -> TokenizerError {
    invalid(key, format!("expected {expected}, found {}", v.type_name()))
}

/// A token id key, accepting any integer type; negative means "not set".
fn meta_id(meta: &Metadata, key: &str) -> Result<Option<u32>, TokenizerError> {
    match meta.get(key) {
        None => Ok(None),
        Some(v) => match v.as_i128() {
            Some(i) if i < 0 => Ok(None),
            Some(i) => u32::try_from(i)
                .map(Some)
                .map_err(|_| invalid(key, format!("{i} is out of range"))),
            None => Err(wrong_type(key, "an integer", v)),
        },
    }
}

fn meta_bool(meta: &Metadata, key: &str) -> Result<Option<bool>, TokenizerError> {
    match meta.get(key) {
        None => Ok(None),
        Some(MetadataValue::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(wrong_type(key, "bool", v)),
    }
}

fn meta_str<'m>(meta: &'m Metadata, key: &str) -> Result<Option<&'m str>, TokenizerError> {
    match meta.get(key) {
        None => Ok(None),
        Some(MetadataValue::String(s)) => Ok(Some(s)),
        Some(v) => Err(wrong_type(key, "string", v)),
    }
}

fn meta_strings<'m>(meta: &'m Metadata, key: &str) -> Result<Option<&'m [String]>, TokenizerError> {
    match meta.get(key) {
        None => Ok(None),
        Some(MetadataValue::Array(MetadataArray::String(v))) => Ok(Some(v)),
        Some(v) => Err(wrong_type(key, "array[string]", v)),
    }
}

/// Reads the `tokenizer.ggml.*` keys (plus `general.name`/`general.architecture`).
pub(crate) fn read_gguf(meta: &Metadata) -> Result<Source<'_>, TokenizerError> {
    let model =
        meta_str(meta, KEY_MODEL)?.ok_or_else(|| TokenizerError::MissingKey(KEY_MODEL.into()))?;
    let scores = match meta.get(KEY_SCORES) {
        None => None,
        Some(MetadataValue::Array(MetadataArray::F32(v))) => Some(Cow::Borrowed(v.as_slice())),
        Some(MetadataValue::Array(MetadataArray::I32(v))) => {
            Some(Cow::Owned(v.iter().map(|&x| x as f32).collect()))
        }
        Some(v) => return Err(wrong_type(KEY_SCORES, "array[f32]", v)),
    };
    let token_types = match meta.get(KEY_TOKEN_TYPE) {
        None => None,
        Some(MetadataValue::Array(MetadataArray::I32(v))) => Some(v.as_slice()),
        Some(v) => return Err(wrong_type(KEY_TOKEN_TYPE, "array[i32]", v)),
    };
    let id = |key: &str| meta_id(meta, key);
    // The deprecated prefix/suffix/middle keys are read after the fim_* ones.
    let later =
        |old: &str, new: &str| -> Result<Option<u32>, TokenizerError> { Ok(id(old)?.or(id(new)?)) };
    let special = SpecialTokenIds {
        bos: id(KEY_BOS)?,
        eos: id(KEY_EOS)?,
        eot: id("tokenizer.ggml.eot_token_id")?,
        eom: id("tokenizer.ggml.eom_token_id")?,
        unk: id("tokenizer.ggml.unknown_token_id")?,
        sep: id(KEY_SEP)?,
        pad: id("tokenizer.ggml.padding_token_id")?,
        mask: id("tokenizer.ggml.mask_token_id")?,
        fim_pre: later(
            "tokenizer.ggml.prefix_token_id",
            "tokenizer.ggml.fim_pre_token_id",
        )?,
        fim_suf: later(
            "tokenizer.ggml.suffix_token_id",
            "tokenizer.ggml.fim_suf_token_id",
        )?,
        fim_mid: later(
            "tokenizer.ggml.middle_token_id",
            "tokenizer.ggml.fim_mid_token_id",
        )?,
        fim_pad: id("tokenizer.ggml.fim_pad_token_id")?,
        fim_rep: id("tokenizer.ggml.fim_rep_token_id")?,
        fim_sep: id("tokenizer.ggml.fim_sep_token_id")?,
    };
    Ok(Source {
        model,
        pre: meta_str(meta, KEY_PRE)?,
        tokens: meta_strings(meta, KEY_TOKENS)?
            .ok_or_else(|| TokenizerError::MissingKey(KEY_TOKENS.into()))?,
        scores,
        token_types,
        merges: meta_strings(meta, KEY_MERGES)?,
        special,
        add_bos: meta_bool(meta, KEY_ADD_BOS)?,
        add_eos: meta_bool(meta, KEY_ADD_EOS)?,
        add_sep: meta_bool(meta, KEY_ADD_SEP)?,
        add_space_prefix: meta_bool(meta, KEY_ADD_PREFIX)?,
        remove_extra_whitespaces: meta_bool(meta, KEY_REMOVE_EXTRA_WS)?,
        model_name: meta_str(meta, "general.name")?,
        architecture: meta_str(meta, "general.architecture")?,
    })
}

pub(crate) fn build(src: Source<'_>) -> Result<Tokenizer, TokenizerError> {
    let mut warnings = Vec::new();
    let model = src.model.to_string();
    let mut pre = src.pre.map(str::to_string);

    // Per model type: the algorithm and default special ids.
    let (kind, mut ids) = match src.model {
        "llama" => (
            TokenizerKind::SentencePiece,
            SpecialTokenIds {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..Default::default()
            },
        ),
        "gpt2" => (
            TokenizerKind::Bpe,
            SpecialTokenIds {
                bos: Some(11),
                eos: Some(11),
                ..Default::default()
            },
        ),
        "gemma4" => {
            pre = Some("gemma4".to_string());
            (TokenizerKind::Bpe, SpecialTokenIds::default())
        }
        "no_vocab" | "none" | "bert" | "t5" | "rwkv" | "plamo2" | "hybriddna" | "whitespace" => {
            return Err(TokenizerError::UnsupportedModel(model))
        }
        _ => return Err(TokenizerError::UnknownModel(model)),
    };

    let mut add_space_prefix = false;
    let mut add_bos;
    let mut add_eos = false;
    let mut add_sep = false;
    let mut clean_spaces = false;
    let mut pre_cfg: Option<PreConfig> = None;
    match kind {
        TokenizerKind::Bpe => {
            let name = match pre.as_deref() {
                None | Some("") => {
                    warnings.push(
                        "missing pre-tokenizer type (tokenizer.ggml.pre), using 'default': \
                         generation quality will be degraded"
                            .to_string(),
                    );
                    "default"
                }
                Some(p) => p,
            };
            let pc = bpe_pre_config(name)
                .ok_or_else(|| TokenizerError::UnknownPreTokenizer(name.to_string()))?;
            clean_spaces = pc.clean_spaces;
            add_bos = pc.add_bos;
            add_sep = pc.add_sep;
            if pc.no_bos {
                ids.bos = None;
            }
            pre_cfg = Some(pc);
        }
        TokenizerKind::SentencePiece => {
            add_space_prefix = true;
            add_bos = true;
        }
    }
    if let Some(v) = src.add_space_prefix {
        add_space_prefix = v;
    }
    let remove_extra_whitespaces = src.remove_extra_whitespaces.unwrap_or(false);

    // The vocabulary.
    let n = src.tokens.len();
    if n == 0 {
        return Err(invalid(KEY_TOKENS, "the vocabulary is empty"));
    }
    if n >= u32::MAX as usize {
        return Err(invalid(KEY_TOKENS, "too many tokens"));
    }
    if let Some(s) = &src.scores {
        if s.len() < n {
            return Err(invalid(
                KEY_SCORES,
                format!("{} scores for {n} tokens", s.len()),
            ));
        }
    }
    if let Some(t) = src.token_types {
        if t.len() < n {
            return Err(invalid(
                KEY_TOKEN_TYPE,
                format!("{} token types for {n} tokens", t.len()),
            ));
        }
    }
    let bytes: usize = src.tokens.iter().map(String::len).sum();
    if bytes >= u32::MAX as usize {
        return Err(invalid(KEY_TOKENS, "the token texts are too large"));
    }
    let mut vocab = StrTable::with_capacity(n, bytes + 64);
    for (i, word) in src.tokens.iter().enumerate() {
        let placeholder;
        let text = if word.is_empty() {
            warnings.push(format!("empty token at index {i}"));
            placeholder = format!("[EMPTY_{i}]");
            &placeholder
        } else {
            word
        };
        if let Err(first) = vocab.push(text) {
            return Err(TokenizerError::DuplicateToken {
                text: text.clone(),
                first,
                second: i as u32,
            });
        }
    }
    let scores: Vec<f32> = match &src.scores {
        Some(s) => s[..n].to_vec(),
        None => vec![0.0; n],
    };
    let mut attrs: Vec<u16> = match src.token_types {
        Some(t) => t[..n]
            .iter()
            .map(|&v| TokenType::from_gguf(v).attr())
            .collect(),
        None => vec![attr::NORMAL; n],
    };

    // Special ids: defaults out of range are disabled, file values in range win.
    let given = &src.special;
    let pairs: [(&str, &mut Option<u32>, Option<u32>); 14] = [
        ("bos", &mut ids.bos, given.bos),
        ("eos", &mut ids.eos, given.eos),
        ("eot", &mut ids.eot, given.eot),
        ("eom", &mut ids.eom, given.eom),
        ("unk", &mut ids.unk, given.unk),
        ("sep", &mut ids.sep, given.sep),
        ("pad", &mut ids.pad, given.pad),
        ("mask", &mut ids.mask, given.mask),
        ("fim_pre", &mut ids.fim_pre, given.fim_pre),
        ("fim_suf", &mut ids.fim_suf, given.fim_suf),
        ("fim_mid", &mut ids.fim_mid, given.fim_mid),
        ("fim_pad", &mut ids.fim_pad, given.fim_pad),
        ("fim_rep", &mut ids.fim_rep, given.fim_rep),
        ("fim_sep", &mut ids.fim_sep, given.fim_sep),
    ];
    for (name, slot, from_file) in pairs {
        if let Some(d) = *slot {
            if d as usize >= n {
                warnings.push(format!(
                    "default {name} token id {d} is out of the vocabulary, disabling it"
                ));
                *slot = None;
            }
        }
        if let Some(v) = from_file {
            if v as usize >= n {
                warnings.push(format!(
                    "bad {name} token id {v} (vocabulary size {n}), keeping {slot:?}"
                ));
            } else {
                *slot = Some(v);
            }
        }
    }

    if let Some(v) = src.add_bos {
        add_bos = v;
    }
    if let Some(v) = src.add_eos {
        add_eos = v;
    }
    if let Some(v) = src.add_sep {
        add_sep = v;
    }
    if pre_cfg.as_ref().is_some_and(|p| p.gemma4) && !add_bos {
        warnings.push(format!("overriding {KEY_ADD_BOS} to true for Gemma 4"));
        add_bos = true;
    }
    for (on, id, flag, key) in [
        (add_bos, ids.bos, KEY_ADD_BOS, KEY_BOS),
        (add_eos, ids.eos, KEY_ADD_EOS, KEY_EOS),
        (add_sep, ids.sep, KEY_ADD_SEP, KEY_SEP),
    ] {
        if on && id.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: flag.into(),
                id_key: key.into(),
            });
        }
    }

    // Special tokens recognized by their text become control tokens.
    let mut promote = |attrs: &mut [u16], id: u32| {
        if attrs[id as usize] & attr::CONTROL == 0 {
            warnings.push(format!(
                "control-looking token {id} '{}' was not control-type; overriding its type",
                vocab.text(id)
            ));
            attrs[id as usize] |= attr::CONTROL;
        }
    };
    let detect: [(&mut Option<u32>, &[&str]); 8] = [
        (&mut ids.eot, vocab::EOT_TEXTS),
        (&mut ids.eom, vocab::EOM_TEXTS),
        (&mut ids.fim_pre, vocab::FIM_PRE_TEXTS),
        (&mut ids.fim_suf, vocab::FIM_SUF_TEXTS),
        (&mut ids.fim_mid, vocab::FIM_MID_TEXTS),
        (&mut ids.fim_pad, vocab::FIM_PAD_TEXTS),
        (&mut ids.fim_rep, vocab::FIM_REP_TEXTS),
        (&mut ids.fim_sep, vocab::FIM_SEP_TEXTS),
    ];
    // llama.cpp keeps the first match in its hash map's iteration order; that
    // order is only worked out when a list has several matches.
    let mut map_order: Option<Vec<u32>> = None;
    for (slot, texts) in detect {
        if slot.is_some() {
            continue;
        }
        let found: Vec<u32> = texts.iter().filter_map(|t| vocab.get(t)).collect();
        let chosen = if found.len() > 1 {
            let pos = map_order.get_or_insert_with(|| {
                stdmap::iteration_positions((0..n as u32).map(|id| vocab.text(id)))
            });
            found.iter().copied().min_by_key(|&id| pos[id as usize])
        } else {
            found.first().copied()
        };
        if let Some(id) = chosen {
            *slot = Some(id);
            promote(&mut attrs, id);
        }
    }
    // Control tokens named "unused".
    for (id, a) in attrs.iter_mut().enumerate() {
        if *a & attr::CONTROL != 0 && vocab.text(id as u32).contains("unused") {
            *a |= attr::UNUSED;
        }
    }

    // End-of-generation tokens.
    let mut eog: BTreeSet<u32> = [ids.fim_pad, ids.fim_rep, ids.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for text in vocab::EOG_TEXTS {
        if let Some(id) = vocab.get(text) {
            eog.insert(id);
            promote(&mut attrs, id);
        }
    }
    // gpt-oss: always rendered.
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = vocab.get(text) {
            attrs[id as usize] = attr::USER_DEFINED;
        }
    }
    for (name, id) in [("eos", ids.eos), ("eot", ids.eot), ("eom", ids.eom)] {
        if let Some(id) = id {
            if eog.insert(id) {
                warnings.push(format!(
                    "{name} token {id} was not among the end-of-generation tokens, adding it"
                ));
            }
        }
    }
    let in_eog = |eog: &BTreeSet<u32>, text: &str| vocab.get(text).filter(|id| eog.contains(id));
    // o200k_harmony / solar-open: "<|end|>" is not EOG next to "<|return|>"+"<|call|>" or "<|calls|>"+"<|flush|>".
    {
        let has_return = in_eog(&eog, "<|return|>").is_some();
        let has_call = in_eog(&eog, "<|call|>").is_some() || in_eog(&eog, "<|calls|>").is_some();
        let has_flush = in_eog(&eog, "<|flush|>").is_some();
        if let Some(end) = in_eog(&eog, "<|end|>") {
            if has_call && (has_return || has_flush) {
                eog.remove(&end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
    }
    // Gemma 4 / PaddleOCR / PLaMo: "</s>" is not EOG next to "<|tool_response>" or "<|plamo:eos|>".
    if in_eog(&eog, "<|tool_response>").is_some() || in_eog(&eog, "<|plamo:eos|>").is_some() {
        if let Some(s) = in_eog(&eog, "</s>") {
            eog.remove(&s);
            attrs[s as usize] = attr::NORMAL;
        }
    }

    // Special tokens for partitioning: control, user-defined and unknown; longest first.
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&id| {
            attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
        })
        .collect();
    order.sort_by_key(|&id| std::cmp::Reverse(vocab.text(id).len()));

    // Per-token attributes llama.cpp sets by model name.
    {
        let name = src.model_name.unwrap_or("").to_lowercase();
        let pre_raw = src.pre.unwrap_or("");
        let arch = src.architecture.unwrap_or("");
        let contains_any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        let mut set = |attrs: &mut [u16], text: &str, bit: u16, on: bool| match vocab.get(text) {
            Some(id) => {
                let a = &mut attrs[id as usize];
                *a = if on { *a | bit } else { *a & !bit };
            }
            None => warnings.push(format!("token '{text}' is missing from the vocabulary")),
        };
        if contains_any(pre_raw, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
            || contains_any(arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            set(&mut attrs, "<mask>", attr::LSTRIP, true);
        } else if contains_any(&name, &["phi-3", "phi3"]) {
            for &id in &order {
                attrs[id as usize] |= attr::RSTRIP;
            }
            set(&mut attrs, "</s>", attr::RSTRIP, true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                set(&mut attrs, t, attr::RSTRIP, false);
            }
        } else if contains_any(&name, &["modern-bert"]) {
            set(&mut attrs, "[MASK]", attr::LSTRIP, true);
        }
    }

    // Byte fallback tokens.
    let byte_encode = pre_cfg.as_ref().is_none_or(|p| p.byte_encode);
    let mut byte_tokens: Box<ByteTokens> = Box::new([None; 256]);
    for b in 0..=255u8 {
        let hex = format!("<0x{b:02X}>");
        let ascii = if b < 0x80 {
            vocab.get((b as char).encode_utf8(&mut [0; 4]))
        } else {
            None
        };
        byte_tokens[b as usize] = match kind {
            TokenizerKind::SentencePiece => vocab.get(&hex).or(ascii),
            TokenizerKind::Bpe if !byte_encode => vocab.get(&hex),
            // Byte-level BPE looks up each byte of a piece as a one-byte
            // string: only ASCII bytes can be tokens.
            TokenizerKind::Bpe => ascii,
        };
    }

    let special = SpecialTokens::new(order, |id| vocab.text(id).to_string())
        .map_err(TokenizerError::Other)?;

    let (ranks, pre_tokenizer) = match &pre_cfg {
        Some(pc) => {
            let merges = src
                .merges
                .ok_or_else(|| TokenizerError::MissingKey(KEY_MERGES.into()))?;
            let pt = PreTokenizer::new(pc.regexes).map_err(TokenizerError::Other)?;
            // Build the Unicode tables now rather than on the first encode.
            crate::unicode::init();
            (Some(BpeRanks::new(merges)), Some(pt))
        }
        None => (None, None),
    };
    Ok(Tokenizer {
        kind,
        model,
        pre: src.pre.map(str::to_string),
        vocab,
        scores,
        attrs,
        ids,
        add_bos,
        add_eos,
        add_sep,
        add_space_prefix,
        remove_extra_whitespaces,
        clean_spaces,
        ignore_merges: pre_cfg.as_ref().is_some_and(|p| p.ignore_merges),
        escape_whitespaces: pre_cfg.as_ref().is_some_and(|p| p.escape_whitespaces),
        byte_encode,
        gemma4_newlines: pre_cfg.as_ref().is_some_and(|p| p.gemma4),
        byte_tokens,
        special,
        eog: eog.into_iter().collect(),
        ranks,
        pre_tokenizer,
        warnings,
        hf: None,
    })
}
