//! Q4_K (ggml's `quantize_row_q4_K_ref`) and the shared 6-bit scale packing
//! of Q4_K and Q5_K: 8 groups of 32 weights, affine 4-bit levels.
//!
//! Layout (144 bytes): `d`, `dmin` (f16), `scales[12]` (see
//! [`pack_scales_mins`]), `qs[128]` (byte `l` of each 32-byte run holds
//! level `l` low and `l + 32` high).

use crate::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use crate::k_common::{make_qkx2_quants, nearest_int, AffineSearch, QK_K};

pub const BLOCK_BYTES: usize = 144;

/// Quantizes one block's 8 group scales and mins to 6 bits; writes `d`,
/// `dmin` and `scales[12]` (the first 16 bytes of a Q4_K/Q5_K block) and
/// returns the levels of each weight in `[0, nmax]` re-fitted to them.
pub(crate) fn quantize_affine_block(
    x: &[f32],
    search: &AffineSearch,
    header: &mut [u8],
    levels: &mut [u8; QK_K],
) {
    let mut aux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut scales = [0f32; QK_K / 32];
    let mut mins = [0f32; QK_K / 32];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..QK_K / 32 {
        let group = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in group {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, v) in weights.iter_mut().zip(group) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(
            group,
            &weights,
            search,
            &mut levels[32 * j..32 * j + 32],
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
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let (d, sc) = header.split_at_mut(4);
    sc.fill(0);
    for j in 0..QK_K / 32 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        pack_scale_min(j, ls, lm, sc);
    }
    let d_bits = f32_to_f16_bits(max_scale / 63.0);
    let dmin_bits = f32_to_f16_bits(max_min / 63.0);
    d[0..2].copy_from_slice(&d_bits.to_le_bytes());
    d[2..4].copy_from_slice(&dmin_bits.to_le_bytes());
    for j in 0..QK_K / 32 {
        let (ls, lm) = scale_min(j, sc);
        let dl = f16_bits_to_f32(d_bits) * ls as f32;
        if dl == 0.0 {
            continue;
        }
        let ml = f16_bits_to_f32(dmin_bits) * lm as f32;
        for ii in 0..32 {
            levels[32 * j + ii] =
                nearest_int((x[32 * j + ii] + ml) / dl).clamp(0, search.nmax) as u8;
        }
    }
}

/// Groups 0-3 keep their 6-bit scale and min in bytes `j` and `j + 4`;
/// groups 4-7 put their low nibbles in byte `j + 4` and their two high bits
/// on top of bytes `j - 4` (scale) and `j` (min).
fn pack_scale_min(j: usize, ls: u8, lm: u8, sc: &mut [u8]) {
    if j < 4 {
        sc[j] = ls;
        sc[j + 4] = lm;
    } else {
        sc[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
        sc[j - 4] |= (ls >> 4) << 6;
        sc[j] |= (lm >> 4) << 6;
    }
}

/// ggml's `get_scale_min_k4`.
pub(crate) fn scale_min(j: usize, sc: &[u8]) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 63, sc[j + 4] & 63)
    } else {
        (
            (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4),
            (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4),
        )
    }
}

const SEARCH: AffineSearch = AffineSearch {
    nmax: 15,
    rmin: -1.0,
    rdelta: 0.1,
    nstep: 20,
    use_mad: false,
};

pub fn quantize_row_q4_k(x: &[f32], y: &mut [u8]) {
    let mut levels = [0u8; QK_K];
    for (x, y) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BLOCK_BYTES)) {
        let (header, qs) = y.split_at_mut(16);
        quantize_affine_block(x, &SEARCH, header, &mut levels);
        for (j, q) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
            for l in 0..32 {
                q[l] = levels[j + l] | (levels[j + l + 32] << 4);
            }
        }
    }
}
