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

mod common;

use std::path::PathBuf;

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::weights::SafetensorsWeights;
use mlxr_models::{Backend, DecoderModel, ModelConfig, Session};
use serde::Deserialize;

use common::argmax;

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
    /// transformers' own logits with a soft cap disabled, from its logits
    /// with every cap (Gemma 2).
    max_abs_diff_if_attn_softcap_ignored: Option<f32>,
    max_abs_diff_if_final_softcap_ignored: Option<f32>,
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

/// Tokens a test sequence may hold.
const BLOCKS: usize = 32;

/// The model through one backend against the reference's logits and
/// greedy tokens; returns each case's last-position logits.
fn check_on<B: Backend>(
    label: &str,
    model: &DecoderModel,
    reference: &Reference,
    session: &mut Session<B>,
) -> Vec<Vec<f32>> {
    let mut worst_of_model = 0f32;
    let mut greedy_steps = 0;
    let mut all = Vec::new();
    for case in &reference.cases {
        session.truncate(0, 0);
        let logits = session.feed(model, &[(0, &case.ids)]).unwrap().to_vec();
        assert_eq!(logits.len(), case.last_logits.len(), "{label}: vocab size");
        assert!(
            logits.iter().all(|l| l.is_finite()),
            "{label}: non-finite logits"
        );
        let worst = max_diff(&logits, &case.last_logits);
        assert!(
            worst <= TOLERANCE,
            "{label}/{}: logits differ by up to {worst}",
            case.name
        );
        worst_of_model = worst_of_model.max(worst);

        let mut next = argmax(&logits);
        all.push(logits);
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
            next = argmax(session.feed(model, &[(0, &[next])]).unwrap());
        }
    }
    eprintln!("{label}: max |logit diff| {worst_of_model:.2e}, {greedy_steps} greedy steps equal");
    all
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

/// `model` on the CPU backend and `reference_model` (the same weights,
/// prepared for candle's ops) on the reference backend, each against the
/// reference implementation's numbers, and against each other.
fn check(label: &str, model: &DecoderModel, reference_model: &DecoderModel, reference: &Reference) {
    let candle = check_on(
        &format!("{label} (reference backend)"),
        reference_model,
        reference,
        &mut common::reference(reference_model, 1, BLOCKS),
    );
    let cpu = check_on(
        &format!("{label} (CPU backend)"),
        model,
        reference,
        &mut common::cpu(model, 1, BLOCKS, DType::F32),
    );
    for ((a, b), case) in cpu.iter().zip(&candle).zip(&reference.cases) {
        let worst = max_diff(a, b);
        assert!(
            worst <= TOLERANCE,
            "{label}/{}: the backends differ by up to {worst}",
            case.name
        );
    }
}

fn check_dir(name: &str) {
    // Float and MLX weights have no CPU-kernel form: one load serves both.
    let model = DecoderModel::load_dir(&fixtures().join(name), &Device::Cpu)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    check(name, &model, &model, &reference(name));
}

