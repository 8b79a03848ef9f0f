//! Helpers to build raw, possibly malformed, GGUF bytes field by field.
#![allow(dead_code)]

use mlxr_formats::gguf::writer::{write_str, write_value};
use mlxr_formats::gguf::{GgufError, GgufFile, MetadataValue};

/// A GGUF byte string built field by field, with nothing validated.
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor count and metadata entry count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }

    pub fn u32(mut self, v: u32) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(mut self, v: u64) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }

    pub fn str(mut self, s: &str) -> Raw {
        write_str(&mut self.0, s);
        self
    }

    /// A key/value pair: key, value type id, payload.
    pub fn kv(mut self, key: &str, v: impl Into<MetadataValue>) -> Raw {
        let v = v.into();
        write_str(&mut self.0, key);
        self.0.extend_from_slice(&v.type_id().to_le_bytes());
        write_value(&mut self.0, &v);
        self
    }

    /// A tensor info: name, n_dims, dims, type id, relative offset.
    pub fn tensor(self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(type_id).u64(offset)
    }

    /// Zero padding up to a multiple of `align`.
    pub fn pad(mut self, align: usize) -> Raw {
        let n = self.0.len().div_ceil(align) * align;
        self.0.resize(n, 0);
        self
    }

    pub fn zeros(mut self, n: usize) -> Raw {
        self.0.resize(self.0.len() + n, 0);
        self
    }

    pub fn parse(self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes(self.0)
    }

    /// Parses, expecting an error; returns it.
    #[track_caller]
    pub fn err(self) -> GgufError {
        match self.parse() {
            Ok(f) => panic!("expected an error, parsed {f:?}"),
            Err(e) => e,
        }
    }
}
