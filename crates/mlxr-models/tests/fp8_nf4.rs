//! Quantized Hugging Face checkpoints — FP8 (`quant_method: fp8` with
//! partial edge blocks, compressed-tensors channel and tensor scales),
//! bitsandbytes NF4 / FP4 (with and without double quantization) — and MLX
//! 3/5/6-bit affine and mxfp4 / mxfp8 / nvfp4 folders, made by
//! scripts/fixtures/fp8-nf4.py
//! (tests/fixtures/fp8-nf4), against the logits of transformers (float32)
//! running the reference's own dequantized weights. On the CPU the FP8 and
//! 4-bit weights stay in their codes and are decoded row by row inside the
//! matmul (each value the same f32 product the reference dequantizes to),
//! so only the float32 summation order separates the two; MLX affine folders
//! run through the affine kernel, MLX's floating-point modes through the
//! FP8 (mxfp8) and 4-bit (mxfp4, nvfp4) ones. Measured on both
//! backends: at most 1.1e-4 (llama-mlx-q6-g64), while the quantization
//! itself moves the logits by 1.3 to 10.5.
//! Malformed configs and missing or misshapen scale tensors are errors that
//! name the field or tensor.

mod common;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use mlxr_models::{Backend, DecoderModel, Session};
use serde::Deserialize;

const TOLERANCE: f32 = 5e-4;

/// MLX affine checkpoints beside [`common::CODED_FOLDERS`].
const MLX_FOLDERS: [&str; 3] = ["llama-mlx-q3-g32", "qwen2-mlx-q5-g64", "llama-mlx-q6-g64"];

#[derive(Deserialize)]
struct Reference {
    max_abs_diff_vs_unquantized: f32,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    ids: Vec<u32>,
    last_logits: Vec<f32>,
}

fn fixtures() -> PathBuf {
    mlxr_testkit::fixture_path("fp8-nf4")
}

fn reference(name: &str) -> Reference {
    let path = fixtures().join("reference").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

/// The largest difference from the reference's last-position logits.
fn worst<B: Backend>(model: &DecoderModel, reference: &Reference, session: &mut Session<B>) -> f32 {
    let mut worst = 0f32;
    for case in &reference.cases {
        session.truncate(0, 0);
        let logits = session.feed(model, &[(0, &case.ids)]).unwrap().to_vec();
        assert_eq!(logits.len(), case.last_logits.len(), "{}: vocab", case.name);
        worst = worst.max(max_diff(&logits, &case.last_logits));
    }
    worst
}

/// Fixture `name` on the CPU backend and the reference backend against its
/// reference logits.
fn matches_its_reference(name: &str) {
    let model = DecoderModel::load_dir(&fixtures().join(name), &Device::Cpu)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let reference = reference(name);
    // The quantization itself must matter, or the test proves nothing.
    assert!(reference.max_abs_diff_vs_unquantized > 100.0 * TOLERANCE);
    let cpu = worst(
        &model,
        &reference,
        &mut common::cpu(&model, 1, 4, DType::F32),
    );
    let candle = worst(&model, &reference, &mut common::reference(&model, 1, 4));
    eprintln!("{name}: max |logit diff| CPU backend {cpu:.2e}, reference backend {candle:.2e}");
    assert!(cpu <= TOLERANCE, "{name}: CPU backend differs by {cpu}");
    assert!(
        candle <= TOLERANCE,
        "{name}: reference backend differs by {candle}"
    );
}

#[test]
fn quantized_folders_match_their_reference() {
    for name in common::CODED_FOLDERS.into_iter().chain(MLX_FOLDERS) {
        matches_its_reference(name);
    }
}

#[test]
fn mlx_fp_modes_match_their_reference() {
    for name in common::MLX_FP_FOLDERS {
        matches_its_reference(name);
    }
}

/// The same FP8 weights under the other layout's names: compressed-tensors
/// per-tensor scales as `quant_method: fp8` without a block size (one
/// `weight_scale_inv` a tensor), and `fp8` [64, 64] blocks as
/// compressed-tensors `strategy: block`; each must give its source's
/// reference logits.
#[test]
fn one_set_of_weights_under_either_fp8_layout() {
    let rename = |from: &'static str, to: &'static str| {
        move |t: &mut Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>| {
            for (n, ..) in t.iter_mut() {
                if let Some(stem) = n.strip_suffix(from) {
                    *n = format!("{stem}{to}");
                }
            }
        }
    };
    let per_tensor = edited(
        "qwen2-ct-fp8-tensor",
        |c| c["quantization_config"] = serde_json::json!({"quant_method": "fp8", "fmt": "e4m3"}),
        rename(".weight_scale", ".weight_scale_inv"),
    );
    let block = edited(
        "qwen2-fp8-b64",
        |c| {
            c["quantization_config"] = serde_json::json!({
                "quant_method": "compressed-tensors", "format": "float-quantized",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                    "num_bits": 8, "type": "float", "strategy": "block",
                    "block_structure": [64, 64], "symmetric": true}}}})
        },
        rename(".weight_scale_inv", ".weight_scale"),
    );
    for (dir, source) in [
        (&per_tensor, "qwen2-ct-fp8-tensor"),
        (&block, "qwen2-fp8-b64"),
    ] {
        let model = DecoderModel::load_dir(dir.path(), &Device::Cpu).unwrap();
        let diff = worst(
            &model,
            &reference(source),
            &mut common::cpu(&model, 1, 4, DType::F32),
        );
        assert!(diff <= TOLERANCE, "{source} relabelled: {diff}");
    }
}

