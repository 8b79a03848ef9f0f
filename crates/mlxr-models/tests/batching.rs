//! The batched forward pass: sequences sharing a step, and prompts
//! prefilled in chunks, give the same logits as each sequence run alone in
//! one go, on the CPU backend and on the reference backend (shuffled,
//! non-contiguous block tables).
//!
//! Weights are dequantized to f32 here. With quantized weights candle
//! quantizes activations to 8 bits per row, and the last-ulp differences that
//! different GEMM shapes produce can flip a rounding there; the logits then
//! differ by a few tenths although positions, masks and caches are right. In
//! f32 the same comparison holds to ~1e-4, relative (5e-2 absolute on Gemma logits of magnitude ~30; a wrong position, mask or cache entry moves them by whole units).

mod common;

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{
    Backend, CpuBackend, DecoderModel, KvGeometry, ReferenceBackend, RowOrder, Session,
};
use mlxr_testkit::{GEMMA3, SMOLLM2};

use common::BLOCK;

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

struct Seq {
    tokens: Vec<u32>,
    chunk: usize,
    pos: usize,
    logits: Vec<f32>,
}

/// Three sequences in one session, blocks interleaved and in reverse: a
/// long prompt and a short one prefilled in chunks of different sizes while
/// the third feeds one token a step (mixed prefill and decode); each one's
/// last logits against the same prompt run alone (`new_session(1 or 3,
/// tables)`).
fn check<B: Backend>(
    file: &str,
    model: &DecoderModel,
    long: usize,
    new_session: impl Fn(Vec<Vec<u32>>) -> Session<B>,
) {
    let mut seqs: Vec<Seq> = [(long, 100), (9, 4), (3, 1)]
        .iter()
        .enumerate()
        .map(|(i, &(len, chunk))| Seq {
            tokens: prompt(len, i as u32 + 1),
            chunk,
            pos: 0,
            logits: Vec::new(),
        })
        .collect();
    let blocks_per_seq = long.div_ceil(BLOCK);
    let expected: Vec<Vec<f32>> = seqs
        .iter()
        .map(|s| {
            let table = (0..blocks_per_seq as u32).collect();
            let mut alone = new_session(vec![table]);
            alone.feed(model, &[(0, &s.tokens)]).unwrap().to_vec()
        })
        .collect();
    let num_blocks = blocks_per_seq * seqs.len();
    let tables: Vec<Vec<u32>> = (0..seqs.len())
        .map(|i| {
            (0..blocks_per_seq)
                .map(|b| (num_blocks - 1 - (b * seqs.len() + i)) as u32)
                .collect()
        })
        .collect();
    let mut session = new_session(tables);
    let vocab = model.config().vocab_size;
    while seqs.iter().any(|s| s.pos < s.tokens.len()) {
        let mut chunks: Vec<(usize, &[u32])> = Vec::new();
        for (i, s) in seqs.iter().enumerate() {
            let take = (s.tokens.len() - s.pos).min(s.chunk);
            if take > 0 {
                chunks.push((i, &s.tokens[s.pos..s.pos + take]));
            }
        }
        let fed: Vec<(usize, usize)> = chunks.iter().map(|&(i, t)| (i, t.len())).collect();
        let logits = session.feed(model, &chunks).unwrap().to_vec();
        for (row, (i, take)) in logits.chunks_exact(vocab).zip(fed) {
            seqs[i].logits = row.to_vec();
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

fn geometry(model: &DecoderModel, tables: &[Vec<u32>]) -> KvGeometry {
    KvGeometry::new(model.config(), tables.iter().map(Vec::len).sum(), BLOCK)
}

/// The model file, with candle told to dequantize its weights (every test
/// in this binary sets the same value).
fn model_file(file: &str) -> Option<GgufFile> {
    let path = mlxr_testkit::model_path(file)?;
    std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
    Some(GgufFile::open(&path).unwrap())
}

fn on_cpu(file: &str, long: usize) {
    let Some(gguf) = model_file(file) else {
        return;
    };
    let order = Some(RowOrder::Independent);
    let model = DecoderModel::load_with_kernels(&gguf, &Device::Cpu, order).unwrap();
    check(file, &model, long, |tables| {
        let backend = CpuBackend::new(geometry(&model, &tables), DType::F32).unwrap();
        Session::with_tables(backend, tables, BLOCK)
    });
}

fn on_reference(file: &str, long: usize) {
    let Some(gguf) = model_file(file) else {
        return;
    };
    let model = DecoderModel::load_with_kernels(&gguf, &Device::Cpu, None).unwrap();
    check(file, &model, long, |tables| {
        let backend = ReferenceBackend::new(geometry(&model, &tables), &Device::Cpu).unwrap();
        Session::with_tables(backend, tables, BLOCK)
    });
}

#[test]
fn smollm2_batched_equals_alone_on_the_cpu_backend() {
    on_cpu(SMOLLM2, 250);
}

#[test]
fn smollm2_batched_equals_alone_on_the_reference_backend() {
    on_reference(SMOLLM2, 250);
}

#[test]
fn gemma3_batched_equals_alone_past_the_window_on_the_cpu_backend() {
    on_cpu(GEMMA3, 600);
}

#[test]
fn gemma3_batched_equals_alone_past_the_window_on_the_reference_backend() {
    on_reference(GEMMA3, 600);
}
