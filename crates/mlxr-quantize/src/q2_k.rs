//! Q2_K (ggml's `quantize_row_q2_K_ref`): 16 groups of 16 weights, 2-bit
//! levels with a 4-bit scale and 4-bit min per group.
//!
//! Layout (84 bytes): `scales[16]` (scale low nibble, min high nibble),
//! `qs[64]` (see [`pack_2bit`]), `d` and `dmin` (f16).

use crate::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use crate::k_common::{make_qkx2_quants, nearest_int, pack_2bit, AffineSearch, QK_K};

pub const BLOCK_BYTES: usize = 84;

const SEARCH: AffineSearch = AffineSearch {
    nmax: 3,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: true,
};

pub fn quantize_row_q2_k(x: &[f32], y: &mut [u8]) {
    let mut levels = [0u8; QK_K];
    let mut aux = [0u8; 16];
    let mut weights = [0f32; 16];
    let mut scales = [0f32; QK_K / 16];
    let mut mins = [0f32; QK_K / 16];
    for (x, y) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BLOCK_BYTES)) {
        let (sc, rest) = y.split_at_mut(16);
        let (qs, d) = rest.split_at_mut(64);
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..QK_K / 16 {
            let group = &x[16 * j..16 * j + 16];
            for (w, v) in weights.iter_mut().zip(group) {
                *w = v.abs();
            }
            let (scale, min) = make_qkx2_quants(
                group,
                &weights,
                &SEARCH,
                &mut levels[16 * j..16 * j + 16],
                &mut aux,
            );
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }
        let d_bits = if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..QK_K / 16 {
                sc[j] = nearest_int(iscale * scales[j]) as u8;
            }
            f32_to_f16_bits(max_scale / 15.0)
        } else {
            sc.fill(0);
            f32_to_f16_bits(0.0)
        };
        let dmin_bits = if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..QK_K / 16 {
                sc[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
            }
            f32_to_f16_bits(max_min / 15.0)
        } else {
            f32_to_f16_bits(0.0)
        };
        d[0..2].copy_from_slice(&d_bits.to_le_bytes());
        d[2..4].copy_from_slice(&dmin_bits.to_le_bytes());
        for j in 0..QK_K / 16 {
            let dl = f16_bits_to_f32(d_bits) * (sc[j] & 0xf) as f32;
            if dl == 0.0 {
                continue;
            }
            let ml = f16_bits_to_f32(dmin_bits) * (sc[j] >> 4) as f32;
            for ii in 0..16 {
                levels[16 * j + ii] = nearest_int((x[16 * j + ii] + ml) / dl).clamp(0, 3) as u8;
            }
        }
        pack_2bit(&levels, qs);
    }
}
