//! Where the server finds models by name. The registry is one catalogue;
//! models given on the command line (`mlxr serve -m file.gguf`) are another.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlxr_registry::{
    folder_weights, gguf_details, safetensors_details, Digest, ModelDetails, ModelName,
    ModelRecord, Registry,
};
use serde_json::{Map, Value};

/// What a model is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// A GGUF decoder: chat and completions.
    Generate,
    /// A sentence-transformers folder: embeddings.
    Embed,
}

/// Everything the server needs to load and describe a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The name clients use (`smollm2:135m`).
    pub name: String,
    pub kind: ModelKind,
    /// A GGUF file, or the folder of an embedding model.
    pub path: PathBuf,
    /// `sha256:<hex>` of the model (or its manifest).
    pub digest: String,
    pub size: u64,
    pub modified_at: chrono::DateTime<chrono::Utc>,
    /// A chat template replacing the file's (Jinja).
    pub template: Option<String>,
    pub system: Option<String>,
    /// Default options (Ollama's names: temperature, top_k, stop, ...).
    pub parameters: Map<String, Value>,
    /// `(role, content)` turns put before every chat (Modelfile `MESSAGE`).
    pub messages: Vec<(String, String)>,
    pub license: Option<String>,
    pub details: ModelDetails,
}

impl ModelSpec {
    /// A model file (or embedding-model folder) served under `name`, with
    /// no overrides.
    pub fn from_file(name: &str, path: &Path) -> Result<ModelSpec, String> {
        let (kind, details) = if path.is_dir() {
            let shards = folder_weights(path).map_err(|e| e.to_string())?;
            let weights: Vec<PathBuf> = shards.iter().map(|s| path.join(s)).collect();
            let weights: Vec<&Path> = weights.iter().map(PathBuf::as_path).collect();
            let details = safetensors_details(&weights, Some(&path.join("config.json")))
                .map_err(|e| e.to_string())?;
            (folder_kind(path), details)
        } else {
            let details = gguf_details(path).map_err(|e| e.to_string())?;
            (ModelKind::Generate, details)
        };
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let modified_at = meta
            .modified()
            .map(chrono::DateTime::<chrono::Utc>::from)
            .unwrap_or_else(|_| chrono::Utc::now());
        Ok(ModelSpec {
            name: with_tag(name),
            kind,
            path: path.to_path_buf(),
            digest: String::new(),
            size: disk_size(path),
            modified_at,
            template: None,
            system: None,
            parameters: Map::new(),
            messages: Vec::new(),
            license: None,
            details,
        })
    }

    /// A registry model. A multi-file (embedding) model gets a folder of
    /// links to its blobs, named by its digest, so it loads like any folder.
    fn from_record(registry: &Registry, r: ModelRecord) -> Result<ModelSpec, String> {
        let (kind, path) = if r.files.is_empty() {
            (ModelKind::Generate, r.model_path)
        } else {
            let folder = model_folder(registry, &r)?;
            (folder_kind(&folder), folder)
        };
        Ok(ModelSpec {
            name: r.name.to_string(),
            kind,
            path,
            digest: r.digest.to_string(),
            size: r.size,
            modified_at: r.modified_at,
            template: r.template,
            system: r.system,
            parameters: r.parameters,
            messages: r.messages,
            license: r.license,
            details: r.details,
        })
    }
}

/// What a model folder serves: embedding folders embed, decoders generate.
fn folder_kind(dir: &Path) -> ModelKind {
    if mlxr_embed::is_embedding_folder(dir) {
        ModelKind::Embed
    } else {
        ModelKind::Generate
    }
}

/// Bytes of a file, or of every file under a folder.
fn disk_size(path: &Path) -> u64 {
    match std::fs::read_dir(path) {
        Ok(entries) => entries.flatten().map(|e| disk_size(&e.path())).sum(),
        Err(_) => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
    }
}

fn model_folder(registry: &Registry, r: &ModelRecord) -> Result<PathBuf, String> {
    let dir = registry.home().join("models").join(r.digest.hex());
    let files: Vec<(String, Digest)> = r
        .files
        .iter()
        .map(|f| (f.path.clone(), f.digest.clone()))
        .collect();
    link_model_files(registry, &r.model_blob, &files, &dir)?;
    Ok(dir)
}

