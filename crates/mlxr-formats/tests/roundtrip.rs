//! Files built with the in-memory writer parse back to exactly what was written.

use mlxr_formats::gguf::writer::GgufWriter;
use mlxr_formats::gguf::{GgmlType, GgufError, GgufFile, MetadataArray, MetadataValue};

fn all_value_types(w: GgufWriter) -> GgufWriter {
    w.kv("general.architecture", "llama")
        .kv("t.u8", 200u8)
        .kv("t.i8", -100i8)
        .kv("t.u16", 60000u16)
        .kv("t.i16", -30000i16)
        .kv("t.u32", 4_000_000_000u32)
        .kv("t.i32", -2_000_000_000i32)
        .kv("t.u64", u64::MAX)
        .kv("t.i64", i64::MIN)
        .kv("t.f32", 1.5f32)
        .kv("t.f64", -2.25f64)
        .kv("t.bool", true)
        .kv("t.string", "héllo\nworld")
        .kv("t.empty_string", "")
        .kv("a.u8", vec![1u8, 2, 3])
        .kv("a.i8", vec![-1i8, 0, 1])
        .kv("a.u16", vec![1u16, 65535])
        .kv("a.i16", vec![-32768i16, 32767])
        .kv("a.u32", vec![7u32, 8, 9])
        .kv("a.i32", vec![-7i32, 8])
        .kv("a.u64", vec![u64::MAX, 0])
        .kv("a.i64", vec![i64::MIN, i64::MAX])
        .kv("a.f32", vec![0.5f32, -1e-6, f32::INFINITY])
        .kv("a.f64", vec![0.25f64, 1e300])
        .kv("a.bool", vec![true, false, true])
        .kv("a.string", vec!["<s>", "", "ĠThe"])
        .kv("a.empty", Vec::<u32>::new())
        .kv(
            "a.nested",
            MetadataArray::Array(vec![
                MetadataArray::U32(vec![1, 2]),
                MetadataArray::String(vec!["x".into()]),
                MetadataArray::Array(vec![MetadataArray::Array(vec![MetadataArray::F32(vec![
                    3.0,
                ])])]),
                MetadataArray::Array(vec![]),
            ]),
        )
}

