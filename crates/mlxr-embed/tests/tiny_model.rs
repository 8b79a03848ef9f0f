//! A tiny random-weight BERT folder written by the test: loading (prefixes,
//! missing pieces), truncation and padding without the real model.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use mlxr_embed::{EmbedError, EmbeddingModel};

const HIDDEN: usize = 8;
const INTERMEDIATE: usize = 16;
const LAYERS: usize = 2;
const VOCAB: usize = 9;

const CONFIG: &str = r#"{"model_type": "bert", "vocab_size": 9, "hidden_size": 8,
    "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
    "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
    "hidden_act": "gelu"}"#;

const TOKENIZER: &str = r###"{
  "version": "1.0", "truncation": {"max_length": 3, "strategy": "LongestFirst", "stride": 0},
  "padding": null, "added_tokens": [],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                 "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
  "decoder": null,
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5,
                      "the": 6, "cat": 7, "##s": 8}}
}"###;

const MODULES: &str = r#"[
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
]"#;

fn weights(prefix: &str) -> HashMap<String, Tensor> {
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![VOCAB, HIDDEN],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![16, HIDDEN],
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        ),
        ("embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        ("embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", HIDDEN, HIDDEN),
            ("attention.self.key", HIDDEN, HIDDEN),
            ("attention.self.value", HIDDEN, HIDDEN),
            ("attention.output.dense", HIDDEN, HIDDEN),
            ("intermediate.dense", INTERMEDIATE, HIDDEN),
            ("output.dense", HIDDEN, INTERMEDIATE),
        ] {
            shapes.push((format!("{p}.{name}.weight"), vec![out, inp]));
            shapes.push((format!("{p}.{name}.bias"), vec![out]));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            shapes.push((format!("{p}.{norm}.weight"), vec![HIDDEN]));
            shapes.push((format!("{p}.{norm}.bias"), vec![HIDDEN]));
        }
    }
    // Deterministic pseudo-random values.
    let mut state = 12345u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    shapes
        .into_iter()
        .map(|(name, shape)| {
            let n = shape.iter().product();
            let values: Vec<f32> = (0..n).map(|_| next()).collect();
            let tensor = Tensor::from_vec(values, shape, &Device::Cpu).unwrap();
            (format!("{prefix}{name}"), tensor)
        })
        .collect()
}

/// Writes a complete folder; `skip` leaves one file out.
fn write_folder(dir: &Path, prefix: &str, pooling: &str, max_seq_length: usize, skip: &str) {
    let pooling_json =
        format!("{{\"word_embedding_dimension\": 8, \"pooling_mode_{pooling}\": true}}");
    let sbert = format!("{{\"max_seq_length\": {max_seq_length}}}");
    let files = [
        ("config.json", CONFIG),
        ("tokenizer.json", TOKENIZER),
        ("modules.json", MODULES),
        ("1_Pooling/config.json", pooling_json.as_str()),
        ("sentence_bert_config.json", sbert.as_str()),
    ];
    for (name, text) in files.iter().filter(|(name, _)| *name != skip) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    if skip != "model.safetensors" {
        candle_core::safetensors::save(&weights(prefix), dir.join("model.safetensors")).unwrap();
    }
}

fn folder(
    prefix: &str,
    pooling: &str,
    max_seq_length: usize,
) -> (tempfile::TempDir, EmbeddingModel) {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path(), prefix, pooling, max_seq_length, "");
    let model = EmbeddingModel::load(dir.path()).unwrap();
    (dir, model)
}

const TEXTS: [&str; 4] = ["hello world", "the cats", "", "Hello the cat, world!"];

#[test]
fn bert_prefix_is_optional() {
    let (_a, plain) = folder("", "mean_tokens", 16);
    let (_b, prefixed) = folder("bert.", "mean_tokens", 16);
    let a = plain.embed(&TEXTS, true).unwrap();
    let b = prefixed.embed(&TEXTS, true).unwrap();
    assert_eq!(a, b);
    // [CLS] hello world [SEP], [CLS] the cat ##s [SEP], [CLS] [SEP],
    // [CLS] hello the cat [UNK] world [UNK] [SEP]
    assert_eq!(a.prompt_tokens, 4 + 5 + 2 + 8);
    for v in &a.vectors {
        assert_eq!(v.len(), 8);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }
}

#[test]
fn padding_does_not_change_vectors() {
    for pooling in ["mean_tokens", "cls_token"] {
        let (_dir, model) = folder("", pooling, 16);
        let batched = model.embed(&TEXTS, true).unwrap();
        for (i, text) in TEXTS.iter().enumerate() {
            let alone = model.embed(&[text], true).unwrap();
            let diff = batched.vectors[i]
                .iter()
                .zip(&alone.vectors[0])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(diff <= 1e-6, "{pooling} text {i}: {diff}");
        }
    }
}

#[test]
fn truncation_keeps_the_start_and_the_special_tokens() {
    let (_dir, model) = folder("", "mean_tokens", 5);
    assert_eq!(model.max_tokens(), 5);
    // 8 tokens with specials; the tokenizer.json's own truncation (3) is ignored.
    let long = "Hello the cat, world!";
    let truncated = model.embed(&[long], true).unwrap();
    assert_eq!(truncated.prompt_tokens, 5);
    // [CLS] hello the cat [SEP] is exactly "hello the cat".
    let same = model.embed(&["hello the cat"], false).unwrap();
    assert_eq!(truncated.vectors, same.vectors);

    let err = model.embed(&["hello", "world", long], false).unwrap_err();
    assert!(
        matches!(
            err,
            EmbedError::InputTooLong {
                index: 2,
                tokens: 8,
                limit: 5
            }
        ),
        "{err:?}"
    );
}

#[test]
fn missing_files_are_named() {
    for file in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "1_Pooling/config.json",
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_folder(dir.path(), "", "mean_tokens", 16, file);
        let err = EmbeddingModel::load(dir.path()).err().unwrap();
        assert!(
            matches!(&err, EmbedError::MissingFile { path } if path.ends_with(file)),
            "{file}: {err}"
        );
    }
}

#[test]
fn load_errors_have_context() {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path(), "", "max_tokens", 16, "");
    let err = EmbeddingModel::load(dir.path()).err().unwrap();
    assert!(err.to_string().contains("unsupported pooling"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path(), "", "mean_tokens", 16, "model.safetensors");
    let mut tensors = weights("");
    tensors.remove("encoder.layer.1.output.dense.weight");
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let err = EmbeddingModel::load(dir.path()).err().unwrap();
    let message = err.to_string();
    assert!(matches!(err, EmbedError::Weights { .. }), "{message}");
    assert!(
        message.contains("encoder.layer.1.output.dense.weight"),
        "{message}"
    );

    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path(), "", "mean_tokens", 16, "tokenizer.json");
    std::fs::write(dir.path().join("tokenizer.json"), "{\"model\": 1}").unwrap();
    let err = EmbeddingModel::load(dir.path()).err().unwrap();
    assert!(matches!(err, EmbedError::LoadTokenizer { .. }), "{err}");
}