/// Fills `dir` with links to a multi-file model's blobs under their file
/// names (`model.safetensors` for the weights), so it reads as the folder.
pub fn link_model_files(
    registry: &Registry,
    model_blob: &Digest,
    files: &[(String, Digest)],
    dir: &Path,
) -> Result<(), String> {
    let link = |target: &Path, rel: &str| -> Result<(), String> {
        let at = dir.join(rel);
        if at.exists() {
            return Ok(());
        }
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        link_or_copy(target, &at).map_err(|e| format!("{}: {e}", at.display()))
    };
    link(&registry.blob_path(model_blob), "model.safetensors")?;
    for (path, digest) in files {
        if path.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(format!(
                "model file path '{path}' is not a plain relative path"
            ));
        }
        link(&registry.blob_path(digest), path)?;
    }
    Ok(())
}

#[cfg(unix)]
fn link_or_copy(target: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn link_or_copy(target: &Path, at: &Path) -> std::io::Result<()> {
    std::fs::copy(target, at).map(|_| ())
}

pub trait ModelCatalog: Send + Sync {
    fn resolve(&self, name: &str) -> Result<Option<ModelSpec>, String>;
    fn list(&self) -> Result<Vec<ModelSpec>, String>;
}

/// The model parameter naming a model's draft model (llama-server's
/// `--model-draft`, per model): a file or the name of a served model.
pub const MODEL_DRAFT_PARAMETER: &str = "speculative.model_draft";

/// The weights file of a draft model given as a file path or as the name
/// of a model in `catalog`; an error says why it cannot draft.
pub fn resolve_draft(catalog: &dyn ModelCatalog, given: &str) -> Result<PathBuf, String> {
    let path = Path::new(given);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    let model = catalog
        .resolve(given)?
        .ok_or_else(|| format!("'{given}' is no file and no model this server has"))?;
    if model.kind != ModelKind::Generate {
        return Err(format!("'{given}' is an embedding model: it cannot draft"));
    }
    Ok(model.path)
}

/// The draft model that a model's `parameters` name
/// ([`MODEL_DRAFT_PARAMETER`]).
pub fn model_draft(parameters: &Map<String, Value>) -> Result<Option<&str>, String> {
    match parameters.get(MODEL_DRAFT_PARAMETER) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(other) => Err(format!(
            "{MODEL_DRAFT_PARAMETER} must be a model name or a file path, not {other}"
        )),
    }
}

/// A fixed set of model files, each under a name.
pub struct FileCatalog {
    models: Vec<ModelSpec>,
}

impl FileCatalog {
    pub fn new(models: Vec<ModelSpec>) -> Self {
        Self { models }
    }
}

impl ModelCatalog for FileCatalog {
    fn resolve(&self, name: &str) -> Result<Option<ModelSpec>, String> {
        Ok(self
            .models
            .iter()
            .find(|m| same_name(&m.name, name))
            .cloned())
    }

    fn list(&self) -> Result<Vec<ModelSpec>, String> {
        Ok(self.models.clone())
    }
}

/// The registry's models, then (for names it lacks) fixed model files.
pub struct RegistryCatalog {
    registry: Arc<Registry>,
    files: FileCatalog,
}

impl RegistryCatalog {
    pub fn new(registry: Arc<Registry>, files: FileCatalog) -> Self {
        Self { registry, files }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
}

impl ModelCatalog for RegistryCatalog {
    fn resolve(&self, name: &str) -> Result<Option<ModelSpec>, String> {
        if let Some(found) = self.files.resolve(name)? {
            return Ok(Some(found));
        }
        // A name the registry would reject cannot be in it.
        let Ok(parsed) = ModelName::parse(name) else {
            return Ok(None);
        };
        match self.registry.get(&parsed).map_err(|e| e.to_string())? {
            Some(r) => ModelSpec::from_record(&self.registry, r).map(Some),
            None => Ok(None),
        }
    }

    fn list(&self) -> Result<Vec<ModelSpec>, String> {
        let mut out = self.files.list()?;
        let records = self.registry.list().map_err(|e| e.to_string())?;
        for r in records {
            out.push(ModelSpec::from_record(&self.registry, r)?);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// `smollm2` and `smollm2:latest` are one model.
pub fn same_name(a: &str, b: &str) -> bool {
    with_tag(a) == with_tag(b)
}

pub fn with_tag(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}