/// Deterministic filler bytes.
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn with_tensors(w: GgufWriter) -> GgufWriter {
    w.tensor_f32("f32", &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .tensor("f16", &[5], GgmlType::F16, bytes(10, 1))
        .tensor("q4_0", &[64, 2], GgmlType::Q4_0, bytes(4 * 18, 2))
        .tensor("q8_0", &[32], GgmlType::Q8_0, bytes(34, 3))
        .tensor("q4_k", &[256, 3], GgmlType::Q4_K, bytes(3 * 144, 4))
        .tensor("q6_k", &[512, 1, 1, 2], GgmlType::Q6_K, bytes(4 * 210, 5))
        .tensor(
            "blk.0.attn_q.weight",
            &[256, 2],
            GgmlType::IQ2_XXS,
            bytes(2 * 66, 6),
        )
        .tensor("bf16", &[7], GgmlType::BF16, bytes(14, 7))
        .tensor("mxfp4", &[32, 3], GgmlType::MXFP4, bytes(3 * 17, 8))
        .tensor("i32", &[3], GgmlType::I32, bytes(12, 9))
}

fn check_all_value_types(f: &GgufFile) {
    let m = f.metadata();
    assert_eq!(m.get("t.u8"), Some(&MetadataValue::U8(200)));
    assert_eq!(m.get("t.i8"), Some(&MetadataValue::I8(-100)));
    assert_eq!(m.get("t.u16"), Some(&MetadataValue::U16(60000)));
    assert_eq!(m.get("t.i16"), Some(&MetadataValue::I16(-30000)));
    assert_eq!(m.get("t.u32"), Some(&MetadataValue::U32(4_000_000_000)));
    assert_eq!(m.get("t.i32"), Some(&MetadataValue::I32(-2_000_000_000)));
    assert_eq!(m.get("t.u64"), Some(&MetadataValue::U64(u64::MAX)));
    assert_eq!(m.get("t.i64"), Some(&MetadataValue::I64(i64::MIN)));
    assert_eq!(m.get("t.f32"), Some(&MetadataValue::F32(1.5)));
    assert_eq!(m.get("t.f64"), Some(&MetadataValue::F64(-2.25)));
    assert_eq!(m.get("t.bool"), Some(&MetadataValue::Bool(true)));
    assert_eq!(m.get_str("t.string").unwrap(), "héllo\nworld");
    assert_eq!(m.get_str("t.empty_string").unwrap(), "");
    assert_eq!(
        m.get_array("a.u8").unwrap(),
        &MetadataArray::U8(vec![1, 2, 3])
    );
    assert_eq!(
        m.get_array("a.i8").unwrap(),
        &MetadataArray::I8(vec![-1, 0, 1])
    );
    assert_eq!(
        m.get_array("a.u16").unwrap(),
        &MetadataArray::U16(vec![1, 65535])
    );
    assert_eq!(
        m.get_array("a.i16").unwrap(),
        &MetadataArray::I16(vec![-32768, 32767])
    );
    assert_eq!(m.get_u32_array("a.u32").unwrap(), vec![7, 8, 9]);
    assert_eq!(m.get_i32_array("a.i32").unwrap(), vec![-7, 8]);
    assert_eq!(
        m.get_array("a.u64").unwrap(),
        &MetadataArray::U64(vec![u64::MAX, 0])
    );
    assert_eq!(
        m.get_array("a.i64").unwrap(),
        &MetadataArray::I64(vec![i64::MIN, i64::MAX])
    );
    assert_eq!(
        m.get_f32_array("a.f32").unwrap(),
        &[0.5, -1e-6, f32::INFINITY]
    );
    assert_eq!(
        m.get_array("a.f64").unwrap(),
        &MetadataArray::F64(vec![0.25, 1e300])
    );
    assert_eq!(
        m.get_array("a.bool").unwrap(),
        &MetadataArray::Bool(vec![true, false, true])
    );
    assert_eq!(m.get_str_array("a.string").unwrap(), ["<s>", "", "ĠThe"]);
    assert!(m.get_array("a.empty").unwrap().is_empty());
    let nested = m.get_array("a.nested").unwrap();
    assert_eq!(nested.len(), 4);
    assert_eq!(nested.type_name(), "array[array]");
    let MetadataArray::Array(items) = nested else {
        panic!("not nested")
    };
    assert_eq!(items[0], MetadataArray::U32(vec![1, 2]));
    assert_eq!(items[1], MetadataArray::String(vec!["x".into()]));
    assert_eq!(
        items[2],
        MetadataArray::Array(vec![MetadataArray::Array(vec![MetadataArray::F32(vec![
            3.0
        ])])])
    );
    assert_eq!(items[3], MetadataArray::Array(vec![]));
}

fn check_tensors(f: &GgufFile) {
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "f32",
            "f16",
            "q4_0",
            "q8_0",
            "q4_k",
            "q6_k",
            "blk.0.attn_q.weight",
            "bf16",
            "mxfp4",
            "i32"
        ]
    );
    let t = f.tensor("f32").unwrap();
    assert_eq!(t.dims, [3, 2]);
    assert_eq!(t.shape(), [2, 3]);
    assert_eq!(t.n_elements(), 6);
    assert_eq!(t.size_bytes, 24);
    let data = f.tensor_data(t).unwrap();
    let vals: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    for (name, ty, size, seed) in [
        ("f16", GgmlType::F16, 10, 1),
        ("q4_0", GgmlType::Q4_0, 72, 2),
        ("q8_0", GgmlType::Q8_0, 34, 3),
        ("q4_k", GgmlType::Q4_K, 432, 4),
        ("q6_k", GgmlType::Q6_K, 840, 5),
        ("bf16", GgmlType::BF16, 14, 7),
    ] {
        let t = f.tensor(name).unwrap();
        assert_eq!((t.ggml_type, t.size_bytes), (ty, size), "{name}");
        assert_eq!(t.offset % f.alignment(), 0, "{name}");
        assert!(t.offset >= f.data_offset());
        assert_eq!(
            f.tensor_data(t).unwrap(),
            bytes(size as usize, seed),
            "{name}"
        );
    }
    assert_eq!(f.tensor("q6_k").unwrap().shape(), [2, 1, 1, 512]);

    // Types candle cannot load: parse fine, raw bytes available, tensor_data refuses.
    for (name, ty, size, seed) in [
        ("blk.0.attn_q.weight", GgmlType::IQ2_XXS, 132, 6),
        ("mxfp4", GgmlType::MXFP4, 51, 8),
        ("i32", GgmlType::I32, 12, 9),
    ] {
        let t = f.tensor(name).unwrap();
        assert_eq!((t.ggml_type, t.size_bytes), (ty, size), "{name}");
        assert_eq!(f.raw_tensor_data(t).unwrap(), bytes(size as usize, seed));
        let err = f.tensor_data(t).unwrap_err();
        assert!(
            matches!(err, GgufError::UnsupportedTensorType { .. }),
            "{err}"
        );
    }
    let err = f.check_supported().unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 'blk.0.attn_q.weight' has type IQ2_XXS, which MLXR cannot load yet \
         (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, BF16)"
    );
    assert!(f.tensor("missing").is_none());
}

