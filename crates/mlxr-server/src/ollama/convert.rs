//! A registry model converted into a new model by `mlxr-convert` (the jobs
//! API's `kind: "convert"`), as `mlxr convert` does: a Hugging Face or MLX
//! folder (F32/F16/BF16, FP8, bitsandbytes 4-bit or MLX affine weights) to
//! GGUF (`--outtype f32|f16|bf16|q8_0|auto`), or a GGUF model to a folder
//! of dequantized safetensors (`f32|f16|bf16`, `auto` F32). The run is
//! [`blob_run`]'s: progress lines, the model registered at the end, nothing
//! stored when it stops early.

use std::sync::Arc;

use axum::response::Response;
use mlxr_convert::{gguf_to_hf, hf_to_gguf, ConvertError, HfDtype, HfToGgufOptions, OutType};
use mlxr_quantize::QuantizeError;
use mlxr_registry::{ModelName, NewModel, Registry};
use serde::Deserialize;
use serde_json::json;

use super::blob_run::{self, Run, Source};
use super::manage::{model_name, registry_error};
use crate::error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct ConvertBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    from: Option<String>,
    /// As `mlxr convert --outtype`; `auto` when absent.
    #[serde(default)]
    outtype: Option<String>,
    /// As `mlxr convert --tokenizer-pre`: llama.cpp's pre-tokenizer name
    /// for a tokenizer the converter does not recognise.
    #[serde(default)]
    tokenizer_pre: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

/// What a convert writes, told by its source: a folder becomes a GGUF
/// file, a GGUF file a folder.
enum Target {
    Gguf(HfToGgufOptions),
    Folder(HfDtype),
}

impl Target {
    /// The target for `source` (the model `from`) and the request's out
    /// type (400 naming the valid ones).
    fn of(
        source: &Source,
        from: &ModelName,
        outtype: &str,
        tokenizer_pre: Option<String>,
    ) -> Result<Target, ApiError> {
        if !source.is_folder() {
            return HfDtype::from_outtype(outtype)
                .map(Target::Folder)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "outtype '{outtype}' cannot be written to a Hugging Face folder \
                         ('{from}' is a GGUF model); valid: {}",
                        HfDtype::OUTTYPES
                    ))
                });
        }
        let out_type = OutType::parse(outtype).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown outtype '{outtype}'; valid: {}",
                OutType::NAMES
            ))
        })?;
        Ok(Target::Gguf(HfToGgufOptions {
            out_type,
            tokenizer_pre,
        }))
    }

    fn name(&self) -> &'static str {
        match self {
            Target::Gguf(_) => "GGUF",
            Target::Folder(_) => "a Hugging Face folder",
        }
    }
}

/// Converts model `from` into the new model `model`, streaming progress
/// (`converting NAME to GGUF (f16)`, `completed` of `total` tensors) as
/// `/api/create` does. A missing model is a 404; an out type the target
/// cannot take or a source the converter cannot read a 400, before
/// anything runs.
pub async fn create(state: AppState, body: ConvertBody) -> Result<Response, ApiError> {
    let name = model_name(&super::requested_model(body.model, body.name)?)?;
    let from = body
        .from
        .ok_or_else(|| ApiError::bad_request("a convert needs 'from': the model to convert"))?;
    let from = model_name(&from)?;
    let record = state
        .registry
        .get(&from)
        .map_err(registry_error)?
        .ok_or_else(|| ApiError::model_not_found(&from.to_string()))?;
    let outtype = body
        .outtype
        .as_deref()
        .unwrap_or("auto")
        .to_ascii_lowercase();
    let source = Source::of(&record);
    let target = Target::of(&source, &from, &outtype, body.tokenizer_pre)?;
    let new = NewModel {
        model_blob: record.model_blob.clone(),
        template: record.template.clone(),
        system: record.system.clone(),
        parameters: record.parameters.clone(),
        messages: record.messages.clone(),
        license: record.license.clone(),
    };
    let status = format!("converting {from} to {} ({outtype})", target.name());
    let run = start(state.registry.clone(), source, target, status);
    blob_run::create(state, name, new, run, body.stream).await
}

fn start(registry: Arc<Registry>, source: Source, target: Target, status: String) -> Run {
    blob_run::start(move |progress| {
        let scratch = blob_run::scratch(&registry, "convert-")?;
        let mut step = |index: usize, total: usize| {
            progress(json!({"status": status, "total": total, "completed": index}))
        };
        match target {
            Target::Gguf(options) => {
                let folder = source.folder_in(&registry, scratch.path())?;
                let output = scratch.path().join("model.gguf");
                hf_to_gguf(&folder, &output, &options, |p| step(p.index, p.total))
                    .map_err(convert_error)?;
                blob_run::store_file(&registry, &output)
            }
            Target::Folder(dtype) => {
                let output = scratch.path().join("folder");
                let gguf = registry.blob_path(&source.model_blob);
                gguf_to_hf(&gguf, &output, dtype, |p| step(p.index, p.total))
                    .map_err(convert_error)?;
                blob_run::store_folder(&registry, &output)
            }
        }
    })
}

/// A converter's error as the API's: the input's fault a 400.
pub(super) fn convert_error(e: ConvertError) -> ApiError {
    match e {
        ConvertError::Cancelled | ConvertError::Quantize(QuantizeError::Cancelled) => {
            ApiError::bad_request("cancelled")
        }
        ConvertError::Quantize(e) => ApiError::bad_request(format!("quantize: {e}")),
        ConvertError::Input(m) => ApiError::bad_request(format!("convert: {m}")),
        e => ApiError::internal(format!("converting: {e}")),
    }
}
