//! GGUF → Hugging Face folder → GGUF: the tiny fixtures (convert_hf_to_gguf.py's
//! F32 conversions) come back with the same tensors, bit for bit, and the same
//! metadata; a quantized model comes back as its dequantized values, within
//! the quantization's error of the original. The folder's tokenizer.json
//! encodes as the original one does.

mod common;
use common::values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlxr_convert::{gguf_to_hf, hf_to_gguf, HfDtype, HfToGgufOptions, OutType};
use mlxr_formats::gguf::{GgmlType, GgufFile, MetadataValue};
use mlxr_quantize::{quantize_model, QuantizeOptions};

fn tiny(name: &str) -> PathBuf {
    mlxr_testkit::fixture_path(&format!("tiny-models/{name}"))
}

fn back_to_gguf(folder: &Path, out: &Path) {
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: Some("qwen2".into()),
    };
    hf_to_gguf(folder, out, &options, |_| true)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
}

fn metadata(file: &GgufFile) -> BTreeMap<String, MetadataValue> {
    file.metadata()
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn f32_fixtures_come_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2-gguf"] {
        let source_path = tiny(&format!("gguf/{model}.f32.gguf"));
        // The folder is named as the original, so general.name comes back too.
        let folder = dir.path().join(model);
        gguf_to_hf(&source_path, &folder, HfDtype::F32, |_| true)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        for f in [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
            "chat_template.jinja",
            "generation_config.json",
        ] {
            assert!(folder.join(f).is_file(), "{model}: {f} missing");
        }
        let out = dir.path().join(format!("{model}.gguf"));
        back_to_gguf(&folder, &out);
        let (a, b) = (
            GgufFile::open(&source_path).unwrap(),
            GgufFile::open(&out).unwrap(),
        );
        assert_eq!(metadata(&a), metadata(&b), "{model}: metadata");
        let names = |f: &GgufFile| {
            f.tensors()
                .iter()
                .map(|t| (t.name.clone(), t.dims.clone(), t.ggml_type))
                .collect::<Vec<_>>()
        };
        let mut na = names(&a);
        let mut nb = names(&b);
        na.sort_by(|x, y| x.0.cmp(&y.0));
        nb.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(na, nb, "{model}: tensors");
        for t in a.tensors() {
            let other = b.tensor(&t.name).unwrap();
            assert!(
                a.tensor_data(t).unwrap() == b.tensor_data(other).unwrap(),
                "{model}: {} differs",
                t.name
            );
        }
        std::fs::remove_dir_all(&folder).unwrap();
    }
}

#[test]
fn the_written_tokenizer_encodes_as_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("llama");
    gguf_to_hf(&tiny("gguf/llama.f32.gguf"), &folder, HfDtype::BF16, |_| {
        true
    })
    .unwrap();
    let ours = tokenizers::Tokenizer::from_file(folder.join("tokenizer.json")).unwrap();
    let original = tokenizers::Tokenizer::from_file(tiny("llama/tokenizer.json")).unwrap();
    for text in [
        "The quick brown fox",
        "Grüße aus Köln: 3.14 ✓ 🦙\n\n  x",
        "<|im_start|>user\nhi<|im_end|>\n",
        "I've 12345 'RE",
    ] {
        let a = ours.encode(text, true).unwrap();
        let b = original.encode(text, true).unwrap();
        assert_eq!(a.get_ids(), b.get_ids(), "{text:?}");
        assert_eq!(ours.decode(a.get_ids(), false).unwrap(), text);
    }
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["torch_dtype"], "bfloat16");
    assert_eq!(config["architectures"][0], "LlamaForCausalLM");
    assert_eq!(config["rope_theta"], 500.0);
    assert_eq!(config["rms_norm_eps"], 1e-5);
}

#[test]
fn a_quantized_model_comes_back_as_its_dequantized_values() {
    let dir = tempfile::tempdir().unwrap();
    let source = GgufFile::open(tiny("gguf/llama.f32.gguf")).unwrap();
    let q8 = dir.path().join("llama-q8_0.gguf");
    let options = QuantizeOptions {
        file_type: "Q8_0".parse().unwrap(),
        allow_requantize: false,
    };
    quantize_model(&source, &q8, options, |_| true).unwrap();
    let folder = dir.path().join("llama");
    gguf_to_hf(&q8, &folder, HfDtype::F32, |_| true).unwrap();
    let out = dir.path().join("back.gguf");
    back_to_gguf(&folder, &out);
    let (q, back) = (GgufFile::open(&q8).unwrap(), GgufFile::open(&out).unwrap());
    for t in source.tensors() {
        let original = values(&source, &t.name);
        let dequantized = values(&q, &t.name);
        let returned = values(&back, &t.name);
        assert_eq!(returned, dequantized, "{}", t.name);
        if q.tensor(&t.name).unwrap().ggml_type == GgmlType::Q8_0 {
            // Q8_0: within half a step (max |w| / 127) plus the scale's f16 rounding (127 steps × 2^-11).
            for (block, (o, r)) in original.chunks(32).zip(returned.chunks(32)).enumerate() {
                let step = o.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                for (x, y) in o.iter().zip(r) {
                    assert!(
                        (x - y).abs() <= step * (0.5 + 127.0 / 2048.0) + 1e-7,
                        "{} block {block}: {x} vs {y}",
                        t.name
                    );
                }
            }
        }
    }
}

#[test]
fn an_existing_output_or_unknown_architecture_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = gguf_to_hf(
        &tiny("gguf/llama.f32.gguf"),
        dir.path(),
        HfDtype::F32,
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    let bytes = mlxr_formats::gguf::writer::GgufWriter::new()
        .kv("general.architecture", "mamba")
        .tensor_f32("w", &[2], &[1.0, 2.0])
        .build();
    let path = dir.path().join("mamba.gguf");
    std::fs::write(&path, bytes).unwrap();
    let e = gguf_to_hf(&path, &dir.path().join("out"), HfDtype::F32, |_| true).unwrap_err();
    assert!(e.to_string().contains("mamba is not supported"), "{e}");
    assert!(!dir.path().join("out").exists());
}

/// transformers (without torch: config, tokenizer, chat template, the
/// safetensors layout) on the folders `mlxr convert MODEL.gguf FOLDER` wrote,
/// as scripts/fixtures/convert-transformers-check.py recorded it.
#[test]
fn transformers_reads_the_written_folders() {
    let path = mlxr_testkit::fixture_path("convert/transformers-check.json");
    let fx: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let results = fx["results"].as_object().unwrap();
    assert_eq!(results.len(), 7);
    for (name, r) in results {
        assert_eq!(r["class_is_transformers_causal_lm"], true, "{name}");
        assert_eq!(
            r["tensors_match"], true,
            "{name}: {}",
            r["tensor_difference"]
        );
        assert!(r["tokenize_cases"].as_u64().unwrap() >= 4, "{name}");
        assert_eq!(r["tokenize_mismatches"], serde_json::json!([]), "{name}");
        assert!(r["chat_cases"].as_u64().unwrap() >= 1, "{name}");
        assert_eq!(r["chat_mismatches"], serde_json::json!([]), "{name}");
    }
}
