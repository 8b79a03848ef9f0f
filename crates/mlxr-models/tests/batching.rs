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
    model
        .forward(tokens, &[SeqChunk::new(0, tokens.len())], &mut cache)
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

/// One sequence of the batch: its prompt, how many tokens it feeds per pass,
/// and what it has fed so far.
struct Seq {
    tokens: Vec<u32>,
    chunk: usize,
    pos: usize,
    cache: ContiguousKvCache,
    logits: Vec<f32>,
}

fn check(file: &str, long: usize) {
    let Some(model) = model(file) else { return };
    let n = model.config().n_layers;
    // A long prompt and a short one prefilled in chunks of different sizes
    // while the third feeds one token a pass: mixed prefill and decode.
    let mut seqs: Vec<Seq> = [(long, 100), (9, 4), (3, 1)]
        .iter()
        .enumerate()
        .map(|(i, &(len, chunk))| Seq {
            tokens: prompt(len, i as u32 + 1),
            chunk,
            pos: 0,
            cache: ContiguousKvCache::new(n),
            logits: Vec::new(),
        })
        .collect();
    let expected: Vec<Vec<f32>> = seqs.iter().map(|s| alone(&model, &s.tokens)).collect();

    while seqs.iter().any(|s| s.pos < s.tokens.len()) {
        let mut tokens = Vec::new();
        let mut chunks = Vec::new();
        let mut caches = Vec::new();
        let mut rows = Vec::new();
        for (i, s) in seqs.iter_mut().enumerate() {
            let take = (s.tokens.len() - s.pos).min(s.chunk);
            if take == 0 {
                continue;
            }
            tokens.extend_from_slice(&s.tokens[s.pos..s.pos + take]);
            chunks.push(SeqChunk::new(s.pos, take));
            caches.push(&mut s.cache);
            rows.push((i, take));
        }
        let logits = model.forward(&tokens, &chunks, &mut caches).unwrap();
        for (row, &(i, take)) in rows.iter().enumerate() {
            seqs[i].logits = logits.get(row).unwrap().to_vec1::<f32>().unwrap();
            seqs[i].pos += take;
        }
    }
    for (i, (s, want)) in seqs.iter().zip(&expected).enumerate() {
        let d = max_diff(&s.logits, want);
        assert!(
            d < 5e-2,
            "{file}: sequence {i}: batched logits differ by {d}"
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
