//! The batched forward pass: sequences sharing a pass, and prompts prefilled
//! in chunks, give the same logits as each sequence run alone in one go —
//! with contiguous per-sequence caches and with the paged block cache
//! (shuffled, non-contiguous block tables).
//!
//! Weights are dequantized to f32 here. With quantized weights candle
//! quantizes activations to 8 bits per row, and the last-ulp differences that
//! different GEMM shapes produce can flip a rounding there; the logits then
//! differ by a few tenths although positions, masks and caches are right. In
//! f32 the same comparison holds to ~1e-4, relative (5e-2 absolute on Gemma logits of magnitude ~30; a wrong position, mask or cache entry moves them by whole units).

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{ContiguousKvCache, DecoderModel, PagedKvStore, PagedKvView, SeqChunk};

fn model(file: &str) -> Option<DecoderModel> {
    let path = mlxr_testkit::model_path(file)?;
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

#[derive(Clone, Copy)]
enum Kv {
    Contiguous,
    Paged(DType),
}

const BLOCK: usize = 16;

fn check(file: &str, long: usize, kv: Kv) {
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
    // Each sequence's blocks interleaved with the others', in reverse.
    let c = model.config();
    let blocks_per_seq = long.div_ceil(BLOCK);
    let num_blocks = blocks_per_seq * seqs.len();
    let tables: Vec<Vec<u32>> = (0..seqs.len())
        .map(|i| {
            (0..blocks_per_seq)
                .map(|b| (num_blocks - 1 - (b * seqs.len() + i)) as u32)
                .collect()
        })
        .collect();
    let store = match kv {
        Kv::Paged(dtype) => Some(
            PagedKvStore::new(
                c.n_layers,
                num_blocks,
                BLOCK,
                c.n_kv_heads,
                c.head_dim,
                dtype,
                &Device::Cpu,
            )
            .unwrap(),
        ),
        Kv::Contiguous => None,
    };

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
        let logits = match &store {
            Some(store) => {
                let tables = rows.iter().map(|&(i, _)| tables[i].as_slice()).collect();
                let mut view = PagedKvView::new(store, tables);
                model.forward(&tokens, &chunks, &mut view).unwrap()
            }
            None => model.forward(&tokens, &chunks, &mut caches).unwrap(),
        };
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

use mlxr_testkit::{GEMMA3, SMOLLM2};

#[test]
fn smollm2_batched_equals_alone() {
    check(SMOLLM2, 250, Kv::Contiguous);
}

#[test]
fn smollm2_paged_equals_alone() {
    check(SMOLLM2, 250, Kv::Paged(DType::F32));
}

/// Longer than Gemma 3's 512-token sliding window, so local layers mask.
#[test]
fn gemma3_batched_equals_alone_past_the_window() {
    check(GEMMA3, 600, Kv::Contiguous);
}

#[test]
fn gemma3_paged_equals_alone_past_the_window() {
    check(GEMMA3, 600, Kv::Paged(DType::F32));
}
