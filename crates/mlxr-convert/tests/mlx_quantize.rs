//! `hf_to_mlx` against `mlx_lm.convert -q`: for three tiny folders (F32
//! llama and qwen3 with tied embeddings, BF16 mistral) at every bits × group
//! size mlx_lm takes, and phi3, gemma2 and gemma3 at every bits with group
//! 64, the same tensors (names, dtypes, shapes, SHA-256
//! of the bytes) and the same config.json. The record is made by
//! scripts/fixtures/mlx-quantize-reference.py. Then MLXR's own MLX reader
//! loads what we wrote and gets the weights back within a step of
//! their group (MLX keeps the larger edge exact, which can cost the far end up
//! to one step).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use mlxr_convert::{hf_to_mlx, ConvertError, MlxQuantizeOptions};
use safetensors::SafeTensors;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn reference() -> Value {
    let path = mlxr_testkit::fixture_path("mlx-quantize/reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn folder(model: &str) -> std::path::PathBuf {
    mlxr_testkit::fixture_path(&format!("tiny-models/{model}"))
}

fn quantize(model: &str, bits: u32, group: usize, out: &Path) {
    let options = MlxQuantizeOptions::new(bits, group).unwrap();
    hf_to_mlx(&folder(model), out, options, |_| true).unwrap();
}

/// name → (dtype, shape, sha256) of a safetensors file.
fn tensors(path: &Path) -> BTreeMap<String, (String, Vec<usize>, String)> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let sha = format!("{:x}", Sha256::digest(view.data()));
            (
                name,
                (format!("{:?}", view.dtype()), view.shape().to_vec(), sha),
            )
        })
        .collect()
}

#[test]
fn every_width_and_group_matches_mlx_lm() {
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3 * 6 * 3 + 3 * 6);
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in cases {
        let model = case["model"].as_str().unwrap();
        let bits = case["bits"].as_u64().unwrap() as u32;
        let group = case["group_size"].as_u64().unwrap() as usize;
        let label = format!("{model} q{bits} g{group}");
        let out = dir.path().join(label.replace(' ', "-"));
        quantize(model, bits, group, &out);
        let ours = tensors(&out.join("model.safetensors"));
        let expected = case["tensors"].as_object().unwrap();
        let names: Vec<&String> = ours.keys().collect();
        let expected_names: Vec<&String> = expected.keys().collect();
        if names != expected_names {
            failures.push(format!(
                "{label}: tensors {names:?}, mlx_lm {expected_names:?}"
            ));
            continue;
        }
        for (name, (dtype, shape, sha)) in &ours {
            let e = &expected[name];
            let e_shape: Vec<usize> = e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            if dtype != e["dtype"].as_str().unwrap() || *shape != e_shape {
                failures.push(format!(
                    "{label} {name}: {dtype} {shape:?}, mlx_lm {} {e_shape:?}",
                    e["dtype"]
                ));
            } else if sha != e["sha256"].as_str().unwrap() {
                failures.push(format!("{label} {name}: bytes differ from mlx_lm's"));
            }
            compared += 1;
        }
        let config: Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        if config != case["config"] {
            failures.push(format!(
                "{label}: config.json {config}, mlx_lm {}",
                case["config"]
            ));
        }
        for file in ["tokenizer.json", "tokenizer_config.json"] {
            if !out.join(file).is_file() {
                failures.push(format!("{label}: no {file}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} tensors / configs differ:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert!(compared > 1000, "compared only {compared} tensors");
}

/// Each weight of the source folder as f32, by name.
fn source_values(model: &str) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(folder(model).join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => view
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect(),
                safetensors::Dtype::BF16 => view
                    .data()
                    .chunks_exact(2)
                    .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
                other => panic!("{name}: {other:?}"),
            };
            (name, (view.shape().to_vec(), values))
        })
        .collect()
}

#[test]
fn our_reader_dequantizes_what_we_wrote_within_a_step() {
    let dir = tempfile::tempdir().unwrap();
    for (model, bits, group) in [("llama", 3, 32), ("llama", 6, 128), ("mistral", 5, 64)] {
        let out = dir.path().join(format!("{model}-{bits}-{group}"));
        quantize(model, bits, group, &out);
        let reader =
            mlxr_models::weights::SafetensorsWeights::open(&out, false, &candle_core::Device::Cpu)
                .unwrap();
        let levels = ((1u32 << bits) - 1) as f32;
        let mut matrices = 0;
        for (name, (shape, original)) in source_values(model) {
            let Some(stem) = name.strip_suffix(".weight").filter(|_| shape.len() == 2) else {
                continue;
            };
            let back = reader.dequantized_mlx(stem, shape[0], shape[1]).unwrap();
            assert_eq!(back.len(), original.len());
            for (g, (a, b)) in original.chunks(group).zip(back.chunks(group)).enumerate() {
                let (lo, hi) = a
                    .iter()
                    .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                // A step, plus the scale's and bias's rounding to BF16
                // (2^-8 of them, times up to 2^bits - 1 for the scale).
                let step = (hi - lo) / levels;
                let bound = step * (1.0 + 1.0 / 128.0) + hi.abs().max(lo.abs()) / 128.0 + 1e-6;
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= bound,
                        "{model} q{bits} g{group} {name} group {g}: {x} came back as {y} (bound {bound})"
                    );
                }
            }
            matrices += 1;
        }
        assert!(matrices >= 14, "{model}: only {matrices} matrices");
    }
}

#[test]
fn bad_options_and_inputs_are_refused() {
    for (bits, group) in [(7, 64), (1, 64), (4, 16), (4, 256)] {
        let e = MlxQuantizeOptions::new(bits, group).unwrap_err();
        assert!(matches!(e, ConvertError::Input(_)), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let options = MlxQuantizeOptions::new(4, 64).unwrap();
    let e = hf_to_mlx(
        &folder("llama-mlx-q4-g64"),
        &dir.path().join("requantized"),
        options,
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("already quantized"), "{e}");
    let e = hf_to_mlx(
        &mlxr_testkit::fixture_path("tiny-models/gguf"),
        &dir.path().join("x"),
        options,
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("config.json"), "{e}");
    assert!(!dir.path().join("x").exists());
}

/// A matrix whose width the group size does not divide stays a float
/// tensor, as mlx_lm leaves such a layer unquantized.
#[test]
fn a_width_the_group_does_not_divide_stays_unquantized() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    common::copy_folder(&folder("llama"), &input);
    let bytes = std::fs::read(input.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.shape().to_vec(), v.data().to_vec()))
        .collect();
    // down_proj of layer 0: [128, 256] → [128, 96] (96 = 3·32, not a multiple of 64).
    for (name, shape, data) in &mut owned {
        if name == "model.layers.0.mlp.down_proj.weight" {
            let cols = shape[1];
            *data = data
                .chunks_exact(cols * 4)
                .flat_map(|row| row[..96 * 4].to_vec())
                .collect();
            shape[1] = 96;
        }
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, s, d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::tensor::serialize_to_file(views, None, &input.join("model.safetensors")).unwrap();
    let out = dir.path().join("out");
    hf_to_mlx(
        &input,
        &out,
        MlxQuantizeOptions::new(4, 64).unwrap(),
        |_| true,
    )
    .unwrap();
    let written = tensors(&out.join("model.safetensors"));
    let down = &written["model.layers.0.mlp.down_proj.weight"];
    assert_eq!((down.0.as_str(), down.1.clone()), ("F32", vec![128, 96]));
    assert!(!written.contains_key("model.layers.0.mlp.down_proj.scales"));
    assert_eq!(written["model.layers.1.mlp.down_proj.weight"].0, "U32");
}
