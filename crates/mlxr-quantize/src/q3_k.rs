//! Q3_K (ggml's `quantize_row_q3_K_ref`): 16 groups of 16 weights, signed
//! 3-bit levels, 6-bit signed group scales.
//!
//! Layout (110 bytes): `hmask[32]` (bit `j / 32` of byte `j % 32` is the
//! high bit of level `j`), `qs[64]` (low two bits, see [`pack_2bit`]),
//! `scales[12]` (low nibbles of groups 0-15 in bytes 0-7, two high bits of
//! each in bytes 8-11), `d` (f16).

use crate::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use crate::k_common::{make_q3_quants, nearest_int, pack_2bit, QK_K};

pub const BLOCK_BYTES: usize = 110;

pub fn quantize_row_q3_k(x: &[f32], y: &mut [u8]) {
    let mut levels = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    for (x, y) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BLOCK_BYTES)) {
        let (hmask, rest) = y.split_at_mut(32);
        let (qs, rest) = rest.split_at_mut(64);
        let (sc, d) = rest.split_at_mut(12);
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..QK_K / 16 {
            scales[j] =
                make_q3_quants(&x[16 * j..16 * j + 16], 4, &mut levels[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        sc.fill(0);
        let d_bits = if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                // ggml stores nearest_int's result in an int8_t before clamping.
                let l = ((nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    sc[j] = l & 0xf;
                } else {
                    sc[j - 8] |= (l & 0xf) << 4;
                }
                sc[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            f32_to_f16_bits(1.0 / iscale)
        } else {
            f32_to_f16_bits(0.0)
        };
        d.copy_from_slice(&d_bits.to_le_bytes());
        for j in 0..QK_K / 16 {
            let low = if j < 8 { sc[j] & 0xf } else { sc[j - 8] >> 4 };
            let s = (low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32;
            let dl = f16_bits_to_f32(d_bits) * s as f32;
            if dl == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / dl).clamp(-4, 3);
                levels[16 * j + ii] = (l + 4) as i8;
            }
        }
        hmask.fill(0);
        let mut low = [0u8; QK_K];
        for j in 0..QK_K {
            let mut l = levels[j] as u8;
            if l > 3 {
                hmask[j % 32] |= 1 << (j / 32);
                l -= 4;
            }
            low[j] = l;
        }
        pack_2bit(&low, qs);
    }
}
