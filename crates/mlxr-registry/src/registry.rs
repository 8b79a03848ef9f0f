//! [`Registry`]: the catalogue API over the database and the blob store.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::Connection;

use crate::blobs::BlobStore;
use crate::db::{self, ModelRow};
use crate::details::{self, ModelDetails};
use crate::digest::Digest;
use crate::error::{RegistryError, Result};
use crate::name::ModelName;
use crate::policy::PullPolicy;
use crate::record::{Manifest, ModelFile, ModelRecord, NewModel};

/// File name of the database inside the registry home.
pub const DB_FILE: &str = "registry.sqlite";
/// Folder of the blobs inside the registry home.
pub const BLOBS_DIR: &str = "blobs";
/// Disk space an upload must leave free on the blobs' file system.
pub const BLOB_SPACE_MARGIN: u64 = 1 << 30;
/// Folder for scratch work (pip downloads); emptied on open.
pub(crate) const TMP_DIR: &str = "tmp";
/// How old an unreferenced blob file must be before
/// [`Registry::prune_unreferenced_blobs`] removes it.
pub const PRUNE_MIN_AGE: Duration = Duration::from_secs(60 * 60);

/// The model catalogue under one home folder (`MLXR_HOME`, usually `~/.mlxr`).
///
/// All methods are synchronous and the type is `Send + Sync`: share it in an
/// `Arc` and call it from blocking threads. Database work is serialised by an
/// internal mutex; long downloads do not hold it.
pub struct Registry {
    home: PathBuf,
    pub(crate) blobs: BlobStore,
    conn: Mutex<Connection>,
    pub(crate) policy: PullPolicy,
    /// The Hugging Face endpoint (`HF_ENDPOINT` when the registry opened).
    pub(crate) hf_endpoint: String,
}

impl Registry {
    /// Opens the registry at `home`: creates the folders and the database
    /// schema if needed and removes temporary files left by a crash.
    pub fn open(home: &Path) -> Result<Registry> {
        fs::create_dir_all(home).map_err(|e| RegistryError::io_at("creating", home, e))?;
        let blobs = BlobStore::open(home.join(BLOBS_DIR))?;
        let tmp = home.join(TMP_DIR);
        if tmp.exists() {
            let _ = fs::remove_dir_all(&tmp);
        }
        let conn = db::open(&home.join(DB_FILE))?;
        Ok(Registry {
            home: home.to_path_buf(),
            blobs,
            conn: Mutex::new(conn),
            policy: PullPolicy::default(),
            hf_endpoint: crate::http::hf_endpoint_from_env(),
        })
    }

    /// Which pull sources are allowed beyond https and the PyPI defaults
    /// (default: none, see [`PullPolicy`]).
    pub fn with_pull_policy(mut self, policy: PullPolicy) -> Registry {
        self.policy = policy;
        self
    }

    /// The Hugging Face endpoint for `hf.co/` pulls, instead of
    /// `HF_ENDPOINT` (or huggingface.co); its origin is trusted even over
    /// plain http.
    pub fn with_hf_endpoint(mut self, endpoint: &str) -> Registry {
        self.hf_endpoint = endpoint.trim_end_matches('/').to_string();
        self
    }

    /// The pull policy in force.
    pub fn pull_policy(&self) -> PullPolicy {
        self.policy
    }

    /// The home folder.
    pub fn home(&self) -> &Path {
        &self.home
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half transaction
        // committed (rusqlite rolls back on drop), so poisoning is harmless.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// All models, sorted by name.
    pub fn list(&self) -> Result<Vec<ModelRecord>> {
        let rows = db::all_models(&self.lock())?;
        rows.into_iter().map(|r| self.record(r)).collect()
    }

    /// The model with this name (case-insensitive), if any.
    pub fn get(&self, name: &ModelName) -> Result<Option<ModelRecord>> {
        let row = db::get_model(&self.lock(), &name.to_string())?;
        row.map(|r| self.record(r)).transpose()
    }

    /// Whether the blob is stored.
    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blobs.exists(digest)
    }

