//! Parsing of the GGUF header, metadata and tensor infos, and validation of
//! the tensor data layout. Pure function of the input bytes.

use std::collections::HashMap;

use super::error::GgufError;
use super::ggml_type::GgmlType;
use super::metadata::Metadata;
use super::reader::Reader;
use super::value::{value_type as vt, MetadataArray, MetadataValue};
use super::{TensorInfo, DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_DIMS};

pub(crate) const MAGIC: &[u8; 4] = b"GGUF";

/// Smallest possible encoding of one metadata entry: key length, type, 1-byte value.
const MIN_KV_SIZE: u64 = 8 + 4 + 1;
/// Smallest possible encoding of one tensor info: name length, n_dims, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 4 + 8;
/// Most elements reserved up front for a count read from the file. Counts
/// are already bounded by the remaining bytes, but a large memory-mapped file
/// would still allow reserving several times its size before the first
/// element fails to parse; past this, vectors grow as elements really parse.
const MAX_PREALLOC: usize = 1 << 16;

pub(crate) struct Parsed {
    pub version: u32,
    pub alignment: u64,
    pub data_offset: u64,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub index: HashMap<String, usize>,
}

pub(crate) fn parse(data: &[u8]) -> Result<Parsed, GgufError> {
    if data.len() < 4 || &data[..4] != MAGIC {
        return Err(GgufError::NotGguf {
            magic: data[..data.len().min(4)].to_vec(),
            path: None,
        });
    }
    let mut r = Reader::new(data);
    r.take(4, &|| "magic".into())?;
    let version = r.u32(&|| "GGUF version".into())?;
    if !matches!(version, 2 | 3) {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let tensor_count_offset = r.pos() as u64;
    let tensor_count = r.u64(&|| "tensor count".into())?;
    let kv_count = r.count(MIN_KV_SIZE, &|| "metadata entry count".into())?;

    let mut metadata = Metadata::default();
    metadata.reserve(kv_count.min(MAX_PREALLOC));
    for i in 0..kv_count {
        let key_offset = r.pos() as u64;
        let key = r.str(&|| format!("key of metadata entry {i}"))?;
        let type_offset = r.pos() as u64;
        let type_id = r.u32(&|| format!("value type of metadata key '{key}'"))?;
        let value = read_value(&mut r, type_id, key, type_offset)?;
        metadata.insert(key.to_owned(), value, key_offset)?;
    }

    let alignment = match metadata.opt_u64("general.alignment")? {
        None => DEFAULT_ALIGNMENT,
        Some(a) if a.is_power_of_two() && a <= u64::from(u32::MAX) => a,
        Some(a) => return Err(GgufError::BadAlignment(a)),
    };

    let limit = r.remaining() as u64 / MIN_TENSOR_INFO_SIZE;
    if tensor_count > limit {
        return Err(GgufError::TooLarge {
            what: "tensor count".into(),
            value: tensor_count,
            limit,
            offset: tensor_count_offset,
        });
    }
    let tensor_count = tensor_count as usize;
    let prealloc = tensor_count.min(MAX_PREALLOC);
    let mut tensors = Vec::with_capacity(prealloc);
    let mut rel_offsets = Vec::with_capacity(prealloc);
    let mut index = HashMap::with_capacity(prealloc);
    for i in 0..tensor_count {
        let name_offset = r.pos() as u64;
        let name = r.str(&|| format!("name of tensor {i}"))?;
        if index.contains_key(name) {
            return Err(GgufError::DuplicateTensor {
                tensor: name.to_owned(),
                offset: name_offset,
            });
        }
        let (info, rel_offset) = read_tensor_info(&mut r, name)?;
        index.insert(info.name.clone(), i);
        tensors.push(info);
        rel_offsets.push(rel_offset);
    }

    let end_of_infos = r.pos() as u64;
    let data_offset = end_of_infos
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::BadAlignment(alignment))?;
    let file_len = data.len() as u64;
    for (info, &rel) in tensors.iter_mut().zip(&rel_offsets) {
        if rel % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                tensor: info.name.clone(),
                offset: rel,
                alignment,
            });
        }
        let out_of_bounds = || GgufError::TensorOutOfBounds {
            tensor: info.name.clone(),
            offset: data_offset.saturating_add(rel),
            size: info.size_bytes,
            file_len,
        };
        let start = data_offset.checked_add(rel).ok_or_else(out_of_bounds)?;
        let end = start
            .checked_add(info.size_bytes)
            .ok_or_else(out_of_bounds)?;
        if end > file_len {
            return Err(out_of_bounds());
        }
        info.offset = start;
    }
    check_overlaps(&tensors)?;

    Ok(Parsed {
        version,
        alignment,
        data_offset,
        metadata,
        tensors,
        index,
    })
}

