//! Error type of the GGUF reader.
//!
//! Every variant says what is wrong and where (key name, tensor name, byte
//! offset), so that `{}` of an error reads well as a one-line CLI message.

use std::fmt;
use std::path::PathBuf;

use super::ggml_type::GgmlType;

/// Everything that can go wrong while reading a GGUF file or its metadata.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, inspected or memory-mapped.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The first four bytes are not `GGUF`.
    #[error(
        "not a GGUF file (magic \"{}\"){}",
        EscapedBytes(magic),
        PathSuffix(path)
    )]
    NotGguf {
        /// The first (up to four) bytes of the input.
        magic: Vec<u8>,
        /// The file, when the input came from [`super::GgufFile::open`].
        path: Option<PathBuf>,
    },

    /// A GGUF version other than 2 or 3.
    #[error("{}", version_message(*.0))]
    UnsupportedVersion(u32),

    /// The input ends before a field that should be there.
    #[error("file truncated: {what} at byte offset {offset} extends past the end of the data")]
    Truncated { what: String, offset: u64 },

    /// A key, string value or tensor name is not valid UTF-8.
    #[error("invalid UTF-8 in {what} at byte offset {offset}")]
    InvalidUtf8 { what: String, offset: u64 },

    /// A count or length read from the file cannot possibly fit in the
    /// remaining bytes (or overflows when multiplied out).
    #[error("{what} at byte offset {offset} is {value}, more than the {limit} that could fit in the rest of the file")]
    TooLarge {
        what: String,
        value: u64,
        limit: u64,
        offset: u64,
    },

    /// `general.alignment` is not a power of two that fits in a u32.
    #[error("general.alignment must be a power of two from 1 to 2^31, got {0}")]
    BadAlignment(u64),

    /// A metadata value (or array element) type id outside 0..=12.
    #[error("unknown metadata value type {type_id} for key '{key}' at byte offset {offset}")]
    UnknownValueType {
        key: String,
        type_id: u32,
        offset: u64,
    },

    /// Arrays nested deeper than [`super::MAX_ARRAY_DEPTH`].
    #[error("arrays nested more than {max_depth} deep for key '{key}' at byte offset {offset}")]
    NestingTooDeep {
        key: String,
        max_depth: usize,
        offset: u64,
    },

    /// The same metadata key appears twice.
    #[error("duplicate metadata key '{key}' at byte offset {offset}")]
    DuplicateKey { key: String, offset: u64 },

    /// The same tensor name appears twice.
    #[error("duplicate tensor name '{tensor}' at byte offset {offset}")]
    DuplicateTensor { tensor: String, offset: u64 },

    /// A tensor's ggml type id is not one this reader knows.
    #[error("tensor '{tensor}' has unknown ggml type id {id}")]
    UnknownTensorType { tensor: String, id: u32 },

    /// A known ggml type that candle (and so MLXR) cannot load yet.
    #[error(
        "tensor '{tensor}' has type {ggml_type}, which MLXR cannot load yet (supported: {})",
        SupportedList
    )]
    UnsupportedTensorType { tensor: String, ggml_type: GgmlType },

    /// More dimensions than GGML supports.
    #[error("tensor '{tensor}' has {n_dims} dimensions, at most {max} are supported")]
    TooManyDims {
        tensor: String,
        n_dims: u32,
        max: u32,
    },

    /// Zero or overflowing dimensions, or a row that is not a whole number of blocks.
    #[error("tensor '{tensor}' has invalid shape {dims:?}: {reason}")]
    InvalidShape {
        tensor: String,
        dims: Vec<u64>,
        reason: String,
    },

    /// A tensor offset that is not a multiple of the file's alignment.
    #[error("tensor '{tensor}' has offset {offset} (relative to the data section), not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },

    /// A tensor whose data does not lie inside the file.
    #[error("tensor '{tensor}' data (byte offset {offset}, {size} bytes) lies outside the file ({file_len} bytes)")]
    TensorOutOfBounds {
        tensor: String,
        offset: u64,
        size: u64,
        file_len: u64,
    },

    /// Two tensors whose data ranges overlap.
    #[error("tensor '{tensor}' data (byte offset {offset}) overlaps tensor '{other}' (which ends at byte offset {other_end})")]
    TensorOverlap {
        tensor: String,
        offset: u64,
        other: String,
        other_end: u64,
    },

    /// A typed metadata getter found no such key.
    #[error("missing metadata key '{key}'")]
    MissingKey { key: String },

    /// A typed metadata getter found a value of another type.
    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },

    /// A typed metadata getter found an integer that does not fit the requested type.
    #[error("metadata key '{key}' has value {value}, which does not fit in {expected}")]
    OutOfRange {
        key: String,
        expected: &'static str,
        value: String,
    },
}

impl GgufError {
    pub(crate) fn wrong_type(key: &str, expected: &'static str, found: &'static str) -> Self {
        GgufError::WrongType {
            key: key.to_owned(),
            expected,
            found,
        }
    }

    pub(crate) fn missing(key: &str) -> Self {
        GgufError::MissingKey {
            key: key.to_owned(),
        }
    }
}

fn version_message(v: u32) -> String {
    match v {
        1 => "GGUF version 1 is not supported (an obsolete format with 32-bit counts; \
              re-convert the model with a current llama.cpp); supported versions: 2, 3"
            .to_owned(),
        v if matches!(v.swap_bytes(), 1..=3) => format!(
            "this looks like a big-endian GGUF file (version {} byte-swapped); \
             only little-endian GGUF is supported",
            v.swap_bytes()
        ),
        v => format!("unsupported GGUF version {v}; supported versions: 2, 3"),
    }
}

/// Bytes shown like a Rust byte string: printable ASCII as is, the rest as `\xNN`.
struct EscapedBytes<'a>(&'a [u8]);

impl fmt::Display for EscapedBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0 {
            match b {
                b'"' => f.write_str("\\\"")?,
                b'\\' => f.write_str("\\\\")?,
                0x20..=0x7e => fmt::Write::write_char(f, b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

struct PathSuffix<'a>(&'a Option<PathBuf>);

impl fmt::Display for PathSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(p) => write!(f, ": {}", p.display()),
            None => Ok(()),
        }
    }
}

struct SupportedList;

impl fmt::Display for SupportedList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for t in GgmlType::ALL.iter().filter(|t| t.is_supported_by_candle()) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            f.write_str(t.name())?;
        }
        Ok(())
    }
}
