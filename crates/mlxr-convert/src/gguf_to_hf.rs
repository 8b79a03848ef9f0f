//! A GGUF model back to a Hugging Face folder: `config.json` from the GGUF
//! hyperparameters, the tensors dequantized into `model.safetensors` under
//! their Hugging Face names (llama's Q/K rows back in Hugging Face order,
//! Gemma norms back to `w`), `tokenizer.json` / `tokenizer_config.json` from
//! the GGUF vocabulary, `chat_template.jinja` and `generation_config.json`.
//! The folder converts back ([`crate::hf_to_gguf`]) to the same tensors and
//! hyperparameters.

use std::io::Write;
use std::path::{Path, PathBuf};

use mlxr_formats::gguf::{GgmlType, GgufFile};
use serde_json::{json, Map, Value};

use crate::arch::{self, Arch};
use crate::{ConvertError, ConvertProgress, PlannedTensor};

fn err(message: String) -> ConvertError {
    ConvertError::Input(message)
}

/// The element type of the written safetensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HfDtype {
    F32,
    F16,
    BF16,
}

impl HfDtype {
    /// The `--outtype`s a folder can be written in.
    pub const OUTTYPES: &'static str = "f32, f16, bf16, auto (f32)";

    /// An `--outtype` for a folder: `auto` is F32 (no rounding of the
    /// dequantized weights); a GGUF-only type is `None`.
    pub fn from_outtype(name: &str) -> Option<HfDtype> {
        if name.eq_ignore_ascii_case("auto") {
            return Some(HfDtype::F32);
        }
        HfDtype::parse(name)
    }

    pub fn parse(name: &str) -> Option<HfDtype> {
        Some(match name.to_ascii_lowercase().as_str() {
            "f32" => HfDtype::F32,
            "f16" => HfDtype::F16,
            "bf16" => HfDtype::BF16,
            _ => return None,
        })
    }

    fn names(self) -> (&'static str, &'static str, GgmlType) {
        match self {
            HfDtype::F32 => ("F32", "float32", GgmlType::F32),
            HfDtype::F16 => ("F16", "float16", GgmlType::F16),
            HfDtype::BF16 => ("BF16", "bfloat16", GgmlType::BF16),
        }
    }
}

/// An output folder built under a hidden name beside its final path and
/// renamed there by [`PartialFolder::finish`]; removed if dropped before.
pub(crate) struct PartialFolder {
    temp: PathBuf,
    output: PathBuf,
    done: bool,
}

impl PartialFolder {
    /// Every file of `input` but the weights and config.json (tokenizer,
    /// chat template, generation config), copied as they are.
    pub(crate) fn copy_side_files(&self, input: &Path) -> Result<(), ConvertError> {
        let entries = std::fs::read_dir(input)
            .map_err(|e| err(format!("reading {}: {e}", input.display())))?;
        for entry in entries.flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let skip = file_name == "config.json"
                || file_name.ends_with(".safetensors")
                || file_name == "model.safetensors.index.json"
                || !entry.path().is_file();
            if !skip {
                let to = self.file(&file_name);
                std::fs::copy(entry.path(), &to).map_err(|e| write_err(&to, e))?;
            }
        }
        Ok(())
    }

    pub(crate) fn create(output: &Path) -> Result<PartialFolder, ConvertError> {
        if output.exists() {
            return Err(err(format!("{} already exists", output.display())));
        }
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let temp = output.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        std::fs::create_dir_all(&temp).map_err(|e| write_err(&temp, e))?;
        Ok(PartialFolder {
            temp,
            output: output.to_owned(),
            done: false,
        })
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.temp.join(name)
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> Result<(), ConvertError> {
        let path = self.file(name);
        std::fs::write(&path, bytes).map_err(|e| write_err(&path, e))
    }

    pub(crate) fn write_json(&self, name: &str, value: &Value) -> Result<(), ConvertError> {
        let mut text = serde_json::to_string_pretty(value).expect("JSON values serialise");
        text.push('\n');
        self.write(name, text)
    }

    pub(crate) fn finish(mut self) -> Result<(), ConvertError> {
        std::fs::rename(&self.temp, &self.output).map_err(|e| write_err(&self.output, e))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for PartialFolder {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.temp);
        }
    }
}

fn write_err(path: &Path, e: std::io::Error) -> ConvertError {
    err(format!("writing {}: {e}", path.display()))
}

/// What a finished GGUF → folder conversion wrote.
#[derive(Clone, Debug)]
pub struct HfSummary {
    pub architecture: &'static str,
    pub tensors: usize,
    pub bytes: u64,
}

