//! mlxr-formats: model file readers.
//!
//! - [`gguf`]: a hardened, memory-mapped GGUF reader (v2 and v3).

pub mod gguf;

pub use gguf::GgufFile;
