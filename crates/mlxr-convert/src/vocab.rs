//! The `tokenizer.*` metadata of a byte-level BPE tokenizer (`tokenizer.json`
//! with merges), as convert_hf_to_gguf.py's GPT-2 vocabulary path writes it:
//! the token list by id, token types, the pre-tokenizer name, merges,
//! special token ids, add-BOS/EOS flags and the chat template.

use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::hf_folder::read_json_object;
use crate::kvs::Kvs;
use crate::ConvertError;

/// llama.cpp's token types.
pub(crate) const NORMAL: i32 = 1;
pub(crate) const CONTROL: i32 = 3;
pub(crate) const USER_DEFINED: i32 = 4;
pub(crate) const UNUSED: i32 = 5;

/// The text llama.cpp's converter encodes to tell pre-tokenizers apart: the
/// SHA-256 of the printed id list names the pre-tokenizer.
const CHECK_TEXT: &str = "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u{200d}🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL";

/// Hashes of [`CHECK_TEXT`]'s ids for common tokenizers and llama.cpp's
/// name for each (names MLXR's tokenizer runs); any other is named with
/// `--tokenizer-pre`.
const KNOWN_PRE_TOKENIZERS: &[(&str, &str)] = &[
    (
        "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5",
        "llama-bpe",
    ),
    (
        "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454",
        "gpt-2",
    ),
    (
        "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea",
        "qwen2",
    ),
    (
        "d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c",
        "qwen2",
    ),
    (
        "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249",
        "smollm",
    ),
    (
        "1444df51289cfa8063b96f0e62b1125440111bc79a52003ea14b6eac7016fd5f",
        "qwen35",
    ),
    (
        "9d032fcbd5501f4a38150912590928bfb36091efb5df11b8e2124b0390e3fb1e",
        "falcon3",
    ),
    (
        "35d91631860c815f952d711435f48d356ebac988362536bed955d43bfa436e34",
        "starcoder",
    ),
    (
        "32d85c31273f8019248f2559fed492d929ea28b17e51d81d3bb36fff23ca72b3",
        "stablelm2",
    ),
    (
        "9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8",
        "command-r",
    ),
    (
        "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166",
        "olmo",
    ),
    (
        "a8594e3edff7c29c003940395316294b2c623e09894deebbc65f33f1515df79e",
        "dbrx",
    ),
    (
        "63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e",
        "tekken",
    ),
    (
        "fcace8b9cac38ce847670c970cd5892031a753a1ef381abd1d9af00f713da085",
        "phi-2",
    ),
    (
        "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5",
        "deepseek-v3",
    ),
    (
        "b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5",
        "deepseek-r1-qwen",
    ),
    (
        "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e",
        "gpt-4o",
    ),
    (
        "d353350c764d8c3b39c763113960e4fb4919bea5fbf208a0e3b22e8469dc7406",
        "llama4",
    ),
];

fn err(message: String) -> ConvertError {
    ConvertError::Input(message)
}

