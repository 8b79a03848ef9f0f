//! MLX's floating-point quantization modes, as `mlx` 0.32.4 writes them
//! (`mx.quantize(w, mode=...)`, `nn.QuantizedLinear` / `QuantizedEmbedding`,
//! mlx-lm's `quantize_model`), checked against `mx.dequantize` by
//! scripts/fixtures/fp8-nf4.py:
//!
//! | mode    | group | code                 | scale (`U8`, per group)   |
//! |---------|-------|----------------------|---------------------------|
//! | `mxfp4` | 32    | E2M1, 8 a `U32` word | E8M0: `2^(e − 127)`       |
//! | `mxfp8` | 32    | E4M3, 4 a `U32` word | E8M0                      |
//! | `nvfp4` | 16    | E2M1, 8 a `U32` word | E4M3 (all 256 bytes, sign |
//! |         |       |                      | and NaN `0x7f` included)  |
//!
//! - `{module}.weight` is `U32 [out, in·bits/32]`, the codes packed from the
//!   least significant bits (element `8w + i` of a 4-bit row in bits
//!   `4i..4i+4` of word `w`): in the file's little-endian bytes, byte `k`
//!   holds element `2k` in its low nibble and `2k + 1` in its high one
//!   (4-bit), or element `k` (8-bit). `{module}.scales` is `U8 [out,
//!   in/group]`; there are no `biases`. mlx fixes group and bits per mode
//!   (it refuses others).
//! - E2M1: sign bit 3, two exponent bits (bias 1), one mantissa bit: `0,
//!   0.5, 1, 1.5, 2, 3, 4, 6` and their negatives ([`E2M1`]). E4M3 is the
//!   `fn` variant (no infinities, `0x7f`/`0xff` NaN, 448 the largest).
//! - E8M0 byte `e` is `2^(e − 127)`: mlx decodes 0 as 2^−127 (an f32
//!   subnormal) and 255 as +inf (the OCP MX specification says NaN);
//!   [`e8m0_to_f32`] does the same.
//! - `w = code · scale` in f32, an exact product, so each value equals
//!   `mx.dequantize(..., dtype=mx.float32)` bit for bit (checked there over
//!   every scale byte but NaN ones and random codes). `mx.dequantize`'s default
//!   output is bfloat16, which rounds.
//! - No global scale: `mx.quantize` takes one for nvfp4 (`global_scale`),
//!   but `nn.QuantizedLinear` does not store it; mlx-lm keeps one only for
//!   MoE switch layers (`{module}.global_scale`), refused here.
//! - `config.json`: mlx-lm writes `quantization` and `quantization_config`
//!   alike, `{"group_size": 32, "bits": 4, "mode": "mxfp4"}` (mxfp8: 32/8,
//!   nvfp4: 16/4), plus `"<module>": {group_size, bits, mode}` entries for
//!   layers a quant predicate set apart; embeddings and an untied
//!   `lm_head` are quantized too.
//!
//! Loaded into the decoded-weight kernels the other formats use, codes kept
//! as stored: mxfp8 as an [`Fp8Weight`] (E4M3 codes, blocks `[1, 32]`), mxfp4
//! and nvfp4 as a [`Bnb4Weight`] (a 16-entry code book times a per-block
//! scale; the nibbles swapped to its high-first order). The scales are
//! widened to f32 at load (¾ bit a weight more at group 32, 1½ at 16).

use mlxr_formats::float8::Float8;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

use super::hf_quant::MlxMode;
use crate::backend::cpu::kernels::bnb4::Bnb4Weight;
use crate::backend::cpu::kernels::fp8::Fp8Weight;
use crate::ModelError;

/// The E2M1 (FP4) values by code.
pub const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// An E8M0 scale byte as mlx decodes it: `2^(e − 127)`, 0 the subnormal
/// 2^−127, 255 +inf.
pub fn e8m0_to_f32(e: u8) -> f32 {
    f32::from_bits(match e {
        0 => 0x0040_0000,
        e => u32::from(e) << 23,
    })
}

/// A floating-point-mode MLX matrix in the decoded-weight kernels' form.
#[derive(Debug)]
pub enum MlxFpWeight {
    /// mxfp8.
    Fp8(Box<Fp8Weight>),
    /// mxfp4, nvfp4.
    Fp4(Bnb4Weight),
}

