//! Every kind of malformed input gives the right error, never a panic.

mod common;

use common::Raw;
use mlxr_formats::gguf::writer::GgufWriter;
use mlxr_formats::gguf::{GgmlType, GgufError, GgufFile, MetadataArray, TensorInfo};

const F32: u32 = 0;
const Q4_0: u32 = 2;

#[track_caller]
fn assert_msg(err: &GgufError, parts: &[&str]) {
    let msg = err.to_string();
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
}

#[test]
fn bad_magic() {
    let err = GgufFile::from_bytes(b"PK\x03\x04rest".to_vec()).unwrap_err();
    assert!(matches!(&err, GgufError::NotGguf { magic, path: None } if magic == b"PK\x03\x04"));
    assert_eq!(err.to_string(), "not a GGUF file (magic \"PK\\x03\\x04\")");
    for short in [&b""[..], b"G", b"GGU", b"GGUf"] {
        let err = GgufFile::from_bytes(short.to_vec()).unwrap_err();
        assert!(matches!(err, GgufError::NotGguf { .. }), "{err}");
    }
}

#[test]
fn unsupported_versions() {
    let err = Raw::header(1, 0, 0).err();
    assert!(matches!(err, GgufError::UnsupportedVersion(1)));
    assert_msg(&err, &["GGUF version 1 is not supported", "32-bit counts"]);
    let err = Raw::header(4, 0, 0).err();
    assert_eq!(
        err.to_string(),
        "unsupported GGUF version 4; supported versions: 2, 3"
    );
    let err = Raw::header(0, 0, 0).err();
    assert!(matches!(err, GgufError::UnsupportedVersion(0)));
    let err = Raw::header(3u32.swap_bytes(), 0, 0).err();
    assert_msg(&err, &["big-endian"]);
}

/// A valid file with a bit of everything, used for truncation tests.
fn sample() -> Vec<u8> {
    GgufWriter::new()
        .alignment(16)
        .kv("general.architecture", "llama")
        .kv("n", 7u32)
        .kv("tokens", vec!["a", "bc", "def"])
        .kv("scores", vec![1.0f32, 2.0])
        .kv(
            "nested",
            MetadataArray::Array(vec![MetadataArray::U8(vec![1]), MetadataArray::I64(vec![])]),
        )
        .tensor_f32("a", &[2], &[1.0, 2.0])
        .tensor("b", &[32], GgmlType::Q4_0, vec![0; 18])
        .tensor("c", &[256], GgmlType::IQ2_XXS, vec![0; 66])
        .build()
}

#[test]
fn truncation_anywhere_is_an_error() {
    let full = sample();
    let f = GgufFile::from_bytes(full.clone()).unwrap();
    assert_eq!(f.tensors().len(), 3);
    let header_end = f.data_offset() as usize;
    for len in 0..full.len() {
        let err = GgufFile::from_bytes(full[..len].to_vec()).unwrap_err();
        let ok_kind = match &err {
            GgufError::NotGguf { .. } => len < 4,
            GgufError::Truncated { .. } | GgufError::TooLarge { .. } => len < header_end,
            GgufError::TensorOutOfBounds { .. } => len >= header_end - 16,
            _ => false,
        };
        assert!(ok_kind, "prefix of {len} bytes: unexpected {err:?}");
    }
}

