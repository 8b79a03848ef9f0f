//! `/api/create` with `quantize` (Ollama's `ollama create --quantize`): the
//! source model's GGUF quantized by `mlxr-quantize` (llama-quantize's
//! output, bit for bit) into a new blob, with progress; a client that goes
//! away cancels it and nothing is stored.

use mlxr_formats::gguf::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeError, QuantizeOptions};
use mlxr_registry::{Digest, Registry};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::manage::registry_error;
use crate::error::ApiError;

/// What the quantizing task reports: progress lines, then the new blob.
pub enum Quantized {
    Progress(Value),
    Done(Digest),
}

/// Quantizes the GGUF blob `source` to `file_type` on a blocking thread,
/// sending Ollama's progress lines (`quantizing F16 model to Q4_K_M`, with
/// `completed` of `total` tensors) and then the new blob's digest. Dropping
/// the receiver stops the work; the output is kept only when it finishes.
pub fn start(
    registry: std::sync::Arc<Registry>,
    source: Digest,
    file_type: FileType,
) -> mpsc::Receiver<Result<Quantized, ApiError>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::task::spawn_blocking(move || {
        let result = quantize_blob(&registry, &source, file_type, &tx);
        let _ = tx.blocking_send(result.map(Quantized::Done));
    });
    rx
}

fn quantize_blob(
    registry: &Registry,
    source: &Digest,
    file_type: FileType,
    tx: &mpsc::Sender<Result<Quantized, ApiError>>,
) -> Result<Digest, ApiError> {
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
    // it at the end; the file goes when `staging` drops (its bytes are a
    // blob by then, or the run failed).
    let dir = registry.home().join("tmp");
    let staging = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix("quantize-")
                .suffix(".gguf")
                .tempfile_in(&dir)
        })
        .map_err(|e| ApiError::internal(format!("{}: {e}", dir.display())))?;
    let options = QuantizeOptions {
        file_type,
        allow_requantize: false,
    };
    quantize_model(&input, staging.path(), options, |p| {
        let line = json!({"status": status, "total": p.total, "completed": p.index});
        tx.blocking_send(Ok(Quantized::Progress(line))).is_ok()
    })
    .map_err(|e| match e {
        QuantizeError::Cancelled => ApiError::bad_request("cancelled"),
        QuantizeError::Gguf(e) => ApiError::internal(format!("quantizing: {e}")),
        e => ApiError::bad_request(format!("quantize: {e}")),
    })?;
    let mut file = std::fs::File::open(staging.path())
        .map_err(|e| ApiError::internal(format!("reading the quantized model: {e}")))?;
    registry.put_blob(&mut file, None).map_err(registry_error)
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
