//! The architecture against an independent float32 reference: Hugging Face
//! transformers loading the same GGUF files with weights dequantized to f32
//! (scripts/hf-reference). We dequantize too, so the only differences left
//! are float32 rounding (measured: under 1e-4) and the logits must agree to
//! `TOLERANCE`. This pins RoPE style and bases, norms,
//! QK-norm, sliding windows (a 706-token prompt), embedding scaling and the
//! tied LM head, independently of llama.cpp's quantized numerics.

mod common;

use std::collections::BTreeMap;

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::DecoderModel;
use serde::Deserialize;

const TOLERANCE: f32 = 1e-3;

#[derive(Deserialize)]
struct Fixture {
    model_file: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    ids: Vec<u32>,
    top: Vec<(u32, f32)>,
    logsumexp: f64,
    logits_at: BTreeMap<String, f32>,
}

fn check(name: &str) {
    let path = mlxr_testkit::fixture_path(&format!("hf-f32/{name}.json"));
    let fx: Fixture = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let Some(model_path) = mlxr_testkit::model_path(&fx.model_file) else {
        return;
    };
    // Read by candle when the weights become QMatMuls: f32 weights, f32 activations.
    std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
    let model = DecoderModel::load(&GgufFile::open(&model_path).unwrap(), &Device::Cpu).unwrap();
    let mut worst = 0f32;
    for case in &fx.cases {
        let blocks = case.ids.len().div_ceil(common::BLOCK);
        let mut session = common::cpu(&model, 1, blocks, DType::F32);
        let logits = session.feed(&model, &[(0, &case.ids)]).unwrap().to_vec();
        let max = logits.iter().copied().fold(f32::MIN, f32::max) as f64;
        let lse = max
            + logits
                .iter()
                .map(|&l| (l as f64 - max).exp())
                .sum::<f64>()
                .ln();
        let mut pairs: Vec<(u32, f32)> = case.top.clone();
        pairs.extend(
            case.logits_at
                .iter()
                .map(|(id, &l)| (id.parse().unwrap(), l)),
        );
        for (id, reference) in pairs {
            let diff = (logits[id as usize] - reference).abs();
            worst = worst.max(diff);
            assert!(
                diff <= TOLERANCE,
                "{name}/{}: logit of token {id} is {} (transformers f32: {reference})",
                case.name,
                logits[id as usize]
            );
        }
        assert!(
            (lse - case.logsumexp).abs() <= TOLERANCE as f64,
            "{name}/{}: logsumexp {lse} vs {}",
            case.name,
            case.logsumexp
        );
        assert_eq!(
            logits
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |a, (i, &l)| if l > a.1 { (i, l) } else { a })
                .0 as u32,
            case.top[0].0,
            "{name}/{}: argmax",
            case.name
        );
    }
    eprintln!(
        "{name}: {} cases, largest logit difference {worst:.5}",
        fx.cases.len()
    );
}

#[test]
fn smollm2_matches_transformers_f32() {
    check("smollm2");
}

#[test]
fn gemma3_matches_transformers_f32() {
    check("gemma3");
}