/// The hash llama.cpp's converter computes for this tokenizer.
pub fn pre_tokenizer_hash(tokenizer_json: &Path) -> Result<String, ConvertError> {
    let tok = tokenizers::Tokenizer::from_file(tokenizer_json)
        .map_err(|e| err(format!("{}: {e}", tokenizer_json.display())))?;
    let enc = tok.encode(CHECK_TEXT, true).map_err(|e| {
        err(format!(
            "{}: encoding failed: {e}",
            tokenizer_json.display()
        ))
    })?;
    let printed = format!(
        "[{}]",
        enc.get_ids()
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(hex(&Sha256::digest(printed.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the vocabulary keys. `pre` overrides the pre-tokenizer name.
pub fn write_vocab(
    dir: &Path,
    vocab_size: Option<u32>,
    pre: Option<&str>,
    kvs: &mut Kvs,
) -> Result<(), ConvertError> {
    let path = dir.join("tokenizer.json");
    let tokenizer = read_json_object(&path)?.ok_or_else(|| {
        err(format!(
            "{} has no tokenizer.json (nor a tokenizer.model)",
            dir.display()
        ))
    })?;
    let model = tokenizer
        .get("model")
        .and_then(Value::as_object)
        .ok_or_else(|| err(format!("{}: no \"model\" object", path.display())))?;
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        return Err(err(format!(
            "{}: tokenizer model {} is not supported (byte-level BPE is)",
            path.display(),
            model.get("type").unwrap_or(&Value::Null)
        )));
    }
    if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
        return Err(err(format!(
            "{}: a SentencePiece-style BPE (byte_fallback) without tokenizer.model is not supported yet",
            path.display()
        )));
    }
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| err(format!("{}: no model.vocab", path.display())))?;
    let added: Vec<&Map<String, Value>> = tokenizer
        .get("added_tokens")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();

    // id -> (text, its added-token entry if it is one)
    type Entry<'a> = (String, Option<&'a Map<String, Value>>);
    let mut by_id: std::collections::BTreeMap<u64, Entry> = std::collections::BTreeMap::new();
    for (text, id) in vocab {
        let id = id.as_u64().ok_or_else(|| {
            err(format!(
                "{}: token {text:?} has no numeric id",
                path.display()
            ))
        })?;
        by_id.insert(id, (text.clone(), None));
    }
    for a in &added {
        let (Some(id), Some(text)) = (
            a.get("id").and_then(Value::as_u64),
            a.get("content").and_then(Value::as_str),
        ) else {
            return Err(err(format!(
                "{}: an added token has no id or content",
                path.display()
            )));
        };
        by_id.insert(id, (text.to_string(), Some(*a)));
    }
    let max_id = by_id.keys().next_back().copied().unwrap_or(0);
    let n = match vocab_size {
        Some(n) => u64::from(n),
        None => by_id.len() as u64,
    };
    if max_id >= n {
        return Err(err(format!(
            "tokenizer.json has token id {max_id}, beyond config.json's vocab_size {n}"
        )));
    }
    let mut tokens = Vec::with_capacity(n as usize);
    let mut types = Vec::with_capacity(n as usize);
    for i in 0..n {
        match by_id.get(&i) {
            None => {
                tokens.push(format!("[PAD{i}]"));
                types.push(UNUSED);
            }
            Some((text, None)) => {
                tokens.push(text.clone());
                types.push(NORMAL);
            }
            Some((text, Some(a))) => {
                let special = a.get("special").and_then(Value::as_bool).unwrap_or(false);
                if special || looks_special(text) {
                    tokens.push(text.clone());
                    types.push(CONTROL);
                } else {
                    tokens.push(text.replace('\u{2581}', " "));
                    types.push(USER_DEFINED);
                }
            }
        }
    }

    let pre = match pre {
        Some(p) => p.to_string(),
        None => {
            let hash = pre_tokenizer_hash(&path)?;
            KNOWN_PRE_TOKENIZERS
                .iter()
                .find(|(h, _)| *h == hash)
                .map(|(_, name)| name.to_string())
                .ok_or_else(|| {
                    err(format!(
                        "the tokenizer's pre-tokenizer is not one llama.cpp's converter knows (hash {hash}); name llama.cpp's pre-tokenizer with --tokenizer-pre (a convert job's tokenizer_pre), e.g. llama-bpe, qwen2, gpt-2, smollm"
                    ))
                })?
        }
    };

    kvs.set("tokenizer.ggml.model", "gpt2");
    kvs.set("tokenizer.ggml.pre", pre);
    kvs.set("tokenizer.ggml.tokens", tokens);
    kvs.set("tokenizer.ggml.token_type", types);
    let merges = merges(model, &path)?;
    if !merges.is_empty() {
        kvs.set("tokenizer.ggml.merges", merges);
    }
    special_tokens(dir, &tokenizer, &added, n, kvs)
}

/// Added tokens that look like control tokens although not marked special.
pub(crate) fn looks_special(text: &str) -> bool {
    matches!(text, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (text.starts_with("<|") && text.ends_with("|>"))
        || (text.starts_with("<｜") && text.ends_with("｜>"))
        || (text.starts_with("<unused") && text.ends_with('>'))
}

/// Merges as `"a b"` strings; pair-form merges with spaces inside a part get
/// the space shifted to U+0120, as llama.cpp expects.
fn merges(model: &Map<String, Value>, path: &Path) -> Result<Vec<String>, ConvertError> {
    let Some(list) = model.get("merges").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) if pair.len() == 2 => {
                let part = |v: &Value| {
                    v.as_str()
                        .map(|s| s.replace(' ', "\u{120}"))
                        .ok_or_else(|| {
                            err(format!("{}: a merge is not two strings", path.display()))
                        })
                };
                Ok(format!("{} {}", part(&pair[0])?, part(&pair[1])?))
            }
            _ => Err(err(format!("{}: unknown merges format", path.display()))),
        })
        .collect()
}

const SPECIAL_TYPES: [&str; 7] = ["bos", "eos", "unk", "sep", "pad", "cls", "mask"];

/// gguf-py's key for a special token id; `None` for the types it has no
/// key for (cls), which its converter skips too.
fn gguf_special_key(typ: &str) -> Option<String> {
    let name = match typ {
        "pad" => "padding",
        "unk" => "unknown",
        "sep" => "seperator", // sic: llama.cpp's spelling
        "bos" | "eos" | "mask" => typ,
        _ => return None,
    };
    Some(format!("tokenizer.ggml.{name}_token_id"))
}

