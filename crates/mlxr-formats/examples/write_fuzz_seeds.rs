//! Writes a few small, valid GGUF files to use as fuzzing seeds.
//!
//! `cargo run --release -p mlxr-formats --example write_fuzz_seeds -- fuzz/seeds/gguf_parse`

use std::path::PathBuf;

use mlxr_formats::gguf::writer::GgufWriter;
use mlxr_formats::gguf::{GgmlType, GgufFile, MetadataArray};

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/seeds/gguf_parse".into()),
    );
    std::fs::create_dir_all(&dir).expect("create seed dir");
    let seeds = [
        ("empty_v3.gguf", GgufWriter::new().build()),
        (
            "llama_like_v3.gguf",
            GgufWriter::new()
                .kv("general.architecture", "llama")
                .kv("llama.block_count", 2u32)
                .kv("llama.rope.freq_base", 10000.0f32)
                .kv("tokenizer.ggml.tokens", vec!["<s>", "</s>", "a", "b"])
                .kv("tokenizer.ggml.scores", vec![0.0f32, 0.0, -1.0, -2.0])
                .kv("tokenizer.ggml.token_type", vec![3i32, 3, 1, 1])
                .kv("tokenizer.ggml.add_bos_token", true)
                .tensor_f32("output_norm.weight", &[4], &[1.0; 4])
                .tensor(
                    "token_embd.weight",
                    &[32, 4],
                    GgmlType::Q8_0,
                    vec![1; 4 * 34],
                )
                .tensor(
                    "blk.0.attn_q.weight",
                    &[256, 1],
                    GgmlType::Q4_K,
                    vec![2; 144],
                )
                .build(),
        ),
        (
            "all_types_v2_align8.gguf",
            GgufWriter::new()
                .version(2)
                .alignment(8)
                .kv("u8", 1u8)
                .kv("i8", -1i8)
                .kv("u16", 2u16)
                .kv("i16", -2i16)
                .kv("u32", 3u32)
                .kv("i32", -3i32)
                .kv("u64", 4u64)
                .kv("i64", -4i64)
                .kv("f32", 0.5f32)
                .kv("f64", 0.25f64)
                .kv("bool", false)
                .kv("str", "s")
                .kv(
                    "nested",
                    MetadataArray::Array(vec![
                        MetadataArray::U16(vec![1, 2]),
                        MetadataArray::Array(vec![MetadataArray::Bool(vec![true])]),
                    ]),
                )
                .kv("f64s", vec![1.0f64, 2.0])
                .tensor("iq2", &[256], GgmlType::IQ2_XXS, vec![3; 66])
                .tensor("bf16", &[3, 1, 1, 1], GgmlType::BF16, vec![4; 6])
                .tensor("mx", &[32], GgmlType::MXFP4, vec![5; 17])
                .build(),
        ),
    ];
    for (name, bytes) in seeds {
        GgufFile::from_bytes(bytes.clone()).expect("seed must parse");
        let path = dir.join(name);
        std::fs::write(&path, &bytes).expect("write seed");
        println!("{} ({} bytes)", path.display(), bytes.len());
    }
}