/// A copy of fixture `name` in a temporary folder, its config.json edited
/// by `config` and its tensors by `tensors` (name, dtype, shape, bytes).
fn edited(
    name: &str,
    config: impl FnOnce(&mut serde_json::Value),
    tensors: impl FnOnce(&mut Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>),
) -> tempfile::TempDir {
    let src = fixtures().join(name);
    let dir = tempfile::tempdir().unwrap();
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    config(&mut json);
    std::fs::write(dir.path().join("config.json"), json.to_string()).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut list: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    tensors(&mut list);
    let views: Vec<_> = list
        .iter()
        .map(|(n, dtype, shape, data)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.path().join("model.safetensors")).unwrap();
    dir
}

fn load_error(dir: &Path) -> String {
    match DecoderModel::load_dir(dir, &Device::Cpu) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn assert_names(e: &str, needles: &[&str]) {
    for n in needles {
        assert!(e.contains(n), "error does not name '{n}': {e}");
    }
}

const Q_PROJ: &str = "model.layers.0.self_attn.q_proj";
const GATE: &str = "model.layers.1.mlp.gate_proj";

#[test]
fn missing_or_misshapen_scales_are_named() {
    let dir = edited(
        "qwen2-fp8-b64",
        |_| {},
        |t| t.retain(|(n, ..)| n != &format!("{Q_PROJ}.weight_scale_inv")),
    );
    assert_names(
        &load_error(dir.path()),
        &[
            &format!("{Q_PROJ}.weight"),
            &format!("{Q_PROJ}.weight_scale_inv"),
        ],
    );
    // gate_proj [128, 64] in blocks of 64: scales [2, 1]; give it [1, 1].
    let dir = edited(
        "qwen2-fp8-b64",
        |_| {},
        |t| {
            let s = t
                .iter_mut()
                .find(|(n, ..)| n == &format!("{GATE}.weight_scale_inv"))
                .unwrap();
            s.2 = vec![1, 1];
            s.3.truncate(4);
        },
    );
    assert_names(
        &load_error(dir.path()),
        &[&format!("{GATE}.weight_scale_inv"), "[2, 1]", "[1, 1]"],
    );
    let dir = edited(
        "llama-ct-fp8-channel",
        |_| {},
        |t| t.retain(|(n, ..)| n != &format!("{GATE}.weight_scale")),
    );
    assert_names(&load_error(dir.path()), &[&format!("{GATE}.weight_scale")]);
    let dir = edited(
        "qwen2-nf4-dq",
        |_| {},
        |t| t.retain(|(n, ..)| !n.ends_with("quant_state.bitsandbytes__nf4")),
    );
    assert_names(
        &load_error(dir.path()),
        &["quant_state.bitsandbytes__nf4", "weight"],
    );
    let dir = edited(
        "llama-nf4",
        |_| {},
        |t| {
            let a = t
                .iter_mut()
                .find(|(n, ..)| n == &format!("{Q_PROJ}.weight.absmax"))
                .unwrap();
            a.2 = vec![a.2[0] - 1];
            a.3.truncate(a.3.len() - 4);
        },
    );
    assert_names(
        &load_error(dir.path()),
        &[&format!("{Q_PROJ}.weight.absmax"), "expected 64"],
    );
}

#[test]
fn malformed_or_unsupported_configs_are_named() {
    let qc = |f: fn(&mut serde_json::Value)| {
        move |c: &mut serde_json::Value| f(&mut c["quantization_config"])
    };
    for (name, edit, needles) in [
        (
            "llama-fp8-b128",
            Box::new(qc(|q| q["quant_method"] = "gptq".into())) as Box<dyn FnOnce(&mut _)>,
            &["quant_method 'gptq'"][..],
        ),
        (
            "llama-fp8-b128",
            Box::new(qc(|q| q["weight_block_size"] = serde_json::json!([128]))),
            &["weight_block_size"],
        ),
        (
            "llama-fp8-b128",
            Box::new(qc(|q| q["fmt"] = "e5m2".into())),
            &[&format!("{Q_PROJ}.weight"), "F8_E4M3", "E5M2"],
        ),
        (
            "llama-fp8-b128",
            Box::new(|c: &mut serde_json::Value| {
                c.as_object_mut().unwrap().remove("quantization_config");
            }),
            &["F8_E4M3", "no FP8 quantization_config"],
        ),
        (
            "llama-fp8-b128",
            Box::new(qc(|q| {
                q["modules_to_not_convert"] = serde_json::json!(["self_attn.q_proj"])
            })),
            &[&format!("{Q_PROJ}.weight"), "not converted"],
        ),
        (
            "llama-ct-fp8-channel",
            Box::new(qc(|q| {
                q["config_groups"]["group_0"]["weights"]["strategy"] = "group".into()
            })),
            &["config_groups.group_0.weights", "group"],
        ),
        (
            "qwen2-nf4-dq",
            Box::new(qc(|q| q["bnb_4bit_quant_type"] = "fp4".into())),
            &["quant_state.bitsandbytes__fp4"],
        ),
        (
            "llama-mlx-q3-g32",
            Box::new(|c: &mut serde_json::Value| {
                c["quantization"]["mode"] = "mxfp4".into();
                c["quantization_config"]["mode"] = "mxfp4".into();
            }),
            &["mxfp4"],
        ),
    ] {
        let dir = edited(name, edit, |_| {});
        assert_names(&load_error(dir.path()), needles);
    }
}

/// mxfp4 / mxfp8 / nvfp4 folders: missing or misshapen scales, tensors the
/// mode does not store, a mode that does not fit the tensors and unknown
/// modes are errors naming the tensor or mode.
#[test]
fn malformed_mlx_fp_folders_are_named() {
    let without = |suffix: &'static str| {
        move |t: &mut Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>| {
            t.retain(|(n, ..)| n != &format!("{Q_PROJ}{suffix}"))
        }
    };
    let dir = edited("llama-mlx-mxfp4", |_| {}, without(".scales"));
    assert_names(
        &load_error(dir.path()),
        &[
            &format!("{Q_PROJ}.weight"),
            &format!("{Q_PROJ}.scales"),
            "U32",
        ],
    );
    // q_proj [64, 64] in groups of 16: scales [64, 4]; give it [64, 2].
    let dir = edited(
        "qwen2-mlx-nvfp4",
        |_| {},
        |t| {
            let s = t
                .iter_mut()
                .find(|(n, ..)| n == &format!("{Q_PROJ}.scales"))
                .unwrap();
            s.2 = vec![64, 2];
            s.3.truncate(128);
        },
    );
    assert_names(
        &load_error(dir.path()),
        &[Q_PROJ, "nvfp4", "[64, 2]", "[64, 4]"],
    );
    // An affine layer's biases beside E8M0 scales.
    let dir = edited(
        "llama-mlx-mxfp8",
        |_| {},
        |t| {
            let bias = (
                format!("{Q_PROJ}.biases"),
                safetensors::Dtype::F32,
                vec![64, 2],
                vec![0; 512],
            );
            t.push(bias);
        },
    );
    assert_names(
        &load_error(dir.path()),
        &[&format!("{Q_PROJ}.biases"), "mxfp8"],
    );
    let mode = |m: &'static str| {
        move |c: &mut serde_json::Value| {
            c["quantization"]["mode"] = m.into();
            c["quantization_config"]["mode"] = m.into();
        }
    };
    for (name, edit, needles) in [
        // nvfp4 codes read as mxfp4: 16-element groups are not mxfp4's 32.
        (
            "llama-mlx-nvfp4",
            mode("mxfp4"),
            &["mxfp4", "[128, 2]", "[128, 4]"][..],
        ),
        // mxfp8 scales and codes declared affine: U8 scales, no biases.
        ("qwen2-mlx-mxfp8", mode("affine"), &["scales", "U8"]),
        (
            "llama-mlx-mxfp4",
            mode("mxfp6"),
            &["MLX mode 'mxfp6' is not supported"],
        ),
    ] {
        let dir = edited(name, edit, |_| {});
        let e = load_error(dir.path());
        assert_names(&e, needles);
        assert!(!e.contains('\n'), "one line: {e}");
    }
    // The per-layer entries decide: without them qwen2-mlx-nvfp4's mxfp8
    // down_proj would be read as nvfp4.
    let dir = edited(
        "qwen2-mlx-nvfp4",
        |c| {
            for key in ["quantization", "quantization_config"] {
                let q = c[key].as_object_mut().unwrap();
                q.retain(|k, _| !k.contains("down_proj"));
            }
        },
        |_| {},
    );
    assert_names(
        &load_error(dir.path()),
        &["model.layers.0.mlp.down_proj", "nvfp4"],
    );
}
