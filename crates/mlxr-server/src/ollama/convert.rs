//! A registry model that is a Hugging Face or MLX folder (F32/F16/BF16,
//! FP8, bitsandbytes 4-bit or MLX affine weights) converted to GGUF by
//! `mlxr-convert`, as `mlxr convert FOLDER OUT.gguf --outtype T` does, into a
//! new model (the jobs API's `kind: "convert"`). The run is
//! [`blob_run`]'s: progress lines, the model registered at the end,
//! nothing stored when it stops early.

use std::path::Path;
use std::sync::Arc;

use axum::response::Response;
use mlxr_convert::{hf_to_gguf, ConvertError, HfToGgufOptions, OutType};
use mlxr_registry::{ModelRecord, NewModel, Registry};
use serde::Deserialize;
use serde_json::{json, Value};

use super::blob_run::{self, Run};
use super::manage::{model_name, registry_error};
use crate::catalog::link_model_files;
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

/// The out type a request names (400 naming the valid ones).
pub fn parse_outtype(name: Option<&str>) -> Result<OutType, ApiError> {
    let name = name.unwrap_or("auto");
    OutType::parse(name).ok_or_else(|| {
        ApiError::bad_request(format!(
            "unknown outtype '{name}'; valid: {}",
            OutType::NAMES
        ))
    })
}

/// Converts model `from` into the GGUF model `model`, streaming progress
/// (`converting NAME to GGUF (f16)`, `completed` of `total` tensors) as
/// `/api/create` does. A missing model is a 404; a GGUF model, an unknown
/// out type or a folder the converter cannot read a 400, before anything
/// runs.
pub async fn create(state: AppState, body: ConvertBody) -> Result<Response, ApiError> {
    let name = model_name(&super::requested_model(body.model, body.name)?)?;
    let out_type = parse_outtype(body.outtype.as_deref())?;
    let from = body.from.ok_or_else(|| {
        ApiError::bad_request("a convert needs 'from': the folder model to convert")
    })?;
    let from = model_name(&from)?;
    let record = state
        .registry
        .get(&from)
        .map_err(registry_error)?
        .ok_or_else(|| ApiError::model_not_found(&from.to_string()))?;
    if record.files.is_empty() {
        return Err(ApiError::bad_request(format!(
            "'{from}' is a GGUF model: convert takes a Hugging Face or MLX folder model \
             (a GGUF model is quantized instead)"
        )));
    }
    let new = NewModel {
        model_blob: record.model_blob.clone(),
        template: record.template.clone(),
        system: record.system.clone(),
        parameters: record.parameters.clone(),
        messages: record.messages.clone(),
        license: record.license.clone(),
    };
    let status = format!(
        "converting {from} to GGUF ({})",
        body.outtype
            .as_deref()
            .unwrap_or("auto")
            .to_ascii_lowercase()
    );
    let options = HfToGgufOptions {
        out_type,
        tokenizer_pre: body.tokenizer_pre,
    };
    let run = start(state.registry.clone(), record, options, status);
    blob_run::create(state, name, new, Vec::new(), run, body.stream).await
}

fn start(
    registry: Arc<Registry>,
    source: ModelRecord,
    options: HfToGgufOptions,
    status: String,
) -> Run {
    blob_run::start(move |progress| {
        let scratch = blob_run::scratch(&registry, "convert-")?;
        // The folder is named as the source model: the GGUF's `general.name`
        // comes from it when config.json names no Hub id, as for
        // `mlxr convert NAME/ OUT.gguf`.
        let folder = scratch.path().join(source.name.model());
        link_model_files(&registry, &source, &folder).map_err(ApiError::internal)?;
        let output = scratch.path().join("model.gguf");
        convert(&folder, &output, &options, &status, progress)?;
        blob_run::store(&registry, &output)
    })
}

fn convert(
    folder: &Path,
    output: &Path,
    options: &HfToGgufOptions,
    status: &str,
    progress: &mut dyn FnMut(Value) -> bool,
) -> Result<(), ApiError> {
    hf_to_gguf(folder, output, options, |p| {
        progress(json!({"status": status, "total": p.total, "completed": p.index}))
    })
    .map(|_| ())
    .map_err(|e| match e {
        ConvertError::Cancelled => ApiError::bad_request("cancelled"),
        ConvertError::Input(m) => ApiError::bad_request(format!("convert: {m}")),
        e => ApiError::internal(format!("converting: {e}")),
    })
}
