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
            let src = mlxr_testkit::fixture_path("tiny-models").join(name);
            common::rounded::write_rounded(&src, dtype, half_dir.path(), f32_dir.path());
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
