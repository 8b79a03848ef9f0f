//! What the registry stores about a model: the manifest (hashed for the
//! model's digest) and the record handed to callers.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::details::ModelDetails;
use crate::digest::Digest;
use crate::name::ModelName;

/// Version of the manifest JSON layout.
pub(crate) const MANIFEST_VERSION: u32 = 1;

/// A model in the catalogue.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRecord {
    pub name: ModelName,
    /// Digest of the manifest JSON (what `/api/tags` shows as `digest`).
    pub digest: Digest,
    /// The weights blob.
    pub model_blob: Digest,
    /// Path of the weights blob on disk.
    pub model_path: PathBuf,
    /// Bytes of the weights blob plus any companion files.
    pub size: u64,
    pub modified_at: DateTime<Utc>,
    /// Prompt template override; `None` means the model file's own template.
    pub template: Option<String>,
    pub system: Option<String>,
    /// Ollama options, e.g. `{"temperature":0.7,"stop":["<|im_end|>"]}`.
    pub parameters: Map<String, Value>,
    /// `(role, content)` pairs prepended to every chat (Modelfile `MESSAGE`).
    pub messages: Vec<(String, String)>,
    pub license: Option<String>,
    pub details: ModelDetails,
    /// Companion files of a multi-file model (e.g. `tokenizer.json` next to a
    /// safetensors file); empty for GGUF models.
    pub files: Vec<ModelFile>,
}

/// A companion file of a model, stored as a blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFile {
    /// Relative path inside the model folder, e.g. `1_Pooling/config.json`.
    pub path: String,
    pub digest: Digest,
    pub size: u64,
}

/// What `create` needs besides the name.
#[derive(Clone, Debug, PartialEq)]
pub struct NewModel {
    /// The weights blob; it must already be stored (`put_blob` or a pull).
    pub model_blob: Digest,
    pub template: Option<String>,
    pub system: Option<String>,
    pub parameters: Map<String, Value>,
    pub messages: Vec<(String, String)>,
    pub license: Option<String>,
}

impl NewModel {
    /// A model with only its weights and no overrides.
    pub fn from_blob(model_blob: Digest) -> NewModel {
        NewModel {
            model_blob,
            template: None,
            system: None,
            parameters: Map::new(),
            messages: Vec::new(),
            license: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Layer {
    pub digest: Digest,
    pub size: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Message {
    pub role: String,
    pub content: String,
}

/// The stored description of a model; its JSON's SHA-256 is the model digest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub version: u32,
    pub model: Layer,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ModelFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub parameters: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    pub details: ModelDetails,
}

impl Manifest {
    pub(crate) fn new(
        model: NewModel,
        model_size: u64,
        files: Vec<ModelFile>,
        details: ModelDetails,
    ) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            model: Layer {
                digest: model.model_blob,
                size: model_size,
            },
            files,
            template: model.template,
            system: model.system,
            parameters: model.parameters,
            messages: model
                .messages
                .into_iter()
                .map(|(role, content)| Message { role, content })
                .collect(),
            license: model.license,
            details,
        }
    }

    /// Every blob the manifest references.
    pub(crate) fn blobs(&self) -> Vec<Digest> {
        let mut blobs = vec![self.model.digest.clone()];
        blobs.extend(self.files.iter().map(|f| f.digest.clone()));
        blobs.sort();
        blobs.dedup();
        blobs
    }

    pub(crate) fn into_record(
        self,
        name: ModelName,
        digest: Digest,
        model_path: PathBuf,
        modified_at: DateTime<Utc>,
    ) -> ModelRecord {
        let size = self.model.size + self.files.iter().map(|f| f.size).sum::<u64>();
        ModelRecord {
            name,
            digest,
            model_blob: self.model.digest,
            model_path,
            size,
            modified_at,
            template: self.template,
            system: self.system,
            parameters: self.parameters,
            messages: self
                .messages
                .into_iter()
                .map(|m| (m.role, m.content))
                .collect(),
            license: self.license,
            details: self.details,
            files: self.files,
        }
    }
}
