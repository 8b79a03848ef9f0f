//! FP8 and bitsandbytes 4-bit checkpoints to GGUF (tests/fixtures/fp8-nf4,
//! tiny llama / qwen2 models of 128 tokens): the weights are decoded as MLXR
//! runs them (mlxr-models, itself checked against transformers' dequantization)
//! and written as floats; scales and quant states are not tensors of the GGUF.
//! FP8 is also decoded here independently (E4M3 code × its block's scale).
//! MLX affine-quantized folders (tests/fixtures/tiny-models, made from the
//! tiny folders convert_hf_to_gguf.py converted) give that script's GGUF
//! within their quantization error; MLX mxfp4 / mxfp8 / nvfp4 folders
//! (fp8-nf4) give their codes times their scales, decoded here too.

mod common;
use common::{copy_folder, values};

use std::path::Path;

use mlxr_convert::{dequantize_folder, hf_to_gguf, HfDtype, HfToGgufOptions, OutType};
use mlxr_formats::float8::e4m3_to_f32;
use mlxr_formats::GgufFile;
use safetensors::SafeTensors;

/// A copy of the checkpoint with what the fixtures leave out for the
/// converter: the class in config.json and a 128-token byte-level tokenizer.
fn prepare(checkpoint: &str, class: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let from = mlxr_testkit::fixture_path(&format!("fp8-nf4/{checkpoint}"));
    std::fs::copy(from.join("model.safetensors"), to.join("model.safetensors")).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(from.join("config.json")).unwrap()).unwrap();
    config["architectures"] = serde_json::json!([class]);
    std::fs::write(to.join("config.json"), config.to_string()).unwrap();
    let mut vocab = serde_json::Map::new();
    vocab.insert("<|endoftext|>".into(), 0.into());
    for (i, c) in ('!'..='~').take(127).enumerate() {
        vocab.insert(c.to_string(), (i + 1).into());
    }
    let tokenizer = serde_json::json!({
        "added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": true}],
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    });
    std::fs::write(to.join("tokenizer.json"), tokenizer.to_string()).unwrap();
}

fn convert(folder: &Path, out: &Path, pre: &str) -> GgufFile {
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: Some(pre.into()),
    };
    hf_to_gguf(folder, out, &options, |_| true)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
    GgufFile::open(out).unwrap()
}

/// The fixture `checkpoint` (of `class`) prepared in a temporary folder and
/// converted to GGUF, with the tensors a tiny model has: per layer 7 linears
/// + 2 norms (+ 3 biases for qwen2); embeddings, final norm, untied head.
fn converted(checkpoint: &str, class: &str) -> (tempfile::TempDir, GgufFile) {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(checkpoint);
    prepare(checkpoint, class, &folder);
    let gguf = convert(&folder, &dir.path().join("out.gguf"), "gpt-2");
    let per_layer = if class.starts_with("Qwen2") { 12 } else { 9 };
    let extra = if class.starts_with("Qwen2") { 2 } else { 3 };
    assert_eq!(gguf.tensors().len(), 2 * per_layer + extra, "{checkpoint}");
    (dir, gguf)
}

#[test]
fn fp8_blocks_decode_to_code_times_scale() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("qwen2-fp8-b48x80");
    prepare("qwen2-fp8-b48x80", "Qwen2ForCausalLM", &folder);
    let gguf = convert(&folder, &dir.path().join("out.gguf"), "gpt-2");
    assert!(gguf.tensors().iter().all(|t| !t.name.contains("scale")));
    let bytes = std::fs::read(folder.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut checked = 0;
    for (name, view) in st.tensors() {
        let Some(stem) = name.strip_suffix(".weight") else {
            continue;
        };
        if view.dtype() != safetensors::Dtype::F8_E4M3 {
            continue;
        }
        let scales = st.tensor(&format!("{stem}.weight_scale_inv")).unwrap();
        let scales: Vec<f32> = scales
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (rows, cols) = (view.shape()[0], view.shape()[1]);
        let grid_cols = cols.div_ceil(80);
        let want: Vec<f32> = view
            .data()
            .iter()
            .enumerate()
            .map(|(i, &code)| {
                e4m3_to_f32(code) * scales[(i / cols) / 48 * grid_cols + (i % cols) / 80]
            })
            .collect();
        let gguf_name = name
            .replace("model.layers.", "blk.")
            .replace("self_attn.q_proj", "attn_q")
            .replace("self_attn.k_proj", "attn_k")
            .replace("self_attn.v_proj", "attn_v")
            .replace("self_attn.o_proj", "attn_output")
            .replace("mlp.gate_proj", "ffn_gate")
            .replace("mlp.up_proj", "ffn_up")
            .replace("mlp.down_proj", "ffn_down");
        assert_eq!(values(&gguf, &gguf_name), want, "{name} ({rows}x{cols})");
        checked += 1;
    }
    assert_eq!(checked, 14);
}

