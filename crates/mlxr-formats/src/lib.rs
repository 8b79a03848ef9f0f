//! mlxr-formats: model file readers.
//!
//! - [`gguf`]: a hardened, memory-mapped GGUF reader (v2 and v3).
//! - [`safetensors_folder`]: which files hold a model folder's weights.
//! - [`float8`]: the FP8 element formats (safetensors `F8_E4M3`, `F8_E5M2`).

pub mod float8;
pub mod gguf;
pub mod safetensors_folder;

pub use gguf::GgufFile;