/// The `[rows, cols]` matrix `{stem}` in `mode` (not affine) from its
/// `weight` and `scales` tensors, checked.
pub fn mlx_fp_weight(
    mode: MlxMode,
    stem: &str,
    rows: usize,
    cols: usize,
    weight: &TensorView<'_>,
    scales: &TensorView<'_>,
) -> Result<MlxFpWeight, ModelError> {
    let bad =
        |why: String| ModelError::Files(format!("MLX {} tensor '{stem}': {why}", mode.name()));
    let Some((group, bits)) = mode.fixed_layout() else {
        return Err(bad("affine matrices are not floating-point codes".into()));
    };
    if weight.dtype() != Dtype::U32 {
        return Err(bad(format!("weight is {:?}, expected U32", weight.dtype())));
    }
    if scales.dtype() != Dtype::U8 {
        return Err(bad(format!(
            "scales are {:?}, expected U8 ({} scale bytes)",
            scales.dtype(),
            if mode == MlxMode::Nvfp4 {
                "E4M3"
            } else {
                "E8M0"
            }
        )));
    }
    let want_words = [rows, cols * bits / 32];
    let want_scales = [rows, cols / group];
    if !cols.is_multiple_of(group) || weight.shape() != want_words || scales.shape() != want_scales
    {
        return Err(bad(format!(
            "shapes weight {:?}, scales {:?} do not fit [{rows}, {cols}] ({bits}-bit codes, \
             groups of {group}: expected {want_words:?} and {want_scales:?})",
            weight.shape(),
            scales.shape()
        )));
    }
    let (codes, scale_bytes) = (weight.data(), scales.data());
    match mode {
        MlxMode::Mxfp8 => Fp8Weight::new(
            Float8::E4M3,
            rows,
            cols,
            codes.to_vec(),
            scale_bytes.iter().map(|&e| e8m0_to_f32(e)).collect(),
            [1, group],
        )
        .map(|w| MlxFpWeight::Fp8(Box::new(w))),
        MlxMode::Mxfp4 | MlxMode::Nvfp4 => {
            let scale = if mode == MlxMode::Nvfp4 {
                let table = Float8::E4M3.table();
                scale_bytes.iter().map(|&b| table[b as usize]).collect()
            } else {
                scale_bytes.iter().map(|&e| e8m0_to_f32(e)).collect()
            };
            // MLX's low-nibble-first bytes in bitsandbytes' high-first order.
            let packed = codes.iter().map(|b| b.rotate_left(4)).collect();
            Bnb4Weight::new(rows, cols, group, packed, E2M1, scale).map(MlxFpWeight::Fp4)
        }
        MlxMode::Affine => unreachable!("no fixed layout"),
    }
    .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::kernels::decoded::RowDecode;

    #[test]
    fn e8m0_is_a_power_of_two_with_mlx_ends() {
        for e in 1..=254u8 {
            assert_eq!(e8m0_to_f32(e), 2f32.powi(i32::from(e) - 127), "{e}");
        }
        assert_eq!(e8m0_to_f32(0), 2f64.powi(-127) as f32);
        assert!(e8m0_to_f32(0) > 0.0 && !e8m0_to_f32(0).is_normal());
        assert_eq!(e8m0_to_f32(255), f32::INFINITY);
    }

    fn view<'a>(dtype: Dtype, shape: &[usize], data: &'a [u8]) -> TensorView<'a> {
        TensorView::new(dtype, shape.to_vec(), data).unwrap()
    }

    /// One row of 32 elements: word 0 holds elements 0..8 from the low
    /// nibble up, so `0x...21` is element 0 = code 1, element 1 = code 2.
    #[test]
    fn low_nibble_first_codes_times_the_group_scale() {
        let mut words = [0u8; 16];
        words[..4].copy_from_slice(&0xf8c0_7621_u32.to_le_bytes());
        let w = view(Dtype::U32, &[1, 4], &words);
        let s = view(Dtype::U8, &[1, 1], &[126]);
        let MlxFpWeight::Fp4(q) = mlx_fp_weight(MlxMode::Mxfp4, "m", 1, 32, &w, &s).unwrap() else {
            panic!("mxfp4 is 4-bit");
        };
        let row = q.dequantize();
        assert_eq!(&row[..8], &[0.25, 0.5, 2.0, 3.0, 0.0, -1.0, -0.0, -3.0]);
        assert!(row[8..].iter().all(|&v| v == 0.0));
        // nvfp4: E4M3 scale bytes, one per 16 (0x38 = 1.0, 0xb0 = -0.5).
        let s = view(Dtype::U8, &[1, 2], &[0x38, 0xb0]);
        let MlxFpWeight::Fp4(q) = mlx_fp_weight(MlxMode::Nvfp4, "m", 1, 32, &w, &s).unwrap() else {
            panic!("nvfp4 is 4-bit");
        };
        assert_eq!(&q.dequantize()[..4], &[0.5, 1.0, 4.0, 6.0]);
        // mxfp8: one E4M3 byte an element (0x38 = 1.0, 0xc0 = -2.0).
        let mut bytes = [0u8; 32];
        bytes[..2].copy_from_slice(&[0x38, 0xc0]);
        let w = view(Dtype::U32, &[1, 8], &bytes);
        let s = view(Dtype::U8, &[1, 1], &[128]);
        let MlxFpWeight::Fp8(q) = mlx_fp_weight(MlxMode::Mxfp8, "m", 1, 32, &w, &s).unwrap() else {
            panic!("mxfp8 is 8-bit");
        };
        assert_eq!(&q.dequantize()[..3], &[2.0, -4.0, 0.0]);
    }

    fn le_bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `mx.quantize` of a [2, 64] matrix in each mode (the second row small,
    /// nvfp4 scales subnormal), decoded bit for bit as `mx.dequantize` to
    /// float32 (tests/fixtures/fp8-nf4/mlx-fp-pack.json, from
    /// scripts/fixtures/fp8-nf4.py, mlx 0.32.4).
    #[test]
    fn every_mode_decodes_as_mlx_dequantize() {
        let path = mlxr_testkit::fixture_path("fp8-nf4/mlx-fp-pack.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let ints = |v: &serde_json::Value| -> Vec<u64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        };
        let cases = doc["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 3);
        for case in cases {
            let mode = MlxMode::parse(case["mode"].as_str().unwrap()).unwrap();
            let (group, bits) = mode.fixed_layout().unwrap();
            assert_eq!(case["group_size"].as_u64(), Some(group as u64));
            assert_eq!(case["bits"].as_u64(), Some(bits as u64));
            let words: Vec<u32> = ints(&case["packed"]).iter().map(|&w| w as u32).collect();
            let scales: Vec<u8> = ints(&case["scales"]).iter().map(|&s| s as u8).collect();
            let bytes = le_bytes(&words);
            let w = view(Dtype::U32, &[2, 64 * bits / 32], &bytes);
            let s = view(Dtype::U8, &[2, 64 / group], &scales);
            let got = match mlx_fp_weight(mode, "pack", 2, 64, &w, &s).unwrap() {
                MlxFpWeight::Fp8(q) => q.dequantize(),
                MlxFpWeight::Fp4(q) => q.dequantize(),
            };
            let want: Vec<f32> = case["dequantized"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let bits_of = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits_of(&got), bits_of(&want), "{mode:?}");
            assert!(got[64..].iter().any(|&v| v != 0.0), "{mode:?}: small row");
        }
    }

    /// The decoded-weight kernels' SIMD twins equal the portable code bit
    /// for bit on each mode's layouts (random codes and scale bytes,
    /// rows of several groups and a single group).
    #[test]
    fn kernel_twins_agree_on_every_mode() {
        use crate::backend::cpu::kernels::decoded::tests::check_twins;
        use rand::{Rng, SeedableRng};
        for mode in [MlxMode::Mxfp4, MlxMode::Mxfp8, MlxMode::Nvfp4] {
            let (group, bits) = mode.fixed_layout().unwrap();
            for (rows, cols) in [(40, 128), (17, 96), (9, 320), (5, group)] {
                let mut rng = rand::rngs::StdRng::seed_from_u64(rows as u64);
                let mut codes: Vec<u8> =
                    (0..rows * cols * bits / 8).map(|_| rng.random()).collect();
                if mode == MlxMode::Mxfp8 {
                    // No NaN codes: the f64 check needs finite values.
                    codes
                        .iter_mut()
                        .filter(|c| **c & 0x7f == 0x7f)
                        .for_each(|c| *c = 0);
                }
                // Scales near 1/16..4: E8M0 120..129, positive E4M3 0x28..0x48.
                let scales: Vec<u8> = (0..rows * cols / group)
                    .map(|_| match mode {
                        MlxMode::Nvfp4 => rng.random_range(0x28..0x48),
                        _ => rng.random_range(120..130),
                    })
                    .collect();
                let w = view(Dtype::U32, &[rows, cols * bits / 32], &codes);
                let s = view(Dtype::U8, &[rows, cols / group], &scales);
                match mlx_fp_weight(mode, "twins", rows, cols, &w, &s).unwrap() {
                    MlxFpWeight::Fp8(q) => check_twins(q.as_ref(), 11),
                    MlxFpWeight::Fp4(q) => check_twins(&q, 12),
                }
            }
        }
    }

    #[test]
    fn wrong_types_and_shapes_are_named() {
        let words = [0u8; 64];
        let scales = [127u8; 4];
        for (mode, wshape, wtype, sshape, stype, needle) in [
            (
                MlxMode::Mxfp4,
                [2, 4],
                Dtype::U8,
                [2, 1],
                Dtype::U8,
                "weight is U8",
            ),
            (
                MlxMode::Mxfp4,
                [2, 4],
                Dtype::U32,
                [2, 1],
                Dtype::F16,
                "E8M0",
            ),
            (
                MlxMode::Nvfp4,
                [2, 4],
                Dtype::U32,
                [2, 1],
                Dtype::U8,
                "[2, 2]",
            ),
            (
                MlxMode::Mxfp8,
                [2, 4],
                Dtype::U32,
                [2, 1],
                Dtype::U8,
                "[2, 8]",
            ),
        ] {
            let n = wshape.iter().product::<usize>() * 4;
            let w = view(
                wtype,
                &wshape,
                &words[..n / if wtype == Dtype::U8 { 4 } else { 1 }],
            );
            let ns = sshape.iter().product::<usize>() * if stype == Dtype::F16 { 2 } else { 1 };
            let s = view(stype, &sshape, &scales[..ns]);
            let e = mlx_fp_weight(mode, "layer", 2, 32, &w, &s)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle) && e.contains("layer"), "{mode:?}: {e}");
            assert!(e.contains(mode.name()), "{e}");
        }
    }
}
