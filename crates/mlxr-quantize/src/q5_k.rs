//! Q5_K (ggml's `quantize_row_q5_K_ref`): Q4_K's groups and scales with
//! 5-bit levels.
//!
//! Layout (176 bytes): `d`, `dmin`, `scales[12]` as Q4_K, `qh[32]` (bits
//! `2i` and `2i + 1` of byte `l` are the high bits of levels `64i + l` and
//! `64i + l + 32`), `qs[128]` (low nibbles, as Q4_K).

use crate::k_common::{AffineSearch, QK_K};
use crate::q4_k::quantize_affine_block;

pub const BLOCK_BYTES: usize = 176;

const SEARCH: AffineSearch = AffineSearch {
    nmax: 31,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: false,
};

pub fn quantize_row_q5_k(x: &[f32], y: &mut [u8]) {
    let mut levels = [0u8; QK_K];
    for (x, y) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BLOCK_BYTES)) {
        let (header, rest) = y.split_at_mut(16);
        let (qh, qs) = rest.split_at_mut(32);
        quantize_affine_block(x, &SEARCH, header, &mut levels);
        qh.fill(0);
        for (i, ql) in qs.chunks_exact_mut(32).enumerate() {
            let n = 64 * i;
            for j in 0..32 {
                let mut l1 = levels[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= 1 << (2 * i);
                }
                let mut l2 = levels[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= 2 << (2 * i);
                }
                ql[j] = l1 | (l2 << 4);
            }
        }
    }
}