/// Rejects tensors whose data ranges overlap.
fn check_overlaps(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_unstable_by_key(|&i| tensors[i].offset);
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        // In bounds was checked, so this cannot overflow.
        let a_end = a.offset + a.size_bytes;
        if b.offset < a_end {
            return Err(GgufError::TensorOverlap {
                tensor: b.name.clone(),
                offset: b.offset,
                other: a.name.clone(),
                other_end: a_end,
            });
        }
    }
    Ok(())
}

/// Reads n_dims, dims, type and offset of tensor `name`; validates the shape
/// and computes the size. Returns the info (offset still unset) and the
/// offset relative to the data section.
fn read_tensor_info(r: &mut Reader<'_>, name: &str) -> Result<(TensorInfo, u64), GgufError> {
    let n_dims = r.u32(&|| format!("n_dims of tensor '{name}'"))?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            tensor: name.to_owned(),
            n_dims,
            max: MAX_DIMS,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        dims.push(r.u64(&|| format!("dimension {d} of tensor '{name}'"))?);
    }
    let type_id = r.u32(&|| format!("ggml type of tensor '{name}'"))?;
    let rel_offset = r.u64(&|| format!("data offset of tensor '{name}'"))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.to_owned(),
        id: type_id,
    })?;
    let size_bytes = tensor_size(name, &dims, ggml_type)?;
    let info = TensorInfo {
        name: name.to_owned(),
        dims,
        ggml_type,
        offset: 0,
        size_bytes,
    };
    Ok((info, rel_offset))
}

/// Byte size of a tensor, with every way a shape can be invalid rejected.
fn tensor_size(name: &str, dims: &[u64], ggml_type: GgmlType) -> Result<u64, GgufError> {
    let invalid = |reason: String| GgufError::InvalidShape {
        tensor: name.to_owned(),
        dims: dims.to_vec(),
        reason,
    };
    if let Some(d) = dims.iter().position(|&d| d == 0) {
        return Err(invalid(format!("dimension {d} is zero")));
    }
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| invalid("the element count overflows 64 bits".into()))?;
    let block = ggml_type.block_size();
    let row = dims.first().copied().unwrap_or(1);
    if row % block != 0 {
        return Err(invalid(format!(
            "dims[0] = {row} is not a multiple of the block size {block} of type {ggml_type}"
        )));
    }
    (n_elements / block)
        .checked_mul(ggml_type.type_size())
        .filter(|&s| s <= i64::MAX as u64)
        .ok_or_else(|| invalid("the byte size overflows".into()))
}

/// Smallest encoding of one value of GGUF value type `type_id`, or `None`
/// for an unknown type.
fn min_value_size(type_id: u32) -> Option<u64> {
    Some(match type_id {
        vt::U8 | vt::I8 | vt::BOOL => 1,
        vt::U16 | vt::I16 => 2,
        vt::U32 | vt::I32 | vt::F32 => 4,
        vt::U64 | vt::I64 | vt::F64 => 8,
        vt::STRING => 8,
        vt::ARRAY => 4 + 8,
        _ => return None,
    })
}

fn read_value(
    r: &mut Reader<'_>,
    type_id: u32,
    key: &str,
    type_offset: u64,
) -> Result<MetadataValue, GgufError> {
    let what = || format!("value of metadata key '{key}'");
    Ok(match type_id {
        vt::U8 => MetadataValue::U8(r.u8(&what)?),
        vt::I8 => MetadataValue::I8(r.u8(&what)? as i8),
        vt::U16 => MetadataValue::U16(r.u16(&what)?),
        vt::I16 => MetadataValue::I16(r.u16(&what)? as i16),
        vt::U32 => MetadataValue::U32(r.u32(&what)?),
        vt::I32 => MetadataValue::I32(r.u32(&what)? as i32),
        vt::F32 => MetadataValue::F32(f32::from_bits(r.u32(&what)?)),
        vt::BOOL => MetadataValue::Bool(r.u8(&what)? != 0),
        vt::STRING => MetadataValue::String(r.str(&what)?.to_owned()),
        vt::U64 => MetadataValue::U64(r.u64(&what)?),
        vt::I64 => MetadataValue::I64(r.u64(&what)? as i64),
        vt::F64 => MetadataValue::F64(f64::from_bits(r.u64(&what)?)),
        vt::ARRAY => MetadataValue::Array(read_array(r, key, 1)?),
        _ => {
            return Err(GgufError::UnknownValueType {
                key: key.to_owned(),
                type_id,
                offset: type_offset,
            })
        }
    })
}

