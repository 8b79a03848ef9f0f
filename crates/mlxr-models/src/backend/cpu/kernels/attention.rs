//! Attention of one chunk of queries over contiguous keys and values, in the
//! arithmetic of llama.cpp's CPU graph with an f32 KV cache and no flash
//! attention (AVX-512 build):
//!
//! - `kq = mul_mat(k, q)`: one `ggml_vec_dot_f32` per (query, key);
//! - `soft_max_ext(kq, mask, scale)`: see [`ggml_f32::softmax_row`]; the KV
//!   length is padded (to 256 cells in llama.cpp), padded cells are masked;
//! - `kqv = mul_mat(vᵀ, softmax)`: one `ggml_vec_dot_f32` per output when the
//!   chunk has one token, llamafile's tinyBLAS when it has several (tinyBLAS
//!   only serves `n >= 2`). Zero padding adds nothing, so the padded length
//!   only needs to cover the vector layout (a multiple of 64).

use super::ggml_f32;

/// Shapes of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    /// Query tokens in the chunk.
    pub len: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Keys/values stored, positions `0..kv_len`.
    pub kv_len: usize,
    /// Position of the chunk's first token.
    pub start_pos: usize,
    pub window: Option<usize>,
}

/// `q`: `[len, n_heads, d]`; `k`, `v`: `[n_kv_heads, kv_len, d]`;
/// `out`: `[len, n_heads * d]`. Scores are `scale * q·k`, soft-capped when
/// `softcap` is `Some(cap)` (then scaled and capped before the softmax,
/// which scales by 1).
pub fn attention(
    s: AttnShape,
    (scale, softcap): (f32, Option<f32>),
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    let AttnShape {
        len,
        n_heads,
        n_kv_heads,
        head_dim: d,
        kv_len,
        start_pos,
        window,
    } = s;
    assert_eq!(q.len(), len * n_heads * d);
    assert_eq!(k.len(), n_kv_heads * kv_len * d);
    assert_eq!(v.len(), n_kv_heads * kv_len * d);
    assert_eq!(out.len(), len * n_heads * d);
    let group = n_heads / n_kv_heads;
    let padded = kv_len.next_multiple_of(64);
    let tiny = len >= 2;
    let window = window.unwrap_or(usize::MAX);

    let mut vt = vec![0f32; d * padded];
    let mut scores = vec![0f32; padded];
    let mut row = vec![0f32; d];
    for kvh in 0..n_kv_heads {
        let kh = &k[kvh * kv_len * d..(kvh + 1) * kv_len * d];
        let vh = &v[kvh * kv_len * d..(kvh + 1) * kv_len * d];
        for (j, vrow) in vh.chunks_exact(d).enumerate() {
            for (c, &x) in vrow.iter().enumerate() {
                vt[c * padded + j] = x;
            }
        }
        for g in 0..group {
            let h = kvh * group + g;
            for t in 0..len {
                let pos = start_pos + t;
                let lo = (pos + 1).saturating_sub(window);
                let hi = (pos + 1).min(kv_len);
                let qrow = &q[(t * n_heads + h) * d..(t * n_heads + h + 1) * d];
                scores.fill(0.0);
                ggml_f32::dots(kh, d, qrow, &mut scores[..kv_len], false);
                match softcap {
                    Some(cap) => {
                        for s in &mut scores[lo..hi] {
                            *s = crate::backend::softcap(*s * scale, cap);
                        }
                        ggml_f32::softmax_row(&mut scores, 1.0, lo, hi);
                    }
                    None => ggml_f32::softmax_row(&mut scores, scale, lo, hi),
                }
                ggml_f32::dots(&vt, padded, &scores, &mut row, tiny);
                out[(t * n_heads + h) * d..(t * n_heads + h + 1) * d].copy_from_slice(&row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_f64_attention() {
        let (len, nh, nkv, d, start) = (3, 4, 2, 64, 5);
        let kv_len = start + len;
        let f = |i: usize, m: usize| ((i * m % 97) as f32 - 48.0) / 40.0;
        let q: Vec<f32> = (0..len * nh * d).map(|i| f(i, 31)).collect();
        let k: Vec<f32> = (0..nkv * kv_len * d).map(|i| f(i, 17)).collect();
        let v: Vec<f32> = (0..nkv * kv_len * d).map(|i| f(i, 13)).collect();
        let s = AttnShape {
            len,
            n_heads: nh,
            n_kv_heads: nkv,
            head_dim: d,
            kv_len,
            start_pos: start,
            window: Some(4),
        };
        let mut out = vec![0f32; len * nh * d];
        attention(s, (0.125, None), &q, &k, &v, &mut out);
        for t in 0..len {
            for h in 0..nh {
                let kvh = h / (nh / nkv);
                let pos = start + t;
                let js: Vec<usize> = (0..=pos).filter(|&j| pos - j < 4).collect();
                let sc: Vec<f64> = js
                    .iter()
                    .map(|&j| {
                        (0..d)
                            .map(|c| {
                                q[(t * nh + h) * d + c] as f64
                                    * k[(kvh * kv_len + j) * d + c] as f64
                            })
                            .sum::<f64>()
                            * 0.125
                    })
                    .collect();
                let m = sc.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let want: f64 = js
                        .iter()
                        .zip(&e)
                        .map(|(&j, w)| w / z * v[(kvh * kv_len + j) * d + c] as f64)
                        .sum();
                    let got = out[(t * nh + h) * d + c] as f64;
                    assert!((got - want).abs() < 1e-5, "{t} {h} {c}: {got} vs {want}");
                }
            }
        }
    }
}