#[test]
fn v2_and_v3_with_every_value_type_and_alignment() {
    for version in [2, 3] {
        for alignment in [None, Some(1), Some(8), Some(32), Some(64), Some(4096)] {
            let mut w = GgufWriter::new().version(version);
            if let Some(a) = alignment {
                w = w.alignment(a);
            }
            let bytes = with_tensors(all_value_types(w)).build();
            let f = GgufFile::from_bytes(bytes.clone())
                .unwrap_or_else(|e| panic!("v{version} align {alignment:?}: {e}"));
            assert_eq!(f.version(), version);
            assert_eq!(f.alignment(), alignment.unwrap_or(32));
            assert_eq!(f.data_offset() % f.alignment(), 0);
            assert_eq!(f.file_len(), bytes.len() as u64);
            assert_eq!(f.as_bytes(), &bytes[..]);
            let expected_kvs = 28 + alignment.is_some() as usize;
            assert_eq!(f.metadata().len(), expected_kvs);
            check_all_value_types(&f);
            check_tensors(&f);
        }
    }
}

#[test]
fn metadata_keeps_file_order() {
    let f = GgufFile::from_bytes(all_value_types(GgufWriter::new()).build()).unwrap();
    let keys: Vec<&str> = f.metadata().keys().collect();
    assert_eq!(keys[..3], ["general.architecture", "t.u8", "t.i8"]);
    assert_eq!(keys.last(), Some(&"a.nested"));
    let iter_keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k).collect();
    assert_eq!(keys, iter_keys);
    assert!(f.tensors().is_empty());
    assert!(f.check_supported().is_ok());
}

#[test]
fn no_metadata_no_tensors() {
    let f = GgufFile::from_bytes(GgufWriter::new().build()).unwrap();
    assert!(f.metadata().is_empty());
    assert!(f.tensors().is_empty());
    assert_eq!(f.alignment(), 32);
    // The writer pads the header to the alignment...
    assert_eq!(f.file_len(), 32);
    // ...but a file without tensors needs no padding at all.
    let mut bytes = GgufWriter::new().build();
    bytes.truncate(24);
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!((f.file_len(), f.data_offset()), (24, 32));
}

