//! Checks against real GGUF files from `$MLXR_MODELS_DIR` (default
//! `~/.cache/mlxr/models`). Each test is skipped, with a note, when its file
//! is absent. Expected values were cross-checked with the Python `gguf`
//! package (`gguf.GGUFReader`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use mlxr_formats::gguf::{GgmlType, GgufFile};

use mlxr_testkit::model_path as model;

fn open_timed(path: &PathBuf) -> GgufFile {
    let start = Instant::now();
    let f = GgufFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "parsed {} in {:.1} ms",
        path.file_name().unwrap().to_string_lossy(),
        start.elapsed().as_secs_f64() * 1e3
    );
    f
}

fn type_counts(f: &GgufFile) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for t in f.tensors() {
        *counts.entry(t.ggml_type.name()).or_default() += 1;
    }
    counts
}

/// Every tensor is readable, in order, with exactly its computed size.
fn check_layout(f: &GgufFile) {
    let mut end = f.data_offset();
    for t in f.tensors() {
        assert!(t.offset >= end, "{} overlaps", t.name);
        assert_eq!(t.offset % f.alignment(), 0);
        let data = f.tensor_data(t).unwrap();
        assert_eq!(data.len() as u64, t.size_bytes);
        end = t.offset + t.size_bytes;
    }
    assert!(end <= f.file_len());
    f.check_supported().unwrap();
}

#[test]
fn smollm2_q4_1() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let f = open_timed(&path);
    let m = f.metadata();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.data_offset(), 1_785_664);
    assert_eq!(f.file_len(), 98_362_432);
    assert_eq!(m.len(), 33);
    assert_eq!(m.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(m.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(m.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(m.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    let tokens = m.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[..3], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    assert_eq!(
        m.get_i32_array("tokenizer.ggml.token_type").unwrap().len(),
        49152
    );
    let merges = m.get_str_array("tokenizer.ggml.merges").unwrap();
    assert_eq!((merges.len(), merges[0].as_str()), (48900, "Ġ t"));

    assert_eq!(f.tensors().len(), 272);
    assert_eq!(
        type_counts(&f),
        BTreeMap::from([("F32", 61), ("Q4_1", 210), ("Q8_0", 1)])
    );
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.ggml_type, GgmlType::Q8_0);
    assert_eq!(emb.dims, [576, 49152]);
    assert_eq!((emb.offset, emb.size_bytes), (1_785_664, 30_081_024));
    let norm = f.tensor("output_norm.weight").unwrap();
    assert_eq!((norm.offset, norm.size_bytes), (98_360_128, 2304));
    check_layout(&f);
}

#[test]
fn gemma3_270m_q4_k_m() {
    let Some(path) = model("gemma-3-270m-q4_k_m.gguf") else {
        return;
    };
    let f = open_timed(&path);
    let m = f.metadata();
    assert_eq!(f.data_offset(), 6_525_120);
    assert_eq!(m.len(), 33);
    assert_eq!(m.get_str("general.architecture").unwrap(), "gemma3");
    assert_eq!(m.get_u32("gemma3.block_count").unwrap(), 18);
    assert_eq!(
        m.get_f32("gemma3.attention.layer_norm_rms_epsilon")
            .unwrap(),
        1e-6
    );
    let tokens = m.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 262_144);
    assert_eq!(tokens[..3], ["<pad>", "<eos>", "<bos>"]);
    let scores = m.get_f32_array("tokenizer.ggml.scores").unwrap();
    assert_eq!((scores.len(), scores[0]), (262_144, -1000.0));
    assert_eq!(
        m.get_i32_array("tokenizer.ggml.token_type").unwrap().len(),
        262_144
    );

    assert_eq!(f.tensors().len(), 236);
    assert_eq!(
        type_counts(&f),
        BTreeMap::from([
            ("F32", 109),
            ("Q4_K", 27),
            ("Q5_0", 81),
            ("Q6_K", 9),
            ("Q8_0", 10)
        ])
    );
    let first = &f.tensors()[0];
    assert_eq!(
        (first.name.as_str(), first.offset),
        ("output_norm.weight", 6_525_120)
    );
    check_layout(&f);
}
