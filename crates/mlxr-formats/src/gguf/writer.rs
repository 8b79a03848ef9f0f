//! A small GGUF writer that builds files in memory: for tests (here and in
//! other crates), fuzzing seeds and tiny tools. It writes exactly what it is
//! given (no validation), so tests can also build slightly wrong files.

use super::ggml_type::GgmlType;
use super::value::{MetadataArray, MetadataValue};
use super::DEFAULT_ALIGNMENT;

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory.
///
/// ```
/// use mlxr_formats::gguf::{writer::GgufWriter, GgmlType, GgufFile};
/// let bytes = GgufWriter::new()
///     .kv("general.architecture", "llama")
///     .tensor_f32("w", &[2, 2], &[1.0, 2.0, 3.0, 4.0])
///     .build();
/// let file = GgufFile::from_bytes(bytes).unwrap();
/// assert_eq!(file.tensor("w").unwrap().ggml_type, GgmlType::F32);
/// ```
pub struct GgufWriter {
    version: u32,
    alignment: Option<u64>,
    kvs: Vec<(String, MetadataValue)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// A version 3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: None,
            kvs: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// The version number written in the header (v2 and v3 share one layout).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Lays data out with this alignment and writes it as `general.alignment`
    /// (u32) first in the metadata. Must be a power of two that fits in u32.
    pub fn alignment(mut self, alignment: u64) -> Self {
        self.alignment = Some(alignment);
        self
    }

    /// Appends a metadata entry (duplicates are written as given).
    pub fn kv(mut self, key: impl Into<String>, value: impl Into<MetadataValue>) -> Self {
        self.kvs.push((key.into(), value.into()));
        self
    }

    /// Appends a tensor with its raw data.
    pub fn tensor(
        self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Self {
        self.tensor_raw(name, dims, ty.id(), data)
    }

    /// Appends an F32 tensor.
    pub fn tensor_f32(self, name: impl Into<String>, dims: &[u64], values: &[f32]) -> Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, GgmlType::F32, data)
    }

    /// Appends a tensor with any type id (also unknown ones).
    pub fn tensor_raw(
        mut self,
        name: impl Into<String>,
        dims: &[u64],
        type_id: u32,
        data: Vec<u8>,
    ) -> Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            type_id,
            data,
        });
        self
    }

    /// The complete file.
    pub fn build(&self) -> Vec<u8> {
        let align = self.alignment.unwrap_or(DEFAULT_ALIGNMENT).max(1) as usize;
        let align_up = |n: usize| n.div_ceil(align) * align;

        let mut kvs: Vec<(&str, MetadataValue)> = Vec::new();
        if let Some(a) = self.alignment {
            if !self.kvs.iter().any(|(k, _)| k == "general.alignment") {
                kvs.push(("general.alignment", MetadataValue::U32(a as u32)));
            }
        }
        kvs.extend(self.kvs.iter().map(|(k, v)| (k.as_str(), v.clone())));

        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
        for (k, v) in &kvs {
            write_str(&mut out, k);
            out.extend_from_slice(&v.type_id().to_le_bytes());
            write_value(&mut out, v);
        }

        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut next = 0usize;
        for t in &self.tensors {
            next = align_up(next);
            offsets.push(next);
            next += t.data.len();
        }
        for (t, &off) in self.tensors.iter().zip(&offsets) {
            write_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&(off as u64).to_le_bytes());
        }
        let data_start = align_up(out.len());
        out.resize(data_start, 0);
        for (t, &off) in self.tensors.iter().zip(&offsets) {
            out.resize(data_start + off, 0);
            out.extend_from_slice(&t.data);
        }
        out
    }
}

/// Writes a GGUF string (u64 length + bytes).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Writes a value's payload (without its type id).
pub fn write_value(out: &mut Vec<u8>, v: &MetadataValue) {
    match v {
        MetadataValue::U8(x) => out.push(*x),
        MetadataValue::I8(x) => out.push(*x as u8),
        MetadataValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::Bool(x) => out.push(*x as u8),
        MetadataValue::String(s) => write_str(out, s),
        MetadataValue::Array(a) => write_array(out, a),
    }
}

/// Writes an array (element type id, u64 count, elements).
pub fn write_array(out: &mut Vec<u8>, a: &MetadataArray) {
    out.extend_from_slice(&a.element_type_id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    fn each<T: Copy, const N: usize>(out: &mut Vec<u8>, v: &[T], f: impl Fn(T) -> [u8; N]) {
        for &x in v {
            out.extend_from_slice(&f(x));
        }
    }
    match a {
        MetadataArray::U8(v) => out.extend_from_slice(v),
        MetadataArray::I8(v) => each(out, v, i8::to_le_bytes),
        MetadataArray::U16(v) => each(out, v, u16::to_le_bytes),
        MetadataArray::I16(v) => each(out, v, i16::to_le_bytes),
        MetadataArray::U32(v) => each(out, v, u32::to_le_bytes),
        MetadataArray::I32(v) => each(out, v, i32::to_le_bytes),
        MetadataArray::U64(v) => each(out, v, u64::to_le_bytes),
        MetadataArray::I64(v) => each(out, v, i64::to_le_bytes),
        MetadataArray::F32(v) => each(out, v, f32::to_le_bytes),
        MetadataArray::F64(v) => each(out, v, f64::to_le_bytes),
        MetadataArray::Bool(v) => each(out, v, |b| [b as u8]),
        MetadataArray::String(v) => v.iter().for_each(|s| write_str(out, s)),
        MetadataArray::Array(v) => v.iter().for_each(|a| write_array(out, a)),
    }
}
