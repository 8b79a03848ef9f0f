//! Q6_K (ggml's `quantize_row_q6_K_ref`): 16 groups of 16 weights, signed
//! 6-bit levels, 8-bit signed group scales.
//!
//! Layout (210 bytes): `ql[128]` (low nibbles: byte `l` of each 64-byte
//! half holds levels `l` and `l + 64`, byte `l + 32` holds `l + 32` and
//! `l + 96`), `qh[64]` (two high bits of the four levels, 32 bytes a half),
//! `scales[16]` (i8), `d` (f16).

use crate::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use crate::k_common::{make_qx_quants, nearest_int, QK_K};

pub const BLOCK_BYTES: usize = 210;

const GROUP_MAX_EPS: f32 = 1e-15;

pub fn quantize_row_q6_k(x: &[f32], y: &mut [u8]) {
    let mut levels = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    for (x, y) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BLOCK_BYTES)) {
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..QK_K / 16 {
            let scale = make_qx_quants(
                &x[16 * ib..16 * ib + 16],
                32,
                &mut levels[16 * ib..16 * ib + 16],
            );
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            y.fill(0);
            continue;
        }
        let (ql, rest) = y.split_at_mut(128);
        let (qh, rest) = rest.split_at_mut(64);
        let (sc, d) = rest.split_at_mut(16);
        let iscale = -128.0 / max_scale;
        let d_bits = f32_to_f16_bits(1.0 / iscale);
        d.copy_from_slice(&d_bits.to_le_bytes());
        for ib in 0..QK_K / 16 {
            sc[ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
        }
        for j in 0..QK_K / 16 {
            let dl = f16_bits_to_f32(d_bits) * (sc[j] as i8) as f32;
            if dl == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / dl).clamp(-32, 31);
                levels[16 * j + ii] = (l + 32) as i8;
            }
        }
        let levels = levels.map(|l| l as u8);
        for (half, (ql, qh)) in ql
            .chunks_exact_mut(64)
            .zip(qh.chunks_exact_mut(32))
            .enumerate()
        {
            let j = 128 * half;
            for l in 0..32 {
                let q1 = levels[j + l] & 0xf;
                let q2 = levels[j + l + 32] & 0xf;
                let q3 = levels[j + l + 64] & 0xf;
                let q4 = levels[j + l + 96] & 0xf;
                ql[l] = q1 | (q3 << 4);
                ql[l + 32] = q2 | (q4 << 4);
                qh[l] = (levels[j + l] >> 4)
                    | ((levels[j + l + 32] >> 4) << 2)
                    | ((levels[j + l + 64] >> 4) << 4)
                    | ((levels[j + l + 96] >> 4) << 6);
            }
        }
    }
}