#[test]
fn hugging_face_folders_match_transformers() {
    for name in [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma2",
        "gemma2-gguf",
        "gemma3",
        "phi3",
    ] {
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

/// Each case's last-position logits from a fresh session.
fn last_logits<B: Backend>(
    model: &DecoderModel,
    reference: &Reference,
    session: &mut Session<B>,
) -> Vec<Vec<f32>> {
    reference
        .cases
        .iter()
        .map(|case| {
            session.truncate(0, 0);
            session.feed(model, &[(0, &case.ids)]).unwrap().to_vec()
        })
        .collect()
}

/// A soft cap to switch off: its name, the config edit, and how far
/// transformers' logits move without it (from the reference).
type CapOff = (&'static str, fn(&mut ModelConfig), fn(&Case) -> Option<f32>);

/// Gemma 2's soft caps are not decoration: the folder with either cap
/// switched off (in our config, the weights unchanged) is far from
/// transformers' logits, as far as transformers itself moves with that cap
/// off (recorded in the reference), on both backends. So
/// `hugging_face_folders_match_transformers` would fail without each cap.
#[test]
fn gemma2_soft_caps_change_the_logits() {
    let dir = fixtures().join("gemma2");
    let reference = reference("gemma2");
    let config = ModelConfig::from_hf_dir(&dir).unwrap();
    assert_eq!(
        (config.attn_logit_softcap, config.final_logit_softcap),
        (Some(2.0), Some(8.0))
    );
    let without = |edit: fn(&mut ModelConfig)| {
        let mut config = config.clone();
        edit(&mut config);
        let weights = SafetensorsWeights::open(&dir, config.post_norms, &Device::Cpu).unwrap();
        DecoderModel::from_weights(config, &weights, &Device::Cpu).unwrap()
    };
    let variants: [CapOff; 2] = [
        (
            "attention cap",
            |c| c.attn_logit_softcap = None,
            |case| case.max_abs_diff_if_attn_softcap_ignored,
        ),
        (
            "final cap",
            |c| c.final_logit_softcap = None,
            |case| case.max_abs_diff_if_final_softcap_ignored,
        ),
    ];
    for (what, edit, recorded) in variants {
        let model = without(edit);
        let on_cpu = last_logits(
            &model,
            &reference,
            &mut common::cpu(&model, 1, BLOCKS, DType::F32),
        );
        let on_reference = last_logits(
            &model,
            &reference,
            &mut common::reference(&model, 1, BLOCKS),
        );
        for (backend, all) in [("CPU", on_cpu), ("reference", on_reference)] {
            let mut least = f32::INFINITY;
            for (logits, case) in all.iter().zip(&reference.cases) {
                let worst = max_diff(logits, &case.last_logits);
                let want = recorded(case).expect("the reference records the cap's effect");
                assert!(
                    (worst - want).abs() <= 10.0 * TOLERANCE,
                    "without the {what} ({backend} backend), {}: {worst} from transformers, \
                     transformers without it moves by {want}",
                    case.name
                );
                least = least.min(worst);
            }
            assert!(least > 1000.0 * TOLERANCE, "{what}: {least}");
            eprintln!(
                "gemma2 without the {what} ({backend} backend): logits differ by at least {least:.2} \
                 from transformers"
            );
        }
    }
}

/// A long prompt (past a query tile of 32 and a key chunk of 64 of the
/// tiled kernel, and past the sliding window) prefilled in uneven chunks
/// next to another sequence's decodes, then decoded: the CPU backend's
/// tiled kernel (f16 and bf16 caches, head dimension 32) and its exact one
/// (f32) against the reference backend, every step. Also the fixture's
/// prompts on the f16 cache against transformers.
#[test]
fn gemma2_long_prompts_on_every_cpu_attention_kernel() {
    let dir = fixtures().join("gemma2");
    let model = DecoderModel::load_dir(&dir, &Device::Cpu).unwrap();
    let reference = reference("gemma2");
    // transformers' prompts through the tiled kernel (the f16 cache rounds
    // keys and values, hence a looser bound than TOLERANCE).
    let on_f16 = last_logits(
        &model,
        &reference,
        &mut common::cpu(&model, 1, BLOCKS, DType::F16),
    );
    let worst = on_f16
        .iter()
        .zip(&reference.cases)
        .map(|(l, case)| max_diff(l, &case.last_logits))
        .fold(0f32, f32::max);
    eprintln!("gemma2 (CPU backend, f16 cache): max |logit diff| {worst:.2e} from transformers");
    assert!(worst <= F16_TOLERANCE, "f16 cache: {worst}");

    let long: Vec<u32> = (0..200).map(|i| 3 + (i * 37 % 381) as u32).collect();
    let other: &[u32] = &reference.cases[0].ids;
    for (dtype, bound) in [
        (DType::F16, F16_TOLERANCE),
        (DType::BF16, BF16_TOLERANCE),
        (DType::F32, TOLERANCE),
    ] {
        let mut cpu = common::cpu(&model, 2, BLOCKS, dtype);
        let mut candle = common::reference(&model, 2, BLOCKS);
        let (mut worst, mut rows, mut greedy) = (0f32, 0, 0);
        let mut compare = |chunks: &[(usize, &[u32])]| -> Vec<u32> {
            let got = cpu.feed(&model, chunks).unwrap().to_vec();
            let want = candle.feed(&model, chunks).unwrap();
            let vocab = model.config().vocab_size;
            let mut next = Vec::new();
            for (g, w) in got.chunks_exact(vocab).zip(want.chunks_exact(vocab)) {
                let diff = max_diff(g, w);
                assert!(diff <= bound, "{dtype:?} cache: row {rows}: {diff}");
                worst = worst.max(diff);
                rows += 1;
                let mut sorted = w.to_vec();
                sorted.sort_by(|a, b| b.total_cmp(a));
                if sorted[0] - sorted[1] > 2.0 * bound {
                    assert_eq!(argmax(g), argmax(w), "{dtype:?} cache: row {rows}");
                    greedy += 1;
                }
                next.push(argmax(g));
            }
            next
        };
        let mut next = [0, compare(&[(1, other)])[0]];
        let mut fed = 0;
        for take in [45, 64, 1, 33, 57] {
            let chunk = &long[fed..fed + take];
            let out = compare(&[(0, chunk), (1, &[next[1]])]);
            next = [out[0], out[1]];
            fed += take;
        }
        assert_eq!(fed, long.len());
        for _ in 0..8 {
            let out = compare(&[(0, &[next[0]]), (1, &[next[1]])]);
            next = [out[0], out[1]];
        }
        eprintln!(
            "gemma2, {}-token prompt in chunks ({dtype:?} cache): CPU vs reference backend \
             max |logit diff| {worst:.2e} over {rows} rows, {greedy} greedy tokens equal",
            long.len()
        );
    }
}

/// Logits from an f16 or bf16 KV cache (keys and values rounded to 11 or 8
/// significant bits) against f32 ones.
const F16_TOLERANCE: f32 = 2e-2;
const BF16_TOLERANCE: f32 = 2e-1;

/// The same models converted by llama.cpp's converter (f32), against the
/// transformers reference of the folder they came from. Mistral is left
/// out: the converter drops its sliding window, so llama.cpp would not
/// match transformers on these prompts either. `gemma2-gguf` is a Gemma 2
/// whose RoPE base and attention scale are the ones llama.cpp assumes (its
/// converter stores neither), so its GGUF must match transformers: soft caps,
/// sliding-window layers, post-norms and the converter's norm weights + 1.
#[test]
fn gguf_conversions_match_transformers() {
    for name in ["llama", "qwen2", "qwen3", "phi3", "gemma2-gguf"] {
        let path = fixtures().join("gguf").join(format!("{name}.f32.gguf"));
        let file = GgufFile::open(&path).unwrap();
        let model = DecoderModel::load(&file, &Device::Cpu)
            .unwrap_or_else(|e| panic!("{name}.f32.gguf: {e}"));
        let candle = DecoderModel::load_with_kernels(&file, &Device::Cpu, None).unwrap();
        check(
            &format!("{name}.f32.gguf"),
            &model,
            &candle,
            &reference(name),
        );
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
