//! Attention of a tile of queries (several tokens of one sequence, all query
//! heads of one KV head) over cache blocks, flash-attention style: keys and
//! values are converted to f32 a chunk at a time, scores come from a small
//! register-blocked GEMM, and an online softmax rescales the output as the
//! running maximum grows, so nothing is materialised beyond one chunk.

use super::element::CacheElement;
use crate::backend::cpu::kernels::ggml_f32::v_expf;
use crate::backend::softcap;

/// Keys per chunk.
const KC: usize = 64;
/// The GEMM's row block; a tile's last rows (all of a decode's few) go in
/// blocks of [`ROW_PAD`], to which query rows are padded. Each row's
/// arithmetic is the same in either block, so a row's result never depends
/// on the tile it is in.
pub(super) const ROW_BLOCK: usize = 16;
pub(super) const ROW_PAD: usize = 4;

/// One tile: `rows = len * group` query rows (`t * group + g`), query `t` at
/// position `first_pos + t`, seeing keys `row_lo..=pos` of its row.
pub(super) struct Tile<'a, T> {
    /// Row `t * group + g` is `q[q_offset + t * q_stride + g * head_dim..]`.
    pub q: &'a [f32],
    pub q_offset: usize,
    pub q_stride: usize,
    pub group: usize,
    pub len: usize,
    pub first_pos: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// Scores become `cap * tanh(score / cap)` before the mask.
    pub softcap: Option<f32>,
    pub window: Option<usize>,
    pub keys: BlockRows<'a, T>,
    pub values: BlockRows<'a, T>,
}

/// One KV head of one sequence in a cache `[blocks, n_kv_heads, block_size,
/// head_dim]`.
pub(super) struct BlockRows<'a, T> {
    pub cache: &'a [T],
    pub table: &'a [u32],
    pub n_kv_heads: usize,
    pub kv_head: usize,
    pub block_size: usize,
}

impl<T: CacheElement> BlockRows<'_, T> {
    /// Rows `from..from + n` as f32 into `dst` (`n * d`).
    fn convert(&self, from: usize, n: usize, d: usize, dst: &mut [f32]) {
        let bs = self.block_size;
        let mut j = from;
        while j < from + n {
            let (b, off) = (j / bs, j % bs);
            let run = (bs - off).min(from + n - j);
            let block = self.table[b] as usize;
            let at = ((block * self.n_kv_heads + self.kv_head) * bs + off) * d;
            T::write_f32(
                &self.cache[at..at + run * d],
                &mut dst[(j - from) * d..][..run * d],
            );
            j += run;
        }
    }
}

/// Per-thread buffers.
#[derive(Default)]
pub(super) struct TileScratch {
    /// `[head_dim, rows]`: scaled queries, transposed.
    qt: Vec<f32>,
    keys: Vec<f32>,
    values: Vec<f32>,
    /// `[KC, rows]`: scores, then weights, of one chunk.
    scores: Vec<f32>,
    /// `[rows, head_dim]`.
    out: Vec<f32>,
    max: Vec<f32>,
    sum: Vec<f32>,
    lo: Vec<u32>,
    hi: Vec<u32>,
}