#[test]
fn truncation_messages_say_what_and_where() {
    let full = sample();
    // Cut inside the string value of general.architecture: key at 24 (8 + 17
    // bytes), alignment entry first.
    let err = GgufFile::from_bytes(full[..20].to_vec()).unwrap_err();
    assert!(
        matches!(err, GgufError::Truncated { offset: 16, .. }),
        "{err:?}"
    );
    assert_msg(&err, &["metadata entry count", "byte offset 16"]);
    let err = Raw::header(3, 0, 1)
        .str("general.architecture")
        .u32(4)
        .bytes(&[1, 2])
        .err();
    assert!(
        matches!(err, GgufError::Truncated { offset: 56, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "file truncated: value of metadata key 'general.architecture' at byte offset 56 \
         extends past the end of the data"
    );
}

#[test]
fn absurd_counts_and_lengths() {
    let huge = 1u64 << 60;
    let err = Raw::header(3, huge, 0).err();
    assert!(
        matches!(err, GgufError::TooLarge { value, offset: 8, .. } if value == huge),
        "{err:?}"
    );
    assert_msg(&err, &["tensor count", "1152921504606846976"]);
    let err = Raw::header(3, 0, huge).err();
    assert!(
        matches!(err, GgufError::TooLarge { offset: 16, .. }),
        "{err:?}"
    );
    assert_msg(&err, &["metadata entry count"]);
    let err = Raw::header(3, u64::MAX, u64::MAX).err();
    assert!(matches!(err, GgufError::TooLarge { .. }));

    // Key length.
    let err = Raw::header(3, 0, 1).u64(huge).bytes(b"abc").zeros(64).err();
    assert!(
        matches!(err, GgufError::TooLarge { offset: 24, .. }),
        "{err:?}"
    );
    assert_msg(&err, &["length of key of metadata entry 0"]);
    // String value length.
    let err = Raw::header(3, 0, 1)
        .str("k")
        .u32(8)
        .u64(huge)
        .zeros(64)
        .err();
    assert!(matches!(err, GgufError::TooLarge { .. }), "{err:?}");
    assert_msg(&err, &["value of metadata key 'k'"]);
    // Array lengths, for every element type.
    for elem in [0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] {
        for n in [huge, u64::MAX, 1 << 32] {
            let err = Raw::header(3, 0, 1)
                .str("arr")
                .u32(9)
                .u32(elem)
                .u64(n)
                .zeros(100)
                .err();
            assert!(matches!(err, GgufError::TooLarge { .. }), "{elem}: {err:?}");
            assert_msg(&err, &["length of array 'arr'"]);
        }
    }
    // String element length inside an array.
    let err = Raw::header(3, 0, 1)
        .str("toks")
        .u32(9)
        .u32(8)
        .u64(2)
        .str("ok")
        .u64(huge)
        .zeros(32)
        .err();
    assert_msg(&err, &["element 1 of array 'toks'"]);
    // Tensor name length.
    let err = Raw::header(3, 1, 0).u64(huge).zeros(64).err();
    assert_msg(&err, &["name of tensor 0"]);
}

#[test]
fn unknown_value_types() {
    let err = Raw::header(3, 0, 1).str("k").u32(13).zeros(16).err();
    assert!(
        matches!(&err, GgufError::UnknownValueType { key, type_id: 13, offset: 33 } if key == "k"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "unknown metadata value type 13 for key 'k' at byte offset 33"
    );
    let err = Raw::header(3, 0, 1)
        .str("k")
        .u32(9)
        .u32(u32::MAX)
        .u64(0)
        .err();
    assert!(matches!(
        err,
        GgufError::UnknownValueType {
            type_id: u32::MAX,
            ..
        }
    ));
}

#[test]
fn nesting_depth_is_bounded() {
    // depth levels of arrays, innermost an empty u8 array.
    fn nested(depth: usize) -> Raw {
        let mut r = Raw::header(3, 0, 1).str("deep").u32(9);
        for _ in 1..depth {
            r = r.u32(9).u64(1);
        }
        r.u32(0).u64(0)
    }
    let f = nested(4).parse().unwrap();
    assert_eq!(f.metadata().get_array("deep").unwrap().len(), 1);
    let err = nested(5).err();
    assert!(
        matches!(err, GgufError::NestingTooDeep { max_depth: 4, .. }),
        "{err:?}"
    );
    assert_msg(&err, &["'deep'"]);
    let err = nested(100_000).err();
    assert!(matches!(err, GgufError::NestingTooDeep { .. }));
}

#[test]
fn duplicates() {
    let err = Raw::header(3, 0, 2).kv("a", 1u8).kv("a", 2u8).err();
    assert!(
        matches!(&err, GgufError::DuplicateKey { key, offset: 38 } if key == "a"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "duplicate metadata key 'a' at byte offset 38"
    );
    let err = GgufWriter::new()
        .tensor_f32("w", &[1], &[1.0])
        .tensor_f32("w", &[1], &[2.0])
        .build();
    let err = GgufFile::from_bytes(err).unwrap_err();
    assert!(matches!(&err, GgufError::DuplicateTensor { tensor, .. } if tensor == "w"));
    assert_msg(&err, &["duplicate tensor name 'w'"]);
}

#[test]
fn invalid_utf8() {
    let err = Raw::header(3, 0, 1)
        .u64(2)
        .bytes(&[b'k', 0xC3])
        .u32(0)
        .bytes(&[0])
        .err();
    assert!(
        matches!(err, GgufError::InvalidUtf8 { offset: 33, .. }),
        "{err:?}"
    );
    assert_msg(&err, &["key of metadata entry 0"]);
    let err = Raw::header(3, 0, 1)
        .str("k")
        .u32(8)
        .u64(1)
        .bytes(&[0xFF])
        .err();
    assert_msg(&err, &["invalid UTF-8", "value of metadata key 'k'"]);
    let err = Raw::header(3, 0, 1)
        .str("k")
        .u32(9)
        .u32(8)
        .u64(1)
        .u64(1)
        .bytes(&[0x80])
        .err();
    assert_msg(&err, &["invalid UTF-8", "element 0 of array 'k'"]);
    let err = Raw::header(3, 1, 0)
        .u64(1)
        .bytes(&[0xFE])
        .u32(1)
        .u64(1)
        .u32(F32)
        .u64(0)
        .err();
    assert_msg(&err, &["invalid UTF-8", "name of tensor 0"]);
}

/// One tensor with the given info, padding and `data_len` bytes of data.
fn one_tensor(dims: &[u64], type_id: u32, offset: u64, data_len: usize) -> Raw {
    Raw::header(3, 1, 0)
        .tensor("t", dims, type_id, offset)
        .pad(32)
        .zeros(data_len)
}

#[test]
fn tensor_shapes() {
    assert!(one_tensor(&[4, 2], F32, 0, 32).parse().is_ok());
    assert!(
        one_tensor(&[], F32, 0, 4).parse().is_ok(),
        "a scalar has 1 element"
    );

    let err = one_tensor(&[1, 1, 1, 1, 1], F32, 0, 4).err();
    assert!(matches!(
        err,
        GgufError::TooManyDims {
            n_dims: 5,
            max: 4,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "tensor 't' has 5 dimensions, at most 4 are supported"
    );
    let err = Raw::header(3, 1, 0).str("t").u32(u32::MAX).zeros(100).err();
    assert!(matches!(err, GgufError::TooManyDims { .. }));

    let err = one_tensor(&[4, 0], F32, 0, 32).err();
    assert!(matches!(err, GgufError::InvalidShape { .. }));
    assert_eq!(
        err.to_string(),
        "tensor 't' has invalid shape [4, 0]: dimension 1 is zero"
    );

    let err = one_tensor(&[1 << 32, 1 << 32], F32, 0, 32).err();
    assert_msg(&err, &["element count overflows"]);
    let err = one_tensor(&[u64::MAX, 2, 2, 2], F32, 0, 32).err();
    assert_msg(&err, &["element count overflows"]);
    let err = one_tensor(&[1 << 62], F32, 0, 32).err();
    assert_msg(&err, &["byte size overflows"]);

    let err = one_tensor(&[33], Q4_0, 0, 64).err();
    assert_eq!(
        err.to_string(),
        "tensor 't' has invalid shape [33]: dims[0] = 33 is not a multiple of the block size 32 of type Q4_0"
    );
    let err = one_tensor(&[16, 2], Q4_0, 0, 64).err();
    assert!(
        matches!(err, GgufError::InvalidShape { .. }),
        "row of half a block"
    );
    assert!(one_tensor(&[], Q4_0, 0, 64).parse().is_err());
}

#[test]
fn unknown_tensor_types() {
    for id in [4, 5, 31, 32, 33, 36, 37, 38, 40, u32::MAX] {
        let err = one_tensor(&[32], id, 0, 256).err();
        assert!(
            matches!(&err, GgufError::UnknownTensorType { tensor, id: i } if tensor == "t" && *i == id),
            "{err:?}"
        );
    }
    assert_eq!(
        one_tensor(&[32], 4, 0, 256).err().to_string(),
        "tensor 't' has unknown ggml type id 4"
    );
}

#[test]
fn tensor_offsets() {
    // Past the end of the file.
    let err = one_tensor(&[8], F32, 32, 32).err();
    assert!(
        matches!(
            err,
            GgufError::TensorOutOfBounds {
                size: 32,
                file_len: 96,
                ..
            }
        ),
        "{err:?}"
    );
    assert_msg(
        &err,
        &["tensor 't' data", "lies outside the file (96 bytes)"],
    );
    // Data ends one byte after the end.
    assert!(matches!(
        one_tensor(&[8], F32, 0, 31).err(),
        GgufError::TensorOutOfBounds { .. }
    ));
    // Overflowing offsets.
    for off in [!31u64, 1 << 63, !63] {
        let err = one_tensor(&[8], F32, off, 32).err();
        assert!(
            matches!(err, GgufError::TensorOutOfBounds { .. }),
            "{off}: {err:?}"
        );
    }
    // Misaligned.
    let err = one_tensor(&[1], F32, 4, 64).err();
    assert!(matches!(
        err,
        GgufError::MisalignedTensor {
            offset: 4,
            alignment: 32,
            ..
        }
    ));
    assert_msg(&err, &["tensor 't'", "offset 4", "alignment 32"]);
}

#[test]
fn overlapping_tensors() {
    let err = Raw::header(3, 2, 0)
        .tensor("a", &[16], F32, 0)
        .tensor("b", &[8], F32, 32)
        .pad(32)
        .zeros(128)
        .err();
    assert!(
        matches!(&err, GgufError::TensorOverlap { tensor, other, .. } if tensor == "b" && other == "a"),
        "{err:?}"
    );
    // Identical offsets, in any order.
    let err = Raw::header(3, 2, 0)
        .tensor("a", &[8], F32, 64)
        .tensor("b", &[8], F32, 64)
        .pad(32)
        .zeros(128)
        .err();
    assert!(matches!(err, GgufError::TensorOverlap { .. }));
    // Adjacent is fine, and order in the file need not follow offsets.
    let f = Raw::header(3, 2, 0)
        .tensor("a", &[8], F32, 32)
        .tensor("b", &[8], F32, 0)
        .pad(32)
        .zeros(64)
        .parse()
        .unwrap();
    assert_eq!(
        f.tensor("b").unwrap().offset + 32,
        f.tensor("a").unwrap().offset
    );
}

#[test]
fn bad_alignment() {
    for a in [0u32, 3, 48, u32::MAX] {
        let err = Raw::header(3, 0, 1).kv("general.alignment", a).err();
        assert!(
            matches!(err, GgufError::BadAlignment(x) if x == a as u64),
            "{a}: {err:?}"
        );
    }
    assert_eq!(
        Raw::header(3, 0, 1)
            .kv("general.alignment", 0u32)
            .err()
            .to_string(),
        "general.alignment must be a power of two from 1 to 2^31, got 0"
    );
    let err = Raw::header(3, 0, 1).kv("general.alignment", "32").err();
    assert!(matches!(err, GgufError::WrongType { .. }), "{err:?}");
    let err = Raw::header(3, 0, 1).kv("general.alignment", -32i32).err();
    assert!(matches!(err, GgufError::OutOfRange { .. }), "{err:?}");
    // Alignments beyond u32 (the type GGUF specifies) are rejected.
    let err = Raw::header(3, 0, 1)
        .kv("general.alignment", 1u64 << 63)
        .err();
    assert!(matches!(err, GgufError::BadAlignment(_)), "{err:?}");
    // Other integer types are accepted.
    let f = Raw::header(3, 0, 1)
        .kv("general.alignment", 8u64)
        .parse()
        .unwrap();
    assert_eq!(f.alignment(), 8);
}

#[test]
fn foreign_tensor_info_does_not_panic() {
    let f = GgufFile::from_bytes(sample()).unwrap();
    let bogus = TensorInfo {
        name: "bogus".into(),
        dims: vec![u64::MAX, u64::MAX],
        ggml_type: GgmlType::F32,
        offset: u64::MAX - 3,
        size_bytes: 1024,
    };
    assert_eq!(bogus.n_elements(), u64::MAX);
    assert!(matches!(
        f.tensor_data(&bogus),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
    let bogus = TensorInfo {
        offset: 0,
        size_bytes: u64::MAX,
        ..bogus
    };
    assert!(matches!(
        f.raw_tensor_data(&bogus),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
}
