//! MLXR's model catalogue: a SQLite database (WAL mode) over content-addressed
//! blobs in a home folder (`MLXR_HOME`, usually `~/.mlxr`):
//!
//! ```text
//! MLXR_HOME/registry.sqlite        model names -> manifests, blob references
//! MLXR_HOME/blobs/sha256-<hex>     model files, named by their SHA-256
//! MLXR_HOME/blobs/sha256-<k>-partial  resumable downloads
//! MLXR_HOME/tmp/                   scratch (pip downloads), emptied on open
//! ```
//!
//! Names follow Ollama (`[host/][namespace/]model[:tag]`); models come from
//! [`Registry::create`] over uploaded blobs or from [`Registry::pull`].

mod blobs;
mod db;
mod defaults;
mod details;
mod digest;
mod error;
mod http;
pub mod modelfile;
mod name;
mod policy;
mod pull;
mod pypi;
mod record;
mod registry;
mod safetensors;

pub use defaults::{CompanionFile, DefaultModel, WheelFile, DEFAULT_MODELS};
pub use details::{file_type_name, gguf_details, human_number, ModelDetails};
pub use digest::Digest;
pub use error::{RegistryError, Result};
pub use http::HF_ENDPOINT_ENV;
pub use name::ModelName;
pub use policy::PullPolicy;
pub use pull::{folder_files, folder_weights, PullProgress, PullSource};
pub use pypi::PYTHON_ENV;
pub use record::{ModelFile, ModelRecord, NewModel};
pub use registry::{Registry, BLOBS_DIR, BLOB_SPACE_MARGIN, DB_FILE, PRUNE_MIN_AGE};
pub use safetensors::{
    details as safetensors_details, details_from_headers as safetensors_details_from_headers,
    header_from_bytes as safetensors_header, Header as SafetensorsHeader,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn registry_is_send_and_sync() {
        assert_send_sync::<super::Registry>();
    }
}
