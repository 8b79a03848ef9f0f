//! Every architecture, loaded from Hugging Face folders, MLX affine-quantized
//! conversions and GGUF conversions of the same random-weight models
//! (tests/fixtures/tiny-models, made by scripts/tiny-models), against the
//! reference implementations' logits: transformers (float32) for HF folders
//! and GGUF files, mlx-lm for MLX folders.
//!
//! Per prompt: the last position's logits over the whole vocabulary within
//! `TOLERANCE`, and greedy decoding (through the KV cache, one token at a
//! time) equal to the reference's up to the first step where its top-2 gap
//! is below `CLEAR_GAP` (there a rounding difference may pick the other
//! token and the rest legitimately diverges).

use std::path::PathBuf;

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{ContiguousKvCache, DecoderModel, KvCache, SeqChunk};
use serde::Deserialize;

/// transformers' own f32-vs-f64 noise is below 4e-5 on these models; MLX's
/// quantized matmul sums in another order than ours.
const TOLERANCE: f32 = 2e-3;
const CLEAR_GAP: f32 = 0.01;

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    ids: Vec<u32>,
    last_logits: Vec<f32>,
    greedy: Greedy,
}

#[derive(Deserialize)]
struct Greedy {
    ids: Vec<u32>,
    top2_gaps: Vec<f32>,
}

fn fixtures() -> PathBuf {
    mlxr_testkit::fixture_path("tiny-models")
}

fn reference(name: &str) -> Reference {
    let path = fixtures().join("reference").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn last_logits(
    model: &DecoderModel,
    tokens: &[u32],
    start: usize,
    cache: &mut dyn KvCache,
) -> Vec<f32> {
    model
        .forward(tokens, &[SeqChunk::new(start, tokens.len())], cache)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

fn check(label: &str, model: &DecoderModel, reference: &Reference) {
    let mut worst_of_model = 0f32;
    let mut greedy_steps = 0;
    for case in &reference.cases {
        let mut cache = ContiguousKvCache::new(model.config().n_layers);
        let logits = last_logits(model, &case.ids, 0, &mut cache);
        assert_eq!(logits.len(), case.last_logits.len(), "{label}: vocab size");
        assert!(
            logits.iter().all(|l| l.is_finite()),
            "{label}: non-finite logits"
        );
        let worst = logits
            .iter()
            .zip(&case.last_logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= TOLERANCE,
            "{label}/{}: logits differ by up to {worst}",
            case.name
        );
        worst_of_model = worst_of_model.max(worst);

        let mut next = argmax(&logits);
        for (step, (&want, &gap)) in case
            .greedy
            .ids
            .iter()
            .zip(&case.greedy.top2_gaps)
            .enumerate()
        {
            if gap < CLEAR_GAP {
                break;
            }
            assert_eq!(
                next, want,
                "{label}/{}: greedy step {step} (reference gap {gap})",
                case.name
            );
            greedy_steps += 1;
            let logits = last_logits(model, &[next], case.ids.len() + step, &mut cache);
            next = argmax(&logits);
        }
    }
    eprintln!("{label}: max |logit diff| {worst_of_model:.2e}, {greedy_steps} greedy steps equal");
}

fn check_dir(name: &str) {
    let model = DecoderModel::load_dir(&fixtures().join(name), &Device::Cpu)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    check(name, &model, &reference(name));
}

#[test]
fn hugging_face_folders_match_transformers() {
    for name in ["llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3"] {
        check_dir(name);
    }
}

#[test]
fn mlx_quantized_folders_match_mlx_lm() {
    for name in [
        "llama-mlx-q4-g64",
        "llama-mlx-q8-g32",
        "qwen3-mlx-q4-g128",
        "gemma3-mlx-q4-g32",
    ] {
        check_dir(name);
    }
}

/// The same models converted by llama.cpp's converter (f32), against the
/// transformers reference of the folder they came from. Mistral is left
/// out: the converter drops its sliding window, so llama.cpp would not
/// match transformers on these prompts either.
#[test]
fn gguf_conversions_match_transformers() {
    for name in ["llama", "qwen2", "qwen3", "phi3"] {
        let path = fixtures().join("gguf").join(format!("{name}.f32.gguf"));
        let file = GgufFile::open(&path).unwrap();
        let model = DecoderModel::load(&file, &Device::Cpu)
            .unwrap_or_else(|e| panic!("{name}.f32.gguf: {e}"));
        check(&format!("{name}.f32.gguf"), &model, &reference(name));
    }
}

/// A copy of a fixture folder to break.
fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn load_error(dir: &std::path::Path) -> String {
    match DecoderModel::load_dir(dir, &Device::Cpu) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn edit_config(dir: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
}

#[test]
fn bad_folders_are_clear_errors() {
    let dir = copy_of("qwen2");
    std::fs::remove_file(dir.path().join("model-00002-of-00003.safetensors")).unwrap();
    let e = load_error(dir.path());
    assert!(
        e.contains("shard model-00002-of-00003.safetensors") && e.contains("missing"),
        "{e}"
    );

    let dir = copy_of("llama");
    edit_config(dir.path(), |c| c["intermediate_size"] = 255.into());
    let e = load_error(dir.path());
    assert!(
        e.contains("model.layers.0.mlp.") && e.contains("[255, 128]"),
        "{e}"
    );

    let dir = copy_of("llama");
    edit_config(dir.path(), |c| {
        c["architectures"] = serde_json::json!(["FalconForCausalLM"])
    });
    let e = load_error(dir.path());
    assert!(e.contains("'FalconForCausalLM' is not supported"), "{e}");

    let dir = copy_of("llama");
    std::fs::write(dir.path().join("config.json"), "{\"hidden_size\": ").unwrap();
    let e = load_error(dir.path());
    assert!(e.contains("config.json is not valid JSON"), "{e}");

    let dir = copy_of("llama");
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let e = load_error(dir.path());
    assert!(e.contains("has no *.safetensors weights"), "{e}");

    // A norm weight stored as integers.
    let dir = copy_of("llama");
    let path = dir.path().join("model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let norm = tensors.get_mut("model.norm.weight").unwrap();
    *norm = norm.to_dtype(candle_core::DType::I64).unwrap();
    candle_core::safetensors::save(&tensors, &path).unwrap();
    let e = load_error(dir.path());
    assert!(
        e.contains("'model.norm.weight' is I64") && e.contains("F32, F16 or BF16"),
        "{e}"
    );
}
