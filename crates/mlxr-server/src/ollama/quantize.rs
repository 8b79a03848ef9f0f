//! `/api/create` with `quantize` (Ollama's `ollama create --quantize`): the
//! source model's GGUF quantized by `mlxr-quantize` (llama-quantize's
//! output, bit for bit) into a new blob, with progress; a Hugging Face or
//! MLX folder model is converted first, as `mlxr quantize FOLDER` does
//! (`--outtype lossless` into a scratch file). A client that goes away
//! cancels it and nothing is stored.

use std::sync::Arc;

use mlxr_convert::{quantize_hf_folder, HfToGgufOptions, OutType};
use mlxr_formats::gguf::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeError, QuantizeOptions};
use mlxr_registry::Registry;
use serde_json::{json, Value};

use super::blob_run::{self, Run, Source};
use super::convert::convert_error;
use crate::error::ApiError;

/// Quantizes `source` to `file_type` ([`blob_run::start`]), with Ollama's
/// progress lines (`quantizing F16 model to Q4_K_M`, with `completed` of
/// `total` tensors; a folder's `converting NAME to GGUF` before them).
pub fn start(registry: Arc<Registry>, source: Source, file_type: FileType) -> Run {
    blob_run::start(move |progress| {
        let scratch = blob_run::scratch(&registry, "quantize-")?;
        // The quantizer writes its output beside this path and renames it
        // over it at the end.
        let output = scratch.path().join("model.gguf");
        let options = QuantizeOptions {
            file_type,
            allow_requantize: false,
        };
        if source.is_folder() {
            let folder = source.folder_in(&registry, scratch.path())?;
            let converting = format!("converting {} to GGUF", source.name);
            let quantizing = format!("quantizing {} to {}", source.name, file_type.name());
            let convert = HfToGgufOptions {
                out_type: OutType::Lossless,
                tokenizer_pre: None,
            };
            let mut line = |status: &str, index: usize, total: usize| {
                progress(json!({"status": status, "total": total, "completed": index}))
            };
            // Both callbacks report through `line`: one borrows it at a time.
            let line = std::cell::RefCell::new(&mut line);
            quantize_hf_folder(
                &folder,
                &output,
                &convert,
                options,
                |p| (line.borrow_mut())(&converting, p.index, p.total),
                |p| (line.borrow_mut())(&quantizing, p.index, p.total),
            )
            .map_err(convert_error)?;
        } else {
            quantize_gguf(&registry, &source, options, &output, progress)?;
        }
        blob_run::store_file(&registry, &output)
    })
}

fn quantize_gguf(
    registry: &Registry,
    source: &Source,
    options: QuantizeOptions,
    output: &std::path::Path,
    progress: &mut dyn FnMut(Value) -> bool,
) -> Result<(), ApiError> {
    let path = registry.blob_path(&source.model_blob);
    let input = GgufFile::open(&path).map_err(|e| {
        ApiError::bad_request(format!(
            "quantize takes a GGUF model of F32, F16 or BF16 tensors, or a Hugging Face folder ({e})"
        ))
    })?;
    let from = input
        .metadata()
        .opt_u32("general.file_type")
        .ok()
        .flatten()
        .map_or("the", from_type_name);
    let status = format!("quantizing {from} model to {}", options.file_type.name());
    quantize_model(&input, output, options, |p| {
        progress(json!({"status": status, "total": p.total, "completed": p.index}))
    })
    .map(|_| ())
    .map_err(|e| match e {
        QuantizeError::Cancelled => ApiError::bad_request("cancelled"),
        QuantizeError::Gguf(e) => ApiError::internal(format!("quantizing: {e}")),
        e => ApiError::bad_request(format!("quantize: {e}")),
    })
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
