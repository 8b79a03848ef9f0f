//! The batched forward pass: sequences sharing a pass, and prompts prefilled
//! in chunks, give the same logits as each sequence run alone in one go.
//!
//! Weights are dequantized to f32 here. With quantized weights candle
//! quantizes activations to 8 bits per row, and the last-ulp differences that
//! different GEMM shapes produce can flip a rounding there; the logits then
//! differ by a few tenths although positions, masks and caches are right. In
//! f32 the same comparison holds to ~1e-4, relative (5e-2 absolute on Gemma logits of magnitude ~30; a wrong position, mask or cache entry moves them by whole units).

use std::path::PathBuf;

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{ContiguousKvCache, DecoderModel, SeqChunk};

fn model(file: &str) -> Option<DecoderModel> {
    let dir = std::env::var_os("MLXR_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/mlxr/models")
        });
    let path = dir.join(file);
    if !path.exists() {
        assert!(
            std::env::var("MLXR_REQUIRE_MODELS").as_deref() != Ok("1"),
            "{} missing",
            path.display()
        );
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    // Read by candle when the weights become QMatMuls; every test in this
    // binary sets the same value.
    std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
    Some(DecoderModel::load(&GgufFile::open(&path).unwrap(), &Device::Cpu).unwrap())
}

fn alone(model: &DecoderModel, tokens: &[u32]) -> Vec<f32> {
    let mut cache = ContiguousKvCache::new(model.config().n_layers);
    let mut seqs = [SeqChunk {
        start_pos: 0,
        len: tokens.len(),
        cache: &mut cache,
    }];
    model
        .forward(tokens, &mut seqs)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec1()
        .unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn prompt(len: usize, salt: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| 100 + (i * 37 + salt * 101) % 5000)
        .collect()
}

fn check(file: &str, long: usize) {
    let Some(model) = model(file) else { return };
    let a = prompt(long, 1);
    let b = prompt(9, 2);
    let c = prompt(3, 3);
    let (ra, rb, rc) = (alone(&model, &a), alone(&model, &b), alone(&model, &c));

    // a and b prefilled in chunks of different sizes while c decodes one token at a time:
    // mixed prefill and decode in the same passes.
    let n = model.config().n_layers;
    let (mut ca, mut cb, mut cc) = (
        ContiguousKvCache::new(n),
        ContiguousKvCache::new(n),
        ContiguousKvCache::new(n),
    );
    let (mut pa, mut pb, mut pc) = (0, 0, 0);
    let (mut la, mut lb, mut lc) = (vec![], vec![], vec![]);
    while pa < a.len() || pb < b.len() || pc < c.len() {
        let mut tokens = Vec::new();
        let mut seqs = Vec::new();
        let mut which = Vec::new();
        let take_a = (a.len() - pa).min(100);
        let take_b = (b.len() - pb).min(4);
        let take_c = (c.len() - pc).min(1);
        if take_a > 0 {
            tokens.extend_from_slice(&a[pa..pa + take_a]);
            seqs.push(SeqChunk {
                start_pos: pa,
                len: take_a,
                cache: &mut ca,
            });
            which.push(0);
        }
        if take_b > 0 {
            tokens.extend_from_slice(&b[pb..pb + take_b]);
            seqs.push(SeqChunk {
                start_pos: pb,
                len: take_b,
                cache: &mut cb,
            });
            which.push(1);
        }
        if take_c > 0 {
            tokens.extend_from_slice(&c[pc..pc + take_c]);
            seqs.push(SeqChunk {
                start_pos: pc,
                len: take_c,
                cache: &mut cc,
            });
            which.push(2);
        }
        let logits = model.forward(&tokens, &mut seqs).unwrap();
        for (row, w) in which.iter().enumerate() {
            let l = logits.get(row).unwrap().to_vec1::<f32>().unwrap();
            match w {
                0 => la = l,
                1 => lb = l,
                _ => lc = l,
            }
        }
        pa += take_a;
        pb += take_b;
        pc += take_c;
    }
    for (name, got, want) in [("a", &la, &ra), ("b", &lb, &rb), ("c", &lc, &rc)] {
        let d = max_diff(got, want);
        assert!(
            d < 5e-2,
            "{file}: sequence {name}: batched logits differ by {d}"
        );
    }
}

#[test]
fn smollm2_batched_equals_alone() {
    check("SmolLM2-135M-Instruct.Q4_1.gguf", 250);
}

/// Longer than Gemma 3's 512-token sliding window, so local layers mask.
#[test]
fn gemma3_batched_equals_alone_past_the_window() {
    check("gemma-3-270m-q4_k_m.gguf", 600);
}
