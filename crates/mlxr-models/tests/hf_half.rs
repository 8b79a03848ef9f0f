//! F16 and BF16 Hugging Face folders on the CPU, where their matrices stay
//! 16-bit and are widened inside the matmul (`kernels/float16.rs`): the tiny
//! llama (untied head), qwen2 (tied, QKV bias) and gemma3 (tied, scaled
//! embedding) with every tensor stored as F16 or BF16, against the same
//! rounded values stored as F32, which run through candle's f32 matmul.
//! Both compute with the same weights, so only the float32 summation order
//! separates them: the last-position logits of the reference prompts within
//! `TOLERANCE`, and not bit for bit equal (the 16-bit path ran).

mod common;

use std::path::Path;

use candle_core::DType;
use mlxr_models::DecoderModel;
use safetensors::Dtype;
use serde::Deserialize;

/// float32 summation-order noise: measured up to 4.7e-5 on these models.
const TOLERANCE: f32 = 1e-4;

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    ids: Vec<u32>,
}

/// Fixture `name` with every F32 tensor rounded to `dtype`, stored as
/// `dtype` (`half_dir`) and as F32 (`f32_dir`); shards stay shards.
fn write_rounded(name: &str, dtype: Dtype, half_dir: &Path, f32_dir: &Path) {
    let src = mlxr_testkit::fixture_path("tiny-models").join(name);
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let file_name = path.file_name().unwrap();
        if path.extension().is_some_and(|e| e == "safetensors") {
            let (half, wide) = rounded(&std::fs::read(&path).unwrap(), dtype);
            for (dir, list) in [(half_dir, half), (f32_dir, wide)] {
                let views: Vec<_> = list
                    .iter()
                    .map(|(n, dtype, shape, data)| {
                        let view =
                            safetensors::tensor::TensorView::new(*dtype, shape.clone(), data);
                        (n.clone(), view.unwrap())
                    })
                    .collect();
                safetensors::serialize_to_file(views, None, &dir.join(file_name)).unwrap();
            }
        } else if path.is_file() {
            for dir in [half_dir, f32_dir] {
                std::fs::copy(&path, dir.join(file_name)).unwrap();
            }
        }
    }
}

type Tensors = Vec<(String, Dtype, Vec<usize>, Vec<u8>)>;

/// The float tensors of one safetensors file rounded to `dtype`: as
/// `dtype`, and widened back to F32 (the qwen2 fixture mixes F32 and F16).
fn rounded(bytes: &[u8], dtype: Dtype) -> (Tensors, Tensors) {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let mut half = Vec::new();
    let mut wide = Vec::new();
    for (n, v) in file.tensors() {
        let values: Vec<f32> = match v.dtype() {
            Dtype::F32 => v
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => v
                .data()
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => panic!("{n}: {other:?}"),
        };
        let (mut h, mut w) = (Vec::new(), Vec::new());
        for x in values {
            let (bits, back) = match dtype {
                Dtype::F16 => {
                    let h = half::f16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                }
                _ => {
                    let h = half::bf16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                }
            };
            h.extend(bits.to_le_bytes());
            w.extend(back.to_le_bytes());
        }
        half.push((n.clone(), dtype, v.shape().to_vec(), h));
        wide.push((n, Dtype::F32, v.shape().to_vec(), w));
    }
    (half, wide)
}

fn last_logits(dir: &Path, cases: &[Case]) -> Vec<Vec<f32>> {
    let model = DecoderModel::load_dir(dir, &candle_core::Device::Cpu).unwrap();
    let blocks = cases.iter().map(|c| c.ids.len()).max().unwrap_or(1);
    let mut session = common::cpu(&model, 1, blocks.div_ceil(common::BLOCK), DType::F32);
    cases
        .iter()
        .map(|case| {
            session.truncate(0, 0);
            session.feed(&model, &[(0, &case.ids)]).unwrap().to_vec()
        })
        .collect()
}

#[test]
fn half_folders_match_their_f32_rounding() {
    for name in ["llama", "qwen2", "gemma3"] {
        let path = mlxr_testkit::fixture_path("tiny-models")
            .join("reference")
            .join(format!("{name}.json"));
        let reference: Reference =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for dtype in [Dtype::F16, Dtype::BF16] {
            let (half_dir, f32_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            write_rounded(name, dtype, half_dir.path(), f32_dir.path());
            let half = last_logits(half_dir.path(), &reference.cases);
            let wide = last_logits(f32_dir.path(), &reference.cases);
            let mut worst = 0f32;
            let mut same_bits = true;
            for (h, w) in half.iter().zip(&wide) {
                assert_eq!(h.len(), w.len());
                for (a, b) in h.iter().zip(w) {
                    worst = worst.max((a - b).abs());
                    same_bits &= a.to_bits() == b.to_bits();
                }
            }
            eprintln!("{name} {dtype:?}: max |logit diff| from its f32 rounding {worst:.2e}");
            assert!(worst <= TOLERANCE, "{name} {dtype:?}: {worst}");
            assert!(
                !same_bits,
                "{name} {dtype:?}: the 16-bit kernel did not run"
            );
        }
    }
}
