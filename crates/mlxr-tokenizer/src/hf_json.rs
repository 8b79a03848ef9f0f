//! Tokenizers of Hugging Face / MLX model folders: `tokenizer.json` with
//! `tokenizer_config.json` and `generation_config.json`.
//!
//! Encoding runs through the `tokenizers` crate, so it is what transformers
//! gives for the same files (every normalizer and pre-tokenizer HF has).
//! Everything else (token pieces for streaming, special and end-of-generation
//! tokens) uses this crate's vocabulary built from the same file: byte-level
//! vocabularies as llama.cpp's `gpt2` model, Metaspace/byte-fallback ones as
//! its SentencePiece (`llama`) model.

use std::path::Path;

use serde_json::Value;

use crate::vocab::{SpecialTokenIds, TokenType, TokenizerConfig};
use crate::{TokenId, Tokenizer, TokenizerError};

fn other(msg: impl Into<String>) -> TokenizerError {
    TokenizerError::Other(msg.into())
}

fn read_json(path: &Path) -> Result<Option<Value>, TokenizerError> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| other(format!("reading {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| other(format!("{} is not valid JSON: {e}", path.display())))
}

/// A special token as `tokenizer_config.json` writes it: a string or an
/// `AddedToken` object with `content`.
fn token_text(v: &Value) -> Option<&str> {
    v.as_str().or_else(|| v["content"].as_str())
}

/// The folder's chat template: `chat_template.jinja`, else the
/// `tokenizer_config.json` entry (a string, or named templates of which
/// `default` is taken).
pub fn chat_template(dir: &Path) -> Result<Option<String>, TokenizerError> {
    let file = dir.join("chat_template.jinja");
    if file.exists() {
        return std::fs::read_to_string(&file)
            .map(Some)
            .map_err(|e| other(format!("reading {}: {e}", file.display())));
    }
    let Some(config) = read_json(&dir.join("tokenizer_config.json"))? else {
        return Ok(None);
    };
    Ok(match &config["chat_template"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(named) => named
            .iter()
            .find(|t| t["name"] == "default")
            .or(named.first())
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        _ => None,
    })
}

impl Tokenizer {
    /// Builds the tokenizer of a model folder.
    pub fn from_hf_dir(dir: &Path) -> Result<Tokenizer, TokenizerError> {
        let path = dir.join("tokenizer.json");
        let json = read_json(&path)?.ok_or_else(|| {
            other(format!(
                "{} has no tokenizer.json (other tokenizer formats are not supported)",
                dir.display()
            ))
        })?;
        let hf = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| other(format!("{}: {e}", path.display())))?;
        let config = read_json(&dir.join("tokenizer_config.json"))?.unwrap_or(Value::Null);
        let generation = read_json(&dir.join("generation_config.json"))?.unwrap_or(Value::Null);

        let vocab = Vocabulary::read(&json, &hf)?;
        let id_of = |v: &Value| token_text(v).and_then(|t| hf.token_to_id(t));
        let mut eos_ids: Vec<TokenId> = match &generation["eos_token_id"] {
            Value::Number(n) => n.as_u64().map(|id| id as TokenId).into_iter().collect(),
            Value::Array(ids) => ids
                .iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as TokenId)
                .collect(),
            _ => Vec::new(),
        };
        if let Some(id) = id_of(&config["eos_token"]) {
            eos_ids.insert(0, id);
        }
        let special = SpecialTokenIds {
            bos: id_of(&config["bos_token"])
                .or_else(|| generation["bos_token_id"].as_u64().map(|v| v as TokenId)),
            eos: eos_ids.first().copied(),
            unk: id_of(&config["unk_token"]),
            pad: id_of(&config["pad_token"]),
            ..Default::default()
        };
        let cfg = TokenizerConfig {
            model: vocab.model.to_string(),
            // Only this crate's own encoder reads the pre-tokenizer type, and
            // encoding goes through `tokenizers` here.
            pre: (vocab.model == "gpt2").then(|| "qwen2".to_string()),
            tokens: vocab.tokens,
            scores: None,
            token_types: Some(vocab.types),
            merges: Some(vocab.merges),
            special,
            add_bos: config["add_bos_token"].as_bool(),
            add_eos: config["add_eos_token"].as_bool(),
            add_sep: None,
            add_space_prefix: Some(vocab.space_prefix),
            remove_extra_whitespaces: None,
            model_name: None,
            architecture: None,
        };
        let mut tokenizer = Tokenizer::from_config(&cfg)?;
        tokenizer.clean_spaces = config["clean_up_tokenization_spaces"]
            .as_bool()
            .unwrap_or(false);
        tokenizer.eog.extend(eos_ids);
        tokenizer.eog.sort_unstable();
        tokenizer.eog.dedup();
        tokenizer.hf = Some(Box::new(hf));
        Ok(tokenizer)
    }

    /// `encode` through the `tokenizers` crate: `add_special` runs the
    /// file's post-processor (BOS and the like). Added special tokens are
    /// always recognised, as in transformers.
    pub(crate) fn encode_hf(
        hf: &tokenizers::Tokenizer,
        text: &str,
        add_special: bool,
    ) -> Option<Vec<TokenId>> {
        hf.encode(text, add_special)
            .ok()
            .map(|e| e.get_ids().to_vec())
    }
}

