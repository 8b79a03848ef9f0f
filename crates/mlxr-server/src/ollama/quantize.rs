//! `/api/create` with `quantize` (Ollama's `ollama create --quantize`): the
//! source model's GGUF quantized by `mlxr-quantize` (llama-quantize's
//! output, bit for bit) into a new blob, with progress; a client that goes
//! away cancels it and nothing is stored.

use std::sync::Arc;

use mlxr_formats::gguf::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeError, QuantizeOptions};
use mlxr_registry::{Digest, Registry};
use serde_json::{json, Value};

use super::blob_run::{self, Run, Stored};
use crate::error::ApiError;

/// Quantizes the GGUF blob `source` to `file_type` ([`blob_run::start`]),
/// with Ollama's progress lines (`quantizing F16 model to Q4_K_M`, with
/// `completed` of `total` tensors).
pub fn start(registry: Arc<Registry>, source: Digest, file_type: FileType) -> Run {
    blob_run::start(move |progress| quantize_blob(&registry, &source, file_type, progress))
}

fn quantize_blob(
    registry: &Registry,
    source: &Digest,
    file_type: FileType,
    progress: &mut dyn FnMut(Value) -> bool,
) -> Result<Stored, ApiError> {
    let path = registry.blob_path(source);
    let input = GgufFile::open(&path).map_err(|e| {
        ApiError::bad_request(format!(
            "quantize takes a GGUF model of F32, F16 or BF16 tensors ({e}); \
             convert a Hugging Face folder with `mlxr convert` first"
        ))
    })?;
    let from = input
        .metadata()
        .opt_u32("general.file_type")
        .ok()
        .flatten()
        .map_or("the", from_type_name);
    let status = format!("quantizing {from} model to {}", file_type.name());
    // The quantizer writes its output beside this path and renames it over
    // it at the end.
    let scratch = blob_run::scratch(registry, "quantize-")?;
    let output = scratch.path().join("model.gguf");
    let options = QuantizeOptions {
        file_type,
        allow_requantize: false,
    };
    quantize_model(&input, &output, options, |p| {
        progress(json!({"status": status, "total": p.total, "completed": p.index}))
    })
    .map_err(|e| match e {
        QuantizeError::Cancelled => ApiError::bad_request("cancelled"),
        QuantizeError::Gguf(e) => ApiError::internal(format!("quantizing: {e}")),
        e => ApiError::bad_request(format!("quantize: {e}")),
    })?;
    blob_run::store_file(registry, &output)
}

/// llama.cpp's `general.file_type` numbers of the source types Ollama names.
fn from_type_name(file_type: u32) -> &'static str {
    match file_type {
        0 => "F32",
        1 => "F16",
        32 => "BF16",
        _ => "the",
    }
}
