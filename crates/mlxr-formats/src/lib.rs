//! mlxr-formats: model file readers.
//!
//! - [`gguf`]: a hardened, memory-mapped GGUF reader (v2 and v3).
//! - [`safetensors_folder`]: which files hold a model folder's weights.

pub mod gguf;
pub mod safetensors_folder;

pub use gguf::GgufFile;
