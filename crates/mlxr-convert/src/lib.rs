//! mlxr-convert: model format conversion.
//!
//! [`hf_to_gguf`] writes a Hugging Face safetensors folder as a GGUF file
//! the way llama.cpp's `convert_hf_to_gguf.py` does: the same metadata
//! (hyperparameters, `general.*`, `tokenizer.*` with the chat template), the
//! same tensor names, order, types and layout (Q/K rows of llama-style models
//! permuted for llama.cpp's RoPE, Gemma norms stored as `1 + w`), so for the
//! folders it covers the file is byte-identical to the script's.
//!
//! Covered: `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM`,
//! `Qwen3ForCausalLM`, `Phi3ForCausalLM` (fused `qkv_proj`/`gate_up_proj`)
//! `Gemma2ForCausalLM` and `Gemma3ForCausalLM`, with F32/F16/BF16 weights (or FP8, bitsandbytes
//! 4-bit and MLX affine-quantized ones, decoded by mlxr-models) and a
//! byte-level BPE `tokenizer.json`; output types F32, F16, BF16, Q8_0 or "auto".
//!
//! [`hf_to_mlx`] writes such a folder (F32/F16/BF16) as the MLX
//! affine-quantized folder `mlx_lm.convert -q` writes, tensor for tensor
//! (2, 3, 4, 5, 6 or 8 bits; groups of 32, 64 or 128).
//!
//! [`gguf_to_hf`] goes the other way: a GGUF of those architectures (any
//! type candle dequantizes) to a folder with `config.json`, a dequantized
//! `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`,
//! `chat_template.jinja` and `generation_config.json`.

mod arch;
mod gguf_to_hf;
mod hf_folder;
mod hf_to_mlx;
mod kvs;
mod mlx_affine;
mod naming;
mod spm;
mod tokenizer_json;
mod vocab;

use std::path::Path;

use mlxr_formats::gguf::stream_writer::{GgufStreamWriter, TensorSpec};
use mlxr_formats::gguf::{GgmlType, GgufError, MetadataValue};
use mlxr_quantize::QuantizeError;

pub use arch::SUPPORTED_CLASSES;
use arch::{Arch, HParams};
pub use gguf_to_hf::{dequantize_folder, gguf_to_hf, HfDtype, HfSummary};
use hf_folder::{HfFolder, SourceDtype};
pub use hf_to_mlx::{hf_to_mlx, MlxProgress, MlxQuantizeOptions, MlxSummary};
pub use mlx_affine::{MLX_BITS, MLX_GROUP_SIZES};
pub use vocab::pre_tokenizer_hash;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The input is not something the converter can read; the message says
    /// what and where.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Quantize(#[from] QuantizeError),
    #[error("cancelled")]
    Cancelled,
}

/// `--outtype`: the type of the 2-D weights (1-D tensors, norms and biases
/// stay F32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    F32,
    F16,
    BF16,
    Q8_0,
    /// The type of the first 2-D weight when it is F16 or BF16, else F16.
    Auto,
    /// The one type every 2-D weight is stored in when that is F16 or BF16,
    /// else F32: no value is rounded (the intermediate of `mlxr quantize FOLDER`).
    Lossless,
}

impl OutType {
    pub const NAMES: &'static str = "f32, f16, bf16, q8_0, auto, lossless";

    pub fn parse(name: &str) -> Option<OutType> {
        Some(match name.to_ascii_lowercase().as_str() {
            "f32" => OutType::F32,
            "f16" => OutType::F16,
            "bf16" => OutType::BF16,
            "q8_0" => OutType::Q8_0,
            "auto" => OutType::Auto,
            "lossless" => OutType::Lossless,
            _ => return None,
        })
    }

    fn resolved(self) -> (GgmlType, u32) {
        match self {
            OutType::F32 | OutType::Lossless => (GgmlType::F32, 0),
            OutType::F16 | OutType::Auto => (GgmlType::F16, 1),
            OutType::BF16 => (GgmlType::BF16, 32),
            OutType::Q8_0 => (GgmlType::Q8_0, 7),
        }
    }
}

/// How to convert.
#[derive(Clone, Debug)]
pub struct HfToGgufOptions {
    pub out_type: OutType,
    /// llama.cpp's pre-tokenizer name (`tokenizer.ggml.pre`) when the
    /// tokenizer's is not one the converter recognises.
    pub tokenizer_pre: Option<String>,
}

