//! `mlxr quantize FOLDER OUT --type qB --group-size G`: a Hugging Face folder
//! as the MLX affine-quantized folder `mlx_lm.convert -q --q-bits B
//! --q-group-size G` writes: the same tensors under the same names, every
//! Linear / Embedding weight (a 2-D `*.weight`) whose width G divides stored
//! as packed `U32` words with `scales` and `biases`, the rest as they are;
//! config.json with `quantization` and `quantization_config`; the tokenizer,
//! template and generation files copied.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::gguf_to_hf::PartialFolder;
use crate::hf_folder::{HfFolder, SourceDtype, SourceTensor};
use crate::mlx_affine::{self, MLX_BITS, MLX_GROUP_SIZES};
use crate::ConvertError;

fn err(message: String) -> ConvertError {
    ConvertError::Input(message)
}

/// Bits and group size of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlxQuantizeOptions {
    pub bits: u32,
    pub group_size: usize,
}

impl MlxQuantizeOptions {
    /// Checks both against what mlx_lm accepts.
    pub fn new(bits: u32, group_size: usize) -> Result<Self, ConvertError> {
        if !MLX_BITS.contains(&bits) {
            return Err(err(format!(
                "MLX affine quantization takes 2, 3, 4, 5, 6 or 8 bits, not {bits}"
            )));
        }
        if !MLX_GROUP_SIZES.contains(&group_size) {
            return Err(err(format!(
                "MLX affine quantization takes group size 32, 64 or 128, not {group_size}"
            )));
        }
        Ok(Self { bits, group_size })
    }
}

/// Reported before each source tensor is written; return false to stop.
#[derive(Clone, Copy, Debug)]
pub struct MlxProgress<'a> {
    pub index: usize,
    pub total: usize,
    pub name: &'a str,
}

/// What a finished quantization wrote.
#[derive(Clone, Debug, Default)]
pub struct MlxSummary {
    /// Matrices quantized.
    pub quantized: usize,
    /// Tensors stored as they were (norms, biases, matrices G does not divide).
    pub kept: usize,
    pub input_bytes: u64,
    pub output_bytes: u64,
}

/// The float type tensors are held in, as mlx_lm picks it: config.json's
/// `torch_dtype` (or `text_config.dtype`) when it is float16, bfloat16 or
/// float32, else each tensor's own type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Float {
    F32,
    F16,
    BF16,
}

impl Float {
    fn from_config(config: &Map<String, Value>) -> Option<Float> {
        let name = match config.get("torch_dtype").filter(|v| !v.is_null()) {
            Some(v) => v.as_str(),
            None => config
                .get("text_config")
                .and_then(|t| t.get("dtype"))
                .and_then(Value::as_str),
        };
        match name? {
            "float32" => Some(Float::F32),
            "float16" => Some(Float::F16),
            "bfloat16" => Some(Float::BF16),
            _ => None,
        }
    }

    fn of(dtype: SourceDtype) -> Float {
        match dtype {
            SourceDtype::F16 => Float::F16,
            SourceDtype::BF16 => Float::BF16,
            _ => Float::F32,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Float::F32 => "F32",
            Float::F16 => "F16",
            Float::BF16 => "BF16",
        }
    }

    fn size(self) -> usize {
        if self == Float::F32 {
            4
        } else {
            2
        }
    }

    /// Rounds `v` to this type (as MLX's `astype`), in place.
    fn round(self, v: &mut [f32]) {
        match self {
            Float::F32 => {}
            Float::F16 => v
                .iter_mut()
                .for_each(|x| *x = half::f16::from_f32(*x).to_f32()),
            Float::BF16 => v
                .iter_mut()
                .for_each(|x| *x = half::bf16::from_f32(*x).to_f32()),
        }
    }

    fn encode(self, v: &[f32], out: &mut Vec<u8>) {
        match self {
            Float::F32 => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
            Float::F16 => v
                .iter()
                .for_each(|x| out.extend(half::f16::from_f32(*x).to_le_bytes())),
            Float::BF16 => v
                .iter()
                .for_each(|x| out.extend(half::bf16::from_f32(*x).to_le_bytes())),
        }
    }
}

/// One tensor of the output: a source tensor as it is, or one of the three
/// parts of a quantized one.
struct OutTensor {
    name: String,
    dtype: &'static str,
    shape: Vec<usize>,
    bytes: usize,
}

/// Whether mlx_lm quantizes this tensor: the weight of a Linear or Embedding
/// (the 2-D `*.weight`s of the decoder models converted here) whose width
/// the group size divides.
fn quantizes(t: &SourceTensor, group_size: usize) -> bool {
    t.name.ends_with(".weight") && t.shape.len() == 2 && t.shape[1].is_multiple_of(group_size)
}

/// Tensors mlx_lm's model classes drop when they load a folder.
fn dropped(name: &str, config: &Map<String, Value>) -> bool {
    let tied = config
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    name.contains("self_attn.rotary_emb.inv_freq") || (tied && name == "lm_head.weight")
}

