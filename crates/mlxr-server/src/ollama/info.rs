//! `/api/tags`, `/api/ps`, `/api/show`.

use axum::extract::State;
use axum::Json;
use mlxr_formats::gguf::{GgufFile, MetadataArray, MetadataValue};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::catalog::{ModelKind, ModelSpec};
use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::state::AppState;

fn details(m: &ModelSpec) -> Value {
    let d = &m.details;
    json!({
        "parent_model": "",
        "format": d.format,
        "family": d.family,
        "families": d.families,
        "parameter_size": d.parameter_size,
        "quantization_level": d.quantization_level,
    })
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

pub async fn tags(State(state): State<AppState>) -> Result<Json<Value>, OllamaError> {
    let models = state.models.catalog().list().map_err(ApiError::internal)?;
    let models: Vec<Value> = models
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "model": m.name,
                "modified_at": rfc3339(m.modified_at),
                "size": m.size,
                "digest": m.digest.trim_start_matches("sha256:"),
                "details": details(m),
            })
        })
        .collect();
    Ok(Json(json!({ "models": models })))
}

pub async fn ps(State(state): State<AppState>) -> Json<Value> {
    // "Forever" as a date clients can parse (Python's datetime stops at 9999).
    let far_future = chrono::Utc::now() + chrono::Duration::days(365 * 100);
    let models: Vec<Value> = state
        .models
        .loaded()
        .await
        .iter()
        .map(|l| {
            json!({
                "name": l.spec.name,
                "model": l.spec.name,
                "size": l.spec.size,
                "digest": l.spec.digest.trim_start_matches("sha256:"),
                "details": details(&l.spec),
                "expires_at": rfc3339(l.expires_at.unwrap_or(far_future)),
                "size_vram": 0,
                "context_length": l.context_length,
                "device": l.device,
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

#[derive(Deserialize)]
pub struct ShowBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    verbose: bool,
}

pub async fn show(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ShowBody>,
) -> Result<Json<Value>, OllamaError> {
    let name = super::requested_model(body.model, body.name)?;
    Ok(Json(show_model(&state, &name, body.verbose)?))
}

/// `/api/show`'s answer for a model: its Modelfile, template, parameters,
/// details, metadata (`model_info`; long arrays only when verbose).
pub fn show_model(state: &AppState, name: &str, verbose: bool) -> Result<Value, ApiError> {
    let spec = state.models.resolve(name)?;
    let (model_info, file_template, capabilities) = match spec.kind {
        ModelKind::Generate if spec.path.is_dir() => (
            folder_info(&spec),
            mlxr_tokenizer::hf_chat_template(&spec.path).ok().flatten(),
            json!(["completion"]),
        ),
        ModelKind::Generate => {
            let file = GgufFile::open(&spec.path)
                .map_err(|e| ApiError::internal(format!("reading {}: {e}", spec.path.display())))?;
            let template = file
                .metadata()
                .opt_str("tokenizer.chat_template")
                .ok()
                .flatten()
                .map(str::to_string);
            (model_info(&file, verbose), template, json!(["completion"]))
        }
        ModelKind::Embed => (folder_info(&spec), None, json!(["embedding"])),
    };
    let template = spec.template.clone().or(file_template);
    let parameters: String = spec
        .parameters
        .iter()
        .flat_map(|(k, v)| match v {
            Value::Array(items) => items
                .iter()
                .map(|i| format!("{k:<30} {}", plain(i)))
                .collect(),
            v => vec![format!("{k:<30} {}", plain(v))],
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut modelfile = format!("FROM {}\n", spec.path.display());
    if let Some(t) = &template {
        modelfile.push_str(&format!("TEMPLATE \"\"\"{t}\"\"\"\n"));
    }
    if let Some(s) = &spec.system {
        modelfile.push_str(&format!("SYSTEM \"\"\"{s}\"\"\"\n"));
    }
    for line in parameters.lines() {
        modelfile.push_str(&format!("PARAMETER {line}\n"));
    }
    Ok(json!({
        "modelfile": modelfile,
        "parameters": parameters,
        "template": template.unwrap_or_default(),
        "system": spec.system,
        "license": spec.license,
        "messages": spec.messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
        "details": details(&spec),
        "model_info": model_info,
        "capabilities": capabilities,
        "modified_at": rfc3339(spec.modified_at),
        // Where the model runs (or would run) when loaded.
        "device": match spec.kind {
            ModelKind::Generate => state.models.device().to_string(),
            ModelKind::Embed => "cpu".to_string(),
        },
    }))
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A model folder's `config.json`, keyed like GGUF metadata
/// (`general.architecture`, `bert.hidden_size`, ...).
fn folder_info(spec: &ModelSpec) -> Value {
    let family = &spec.details.family;
    let mut out = Map::new();
    out.insert("general.architecture".into(), json!(family));
    let config = std::fs::read_to_string(spec.path.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Map<String, Value>>(&t).ok())
        .unwrap_or_default();
    for (k, v) in config {
        out.insert(format!("{family}.{k}"), v);
    }
    Value::Object(out)
}

/// GGUF metadata as JSON; long arrays (the vocabulary) only when verbose.
fn model_info(file: &GgufFile, verbose: bool) -> Value {
    let mut out = Map::new();
    for (key, value) in file.metadata().iter() {
        let v = match value {
            MetadataValue::Array(_) if !verbose => Value::Null,
            v => value_json(v),
        };
        out.insert(key.to_string(), v);
    }
    Value::Object(out)
}

fn value_json(v: &MetadataValue) -> Value {
    match v {
        MetadataValue::U8(x) => json!(x),
        MetadataValue::I8(x) => json!(x),
        MetadataValue::U16(x) => json!(x),
        MetadataValue::I16(x) => json!(x),
        MetadataValue::U32(x) => json!(x),
        MetadataValue::I32(x) => json!(x),
        MetadataValue::U64(x) => json!(x),
        MetadataValue::I64(x) => json!(x),
        MetadataValue::F32(x) => json!(x),
        MetadataValue::F64(x) => json!(x),
        MetadataValue::Bool(x) => json!(x),
        MetadataValue::String(x) => json!(x),
        MetadataValue::Array(a) => array_json(a),
    }
}

fn array_json(a: &MetadataArray) -> Value {
    match a {
        MetadataArray::U8(x) => json!(x),
        MetadataArray::I8(x) => json!(x),
        MetadataArray::U16(x) => json!(x),
        MetadataArray::I16(x) => json!(x),
        MetadataArray::U32(x) => json!(x),
        MetadataArray::I32(x) => json!(x),
        MetadataArray::U64(x) => json!(x),
        MetadataArray::I64(x) => json!(x),
        MetadataArray::F32(x) => json!(x),
        MetadataArray::F64(x) => json!(x),
        MetadataArray::Bool(x) => json!(x),
        MetadataArray::String(x) => json!(x),
        MetadataArray::Array(x) => Value::Array(x.iter().map(array_json).collect()),
    }
}