/// A number as JSON, written as the shortest decimal that reads back as the
/// same f32.
fn json_f32(x: f32) -> Value {
    let shortest: f64 = format!("{x}").parse().unwrap_or(f64::from(x));
    json!(shortest)
}

/// Converts the GGUF `input` into the folder `output` (built under a hidden
/// name beside it and renamed at the end; `output` must not exist).
pub fn gguf_to_hf(
    input: &Path,
    output: &Path,
    dtype: HfDtype,
    progress: impl FnMut(ConvertProgress<'_>) -> bool,
) -> Result<HfSummary, ConvertError> {
    let file = GgufFile::open(input)?;
    let meta = file.metadata();
    let arch_name = meta.get_str("general.architecture")?;
    let arch = Arch::from_gguf_name(arch_name).ok_or_else(|| {
        err(format!(
            "GGUF architecture {arch_name} is not supported; supported: llama, qwen2, qwen3, phi3, gemma2"
        ))
    })?;
    let config = hf_config(&file, arch, dtype)?;

    // Plan the tensors: Hugging Face names and shapes.
    let mut plan = Vec::new();
    for (i, t) in file.tensors().iter().enumerate() {
        if t.name == "rope_freqs.weight" {
            return Err(err(
                "the GGUF has Llama 3 RoPE frequency factors (rope_freqs.weight); writing them back as config.json's rope_scaling is not supported yet".into(),
            ));
        }
        let name = arch.hf_tensor_name(&t.name)?;
        let supported = matches!(t.ggml_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
            || (t.ggml_type.is_supported_by_candle() && t.ggml_type != GgmlType::Q8_1);
        if !supported {
            return Err(err(format!(
                "tensor {} is {}, which cannot be dequantized",
                t.name, t.ggml_type
            )));
        }
        plan.push(PlannedTensor {
            name,
            dims: t.dims.clone(),
            ggml_type: dtype.names().2,
            source: i,
        });
    }

    let out = PartialFolder::create(output)?;
    out.write_json("config.json", &Value::Object(config.clone()))?;
    let tok = crate::tokenizer_json::from_gguf(meta, arch)?;
    if let Some(t) = &tok.tokenizer {
        out.write_json("tokenizer.json", t)?;
    }
    if let Some(m) = &tok.model {
        out.write("tokenizer.model", m)?;
    }
    out.write_json("tokenizer_config.json", &tok.config)?;
    let mut generation = Map::new();
    for key in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        if let Some(v) = config.get(key) {
            generation.insert(key.into(), v.clone());
        }
    }
    out.write_json("generation_config.json", &Value::Object(generation))?;
    if let Some(t) = meta.opt_str("tokenizer.chat_template")? {
        out.write("chat_template.jinja", t)?;
    }

    let n_head = config
        .get("num_attention_heads")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let n_head_kv = config
        .get("num_key_value_heads")
        .and_then(Value::as_u64)
        .unwrap_or(n_head as u64) as usize;
    let bytes = write_safetensors(
        &out.file("model.safetensors"),
        &plan,
        dtype,
        progress,
        |t| {
            let info = &file.tensors()[t.source];
            let n = info.n_elements() as usize;
            let data = file.raw_tensor_data(info)?;
            let tensor_err = |m: String| err(format!("tensor {}: {m}", info.name));
            let mut values =
                mlxr_quantize::dequantize(info.ggml_type, data, n).map_err(tensor_err)?;
            file.release(info);
            if arch == Arch::Llama {
                let rows = info.dims.last().copied().unwrap_or(1) as usize;
                let heads = if t.name.contains("q_proj.") {
                    Some(n_head)
                } else if t.name.contains("k_proj.") {
                    Some(n_head_kv)
                } else {
                    None
                };
                if let Some(h) = heads {
                    values = arch::unpermute_rows(&values, rows, h).map_err(tensor_err)?;
                }
            }
            if arch.shifts_norms() && t.name.ends_with("norm.weight") {
                values.iter_mut().for_each(|v| *v -= 1.0);
            }
            Ok(values)
        },
    )?;
    out.finish()?;
    Ok(HfSummary {
        architecture: arch.gguf_name(),
        tensors: plan.len(),
        bytes,
    })
}

/// Writes `plan` (Hugging Face names; dims in GGUF order) as one safetensors
/// file of `dtype`, each tensor's values from `values`. Returns the bytes
/// written.
fn write_safetensors(
    path: &Path,
    plan: &[PlannedTensor],
    dtype: HfDtype,
    mut progress: impl FnMut(ConvertProgress<'_>) -> bool,
    mut values: impl FnMut(&PlannedTensor) -> Result<Vec<f32>, ConvertError>,
) -> Result<u64, ConvertError> {
    let io = |e: std::io::Error| err(format!("writing {}: {e}", path.display()));
    let (st_dtype, _, ggml_dtype) = dtype.names();
    let elem = ggml_dtype.type_size();
    let mut header = Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0u64;
    for t in plan {
        let n: u64 = t.dims.iter().product();
        let shape: Vec<u64> = t.dims.iter().rev().copied().collect();
        header.insert(
            t.name.clone(),
            json!({"dtype": st_dtype, "shape": shape, "data_offsets": [offset, offset + n * elem]}),
        );
        offset += n * elem;
    }
    let mut header = serde_json::to_vec(&Value::Object(header)).expect("JSON values serialise");
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&header).map_err(io)?;
    for (index, t) in plan.iter().enumerate() {
        if !progress(ConvertProgress {
            index,
            total: plan.len(),
            tensor: t,
        }) {
            return Err(ConvertError::Cancelled);
        }
        let v = values(t)?;
        let row = t.dims.first().copied().unwrap_or(1) as usize;
        let encoded = mlxr_quantize::quantize(ggml_dtype, &v, row.max(1))
            .map_err(|e| err(format!("tensor {}: {e}", t.name)))?;
        out.write_all(&encoded).map_err(io)?;
    }
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(offset + 8 + header.len() as u64)
}

/// A quantized Hugging Face folder (FP8, bitsandbytes 4-bit, MLX affine) as
/// a float one: the same tensors under the same names, decoded as MLXR runs
/// them, in `dtype`; config.json without its quantization; every other file
/// (tokenizer, chat template, generation config) copied.
pub fn dequantize_folder(
    input: &Path,
    output: &Path,
    dtype: HfDtype,
    progress: impl FnMut(ConvertProgress<'_>) -> bool,
) -> Result<HfSummary, ConvertError> {
    let folder = crate::hf_folder::HfFolder::open(input)?;
    let arch = Arch::from_config(&folder.config)?;
    if !folder.is_quantized() {
        return Err(err(format!(
            "{} holds no FP8, 4-bit or MLX-quantized weights; nothing to dequantize",
            input.display()
        )));
    }
    let plan: Vec<PlannedTensor> = folder
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| PlannedTensor {
            name: t.name.clone(),
            dims: t.shape.iter().rev().map(|&d| d as u64).collect(),
            ggml_type: dtype.names().2,
            source: i,
        })
        .collect();
    let out = PartialFolder::create(output)?;
    let mut config = folder.config.clone();
    config.remove("quantization_config");
    config.remove("quantization");
    for key in ["torch_dtype", "dtype"] {
        if config.contains_key(key) || key == "torch_dtype" {
            config.insert(key.into(), json!(dtype.names().1));
        }
    }
    out.write_json("config.json", &Value::Object(config))?;
    out.copy_side_files(input)?;
    let bytes = write_safetensors(
        &out.file("model.safetensors"),
        &plan,
        dtype,
        progress,
        |t| folder.values(&folder.tensors[t.source]),
    )?;
    out.finish()?;
    Ok(HfSummary {
        architecture: arch.gguf_name(),
        tensors: plan.len(),
        bytes,
    })
}

/// `config.json` from the GGUF hyperparameters.
fn hf_config(
    file: &GgufFile,
    arch: Arch,
    dtype: HfDtype,
) -> Result<Map<String, Value>, ConvertError> {
    let meta = file.metadata();
    let a = arch.gguf_name();
    let key = |k: &str| format!("{a}.{k}");
    let (class, model_type) = arch.hf_class();
    let n_vocab = meta.get_str_array("tokenizer.ggml.tokens")?.len();
    let embd = meta.get_u32(&key("embedding_length"))?;
    let heads = meta.get_u32(&key("attention.head_count"))?;
    let mut c = Map::new();
    c.insert("architectures".into(), json!([class]));
    c.insert("model_type".into(), json!(model_type));
    c.insert("hidden_size".into(), json!(embd));
    c.insert(
        "intermediate_size".into(),
        json!(meta.get_u32(&key("feed_forward_length"))?),
    );
    c.insert(
        "num_hidden_layers".into(),
        json!(meta.get_u32(&key("block_count"))?),
    );
    c.insert("num_attention_heads".into(), json!(heads));
    c.insert(
        "num_key_value_heads".into(),
        json!(meta
            .opt_u32(&key("attention.head_count_kv"))?
            .unwrap_or(heads)),
    );
    if let Some(d) = meta.opt_u32(&key("attention.key_length"))? {
        c.insert("head_dim".into(), json!(d));
    }
    c.insert(
        "max_position_embeddings".into(),
        json!(meta.get_u32(&key("context_length"))?),
    );
    c.insert(
        "rms_norm_eps".into(),
        json_f32(meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?),
    );
    let theta = meta.opt_f32(&key("rope.freq_base"))?;
    if arch != Arch::Gemma2 || theta.is_some() {
        c.insert("rope_theta".into(), json_f32(theta.unwrap_or(10000.0)));
    }
    c.insert("rope_scaling".into(), Value::Null);
    match meta.opt_str(&key("rope.scaling.type"))? {
        None | Some("none") => {}
        Some("linear") => {
            let f = meta.get_f32(&key("rope.scaling.factor"))?;
            c.insert(
                "rope_scaling".into(),
                json!({"rope_type": "linear", "factor": json_f32(f)}),
            );
        }
        Some(other) => return Err(err(format!("RoPE scaling {other} is not supported yet"))),
    }
    c.insert("vocab_size".into(), json!(n_vocab));
    let tied = file.tensor("output.weight").is_none();
    c.insert("tie_word_embeddings".into(), json!(tied));
    for (k, gguf) in [
        ("bos_token_id", "bos"),
        ("eos_token_id", "eos"),
        ("pad_token_id", "padding"),
    ] {
        if let Some(id) = meta.opt_u32(&format!("tokenizer.ggml.{gguf}_token_id"))? {
            c.insert(k.into(), json!(id));
        }
    }
    c.insert("torch_dtype".into(), json!(dtype.names().1));
    match arch {
        Arch::Llama => {
            c.insert("hidden_act".into(), json!("silu"));
            c.insert(
                "attention_bias".into(),
                json!(file.tensor("blk.0.attn_q.bias").is_some()),
            );
            c.insert("mlp_bias".into(), json!(false));
            if let Some(d) = meta.opt_u32(&key("rope.dimension_count"))? {
                let head_dim = meta
                    .opt_u32(&key("attention.key_length"))?
                    .unwrap_or(embd / heads);
                if d != head_dim {
                    return Err(err(format!(
                        "partial RoPE ({d} of {head_dim} dims) is not supported for llama"
                    )));
                }
            }
        }
        Arch::Qwen2 | Arch::Qwen3 => {
            c.insert("hidden_act".into(), json!("silu"));
        }
        Arch::Phi3 => {
            c.insert("hidden_act".into(), json!("silu"));
            let orig = meta.opt_u32(&key("rope.scaling.original_context_length"))?;
            c.insert(
                "original_max_position_embeddings".into(),
                json!(orig.unwrap_or(meta.get_u32(&key("context_length"))?)),
            );
            let window = meta.opt_u32(&key("attention.sliding_window"))?.unwrap_or(0);
            c.insert(
                "sliding_window".into(),
                if window == 0 {
                    Value::Null
                } else {
                    json!(window)
                },
            );
            let rope_dims = meta
                .opt_u32(&key("rope.dimension_count"))?
                .unwrap_or(embd / heads);
            let factor = f64::from(rope_dims * heads) / f64::from(embd);
            if factor != 1.0 {
                c.insert("partial_rotary_factor".into(), json!(factor));
            }
        }
        Arch::Gemma2 => {
            let head_dim = meta.get_u32(&key("attention.key_length"))?;
            c.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
            c.insert("hidden_act".into(), json!("gelu_pytorch_tanh"));
            // llama.cpp scales queries by 1/sqrt(head_dim) and uses RoPE base 10000 for Gemma 2.
            c.insert("query_pre_attn_scalar".into(), json!(head_dim));
            c.insert("rope_theta".into(), json_f32(theta.unwrap_or(10000.0)));
            for k in ["attn_logit_softcapping", "final_logit_softcapping"] {
                c.insert(k.into(), json_f32(meta.get_f32(&key(k))?));
            }
            c.insert(
                "sliding_window".into(),
                json!(meta.get_u32(&key("attention.sliding_window"))?),
            );
        }
        Arch::Gemma3 => {
            return Err(err(
                "GGUF architecture gemma3 to a Hugging Face folder is not supported yet".into(),
            ))
        }
    }
    Ok(c)
}
