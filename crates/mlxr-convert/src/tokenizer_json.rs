//! A Hugging Face `tokenizer.json` and `tokenizer_config.json` from a GGUF
//! byte-level BPE vocabulary (`tokenizer.ggml.model = gpt2`): the vocabulary
//! and merges, control / user-defined tokens as added tokens, the
//! pre-tokenizer that matches `tokenizer.ggml.pre`, BOS/EOS handling.

use mlxr_formats::gguf::Metadata;
use serde_json::{json, Map, Value};

use crate::arch::Arch;
use crate::ConvertError;

/// Hugging Face's split patterns (tokenizer.json syntax).
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

pub struct HfTokenizer {
    /// tokenizer.json (byte-level BPE vocabularies).
    pub tokenizer: Option<Value>,
    /// tokenizer.model (SentencePiece vocabularies).
    pub model: Option<Vec<u8>>,
    pub config: Value,
}

fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split(pattern: &str) -> Value {
    json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false})
}

pub fn from_gguf(meta: &Metadata, arch: Arch) -> Result<HfTokenizer, ConvertError> {
    let model = meta.get_str("tokenizer.ggml.model")?;
    if model == "llama" {
        let proto = crate::spm::model_proto(meta)?;
        let mut config = tokenizer_config(meta, "LlamaTokenizer")?;
        // Control and user-defined tokens as added tokens, so they come back as such.
        let tokens = meta.get_str_array("tokenizer.ggml.tokens")?;
        let types = meta.get_i32_array("tokenizer.ggml.token_type")?;
        let mut decoder = Map::new();
        for (id, (text, &ty)) in tokens.iter().zip(&types).enumerate() {
            if ty == CONTROL || ty == USER_DEFINED {
                decoder.insert(
                    id.to_string(),
                    json!({"content": text, "lstrip": false, "normalized": ty != CONTROL,
                           "rstrip": false, "single_word": false, "special": ty == CONTROL}),
                );
            }
        }
        config.insert("added_tokens_decoder".into(), Value::Object(decoder));
        return Ok(HfTokenizer {
            tokenizer: None,
            model: Some(proto),
            config: Value::Object(config),
        });
    }
    if model != "gpt2" {
        return Err(ConvertError::Input(format!(
            "GGUF tokenizer model {model:?} is not supported yet (byte-level BPE \"gpt2\" and SentencePiece \"llama\" are)"
        )));
    }
    let pre = meta.opt_str("tokenizer.ggml.pre")?.unwrap_or("default");
    let (normalizer, pre_tokenizer, ignore_merges) = match pre {
        "qwen2" => (
            json!({"type": "NFC"}),
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_SPLIT), byte_level(false)]}),
            false,
        ),
        "llama-bpe" | "llama3" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_SPLIT), byte_level(false)]}),
            true,
        ),
        "gpt-2" | "default" => (Value::Null, byte_level(true), false),
        "smollm" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            false,
        ),
        other => {
            return Err(ConvertError::Input(format!(
                "pre-tokenizer {other:?} has no tokenizer.json form here yet (qwen2, llama-bpe, gpt-2, smollm do)"
            )))
        }
    };
    let tokens = meta.get_str_array("tokenizer.ggml.tokens")?;
    let types = meta
        .get_i32_array("tokenizer.ggml.token_type")
        .unwrap_or_else(|_| vec![1; tokens.len()]);
    let merges = meta.opt_str_array("tokenizer.ggml.merges")?.unwrap_or(&[]);
    let mut vocab = Map::new();
    let mut added = Vec::new();
    for (id, (text, &ty)) in tokens.iter().zip(&types).enumerate() {
        if ty == UNUSED {
            continue;
        }
        vocab.insert(text.clone(), json!(id));
        if ty == CONTROL || ty == USER_DEFINED {
            added.push(json!({
                "id": id, "content": text, "single_word": false, "lstrip": false, "rstrip": false,
                "normalized": ty != CONTROL, "special": ty == CONTROL,
            }));
        }
    }
    let token = |key: &str| -> Result<Option<(u32, String)>, ConvertError> {
        Ok(
            match meta.opt_u32(&format!("tokenizer.ggml.{key}_token_id"))? {
                Some(id) => tokens.get(id as usize).map(|t| (id, t.clone())),
                None => None,
            },
        )
    };
    let bos = token("bos")?;
    let eos = token("eos")?;
    let add_bos = meta
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(false);
    let add_eos = meta
        .opt_bool("tokenizer.ggml.add_eos_token")?
        .unwrap_or(false);
    let post_processor = if add_bos || add_eos {
        let mut single = Vec::new();
        let mut specials = Map::new();
        let mut special = |t: &Option<(u32, String)>, what: &str| -> Result<Value, ConvertError> {
            let (id, text) = t.clone().ok_or_else(|| {
                ConvertError::Input(format!("the GGUF adds {what} but names no {what} token"))
            })?;
            specials.insert(
                text.clone(),
                json!({"id": text, "ids": [id], "tokens": [text]}),
            );
            Ok(json!({"SpecialToken": {"id": text, "type_id": 0}}))
        };
        if add_bos {
            single.push(special(&bos, "BOS")?);
        }
        single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
        if add_eos {
            single.push(special(&eos, "EOS")?);
        }
        let mut pair = single.clone();
        pair.extend(single.iter().map(|v| {
            if v.get("Sequence").is_some() {
                json!({"Sequence": {"id": "B", "type_id": 1}})
            } else {
                v.clone()
            }
        }));
        json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials})
    } else {
        json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true})
    };
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges,
        },
    });
    // Phi-3's converter reads a BPE tokenizer.json only under this class (its Phi-4 path).
    let class = if arch == Arch::Phi3 {
        "GPT2Tokenizer"
    } else {
        "PreTrainedTokenizerFast"
    };
    Ok(HfTokenizer {
        tokenizer: Some(tokenizer),
        model: None,
        config: Value::Object(tokenizer_config(meta, class)?),
    })
}

/// tokenizer_config.json: BOS/EOS flags, the special tokens' texts, the class.
fn tokenizer_config(meta: &Metadata, class: &str) -> Result<Map<String, Value>, ConvertError> {
    let tokens = meta.get_str_array("tokenizer.ggml.tokens")?;
    let mut config = Map::new();
    config.insert(
        "add_bos_token".into(),
        json!(meta
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(false)),
    );
    config.insert(
        "add_eos_token".into(),
        json!(meta
            .opt_bool("tokenizer.ggml.add_eos_token")?
            .unwrap_or(false)),
    );
    for (key, gguf) in [
        ("bos_token", "bos"),
        ("eos_token", "eos"),
        ("pad_token", "padding"),
        ("unk_token", "unknown"),
    ] {
        let text = meta
            .opt_u32(&format!("tokenizer.ggml.{gguf}_token_id"))?
            .and_then(|id| tokens.get(id as usize));
        config.insert(key.into(), text.map(|t| json!(t)).unwrap_or(Value::Null));
    }
    config.insert("clean_up_tokenization_spaces".into(), json!(false));
    if let Some(b) = meta.opt_bool("tokenizer.ggml.add_space_prefix")? {
        config.insert("add_prefix_space".into(), json!(b));
    }
    config.insert("tokenizer_class".into(), json!(class));
    Ok(config)
}