/// Special token ids, add-BOS/EOS flags and the chat template, in the order
/// gguf-py's SpecialVocab finds them: tokenizer.json's post-processor,
/// tokenizer_config.json, then config.json's `*_token_id`.
pub(crate) fn special_tokens(
    dir: &Path,
    tokenizer: &Map<String, Value>,
    added: &[&Map<String, Value>],
    n_vocab: u64,
    kvs: &mut Kvs,
) -> Result<(), ConvertError> {
    let config = read_json_object(&dir.join("tokenizer_config.json"))?;
    let mut ids: Vec<(&str, u64)> = Vec::new();
    let mut add: Vec<(&str, bool)> = Vec::new();
    let token_content = |v: Option<&Value>| -> Option<String> {
        match v? {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
            _ => None,
        }
    };
    let cfg_token = |typ: &str| {
        config
            .as_ref()
            .and_then(|c| token_content(c.get(&format!("{typ}_token"))))
    };
    let bos = cfg_token("bos");
    let eos = cfg_token("eos");
    if let Some(pp) = tokenizer.get("post_processor").and_then(Value::as_object) {
        let processors: Vec<&Map<String, Value>> =
            match pp.get("processors").and_then(Value::as_array) {
                Some(list) => list.iter().filter_map(Value::as_object).collect(),
                None => vec![pp],
            };
        for p in processors {
            match p.get("type").and_then(Value::as_str) {
                Some("ByteLevel") => {
                    set_default(&mut add, "bos", false);
                    set_default(&mut add, "eos", false);
                }
                Some("TemplateProcessing") => {
                    let single = p
                        .get("single")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let special_id = |v: &Value| {
                        v.get("SpecialToken")
                            .and_then(|s| s.get("id"))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    };
                    if single.len() > 1 {
                        if let Some(first) = single.first().and_then(special_id) {
                            if bos.is_none() || config.is_none() {
                                return Err(err(
                                    "tokenizer.json's post-processor adds a leading special token that tokenizer_config.json does not name as bos_token; not supported yet".into(),
                                ));
                            }
                            put(&mut add, "bos", Some(&first) == bos.as_ref());
                        }
                        if let Some(last) = single.last().and_then(special_id) {
                            if Some(&last) != eos.as_ref() {
                                return Err(err(
                                    "tokenizer.json's post-processor adds a trailing special token other than eos_token; not supported yet".into(),
                                ));
                            }
                            put(&mut add, "eos", true);
                        }
                    }
                }
                Some(other) => {
                    return Err(err(format!(
                        "tokenizer.json post-processor {other} is not supported yet"
                    )))
                }
                None => {}
            }
        }
    }
    let mut chat_template = None;
    if let Some(cfg) = config.as_ref().filter(|c| !c.is_empty()) {
        let jinja = dir.join("chat_template.jinja");
        let alt = if jinja.is_file() {
            Some(Value::String(std::fs::read_to_string(&jinja).map_err(
                |e| err(format!("reading {}: {e}", jinja.display())),
            )?))
        } else {
            read_json_object(&dir.join("chat_template.json"))?
                .and_then(|o| o.get("chat_template").cloned())
        };
        chat_template = match cfg.get("chat_template").cloned().or(alt) {
            Some(Value::String(s)) => Some(s),
            Some(Value::Null) | None => None,
            Some(_) => {
                return Err(err(
                    "named chat templates (a list) are not supported yet".into()
                ))
            }
        };
        for typ in SPECIAL_TYPES {
            if let Some(Value::Bool(b)) = cfg.get(&format!("add_{typ}_token")) {
                set_default(&mut add, typ, *b);
            }
            if let Some(content) = token_content(cfg.get(&format!("{typ}_token"))) {
                let id = added
                    .iter()
                    .find(|a| a.get("content").and_then(Value::as_str) == Some(content.as_str()))
                    .and_then(|a| a.get("id").and_then(Value::as_u64));
                set_special(&mut ids, typ, id, n_vocab);
            }
        }
    }
    if let Some(model_config) = read_json_object(&dir.join("config.json"))? {
        for typ in SPECIAL_TYPES {
            let id = model_config
                .get(&format!("{typ}_token_id"))
                .and_then(Value::as_u64);
            set_special(&mut ids, typ, id, n_vocab);
        }
    }
    for (typ, id) in ids {
        if let Some(key) = gguf_special_key(typ) {
            kvs.set(key, id as u32);
        }
    }
    for (typ, b) in add {
        // gguf-py writes add_bos / add_eos / add_sep only.
        if matches!(typ, "bos" | "eos" | "sep") {
            kvs.set(format!("tokenizer.ggml.add_{typ}_token"), b);
        }
    }
    if let Some(t) = chat_template {
        kvs.set("tokenizer.chat_template", t);
    }
    Ok(())
}

fn set_default<'a>(list: &mut Vec<(&'a str, bool)>, typ: &'a str, value: bool) {
    if !list.iter().any(|(t, _)| *t == typ) {
        list.push((typ, value));
    }
}

fn put<'a>(list: &mut Vec<(&'a str, bool)>, typ: &'a str, value: bool) {
    match list.iter_mut().find(|(t, _)| *t == typ) {
        Some(slot) => slot.1 = value,
        None => list.push((typ, value)),
    }
}

fn set_special<'a>(ids: &mut Vec<(&'a str, u64)>, typ: &'a str, id: Option<u64>, n_vocab: u64) {
    if let Some(id) = id {
        if id < n_vocab && !ids.iter().any(|(t, _)| *t == typ) {
            ids.push((typ, id));
        }
    }
}