struct Vocabulary {
    model: &'static str,
    tokens: Vec<String>,
    /// `"left right"`, as GGUF stores them.
    merges: Vec<String>,
    types: Vec<i32>,
    space_prefix: bool,
}

impl Vocabulary {
    fn read(json: &Value, hf: &tokenizers::Tokenizer) -> Result<Self, TokenizerError> {
        let kind = json["model"]["type"].as_str().unwrap_or("BPE");
        if kind != "BPE" {
            return Err(TokenizerError::UnsupportedModel(format!(
                "{kind} (tokenizer.json)"
            )));
        }
        let text = json.to_string();
        let byte_level = text.contains("\"ByteLevel\"");
        let metaspace = text.contains("\"Metaspace\"") || text.contains("\u{2581}");
        let model = if byte_level {
            "gpt2"
        } else if metaspace {
            "llama"
        } else {
            return Err(other(
                "tokenizer.json is neither byte-level nor SentencePiece-style (Metaspace)",
            ));
        };
        let size = hf.get_vocab_size(true);
        let mut tokens: Vec<Option<String>> = vec![None; size];
        for (text, id) in hf.get_vocab(true) {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = Some(text);
            }
        }
        let mut types = vec![TokenType::Normal as i32; size];
        for added in json["added_tokens"].as_array().into_iter().flatten() {
            let Some(id) = added["id"]
                .as_u64()
                .map(|v| v as usize)
                .filter(|&v| v < size)
            else {
                continue;
            };
            types[id] = if added["special"].as_bool().unwrap_or(false) {
                TokenType::Control as i32
            } else {
                TokenType::UserDefined as i32
            };
        }
        let tokens: Vec<String> = tokens
            .into_iter()
            .enumerate()
            .map(|(id, t)| t.unwrap_or_else(|| format!("[UNUSED_{id}]")))
            .collect();
        if model == "llama" {
            for (id, t) in tokens.iter().enumerate() {
                let is_byte = t.len() == 6 && t.starts_with("<0x") && t.ends_with('>');
                if is_byte && types[id] == TokenType::Normal as i32 {
                    types[id] = TokenType::Byte as i32;
                }
            }
        }
        // SentencePiece's leading "▁": a Prepend normalizer (Llama 2), or a
        // Metaspace pre-tokenizer that prepends (older files: add_prefix_space).
        let pre = &json["pre_tokenizer"];
        let metaspace_prepends = pre["type"] == "Metaspace"
            && (matches!(pre["prepend_scheme"].as_str(), Some("always" | "first"))
                || pre["add_prefix_space"] == true);
        let space_prefix = model == "llama"
            && (json["normalizer"].to_string().contains("Prepend") || metaspace_prepends);
        let merges = json["model"]["merges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| match m {
                Value::String(s) => Some(s.clone()),
                Value::Array(pair) => Some(format!("{} {}", pair[0].as_str()?, pair[1].as_str()?)),
                _ => None,
            })
            .collect();
        Ok(Self {
            model,
            tokens,
            merges,
            types,
            space_prefix,
        })
    }
}