#[test]
fn fp8_and_4bit_checkpoints_convert() {
    for (checkpoint, class) in [
        ("llama-fp8-b128", "LlamaForCausalLM"),
        ("qwen2-fp8-b64", "Qwen2ForCausalLM"),
        ("llama-ct-fp8-channel", "LlamaForCausalLM"),
        ("qwen2-ct-fp8-tensor", "Qwen2ForCausalLM"),
        ("llama-nf4", "LlamaForCausalLM"),
        ("qwen2-nf4-dq", "Qwen2ForCausalLM"),
        ("llama-fp4-dq", "LlamaForCausalLM"),
    ] {
        let (dir, gguf) = converted(checkpoint, class);
        let folder = dir.path().join(checkpoint);
        // What mlxr-models runs is what the GGUF holds (q/k rows permuted for llama.cpp).
        let weights = mlxr_models::weights::SafetensorsWeights::open(
            &folder,
            false,
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let (down, shape) = weights
            .dequantized_weight("model.layers.1.mlp.down_proj")
            .unwrap()
            .unwrap();
        assert_eq!(values(&gguf, "blk.1.ffn_down.weight"), down, "{checkpoint}");
        assert_eq!(
            gguf.tensor("blk.1.ffn_down.weight").unwrap().dims,
            vec![shape[1] as u64, shape[0] as u64]
        );
        assert!(down.iter().all(|v| v.is_finite()) && down.iter().any(|v| *v != 0.0));
        let (q, _) = weights
            .dequantized_weight("model.layers.0.self_attn.q_proj")
            .unwrap()
            .unwrap();
        let mut a = values(&gguf, "blk.0.attn_q.weight");
        let mut b = q;
        a.sort_by(f32::total_cmp);
        b.sort_by(f32::total_cmp);
        assert_eq!(a, b, "{checkpoint}: attn_q holds the same values");
    }
}

/// An MLX floating-point-mode matrix decoded from its bytes: E2M1 (low
/// nibble first) or E4M3 codes times E8M0 (mx) or E4M3 (nvfp4) group scales.
fn mlx_fp_decode(mode: &str, words: &[u8], scales: &[u8], cols: usize) -> Vec<f32> {
    const E2M1: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let fp4 = |c: u8| E2M1[(c & 7) as usize] * if c & 8 != 0 { -1.0 } else { 1.0 };
    let codes: Vec<f32> = match mode {
        "mxfp8" => words.iter().map(|&b| e4m3_to_f32(b)).collect(),
        _ => words
            .iter()
            .flat_map(|&b| [fp4(b & 15), fp4(b >> 4)])
            .collect(),
    };
    let group = if mode == "nvfp4" { 16 } else { 32 };
    let scale = |b: u8| match mode {
        "nvfp4" => e4m3_to_f32(b),
        _ => 2f32.powi(i32::from(b) - 127),
    };
    assert_eq!(codes.len(), scales.len() * group);
    assert!(cols.is_multiple_of(group));
    codes
        .iter()
        .enumerate()
        .map(|(k, c)| c * scale(scales[k / group]))
        .collect()
}

#[test]
fn mlx_fp_folders_convert_to_their_decoded_values() {
    for (checkpoint, class) in [
        ("llama-mlx-mxfp4", "LlamaForCausalLM"),
        ("qwen2-mlx-mxfp4", "Qwen2ForCausalLM"),
        ("llama-mlx-mxfp8", "LlamaForCausalLM"),
        ("qwen2-mlx-mxfp8", "Qwen2ForCausalLM"),
        ("llama-mlx-nvfp4", "LlamaForCausalLM"),
        ("qwen2-mlx-nvfp4", "Qwen2ForCausalLM"),
    ] {
        let (dir, gguf) = converted(checkpoint, class);
        let folder = dir.path().join(checkpoint);
        assert!(gguf.tensors().iter().all(|t| !t.name.contains("scale")));
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(folder.join("config.json")).unwrap()).unwrap();
        let bytes = std::fs::read(folder.join("model.safetensors")).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        // Matrices that keep their row order in the GGUF.
        for (stem, gguf_name, cols) in [
            ("model.layers.1.mlp.down_proj", "blk.1.ffn_down.weight", 128),
            ("model.layers.0.self_attn.v_proj", "blk.0.attn_v.weight", 64),
            ("model.embed_tokens", "token_embd.weight", 64),
        ] {
            let q = &config["quantization"];
            let mode = q[stem]["mode"].as_str().or(q["mode"].as_str()).unwrap();
            let want = mlx_fp_decode(
                mode,
                st.tensor(&format!("{stem}.weight")).unwrap().data(),
                st.tensor(&format!("{stem}.scales")).unwrap().data(),
                cols,
            );
            assert!(want.iter().all(|v| v.is_finite()) && want.iter().any(|v| *v != 0.0));
            assert_eq!(
                values(&gguf, gguf_name),
                want,
                "{checkpoint} {stem} ({mode})"
            );
        }
    }
}

