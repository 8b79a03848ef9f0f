//! A hardened reader for GGUF model files (versions 2 and 3, little-endian).
//!
//! ```no_run
//! use mlxr_formats::gguf::GgufFile;
//! let file = GgufFile::open("model.gguf")?;
//! let arch = file.metadata().get_str("general.architecture")?;
//! file.check_supported()?;
//! for t in file.tensors() {
//!     let bytes = file.tensor_data(t)?;
//!     println!("{arch} {} {:?} {} {} bytes", t.name, t.dims, t.ggml_type, bytes.len());
//! }
//! # Ok::<(), mlxr_formats::gguf::GgufError>(())
//! ```
//!
//! Malformed input gives a [`GgufError`], never a panic or an allocation
//! larger than a small multiple of the input size. Parsing succeeds for
//! tensor types candle cannot load (so metadata tools work on any file);
//! [`GgufFile::tensor_data`] and [`GgufFile::check_supported`] report them.

mod error;
mod ggml_type;
mod metadata;
mod parse;
mod reader;
pub mod stream_writer;
mod value;
pub mod writer;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub use error::GgufError;
pub use ggml_type::GgmlType;
pub use metadata::{Metadata, MetadataArray, MetadataValue};

/// Alignment of the data section and tensor offsets when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a GGML tensor can have.
pub const MAX_DIMS: u32 = 4;
/// Deepest nesting of metadata arrays accepted (1 = an array of scalars).
pub const MAX_ARRAY_DEPTH: usize = 4;

/// One tensor's description from the GGUF header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: `dims[0]` varies fastest (ggml's `ne0`). Reverse it for a
    /// row-major shape (see [`TensorInfo::shape`]).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Absolute byte offset of the tensor data in the file.
    pub offset: u64,
    /// Exact byte size of the tensor data.
    pub size_bytes: u64,
}

impl TensorInfo {
    /// Number of elements (1 for a tensor with no dimensions).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// Row-major shape (slowest dimension first), as candle and PyTorch use it.
    pub fn shape(&self) -> Vec<usize> {
        self.dims
            .iter()
            .rev()
            .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect()
    }
}

enum Storage {
    Mmap(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

struct Inner {
    storage: Storage,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
}

/// A parsed GGUF file. Cloning is cheap (shared, reference-counted).
#[derive(Clone)]
pub struct GgufFile {
    inner: Arc<Inner>,
}

impl GgufFile {
    /// Memory-maps and parses the file at `path`.
    ///
    /// As with any memory map, the file must not be modified while mapped.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io_err = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is only read through shared slices; the caller
            // must not modify the file while it is mapped (documented above).
            Storage::Mmap(unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?)
        };
        Self::from_storage(storage).map_err(|e| match e {
            GgufError::NotGguf { magic, .. } => GgufError::NotGguf {
                magic,
                path: Some(path.to_owned()),
            },
            e => e,
        })
    }

    /// Parses a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::from_storage(Storage::Owned(bytes))
    }

    fn from_storage(storage: Storage) -> Result<GgufFile, GgufError> {
        let p = parse::parse(storage.bytes())?;
        Ok(GgufFile {
            inner: Arc::new(Inner {
                storage,
                version: p.version,
                alignment: p.alignment,
                data_offset: p.data_offset,
                metadata: p.metadata,
                tensors: p.tensors,
                index: p.index,
            }),
        })
    }

    /// GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.inner.version
    }

    /// Alignment of the data section and of tensor offsets.
    pub fn alignment(&self) -> u64 {
        self.inner.alignment
    }

    /// Absolute byte offset where the tensor data section starts.
    pub fn data_offset(&self) -> u64 {
        self.inner.data_offset
    }

    /// Size of the whole file in bytes.
    pub fn file_len(&self) -> u64 {
        self.inner.storage.bytes().len() as u64
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.inner.storage.bytes()
    }

    pub fn metadata(&self) -> &Metadata {
        &self.inner.metadata
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.inner.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.inner.index.get(name).map(|&i| &self.inner.tensors[i])
    }

    /// The exact bytes of a tensor whose type candle supports; an error for
    /// other types.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8], GgufError> {
        if !info.ggml_type.is_supported_by_candle() {
            return Err(GgufError::UnsupportedTensorType {
                tensor: info.name.clone(),
                ggml_type: info.ggml_type,
            });
        }
        self.raw_tensor_data(info)
    }

    /// The exact bytes of a tensor of any type (for tools that copy or
    /// inspect data without decoding it).
    pub fn raw_tensor_data(&self, info: &TensorInfo) -> Result<&[u8], GgufError> {
        let bytes = self.as_bytes();
        let range = info
            .offset
            .checked_add(info.size_bytes)
            .filter(|&end| end <= bytes.len() as u64)
            .map(|end| info.offset as usize..end as usize);
        match range {
            Some(r) => Ok(&bytes[r]),
            None => Err(GgufError::TensorOutOfBounds {
                tensor: info.name.clone(),
                offset: info.offset,
                size: info.size_bytes,
                file_len: bytes.len() as u64,
            }),
        }
    }

    /// Lets the OS take `info`'s bytes out of this process's resident memory,
    /// for a loader that has copied them: without it, loading holds every
    /// page of the file mapped beside the copies made from it (Qwen2.5-1.5B
    /// Q4_K_M peaked at twice its resident size). Reading the bytes again
    /// maps the file's pages back; in-memory files are left as they are.
    pub fn release(&self, info: &TensorInfo) {
        #[cfg(unix)]
        if let Storage::Mmap(map) = &self.inner.storage {
            let Ok(data) = self.raw_tensor_data(info) else {
                return;
            };
            let start = data.as_ptr() as usize - map.as_ptr() as usize;
            // SAFETY: the map is read-only and backed by a file nobody may
            // modify while it is mapped (see `open`): after MADV_DONTNEED a
            // read faults the same bytes back in from the file, so slices
            // into the map stay valid. Advice that fails changes nothing.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, data.len())
            };
        }
    }

    /// Ok when every tensor has a type MLXR can load; otherwise an error
    /// naming the first tensor that has not.
    pub fn check_supported(&self) -> Result<(), GgufError> {
        match self
            .tensors()
            .iter()
            .find(|t| !t.ggml_type.is_supported_by_candle())
        {
            Some(t) => Err(GgufError::UnsupportedTensorType {
                tensor: t.name.clone(),
                ggml_type: t.ggml_type,
            }),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version())
            .field("alignment", &self.alignment())
            .field("file_len", &self.file_len())
            .field("metadata_entries", &self.metadata().len())
            .field("tensors", &self.tensors().len())
            .finish()
    }
}