/// Decodes `bytes` as little-endian `N`-byte values.
fn decode<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

/// Reads an array (element type, count, elements) at nesting level `depth`
/// (1 for an array that is itself a metadata value).
fn read_array(r: &mut Reader<'_>, key: &str, depth: usize) -> Result<MetadataArray, GgufError> {
    let type_offset = r.pos() as u64;
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            key: key.to_owned(),
            max_depth: MAX_ARRAY_DEPTH,
            offset: type_offset,
        });
    }
    let elem_type = r.u32(&|| format!("element type of array '{key}'"))?;
    let min_size = min_value_size(elem_type).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_owned(),
        type_id: elem_type,
        offset: type_offset,
    })?;
    let n = r.count(min_size, &|| format!("length of array '{key}'"))?;
    let what = || format!("elements of array '{key}'");
    // For fixed-size types, `count` guarantees the bytes are there.
    let mut fixed = |size: u64| r.take(n as u64 * size, &what);
    Ok(match elem_type {
        vt::U8 => MetadataArray::U8(fixed(1)?.to_vec()),
        vt::I8 => MetadataArray::I8(fixed(1)?.iter().map(|&b| b as i8).collect()),
        vt::BOOL => MetadataArray::Bool(fixed(1)?.iter().map(|&b| b != 0).collect()),
        vt::U16 => MetadataArray::U16(decode(fixed(2)?, u16::from_le_bytes)),
        vt::I16 => MetadataArray::I16(decode(fixed(2)?, i16::from_le_bytes)),
        vt::U32 => MetadataArray::U32(decode(fixed(4)?, u32::from_le_bytes)),
        vt::I32 => MetadataArray::I32(decode(fixed(4)?, i32::from_le_bytes)),
        vt::F32 => MetadataArray::F32(decode(fixed(4)?, f32::from_le_bytes)),
        vt::U64 => MetadataArray::U64(decode(fixed(8)?, u64::from_le_bytes)),
        vt::I64 => MetadataArray::I64(decode(fixed(8)?, i64::from_le_bytes)),
        vt::F64 => MetadataArray::F64(decode(fixed(8)?, f64::from_le_bytes)),
        vt::STRING => {
            let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
            for i in 0..n {
                v.push(
                    r.str(&|| format!("element {i} of array '{key}'"))?
                        .to_owned(),
                );
            }
            MetadataArray::String(v)
        }
        vt::ARRAY => {
            let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
            for _ in 0..n {
                v.push(read_array(r, key, depth + 1)?);
            }
            MetadataArray::Array(v)
        }
        _ => {
            // min_value_size accepted only the types above.
            return Err(GgufError::UnknownValueType {
                key: key.to_owned(),
                type_id: elem_type,
                offset: type_offset,
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_sizes() {
        assert_eq!(
            tensor_size("t", &[4096, 4096], GgmlType::Q4_K).unwrap(),
            16 * 4096 * 144
        );
        assert_eq!(tensor_size("t", &[], GgmlType::F32).unwrap(), 4);
        assert_eq!(tensor_size("t", &[64, 3], GgmlType::Q8_0).unwrap(), 6 * 34);
        assert_eq!(
            tensor_size("t", &[256, 2], GgmlType::IQ2_XXS).unwrap(),
            2 * 66
        );
        assert!(tensor_size("t", &[128, 2], GgmlType::Q4_K).is_err());
        assert!(tensor_size("t", &[0], GgmlType::F32).is_err());
        assert!(tensor_size("t", &[1 << 61], GgmlType::F64).is_err());
        assert!(tensor_size("t", &[u64::MAX, u64::MAX], GgmlType::I8).is_err());
    }

    #[test]
    fn value_sizes_cover_every_type() {
        for t in 0..=12 {
            assert!(min_value_size(t).is_some(), "{t}");
        }
        assert_eq!(min_value_size(13), None);
    }

    #[test]
    fn parses_minimal_header() {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        let p = parse(&b).unwrap();
        assert_eq!((p.version, p.alignment, p.data_offset), (2, 32, 32));
        assert!(p.tensors.is_empty() && p.metadata.is_empty());
    }
}
