//! Parses arbitrary bytes as GGUF, then touches everything a caller could.
//! Any panic (including arithmetic overflow: cargo fuzz enables debug
//! assertions), abort or excessive allocation is a bug.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_formats::gguf::GgufFile;

fuzz_target!(|data: &[u8]| {
    let file = match GgufFile::from_bytes(data.to_vec()) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let m = file.metadata();
    assert_eq!(m.iter().count(), m.len());
    for (key, value) in m.iter() {
        // Identity, not ==: values may hold NaN.
        assert!(m.get(key).is_some_and(|v| std::ptr::eq(v, value)));
        let _ = value.to_string();
        let _ = format!("{value:#}");
        let _ = value.type_name();
        let _ = m.get_str(key).map_err(|e| e.to_string());
        let _ = m.get_u32(key).map_err(|e| e.to_string());
        let _ = m.get_u64(key);
        let _ = m.get_i64(key);
        let _ = m.get_f32(key);
        let _ = m.get_bool(key);
        let _ = m.get_str_array(key);
        let _ = m.get_f32_array(key);
        let _ = m.get_i32_array(key).map_err(|e| e.to_string());
        let _ = m.get_u32_array(key);
        let _ = m.get_u32_per_layer(key, 3);
    }
    assert!(file.alignment().is_power_of_two());
    assert_eq!(file.data_offset() % file.alignment(), 0);
    let _ = file.check_supported().map_err(|e| e.to_string());
    for t in file.tensors() {
        assert!(file.tensor(&t.name).is_some_and(|x| std::ptr::eq(x, t)));
        let raw = file
            .raw_tensor_data(t)
            .expect("parsed tensors lie inside the file");
        assert_eq!(raw.len() as u64, t.size_bytes);
        assert_eq!(t.offset % file.alignment(), 0);
        match file.tensor_data(t) {
            Ok(d) => assert_eq!(d, raw),
            Err(e) => {
                assert!(!t.ggml_type.is_supported_by_candle());
                let _ = e.to_string();
            }
        }
        assert_eq!(t.shape().len(), t.dims.len());
        assert!(t.n_elements() > 0);
    }
});