/// Writes the folder `input` quantized into the new folder `output` (built
/// under a hidden name and renamed at the end).
pub fn hf_to_mlx(
    input: &Path,
    output: &Path,
    options: MlxQuantizeOptions,
    mut progress: impl FnMut(MlxProgress<'_>) -> bool,
) -> Result<MlxSummary, ConvertError> {
    let folder = HfFolder::open(input)?;
    if folder.is_quantized() {
        return Err(err(format!(
            "{} is already quantized; dequantize it first (mlxr convert IN OUT-FOLDER)",
            input.display()
        )));
    }
    let cast = Float::from_config(&folder.config);
    let sources: Vec<&SourceTensor> = folder
        .tensors
        .iter()
        .filter(|t| !dropped(&t.name, &folder.config))
        .collect();
    let (bits, group) = (options.bits, options.group_size);
    let mut planned = Vec::new();
    let mut summary = MlxSummary::default();
    for t in &sources {
        let float = cast.unwrap_or(Float::of(t.dtype));
        let n: usize = t.shape.iter().product();
        summary.input_bytes += (n * Float::of(t.dtype).size()) as u64;
        if quantizes(t, group) {
            let stem = t.name.strip_suffix(".weight").expect("checked");
            let (rows, cols) = (t.shape[0], t.shape[1]);
            let groups = vec![rows, cols / group];
            let words = rows * cols * bits as usize / 32;
            planned.push(OutTensor {
                name: t.name.clone(),
                dtype: "U32",
                shape: vec![rows, cols * bits as usize / 32],
                bytes: words * 4,
            });
            for part in ["scales", "biases"] {
                planned.push(OutTensor {
                    name: format!("{stem}.{part}"),
                    dtype: float.name(),
                    shape: groups.clone(),
                    bytes: rows * (cols / group) * float.size(),
                });
            }
            summary.quantized += 1;
        } else {
            planned.push(OutTensor {
                name: t.name.clone(),
                dtype: float.name(),
                shape: t.shape.clone(),
                bytes: n * float.size(),
            });
            summary.kept += 1;
        }
    }

    let out = PartialFolder::create(output)?;
    write_config(&out, input, &folder.config, options)?;
    out.copy_side_files(input)?;
    // safetensors (as mlx writes it) holds tensors in name order.
    let mut order: Vec<usize> = (0..planned.len()).collect();
    order.sort_by(|&a, &b| planned[a].name.cmp(&planned[b].name));
    let mut offsets = vec![0usize; planned.len()];
    let mut header = Map::new();
    header.insert("__metadata__".into(), json!({"format": "mlx"}));
    let mut offset = 0;
    for &i in &order {
        let t = &planned[i];
        offsets[i] = offset;
        header.insert(
            t.name.clone(),
            json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, offset + t.bytes]}),
        );
        offset += t.bytes;
    }
    let data_len = offset;
    let mut header = serde_json::to_vec(&Value::Object(header)).expect("JSON values serialise");
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }

    // Each source tensor's output bytes go to their place in one buffer
    // (the tiny-to-medium models this is for fit in memory twice over).
    let mut data = vec![0u8; data_len];
    let mut next = 0;
    for (index, t) in sources.iter().enumerate() {
        if !progress(MlxProgress {
            index,
            total: sources.len(),
            name: &t.name,
        }) {
            return Err(ConvertError::Cancelled);
        }
        let float = cast.unwrap_or(Float::of(t.dtype));
        let mut values = folder.values(t)?;
        float.round(&mut values);
        if quantizes(t, group) {
            let q = mlx_affine::quantize(&values, t.shape[1], bits, group);
            let mut place = |i: usize, bytes: &[u8]| {
                data[offsets[i]..offsets[i] + bytes.len()].copy_from_slice(bytes);
            };
            let words: Vec<u8> = q.packed.iter().flat_map(|w| w.to_le_bytes()).collect();
            place(next, &words);
            for (k, part) in [&q.scales, &q.biases].into_iter().enumerate() {
                let mut bytes = Vec::with_capacity(part.len() * float.size());
                float.encode(part, &mut bytes);
                place(next + 1 + k, &bytes);
            }
            next += 3;
        } else {
            let mut bytes = Vec::with_capacity(values.len() * float.size());
            float.encode(&values, &mut bytes);
            data[offsets[next]..offsets[next] + bytes.len()].copy_from_slice(&bytes);
            next += 1;
        }
    }

    let path = out.file("model.safetensors");
    let io = |e: std::io::Error| err(format!("writing {}: {e}", path.display()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io)?);
    file.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    file.write_all(&header).map_err(io)?;
    file.write_all(&data).map_err(io)?;
    file.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    let weight_map: Map<String, Value> = order
        .iter()
        .map(|&i| (planned[i].name.clone(), json!("model.safetensors")))
        .collect();
    out.write_json(
        "model.safetensors.index.json",
        &json!({"metadata": {"total_size": data_len}, "weight_map": weight_map}),
    )?;
    summary.output_bytes = (8 + header.len() + data_len) as u64;
    out.finish()?;
    Ok(summary)
}

/// config.json as mlx_lm writes it: the input's, with generation_config's
/// `eos_token_id` when it is truthy in Python's sense (mlx_lm's loader copies
/// it over), without `_name_or_path` and `vision_config`, with
/// `quantization` and the same object again as `quantization_config`.
fn write_config(
    out: &PartialFolder,
    input: &Path,
    config: &Map<String, Value>,
    options: MlxQuantizeOptions,
) -> Result<(), ConvertError> {
    let mut config = config.clone();
    let generation = crate::hf_folder::read_json_object(&input.join("generation_config.json"))
        .ok()
        .flatten();
    if let Some(eos) = generation.as_ref().and_then(|g| g.get("eos_token_id")) {
        let truthy = match eos {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
        };
        if truthy {
            config.insert("eos_token_id".into(), eos.clone());
        }
    }
    config.remove("_name_or_path");
    config.remove("vision_config");
    let quantization = json!({
        "group_size": options.group_size,
        "bits": options.bits,
        "mode": "affine",
    });
    config.insert("quantization".into(), quantization.clone());
    config.insert("quantization_config".into(), quantization);
    out.write_json("config.json", &Value::Object(config))
}
