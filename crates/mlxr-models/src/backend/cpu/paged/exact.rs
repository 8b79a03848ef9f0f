//! Attention over an F32 store in llama.cpp's arithmetic (non-flash CPU
//! graph), bit for bit as `kernels::attention` computes it over contiguous
//! keys, so paged and dense attention give identical results.
//!
//! That kernel works on rows padded to a multiple of 64 keys; masked and
//! padded keys enter only as exact zeros, so here only the visible keys are
//! visited, each in the vector lane its absolute position gives it:
//! - softmax: `v_expf` per key, lane sums of 16-key groups aligned at
//!   position 0 (`reduce_add16`), added to an f64 in group order;
//! - KQV: a one-token chunk uses `ggml_vec_dot_f32` (64 accumulators, key
//!   `j` in `j % 64`), a longer chunk tinyBLAS (16 accumulators, `j % 16`);
//!   each accumulator adds its keys in position order.

use crate::backend::cpu::kernels::ggml_f32::{reduce_add16, v_expf, vec_dot_f32};
use crate::backend::softcap;

/// Rows of one KV head of one sequence in a cache `[blocks, n_kv_heads,
/// block_size, head_dim]`.
pub(super) struct HeadRows<'a> {
    pub cache: &'a [f32],
    pub table: &'a [u32],
    pub n_kv_heads: usize,
    pub kv_head: usize,
    pub block_size: usize,
    pub head_dim: usize,
}

impl HeadRows<'_> {
    #[inline(always)]
    fn row(&self, pos: usize) -> &[f32] {
        let (bs, d) = (self.block_size, self.head_dim);
        let block = self.table[pos / bs] as usize;
        let at = ((block * self.n_kv_heads + self.kv_head) * bs + pos % bs) * d;
        &self.cache[at..at + d]
    }
}

/// Per-thread buffers.
#[derive(Default)]
pub(super) struct ExactScratch {
    probs: Vec<f32>,
    acc: Vec<f32>,
}

/// One query row over keys `lo..hi`, written to `out` (`head_dim`); scores
/// are `scale * q·k`, soft-capped when the cap is `Some`. `one_token`: the
/// query's chunk has a single token.
#[allow(clippy::too_many_arguments)]
pub(super) fn attend_row(
    keys: &HeadRows,
    values: &HeadRows,
    q: &[f32],
    (lo, hi): (usize, usize),
    scale: (f32, Option<f32>),
    one_token: bool,
    scratch: &mut ExactScratch,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::vector::avx2_fma_available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe {
            attend_row_fma(keys, values, q, (lo, hi), scale, one_token, scratch, out)
        };
    }
    attend_row_portable(keys, values, q, (lo, hi), scale, one_token, scratch, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn attend_row_fma(
    keys: &HeadRows,
    values: &HeadRows,
    q: &[f32],
    range: (usize, usize),
    scale: (f32, Option<f32>),
    one_token: bool,
    scratch: &mut ExactScratch,
    out: &mut [f32],
) {
    attend_row_portable(keys, values, q, range, scale, one_token, scratch, out)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_row_portable(
    keys: &HeadRows,
    values: &HeadRows,
    q: &[f32],
    (lo, hi): (usize, usize),
    scale: (f32, Option<f32>),
    one_token: bool,
    scratch: &mut ExactScratch,
    out: &mut [f32],
) {
    const LANES: usize = 16;
    let d = keys.head_dim;
    // `probs[i]` is key `base + i`; `base` is 16-aligned so lanes match.
    let base = lo & !(LANES - 1);
    let end = hi.next_multiple_of(LANES);
    let probs = &mut scratch.probs;
    probs.clear();
    probs.resize(end - base, 0.0);
    let (scale, cap) = scale;
    let mut max = f32::NEG_INFINITY;
    for j in lo..hi {
        let s = vec_dot_f32(keys.row(j), q) * scale;
        let s = match cap {
            Some(cap) => softcap(s, cap),
            None => s,
        };
        probs[j - base] = s;
        max = max.max(s);
    }
    let mut sum = 0f64;
    for (g, group) in probs.chunks_exact_mut(LANES).enumerate() {
        let first = base + g * LANES;
        for (l, p) in group.iter_mut().enumerate() {
            let j = first + l;
            *p = if (lo..hi).contains(&j) {
                v_expf(*p - max)
            } else {
                0.0
            };
        }
        sum += reduce_add16((&*group).try_into().unwrap()) as f64;
    }
    let inv = (1.0 / sum) as f32;

    let accs = if one_token { 64 } else { LANES };
    let acc = &mut scratch.acc;
    acc.clear();
    acc.resize(accs * d, 0.0);
    // One accumulator at a time (its keys in position order, as the vector
    // code adds them) keeps it in L1.
    for (a, row) in acc.chunks_exact_mut(d).enumerate() {
        let first = lo + (a + accs - lo % accs) % accs;
        for j in (first..hi).step_by(accs) {
            let p = probs[j - base] * inv;
            for (x, &v) in row.iter_mut().zip(values.row(j)) {
                *x = v.mul_add(p, *x);
            }
        }
    }
    for (c, o) in out[..d].iter_mut().enumerate() {
        let lane = |l: usize| acc[l * d + c];
        let mut r = [0f32; LANES];
        for (l, r) in r.iter_mut().enumerate() {
            *r = if one_token {
                // `ggml_vec_dot_f32`'s `(s0 + s2) + (s1 + s3)`.
                (lane(l) + lane(32 + l)) + (lane(16 + l) + lane(48 + l))
            } else {
                lane(l)
            };
        }
        *o = reduce_add16(&r);
    }
}
