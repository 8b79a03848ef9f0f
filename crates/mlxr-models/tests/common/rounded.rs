//! Tiny-model fixtures rewritten with every float tensor rounded to F16 or
//! BF16 (the 16-bit weight tests on the CPU and the GPU).

use std::path::Path;

use safetensors::Dtype;

/// The model folder `src` with every float tensor rounded to `dtype`,
/// stored as `dtype` (`half_dir`) and as F32 (`f32_dir`); shards stay
/// shards.
pub fn write_rounded(src: &Path, dtype: Dtype, half_dir: &Path, f32_dir: &Path) {
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let file_name = path.file_name().unwrap();
        if path.extension().is_some_and(|e| e == "safetensors") {
            let (half, wide) = rounded(&std::fs::read(&path).unwrap(), dtype);
            for (dir, list) in [(half_dir, half), (f32_dir, wide)] {
                let views: Vec<_> = list
                    .iter()
                    .map(|(n, dtype, shape, data)| {
                        let view =
                            safetensors::tensor::TensorView::new(*dtype, shape.clone(), data);
                        (n.clone(), view.unwrap())
                    })
                    .collect();
                safetensors::serialize_to_file(views, None, &dir.join(file_name)).unwrap();
            }
        } else if path.is_file() {
            for dir in [half_dir, f32_dir] {
                std::fs::copy(&path, dir.join(file_name)).unwrap();
            }
        }
    }
}

type Tensors = Vec<(String, Dtype, Vec<usize>, Vec<u8>)>;

/// The float tensors of one safetensors file rounded to `dtype`: as
/// `dtype`, and widened back to F32 (the qwen2 fixture mixes F32 and F16).
fn rounded(bytes: &[u8], dtype: Dtype) -> (Tensors, Tensors) {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let mut half = Vec::new();
    let mut wide = Vec::new();
    for (n, v) in file.tensors() {
        let values: Vec<f32> = match v.dtype() {
            Dtype::F32 => v
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => v
                .data()
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => panic!("{n}: {other:?}"),
        };
        let (mut h, mut w) = (Vec::new(), Vec::new());
        for x in values {
            let (bits, back) = match dtype {
                Dtype::F16 => {
                    let h = half::f16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                }
                _ => {
                    let h = half::bf16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                }
            };
            h.extend(bits.to_le_bytes());
            w.extend(back.to_le_bytes());
        }
        half.push((n.clone(), dtype, v.shape().to_vec(), h));
        wide.push((n, Dtype::F32, v.shape().to_vec(), w));
    }
    (half, wide)
}