impl Default for HfToGgufOptions {
    fn default() -> Self {
        HfToGgufOptions {
            out_type: OutType::Auto,
            tokenizer_pre: None,
        }
    }
}

/// [`PlannedTensor::source`] of a tensor the converter computes (Llama 3's
/// `rope_freqs.weight`).
const GENERATED: usize = usize::MAX;

/// One output tensor.
#[derive(Clone, Debug)]
pub struct PlannedTensor {
    pub name: String,
    /// GGUF order (`dims[0]` varies fastest).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    source: usize,
}

/// Reported before each tensor is written; return false to stop.
#[derive(Clone, Copy, Debug)]
pub struct ConvertProgress<'a> {
    pub index: usize,
    pub total: usize,
    pub tensor: &'a PlannedTensor,
}

/// What a finished conversion wrote.
#[derive(Clone, Debug)]
pub struct ConvertSummary {
    pub architecture: &'static str,
    pub out_type: OutType,
    pub tensors: Vec<PlannedTensor>,
    pub parameters: u64,
    pub output_bytes: u64,
}

/// Converts the folder `input` into the GGUF file `output` (written under a
/// hidden temporary name beside it and renamed at the end: an error leaves
/// nothing).
pub fn hf_to_gguf(
    input: &Path,
    output: &Path,
    options: &HfToGgufOptions,
    mut progress: impl FnMut(ConvertProgress<'_>) -> bool,
) -> Result<ConvertSummary, ConvertError> {
    let folder = HfFolder::open(input)?;
    let arch = Arch::from_config(&folder.config)?;
    let hp = HParams {
        map: &folder.config,
    };

    let kept: Vec<usize> = (0..folder.tensors.len())
        .filter(|&i| !arch.skips(&folder.tensors[i].name))
        .collect();
    if kept.is_empty() {
        return Err(ConvertError::Input(format!(
            "{} holds no tensors",
            input.display()
        )));
    }
    let out_type = match options.out_type {
        OutType::Auto => kept
            .iter()
            .map(|&i| &folder.tensors[i])
            .find(|t| t.shape.len() >= 2)
            .map(|t| match t.dtype {
                SourceDtype::BF16 => OutType::BF16,
                _ => OutType::F16,
            })
            .unwrap_or(OutType::F16),
        OutType::Lossless => {
            let mut weights = kept
                .iter()
                .map(|&i| &folder.tensors[i])
                .filter(|t| t.shape.len() >= 2)
                .map(|t| t.dtype);
            let first = weights.next();
            match first {
                Some(SourceDtype::BF16) if weights.all(|d| d == SourceDtype::BF16) => OutType::BF16,
                Some(SourceDtype::F16) if weights.all(|d| d == SourceDtype::F16) => OutType::F16,
                _ => OutType::F32,
            }
        }
        other => other,
    };
    let (weight_type, file_type) = out_type.resolved();

    // Gemma 3's embeddings lose the rows past the tokenizer's vocabulary.
    let vocab_rows = match arch {
        Arch::Gemma3 => Some(gemma3_vocab_rows(input, &hp)?),
        _ => None,
    };
    let mut plan = Vec::with_capacity(kept.len());
    for &i in &kept {
        let t = &folder.tensors[i];
        let name = arch.tensor_name(&t.name)?;
        let mut dims: Vec<u64> = t.shape.iter().rev().map(|&d| d as u64).collect();
        if let (Some(rows), true) = (vocab_rows, name == "token_embd.weight") {
            if let Some(r) = dims.get_mut(1) {
                *r = (*r).min(rows);
            }
        }
        let mut ty = weight_type;
        if t.shape.len() <= 1 || name.ends_with("_norm.weight") || !name.ends_with(".weight") {
            ty = GgmlType::F32;
        }
        let row = dims.first().copied().unwrap_or(1);
        if ty.block_size() > 1 && !row.is_multiple_of(ty.block_size()) {
            ty = GgmlType::F16;
        }
        plan.push(PlannedTensor {
            name,
            dims,
            ggml_type: ty,
            source: i,
        });
    }
    check_complete(arch, &hp, &plan)?;
    // Tensors the converter makes rather than reads come first, as the script's do.
    let rope_factors = match arch {
        Arch::Llama => arch::llama3_rope_factors(&hp)?,
        _ => None,
    };
    if let Some(f) = &rope_factors {
        plan.insert(
            0,
            PlannedTensor {
                name: "rope_freqs.weight".into(),
                dims: vec![f.len() as u64],
                ggml_type: GgmlType::F32,
                source: GENERATED,
            },
        );
    }
    let parameters: u64 = plan.iter().map(|t| t.dims.iter().product::<u64>()).sum();

    let mut kvs = kvs::Kvs::default();
    kvs.set("general.architecture", arch.gguf_name());
    kvs.set("general.type", "model");
    naming::write_general(input, &folder.config, parameters, &mut kvs)?;
    arch::write_hparams(arch, &hp, &mut kvs, file_type)?;
    kvs.set(
        "general.quantization_version",
        mlxr_quantize::QUANTIZATION_VERSION,
    );
    if arch == Arch::Llama {
        if let Some(cfg) = hf_folder::read_json_object(&input.join("tokenizer_config.json"))? {
            if let Some(Some(b)) = cfg.get("add_prefix_space").map(serde_json::Value::as_bool) {
                kvs.set("tokenizer.ggml.add_space_prefix", b);
            }
        }
    }
    if arch == Arch::Phi3 {
        let class =
            hf_folder::read_json_object(&input.join("tokenizer_config.json"))?.and_then(|c| {
                c.get("tokenizer_class")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            });
        if class.as_deref() != Some("GPT2Tokenizer") {
            return Err(ConvertError::Input(
                "Phi-3 with a SentencePiece tokenizer (tokenizer_class other than GPT2Tokenizer) is not supported yet".into(),
            ));
        }
    }
    // A SentencePiece tokenizer.model comes first where the script tries it first.
    let sentencepiece = input.join("tokenizer.model").is_file()
        && matches!(
            arch,
            Arch::Llama | Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3
        );
    if sentencepiece {
        spm::write_spm_vocab(input, hp.u32(&["vocab_size"])?, &mut kvs)?;
        if arch.shifts_norms() {
            kvs.set("tokenizer.ggml.add_space_prefix", false);
        }
    } else {
        vocab::write_vocab(
            input,
            hp.u32(&["vocab_size"])?,
            options.tokenizer_pre.as_deref(),
            &mut kvs,
        )?;
    }
    if arch == Arch::Llama && hp.u32(&["vocab_size"])? == Some(49152) {
        // llama.cpp's converter never adds BOS for this vocabulary size (Granite / SmolLM).
        kvs.set("tokenizer.ggml.add_bos_token", false);
    }

    let specs: Vec<TensorSpec> = plan
        .iter()
        .map(|t| TensorSpec {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: t.ggml_type,
        })
        .collect();
    let kvs: Vec<(String, MetadataValue)> = kvs.into_vec();
    let mut writer = GgufStreamWriter::create(output, &kvs, &specs)?;
    let n_head = hp.u32(&["n_heads", "num_attention_heads"])?;
    let n_head_kv = hp.u32(&["n_kv_heads", "num_key_value_heads"])?;
    let mut output_bytes = 0u64;
    for (index, planned) in plan.iter().enumerate() {
        if !progress(ConvertProgress {
            index,
            total: plan.len(),
            tensor: planned,
        }) {
            return Err(ConvertError::Cancelled);
        }
        if planned.source == GENERATED {
            let data = mlxr_quantize::quantize(
                GgmlType::F32,
                rope_factors.as_deref().unwrap_or(&[]),
                planned.dims[0] as usize,
            )?;
            writer.write_tensor(&data)?;
            output_bytes += data.len() as u64;
            continue;
        }
        let source = &folder.tensors[planned.source];
        let tensor_err =
            |message: String| ConvertError::Input(format!("tensor {}: {message}", source.name));
        let mut values = folder.values(source)?;
        if arch == Arch::Llama {
            let rows = source.shape.first().copied().unwrap_or(1);
            let heads = if source.name.ends_with("q_proj.weight")
                || source.name.ends_with("q_proj.bias")
            {
                n_head
            } else if source.name.ends_with("k_proj.weight") || source.name.ends_with("k_proj.bias")
            {
                n_head_kv.or(n_head)
            } else {
                None
            };
            if let Some(h) = heads {
                values = arch::permute_rows(&values, rows, h as usize).map_err(tensor_err)?;
            }
        }
        let kept_values = planned.dims.iter().product::<u64>() as usize;
        values.truncate(kept_values);
        if arch.shifts_norms() && source.name.ends_with("norm.weight") {
            for v in &mut values {
                *v += 1.0;
                if source.dtype == SourceDtype::F16 {
                    // the script adds in the stored half precision
                    *v = half::f16::from_f32(*v).to_f32();
                }
            }
        }
        let row = planned.dims.first().copied().unwrap_or(1) as usize;
        let data = mlxr_quantize::quantize(planned.ggml_type, &values, row.max(1))
            .map_err(|e| tensor_err(e.to_string()))?;
        writer.write_tensor(&data)?;
        output_bytes += data.len() as u64;
    }
    writer.finish()?;
    Ok(ConvertSummary {
        architecture: arch.gguf_name(),
        out_type,
        tensors: plan,
        parameters,
        output_bytes,
    })
}

/// The tensors every layer needs are there (a missing shard or a truncated
/// export is an error, not a file llama.cpp rejects later).
/// How many embedding rows convert_hf_to_gguf.py keeps for Gemma 3: the
/// SentencePiece vocabulary (padded to `vocab_size`), else tokenizer.json's
/// vocabulary and added tokens.
fn gemma3_vocab_rows(input: &Path, hp: &HParams) -> Result<u64, ConvertError> {
    if input.join("tokenizer.model").is_file() {
        return Ok(u64::from(hp.need_u32(&["vocab_size"])?));
    }
    let tokenizer = hf_folder::read_json_object(&input.join("tokenizer.json"))?
        .ok_or_else(|| ConvertError::Input("no tokenizer.model or tokenizer.json".into()))?;
    let count = |v: Option<&serde_json::Value>| {
        v.map_or(0, |v| match v {
            serde_json::Value::Object(m) => m.len(),
            serde_json::Value::Array(a) => a.len(),
            _ => 0,
        }) as u64
    };
    Ok(count(tokenizer.get("model").and_then(|m| m.get("vocab")))
        + count(tokenizer.get("added_tokens")))
}

fn check_complete(arch: Arch, hp: &HParams, plan: &[PlannedTensor]) -> Result<(), ConvertError> {
    let blocks = hp.block_count()?;
    let has = |n: &str| plan.iter().any(|t| t.name == n);
    let mut missing = Vec::new();
    for n in ["token_embd.weight", "output_norm.weight"] {
        if !has(n) {
            missing.push(n.to_string());
        }
    }
    let per_layer: Vec<&str> = arch
        .layer_parts()
        .into_iter()
        .map(|(_, gguf)| gguf)
        .collect();
    for b in 0..blocks {
        for p in &per_layer {
            let n = format!("blk.{b}.{p}.weight");
            if !has(&n) {
                missing.push(n);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = missing.iter().take(8).map(String::as_str).collect();
    Err(ConvertError::Input(format!(
        "the folder lacks {} tensor(s) a {} model needs: {}{}",
        missing.len(),
        arch.gguf_name(),
        shown.join(", "),
        if missing.len() > shown.len() {
            ", ..."
        } else {
            ""
        }
    )))
}

/// Deletes a file when dropped (the intermediate GGUF of [`quantize_hf_folder`]).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `mlxr quantize` of a folder: converts `input` as [`hf_to_gguf`] does (to
/// `convert.out_type`; [`OutType::Lossless`] rounds nothing) into a hidden
/// file beside `output`, then quantizes that as `llama-quantize` would; the
/// intermediate file is removed whatever happens. The same as running
/// convert_hf_to_gguf.py and then llama-quantize, byte for byte.
pub fn quantize_hf_folder(
    input: &Path,
    output: &Path,
    convert: &HfToGgufOptions,
    quantize: mlxr_quantize::QuantizeOptions,
    convert_progress: impl FnMut(ConvertProgress<'_>) -> bool,
    quantize_progress: impl FnMut(mlxr_quantize::ModelProgress<'_>) -> bool,
) -> Result<mlxr_quantize::QuantizeSummary, ConvertError> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out.gguf".into());
    let intermediate =
        output.with_file_name(format!(".{name}.unquantized-{}.gguf", std::process::id()));
    let guard = RemoveOnDrop(intermediate.clone());
    hf_to_gguf(input, &intermediate, convert, convert_progress)?;
    let file = mlxr_formats::GgufFile::open(&intermediate)?;
    let summary = mlxr_quantize::quantize_model(&file, output, quantize, quantize_progress)?;
    drop(file);
    drop(guard);
    Ok(summary)
}
