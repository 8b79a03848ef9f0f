//! A whole GGUF file to a quantized one, as `llama-quantize IN OUT TYPE`
//! does it: metadata copied with `general.file_type` and
//! `general.quantization_version` set, tensors in llama.cpp's order, each
//! one copied when its type stays or converted to f32 and quantized.

use std::path::Path;

use mlxr_formats::gguf::stream_writer::{GgufStreamWriter, TensorSpec};
use mlxr_formats::gguf::{GgmlType, GgufFile, MetadataValue};

use crate::{dequantize, plan_tensor_types, quantize, FileType, QuantizeError, TensorPlan};

/// ggml's `GGML_QNT_VERSION`.
pub const QUANTIZATION_VERSION: u32 = 2;

/// How to quantize a model.
#[derive(Clone, Copy, Debug)]
pub struct QuantizeOptions {
    pub file_type: FileType,
    /// Dequantize and requantize tensors that are already quantized (as
    /// `llama-quantize --allow-requantize`); without it they are an error.
    pub allow_requantize: bool,
}

/// Reported before each tensor is written; the callback returns false to
/// stop (the run then ends with [`QuantizeError::Cancelled`]).
#[derive(Clone, Copy, Debug)]
pub struct ModelProgress<'a> {
    /// 0-based position of the tensor in the output.
    pub index: usize,
    pub total: usize,
    pub tensor: &'a TensorPlan,
}

/// What a finished run wrote.
#[derive(Clone, Debug)]
pub struct QuantizeSummary {
    pub tensors: Vec<TensorPlan>,
    pub input_bytes: u64,
    pub output_bytes: u64,
}

/// Quantizes `input` into a new file at `output` (written beside it under a
/// temporary name and renamed at the end: an error leaves nothing). Runs on
/// the current rayon pool.
pub fn quantize_model(
    input: &GgufFile,
    output: &Path,
    options: QuantizeOptions,
    mut progress: impl FnMut(ModelProgress<'_>) -> bool,
) -> Result<QuantizeSummary, QuantizeError> {
    let plan = plan_tensor_types(input, options.file_type)?;
    if !options.allow_requantize {
        if let Some(t) = plan
            .iter()
            .find(|t| t.target != t.info.ggml_type && is_quantized(t.info.ggml_type))
        {
            return Err(QuantizeError::Requantize {
                tensor: t.info.name.clone(),
                ty: t.info.ggml_type,
            });
        }
    }
    let specs: Vec<TensorSpec> = plan
        .iter()
        .map(|t| TensorSpec {
            name: t.info.name.clone(),
            dims: t.info.dims.clone(),
            ggml_type: t.target,
        })
        .collect();
    let mut writer =
        GgufStreamWriter::create(output, &output_metadata(input, options.file_type), &specs)?;
    let mut summary = QuantizeSummary {
        tensors: Vec::with_capacity(plan.len()),
        input_bytes: 0,
        output_bytes: 0,
    };
    for (index, tensor) in plan.iter().enumerate() {
        let go_on = progress(ModelProgress {
            index,
            total: plan.len(),
            tensor,
        });
        if !go_on {
            return Err(QuantizeError::Cancelled);
        }
        let data = input.raw_tensor_data(&tensor.info)?;
        if tensor.target == tensor.info.ggml_type {
            writer.write_tensor(data)?;
            summary.output_bytes += data.len() as u64;
        } else {
            let converted = convert(tensor, data)?;
            writer.write_tensor(&converted)?;
            summary.output_bytes += converted.len() as u64;
        }
        summary.input_bytes += data.len() as u64;
        input.release(&tensor.info);
        summary.tensors.push(tensor.clone());
    }
    writer.finish()?;
    Ok(summary)
}

fn is_quantized(ty: GgmlType) -> bool {
    ty.block_size() > 1
}

fn convert(tensor: &TensorPlan, data: &[u8]) -> Result<Vec<u8>, QuantizeError> {
    let info = &tensor.info;
    let tensor_err = |message: String| QuantizeError::Tensor {
        tensor: info.name.clone(),
        message,
    };
    if !info.ggml_type.is_supported_by_candle() || info.ggml_type == GgmlType::Q8_1 {
        return Err(QuantizeError::UnsupportedSource {
            tensor: info.name.clone(),
            ty: info.ggml_type,
        });
    }
    let n = usize::try_from(info.n_elements()).map_err(|_| tensor_err("too large".into()))?;
    let n_per_row = info.dims.first().copied().unwrap_or(1) as usize;
    let values = dequantize(info.ggml_type, data, n).map_err(tensor_err)?;
    quantize(tensor.target, &values, n_per_row).map_err(|e| tensor_err(e.to_string()))
}

/// The input's metadata without split keys, with `general.quantization_version`
/// and `general.file_type` replaced and moved last, as llama-quantize writes them.
fn output_metadata(input: &GgufFile, ftype: FileType) -> Vec<(String, MetadataValue)> {
    const REPLACED: &[&str] = &[
        "general.quantization_version",
        "general.file_type",
        "split.no",
        "split.count",
        "split.tensors.count",
    ];
    let mut kvs: Vec<(String, MetadataValue)> = input
        .metadata()
        .iter()
        .filter(|(k, _)| !REPLACED.contains(k))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    kvs.push((
        "general.quantization_version".into(),
        MetadataValue::U32(QUANTIZATION_VERSION),
    ));
    kvs.push(("general.file_type".into(), MetadataValue::U32(ftype.id())));
    kvs
}