#[test]
fn typed_getters_convert_and_report_errors() {
    let f = GgufFile::from_bytes(all_value_types(GgufWriter::new()).build()).unwrap();
    let m = f.metadata();
    assert_eq!(m.get_u32("t.u8").unwrap(), 200);
    assert_eq!(m.get_u32("t.u16").unwrap(), 60000);
    assert_eq!(m.get_u64("t.u64").unwrap(), u64::MAX);
    assert_eq!(m.get_i64("t.i8").unwrap(), -100);
    assert_eq!(m.get_i64("t.i64").unwrap(), i64::MIN);
    assert_eq!(m.get_f32("t.f64").unwrap(), -2.25);
    assert_eq!(m.get_f32("t.u32").unwrap(), 4e9);
    assert!(m.get_bool("t.bool").unwrap());
    assert_eq!(m.get_i32_array("a.u16").unwrap(), vec![1, 65535]);
    assert_eq!(
        m.get_u32_array("a.i32").unwrap_err().to_string(),
        "metadata key 'a.i32[0]' has value -7, which does not fit in array[u32]"
    );

    let err = m.get_u32("t.i8").unwrap_err();
    assert!(matches!(err, GgufError::OutOfRange { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "metadata key 't.i8' has value -100, which does not fit in u32"
    );
    assert!(matches!(
        m.get_u32("t.u64"),
        Err(GgufError::OutOfRange { .. })
    ));
    assert!(matches!(
        m.get_u64("t.i64"),
        Err(GgufError::OutOfRange { .. })
    ));
    assert!(matches!(
        m.get_i64("t.u64"),
        Err(GgufError::OutOfRange { .. })
    ));

    let err = m.get_str("t.u32").unwrap_err();
    assert!(
        matches!(&err, GgufError::WrongType { key, expected: "string", found: "u32" } if key == "t.u32")
    );
    assert_eq!(
        err.to_string(),
        "metadata key 't.u32' has type u32, expected string"
    );
    let err = m.get_u32("missing.key").unwrap_err();
    assert!(matches!(&err, GgufError::MissingKey { key } if key == "missing.key"));
    assert_eq!(err.to_string(), "missing metadata key 'missing.key'");
    assert!(matches!(
        m.get_f32("t.string"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        m.get_bool("t.u8"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        m.get_array("t.u8"),
        Err(GgufError::WrongType { .. })
    ));
    let err = m.get_str_array("a.f32").unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata key 'a.f32' has type array[f32], expected array[string]"
    );
    assert!(matches!(
        m.get_f32_array("a.f64"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        m.get_u32_array("a.string"),
        Err(GgufError::WrongType { .. })
    ));

    assert_eq!(m.opt_str("general.architecture").unwrap(), Some("llama"));
    assert_eq!(m.opt_str("nope").unwrap(), None);
    assert_eq!(m.opt_u32("nope").unwrap(), None);
    assert_eq!(m.opt_u64("t.u32").unwrap(), Some(4_000_000_000));
    assert_eq!(m.opt_f32("t.f32").unwrap(), Some(1.5));
    assert_eq!(m.opt_bool("t.bool").unwrap(), Some(true));
    assert_eq!(m.opt_i64("nope").unwrap(), None);
    assert!(
        m.opt_bool("t.u8").is_err(),
        "wrong type is an error even for opt_"
    );

    assert_eq!(m.get_u32_per_layer("t.u8", 3).unwrap(), vec![200; 3]);
    assert_eq!(m.get_u32_per_layer("a.u32", 3).unwrap(), vec![7, 8, 9]);
    assert!(m.get_u32_per_layer("a.u32", 4).is_err());
}

#[test]
fn display_abbreviates() {
    let long: Vec<u32> = (0..100).collect();
    let f = GgufFile::from_bytes(
        all_value_types(GgufWriter::new())
            .kv("long", long)
            .kv("long.str", "x".repeat(500))
            .build(),
    )
    .unwrap();
    let m = f.metadata();
    assert_eq!(m.get("t.u32").unwrap().to_string(), "4000000000");
    assert_eq!(m.get("t.string").unwrap().to_string(), "\"héllo\\nworld\"");
    assert_eq!(m.get("t.bool").unwrap().to_string(), "true");
    assert_eq!(
        m.get("long").unwrap().to_string(),
        "[0, 1, 2, 3, 4, 5, 6, 7, ... (100 items)]"
    );
    assert_eq!(
        format!("{:#}", m.get("long").unwrap())
            .matches(", ")
            .count(),
        99
    );
    assert_eq!(
        m.get("a.string").unwrap().to_string(),
        "[\"<s>\", \"\", \"ĠThe\"]"
    );
    assert_eq!(
        m.get("a.nested").unwrap().to_string(),
        "[[1, 2], [\"x\"], [[[3]]], []]"
    );
    let s = m.get("long.str").unwrap().to_string();
    assert!(s.ends_with("... (500 chars)") && s.len() < 200, "{s}");
    assert_eq!(format!("{:#}", m.get("long.str").unwrap()).len(), 502);
    assert_eq!(m.get("a.nested").unwrap().type_name(), "array[array]");
    assert_eq!(m.get("t.f64").unwrap().type_name(), "f64");
}

#[test]
fn open_memory_maps_a_file() {
    let dir = std::env::temp_dir().join(format!("mlxr-formats-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.gguf");
    let bytes = with_tensors(all_value_types(GgufWriter::new().alignment(64))).build();
    std::fs::write(&path, &bytes).unwrap();
    let f = GgufFile::open(&path).unwrap();
    check_all_value_types(&f);
    check_tensors(&f);
    // Released pages come back from the file as they were.
    for info in f.tensors() {
        f.release(info);
    }
    check_tensors(&f);
    assert_eq!(f.as_bytes(), &bytes[..]);
    let clone = f.clone();
    drop(f);
    assert_eq!(clone.as_bytes(), &bytes[..]);
    assert!(format!("{clone:?}").contains("tensors: 10"));

    let zip = dir.join("model.zip");
    std::fs::write(&zip, b"PK\x03\x04rest of a zip").unwrap();
    let err = GgufFile::open(&zip).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "not a GGUF file (magic \"PK\\x03\\x04\"): {}",
            zip.display()
        )
    );
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        GgufFile::open(&empty),
        Err(GgufError::NotGguf { .. })
    ));
    let err = GgufFile::open(dir.join("absent.gguf")).unwrap_err();
    assert!(matches!(err, GgufError::Io { .. }));
    assert!(err.to_string().contains("absent.gguf"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn is_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<GgufFile>();
    assert_send_sync::<GgufError>();
}