/// The tile's output `[len * group, head_dim]`.
pub(super) fn attend_tile<T: CacheElement>(
    tile: &Tile<T>,
    s: &mut TileScratch,
    out: &mut Vec<f32>,
) {
    #[cfg(target_arch = "x86_64")]
    if super::vector::avx512f_available() {
        // SAFETY: the CPU has AVX-512F (and so AVX2 and FMA).
        return unsafe { attend_tile_avx512(tile, s, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if super::vector::avx2_fma_available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { attend_tile_fma(tile, s, out) };
    }
    attend_tile_portable(tile, s, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_tile_fma<T: CacheElement>(
    tile: &Tile<T>,
    s: &mut TileScratch,
    out: &mut Vec<f32>,
) {
    attend_tile_portable(tile, s, out)
}

/// The same code in 16-lane registers: every lane's float operations are
/// unchanged, so the results are the same as the AVX2 build's.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn attend_tile_avx512<T: CacheElement>(
    tile: &Tile<T>,
    s: &mut TileScratch,
    out: &mut Vec<f32>,
) {
    attend_tile_portable(tile, s, out)
}

#[inline(always)]
fn attend_tile_portable<T: CacheElement>(tile: &Tile<T>, s: &mut TileScratch, out: &mut Vec<f32>) {
    let d = tile.head_dim;
    let rows = tile.len * tile.group;
    let rp = rows.next_multiple_of(ROW_PAD);
    let first_key = |pos: usize| tile.window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let last_pos = tile.first_pos + tile.len - 1;
    let lo = first_key(tile.first_pos);

    s.qt.clear();
    s.qt.resize(d * rp, 0.0);
    for r in 0..rows {
        let at = tile.q_offset + (r / tile.group) * tile.q_stride + (r % tile.group) * d;
        for (c, &x) in tile.q[at..at + d].iter().enumerate() {
            s.qt[c * rp + r] = x * tile.scale;
        }
    }
    // Padding rows see nothing (`lo > hi`).
    s.lo.clear();
    s.hi.clear();
    for r in 0..rp {
        let (l, h) = if r < rows {
            let pos = tile.first_pos + r / tile.group;
            (first_key(pos), pos + 1)
        } else {
            (1, 0)
        };
        s.lo.push(l as u32);
        s.hi.push(h as u32);
    }
    let all_see_from = s.lo[..rows].iter().copied().max().unwrap_or(0) as usize;
    let all_see_to = tile.first_pos + 1;
    s.keys.resize(KC * d, 0.0);
    s.values.resize(KC * d, 0.0);
    s.scores.clear();
    s.scores.resize(KC * rp, 0.0);
    s.out.clear();
    s.out.resize(rp * d, 0.0);
    s.max.clear();
    s.max.resize(rp, f32::NEG_INFINITY);
    s.sum.clear();
    s.sum.resize(rp, 0.0);

    // Key chunks start at multiples of KC (not at this tile's first visible
    // key) so each row folds the same chunks whatever tile it is in.
    let mut from = lo - lo % KC;
    while from <= last_pos {
        let n = KC.min(last_pos + 1 - from);
        tile.keys.convert(from, n, d, &mut s.keys);
        tile.values.convert(from, n, d, &mut s.values);
        scores(&s.qt, rp, &s.keys, n, d, &mut s.scores);
        if let Some(cap) = tile.softcap {
            for x in &mut s.scores[..n * rp] {
                *x = softcap(*x, cap);
            }
        }
        let masked = !(from >= all_see_from && from + n <= all_see_to);
        if masked {
            for jj in 0..n {
                let j = (from + jj) as u32;
                let row = &mut s.scores[jj * rp..][..rp];
                for ((x, &l), &h) in row.iter_mut().zip(&s.lo).zip(&s.hi) {
                    if j < l || j >= h {
                        *x = f32::NEG_INFINITY;
                    }
                }
            }
        }
        online_softmax(&mut s.scores, rp, n, d, &mut s.max, &mut s.sum, &mut s.out);
        accumulate(&s.scores, rp, &s.values, n, d, &mut s.out);
        from += n;
    }
    out.clear();
    out.extend_from_slice(&s.out[..rows * d]);
    for (row, &sum) in out.chunks_exact_mut(d).zip(&s.sum) {
        let inv = 1.0 / sum;
        row.iter_mut().for_each(|x| *x *= inv);
    }
}

/// `scores[j][r] = keys[j] · qt[.][r]` for `j < n` (rounded up to 4).
#[inline(always)]
fn scores(qt: &[f32], rp: usize, keys: &[f32], n: usize, d: usize, scores: &mut [f32]) {
    assert!(qt.len() >= d * rp && keys.len() >= KC * d && scores.len() >= KC * rp);
    assert!(rp.is_multiple_of(ROW_PAD) && n <= KC);
    let wide = rp - rp % ROW_BLOCK;
    for j0 in (0..n).step_by(4) {
        for r0 in (0..wide).step_by(ROW_BLOCK) {
            score_block::<ROW_BLOCK>(qt, rp, keys, j0, r0, d, scores);
        }
        for r0 in (wide..rp).step_by(ROW_PAD) {
            score_block::<ROW_PAD>(qt, rp, keys, j0, r0, d, scores);
        }
    }
}

/// Rows `r0..r0 + RB` of keys `j0..j0 + 4` of [`scores`]: per row one FMA
/// chain over the head dimension, whatever `RB`.
#[inline(always)]
fn score_block<const RB: usize>(
    qt: &[f32],
    rp: usize,
    keys: &[f32],
    j0: usize,
    r0: usize,
    d: usize,
    scores: &mut [f32],
) {
    assert!(r0 + RB <= rp && j0 + 4 <= KC && qt.len() >= d * rp && keys.len() >= KC * d);
    let mut acc = [[0f32; RB]; 4];
    for c in 0..d {
        // SAFETY: `c < d`, `r0 + RB <= rp`, `j0 + 3 < KC`: in bounds by the
        // asserts.
        unsafe {
            let qv = &*(qt.as_ptr().add(c * rp + r0) as *const [f32; RB]);
            for (i, acc) in acc.iter_mut().enumerate() {
                let k = *keys.get_unchecked((j0 + i) * d + c);
                for l in 0..RB {
                    acc[l] = k.mul_add(qv[l], acc[l]);
                }
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        let at = (j0 + i) * rp + r0;
        scores[at..at + RB].copy_from_slice(acc);
    }
}

/// Folds one chunk's scores into the running maxima and sums, rescaling
/// `out` where a maximum grew; the scores become the chunk's weights.
#[inline(always)]
fn online_softmax(
    scores: &mut [f32],
    rp: usize,
    n: usize,
    d: usize,
    max: &mut [f32],
    sum: &mut [f32],
    out: &mut [f32],
) {
    let mut chunk_max = [f32::NEG_INFINITY; 256];
    let mut chunk_max_vec;
    let chunk_max: &mut [f32] = if rp <= 256 {
        &mut chunk_max[..rp]
    } else {
        chunk_max_vec = vec![f32::NEG_INFINITY; rp];
        &mut chunk_max_vec
    };
    for row in scores[..n * rp].chunks_exact(rp) {
        for (m, &x) in chunk_max.iter_mut().zip(row) {
            *m = m.max(x);
        }
    }
    for r in 0..rp {
        let new = max[r].max(chunk_max[r]);
        if new > max[r] {
            // From -inf the factor is 0, which also clears nothing (all 0).
            let alpha = v_expf(max[r] - new);
            sum[r] *= alpha;
            out[r * d..][..d].iter_mut().for_each(|x| *x *= alpha);
            max[r] = new;
        }
        // Rows that saw nothing yet subtract 0: their -inf scores give 0.
        chunk_max[r] = if new == f32::NEG_INFINITY { 0.0 } else { new };
    }
    for row in scores[..n * rp].chunks_exact_mut(rp) {
        for ((x, &m), s) in row.iter_mut().zip(chunk_max.iter()).zip(sum.iter_mut()) {
            *x = v_expf(*x - m);
            *s += *x;
        }
    }
}

/// `out[r] += Σ_j weights[j][r] · values[j]`.
#[inline(always)]
fn accumulate(weights: &[f32], rp: usize, values: &[f32], n: usize, d: usize, out: &mut [f32]) {
    const DB: usize = 16;
    assert!(weights.len() >= n * rp && values.len() >= n * d && out.len() >= rp * d);
    assert!(rp.is_multiple_of(4) && d.is_multiple_of(DB));
    for r0 in (0..rp).step_by(4) {
        for c0 in (0..d).step_by(DB) {
            let mut acc = [[0f32; DB]; 4];
            for (i, acc) in acc.iter_mut().enumerate() {
                acc.copy_from_slice(&out[(r0 + i) * d + c0..][..DB]);
            }
            for j in 0..n {
                // SAFETY: `j < n`, `c0 + DB <= d`, `r0 + 3 < rp`: in bounds
                // by the asserts.
                unsafe {
                    let v = &*(values.as_ptr().add(j * d + c0) as *const [f32; DB]);
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let w = *weights.get_unchecked(j * rp + r0 + i);
                        for l in 0..DB {
                            acc[l] = w.mul_add(v[l], acc[l]);
                        }
                    }
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                out[(r0 + i) * d + c0..][..DB].copy_from_slice(acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query row gives the same bits whether it is one of a decode's few
    /// rows (4-row blocks) or inside a prefill tile (16-row blocks first).
    #[test]
    fn a_row_is_the_same_in_every_tile() {
        let (d, group, bs, n_kv_heads, tokens): (usize, usize, usize, usize, usize) =
            (64, 3, 16, 2, 70);
        let mut x = 0x2545_f491_u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        let blocks = tokens.div_ceil(bs);
        let cache_len = blocks * n_kv_heads * bs * d;
        let keys: Vec<f32> = (0..cache_len).map(|_| next()).collect();
        let values: Vec<f32> = (0..cache_len).map(|_| next()).collect();
        // Blocks in reverse order, as a real block table may be.
        let table: Vec<u32> = (0..blocks as u32).rev().collect();
        let q_stride = n_kv_heads * group * d;
        let q: Vec<f32> = (0..tokens * q_stride).map(|_| next()).collect();
        let tile = |first: usize, len: usize| Tile {
            q: &q,
            q_offset: first * q_stride + d * group,
            q_stride,
            group,
            len,
            first_pos: first,
            head_dim: d,
            scale: 0.125,
            softcap: None,
            window: None,
            keys: BlockRows {
                cache: &keys,
                table: &table,
                n_kv_heads,
                kv_head: 1,
                block_size: bs,
            },
            values: BlockRows {
                cache: &values,
                table: &table,
                n_kv_heads,
                kv_head: 1,
                block_size: bs,
            },
        };
        let mut scratch = TileScratch::default();
        // 8 tokens: 24 rows, one 16-row block and two 4-row ones.
        let (first, len) = (tokens - 8, 8);
        let mut prefill = Vec::new();
        attend_tile(&tile(first, len), &mut scratch, &mut prefill);
        for t in 0..len {
            let mut decode = Vec::new();
            attend_tile(&tile(first + t, 1), &mut scratch, &mut decode);
            let rows = &prefill[t * group * d..(t + 1) * group * d];
            let same = rows
                .iter()
                .zip(&decode)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "token {t}: decode rows differ from the prefill tile's"
            );
        }
    }
}