#[test]
fn mlx_affine_folders_convert_within_their_error() {
    // (MLX folder, the tiny-models folder it was made from, worst error as a share of max |w|:
    // one step of a group's range over 2^bits - 1 levels, mlx-lm moving the grid so 0 is on it)
    for (mlx, source, tolerance) in [
        ("llama-mlx-q4-g64", "llama", 2.0 / 15.0),
        ("llama-mlx-q8-g32", "llama", 2.0 / 255.0),
        ("qwen3-mlx-q4-g128", "qwen3", 2.0 / 15.0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // Named as the source folder, so general.name is the same too.
        let folder = dir.path().join(source);
        copy_folder(
            &mlxr_testkit::fixture_path(&format!("tiny-models/{mlx}")),
            &folder,
        );
        let gguf = convert(&folder, &dir.path().join("out.gguf"), "qwen2");
        let reference = GgufFile::open(mlxr_testkit::fixture_path(&format!(
            "tiny-models/gguf/{source}.f32.gguf"
        )))
        .unwrap();
        let meta = |f: &GgufFile| {
            f.metadata()
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(meta(&gguf), meta(&reference), "{mlx}: metadata");
        assert_eq!(gguf.tensors().len(), reference.tensors().len(), "{mlx}");
        let mut quantized = 0;
        for t in reference.tensors() {
            let (ours, theirs) = (values(&gguf, &t.name), values(&reference, &t.name));
            assert_eq!(
                gguf.tensor(&t.name).unwrap().dims,
                t.dims,
                "{mlx} {}",
                t.name
            );
            if t.dims.len() == 1 {
                assert_eq!(ours, theirs, "{mlx} {}", t.name);
                continue;
            }
            quantized += 1;
            let scale = theirs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = ours
                .iter()
                .zip(&theirs)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst > 0.0 && worst <= tolerance * scale,
                "{mlx} {}: {worst} vs max |w| {scale}",
                t.name
            );
        }
        assert!(quantized >= 15, "{mlx}: {quantized}");
    }
}

#[test]
fn quantized_folders_dequantize_to_float_folders() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("qwen2-fp8-b48x80", Some("Qwen2ForCausalLM"), "gpt-2"),
        ("llama-nf4", Some("LlamaForCausalLM"), "gpt-2"),
        ("llama-mlx-q4-g64", None, "qwen2"),
        ("qwen2-mlx-nvfp4", Some("Qwen2ForCausalLM"), "gpt-2"),
    ];
    for (name, class, pre) in cases {
        let quantized = dir.path().join(name);
        match class {
            Some(class) => prepare(name, class, &quantized),
            None => copy_folder(
                &mlxr_testkit::fixture_path(&format!("tiny-models/{name}")),
                &quantized,
            ),
        }
        let float = dir.path().join(format!("{name}-f32"));
        let summary = dequantize_folder(&quantized, &float, HfDtype::F32, |_| true).unwrap();
        assert!(summary.tensors > 10);
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(float.join("config.json")).unwrap()).unwrap();
        assert!(
            config.get("quantization_config").is_none() && config.get("quantization").is_none(),
            "{name}"
        );
        assert_eq!(config["torch_dtype"], "float32");
        assert!(float.join("tokenizer.json").is_file());
        // The float folder converts to the same GGUF tensors as the quantized one.
        let a = convert(&quantized, &dir.path().join(format!("{name}-q.gguf")), pre);
        let b = convert(&float, &dir.path().join(format!("{name}-f.gguf")), pre);
        assert_eq!(a.tensors().len(), b.tensors().len());
        for t in a.tensors() {
            assert_eq!(
                values(&a, &t.name),
                values(&b, &t.name),
                "{name} {}",
                t.name
            );
        }
    }
    let e = dequantize_folder(
        &mlxr_testkit::fixture_path("tiny-models/llama"),
        &dir.path().join("x"),
        HfDtype::F32,
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("nothing to dequantize"), "{e}");
    assert!(!dir.path().join("x").exists());
}