    /// Where the blob is (or would be) stored: `home/blobs/sha256-<hex>`.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs.path(digest)
    }

    /// Stores the bytes of `reader` as a blob and returns its digest. With
    /// `expected`, a different digest is an error and nothing is kept.
    pub fn put_blob(&self, reader: &mut dyn Read, expected: Option<&Digest>) -> Result<Digest> {
        let mut tmp = self.blobs.temp()?;
        tmp.copy_from(reader, &mut |_| Ok(()))?;
        tmp.finish(&self.blobs, expected)
    }

    /// [`Registry::put_blob`] for untrusted input: more than `max_len` bytes
    /// is [`RegistryError::BlobTooLarge`]. Whatever goes wrong (too large, a
    /// read error, a digest mismatch), the temporary file is deleted and no
    /// blob appears.
    pub fn put_blob_capped(
        &self,
        reader: &mut dyn Read,
        expected: Option<&Digest>,
        max_len: u64,
    ) -> Result<Digest> {
        let mut tmp = self.blobs.temp()?;
        tmp.copy_from_capped(reader, max_len)?;
        tmp.finish(&self.blobs, expected)
    }

    /// Refuses with [`RegistryError::NoSpace`] when the blobs' file system
    /// has less than `len` bytes plus [`BLOB_SPACE_MARGIN`] available (`len`
    /// 0 when unknown). Passes where the free space cannot be read.
    pub fn check_blob_space(&self, len: u64) -> Result<()> {
        let Some(available) = self.blobs.available_space() else {
            return Ok(());
        };
        let needed = len.saturating_add(BLOB_SPACE_MARGIN);
        if available < needed {
            return Err(RegistryError::NoSpace {
                dir: self.blobs.dir().to_path_buf(),
                needed,
                margin: BLOB_SPACE_MARGIN,
                available,
            });
        }
        Ok(())
    }

    /// Creates (or atomically replaces) `name` from a stored GGUF blob.
    pub fn create(&self, name: &ModelName, model: NewModel) -> Result<ModelRecord> {
        self.create_with_files(name, model, Vec::new())
    }

    /// Like [`Registry::create`] for a multi-file model: `files` are
    /// `(relative path, blob)` companions of the weights blob (e.g.
    /// `config.json` and `tokenizer.json` of a safetensors model).
    pub fn create_with_files(
        &self,
        name: &ModelName,
        model: NewModel,
        files: Vec<(String, Digest)>,
    ) -> Result<ModelRecord> {
        let model_path = self.blobs.path(&model.model_blob);
        let model_size = self.stored_size(&model.model_blob)?;
        let mut companions = Vec::with_capacity(files.len());
        for (path, digest) in files {
            check_relative_path(&path)?;
            let size = self.stored_size(&digest)?;
            companions.push(ModelFile { path, digest, size });
        }
        let details = self.read_details(&model_path, &companions)?;
        let manifest = Manifest::new(model, model_size, companions, details);
        self.put_manifest(name, manifest)
    }

    /// Copies `from` to `to` (replacing `to`); both then share blobs and digest.
    pub fn copy(&self, from: &ModelName, to: &ModelName) -> Result<()> {
        let mut conn = self.lock();
        let src = db::get_model(&conn, &from.to_string())?
            .ok_or_else(|| RegistryError::NotFound(from.to_string()))?;
        let blobs = db::model_blobs(&conn, &src.name)?;
        let row = ModelRow {
            name: to.to_string(),
            modified_at: now_text(),
            ..src
        };
        let tx = conn.transaction()?;
        let old = db::put_model(&tx, &row, &blobs)?;
        tx.commit()?;
        self.collect_garbage(&conn, old)
    }

    /// Deletes `name` and every blob no other model references.
    pub fn delete(&self, name: &ModelName) -> Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let old = db::delete_model(&tx, &name.to_string())?
            .ok_or_else(|| RegistryError::NotFound(name.to_string()))?;
        tx.commit()?;
        self.collect_garbage(&conn, old)
    }

    /// Writes the manifest for `name` in one transaction.
    pub(crate) fn put_manifest(&self, name: &ModelName, manifest: Manifest) -> Result<ModelRecord> {
        let json = serde_json::to_string(&manifest).expect("manifest serialises");
        let digest = Digest::of_bytes(json.as_bytes());
        let modified_at = Utc::now();
        let row = ModelRow {
            name: name.to_string(),
            manifest_digest: digest.to_string(),
            manifest: json,
            modified_at: modified_at.to_rfc3339_opts(SecondsFormat::Nanos, true),
        };
        let blobs = manifest.blobs();
        let mut conn = self.lock();
        // Re-check under the lock: a concurrent delete may have collected them.
        for d in &blobs {
            if !self.blobs.exists(d) {
                return Err(RegistryError::BlobNotFound(d.clone()));
            }
        }
        let tx = conn.transaction()?;
        let old = db::put_model(&tx, &row, &blobs)?;
        tx.commit()?;
        self.collect_garbage(&conn, old)?;
        drop(conn);
        let model_path = self.blobs.path(&manifest.model.digest);
        Ok(manifest.into_record(name.clone(), digest, model_path, modified_at))
    }

    /// Removes the blobs among `candidates` that no model references (used
    /// when a pull fetched blobs but could not register them).
    pub(crate) fn discard_unreferenced(&self, candidates: Vec<Digest>) -> Result<()> {
        let conn = self.lock();
        self.collect_garbage(&conn, candidates)
    }

    /// Removes the blob files that no model references and that were last
    /// modified at least [`PRUNE_MIN_AGE`] ago, and returns their digests.
    /// Such orphans are what a crash between storing a blob and committing
    /// its model (or between a commit and the cleanup of the blobs it
    /// replaced) leaves behind, as does an upload `/api/create` never used;
    /// `mlxr serve` calls this at start, as Ollama prunes at server start.
    ///
    /// Only files named exactly `sha256-<64 lowercase hex>` are candidates:
    /// resumable downloads (`*-partial`), temporary files (`tmp-*`) and
    /// anything else in the folder are left alone. Work is done under the
    /// connection lock, so no create, copy or delete of this registry runs
    /// meanwhile; it stops at the first error (what it removed before stays
    /// removed).
    pub fn prune_unreferenced_blobs(&self) -> Result<Vec<Digest>> {
        let conn = self.lock();
        let dir = self.blobs.dir();
        let entries = fs::read_dir(dir).map_err(|e| RegistryError::io_at("reading", dir, e))?;
        let now = SystemTime::now();
        let mut removed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| RegistryError::io_at("reading", dir, e))?;
            let Some(digest) = entry.file_name().to_str().and_then(blob_file_digest) else {
                continue;
            };
            // Not followed: a link or folder under a blob name is not ours.
            let meta = entry
                .metadata()
                .map_err(|e| RegistryError::io_at("reading", &entry.path(), e))?;
            if !meta.is_file() {
                continue;
            }
            // The lock above only serialises this process. Another one (a
            // CLI `mlxr pull`, or a client of the server between uploading a
            // blob and the `/api/create` that uses it) may be about to
            // reference a blob it has just written, so recent files are
            // kept, and so is any file whose age cannot be told.
            let old_enough = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age >= PRUNE_MIN_AGE);
            if !old_enough || db::is_referenced(&conn, &digest)? {
                continue;
            }
            self.blobs.remove(&digest)?;
            removed.push(digest);
        }
        Ok(removed)
    }

    /// Removes the blobs among `candidates` that no model references.
    fn collect_garbage(&self, conn: &Connection, candidates: Vec<Digest>) -> Result<()> {
        for d in candidates {
            if !db::is_referenced(conn, &d)? {
                self.blobs.remove(&d)?;
            }
        }
        Ok(())
    }

    fn stored_size(&self, digest: &Digest) -> Result<u64> {
        let path = self.blobs.path(digest);
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(m.len()),
            _ => Err(RegistryError::BlobNotFound(digest.clone())),
        }
    }

    fn read_details(&self, model_path: &Path, files: &[ModelFile]) -> Result<ModelDetails> {
        if crate::safetensors::is_safetensors(model_path) {
            let config = files
                .iter()
                .find(|f| f.path == "config.json")
                .map(|f| self.blobs.path(&f.digest));
            let shards: Vec<PathBuf> = files
                .iter()
                .filter(|f| {
                    f.path.ends_with(".safetensors") && self.blobs.path(&f.digest) != model_path
                })
                .map(|f| self.blobs.path(&f.digest))
                .collect();
            let mut weights = vec![model_path];
            weights.extend(shards.iter().map(PathBuf::as_path));
            crate::safetensors::details(&weights, config.as_deref())
        } else {
            details::gguf_details(model_path)
        }
    }

    fn record(&self, row: ModelRow) -> Result<ModelRecord> {
        let corrupt = |reason: String| RegistryError::Corrupt {
            name: row.name.clone(),
            reason,
        };
        let name = ModelName::parse(&row.name).map_err(|e| corrupt(e.to_string()))?;
        let digest = Digest::parse(&row.manifest_digest).map_err(|e| corrupt(e.to_string()))?;
        let manifest: Manifest =
            serde_json::from_str(&row.manifest).map_err(|e| corrupt(format!("manifest: {e}")))?;
        let modified_at = DateTime::parse_from_rfc3339(&row.modified_at)
            .map_err(|e| corrupt(format!("modified_at: {e}")))?
            .with_timezone(&Utc);
        let model_path = self.blobs.path(&manifest.model.digest);
        Ok(manifest.into_record(name, digest, model_path, modified_at))
    }
}

/// The digest a blob file is named after, when `name` is exactly
/// `sha256-<64 lowercase hex>` (so removing the digest's file removes this
/// very file).
fn blob_file_digest(name: &str) -> Option<Digest> {
    let hex = name.strip_prefix("sha256-")?;
    if !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let digest = Digest::from_hex(hex).ok()?;
    (digest.file_name() == name).then_some(digest)
}

fn now_text() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// A companion file path must stay inside the model folder.
fn check_relative_path(path: &str) -> Result<()> {
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != ".." && !p.contains('\0'));
    if ok {
        Ok(())
    } else {
        Err(RegistryError::InvalidModel {
            path: PathBuf::from(path),
            reason: "companion file paths must be relative and stay inside the model folder"
                .to_string(),
        })
    }
}
