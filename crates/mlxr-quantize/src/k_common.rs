//! Scale searches shared by the k-quants (ggml's `nearest_int`,
//! `make_qx_quants`, `make_q3_quants`, `make_qkx2_quants`). Every sum is
//! accumulated in f32 in ggml's order: the output is only bit-identical to
//! llama-quantize if each operation is the same.

pub const QK_K: usize = 256;

/// Below this a group counts as all zeros (ggml's `GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

/// The most values of a group the searches take (K-quants' sub-blocks are
/// 16 or 32).
const MAX_GROUP: usize = 32;

/// Round to nearest (ties to even) through the f32 mantissa, as ggml does;
/// valid for |x| <= 4194303.
pub fn nearest_int(x: f32) -> i32 {
    let v = x + 12582912.0;
    (v.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// The value of largest magnitude (the first one on ties) and its magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Symmetric levels `l + nmax` in `[0, 2 nmax)` for a group with weights
/// `x * x` (ggml's `rmse_type == 1` without quant weights); returns the scale.
pub fn make_qx_quants(x: &[f32], nmax: i32, levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let nmax_f = nmax as f32;
    // The weights (x², and x³ for Σ w·x·l, as ggml's w·x[i]·l multiplies)
    // once, and each scale's levels in a pass of their own: that pass has
    // no sum in it and is vectorized; the sums stay in ggml's order.
    let n = x.len();
    assert!(n <= MAX_GROUP, "groups of at most {MAX_GROUP} values");
    let (mut w, mut wx, mut ls) = ([0f32; MAX_GROUP], [0f32; MAX_GROUP], [0f32; MAX_GROUP]);
    for ((w, wx), &v) in w.iter_mut().zip(&mut wx).zip(x) {
        *w = v * v;
        *wx = *w * v;
    }
    let (w, wx, ls) = (&w[..n], &wx[..n], &mut ls[..n]);
    let sums = |iscale: f32, ls: &mut [f32]| {
        for (l, &v) in ls.iter_mut().zip(x) {
            *l = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
        }
        let mut sumlx = 0.0f32;
        let mut suml2 = 0.0f32;
        for ((&l, &w), &wx) in ls.iter().zip(w).zip(wx) {
            sumlx += wx * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let keep = |levels: &mut [i8], ls: &[f32]| {
        for (l, &q) in levels.iter_mut().zip(ls) {
            *l = (q as i32 + nmax) as i8;
        }
    };
    let iscale = -nmax_f / max;
    let (sumlx, suml2) = sums(iscale, ls);
    keep(levels, ls);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmax_f + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale, ls);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            keep(levels, ls);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q3_K's search: start from the max-based levels, then move single levels
/// while the weighted fit improves (at most five passes). Levels come back
/// offset by `nmax`.
pub fn make_q3_quants(x: &[f32], nmax: i32, levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (l, &v) in levels.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l = q as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (l, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let old = *l as f32;
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *l as i32 {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *l = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for l in levels.iter_mut() {
        *l += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of the affine (scale + min) search.
pub struct AffineSearch {
    pub nmax: i32,
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Absolute instead of squared error.
    pub use_mad: bool,
}

/// Affine levels in `[0, nmax]` minimising the weighted error over a grid
/// of candidate scales; returns `(scale, -min)` with `min <= 0`.
pub fn make_qkx2_quants(
    x: &[f32],
    weights: &[f32],
    p: &AffineSearch,
    levels: &mut [u8],
    aux: &mut [u8],
) -> (f32, f32) {
    let n = x.len();
    let (weights, levels, aux) = (&weights[..n], &mut levels[..n], &mut aux[..n]);
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let error = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let nmax_f = p.nmax as f32;
    let mut iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    // Each scale's levels in a pass with no sum in it (vectorized), then
    // the sums in ggml's order.
    let quantize = |iscale: f32, min: f32, out: &mut [u8]| {
        for (l, &v) in out.iter_mut().zip(x) {
            *l = nearest_int(iscale * (v - min)).clamp(0, p.nmax) as u8;
        }
    };
    quantize(iscale, min, levels);
    let mut best_error = 0.0f32;
    for i in 0..n {
        let diff = scale * levels[i] as f32 + min - x[i];
        best_error += weights[i] * error(diff);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax_f) / (max - min);
        quantize(iscale, min, aux);
        let mut sum_l = 0.0f32;
        let mut sum_l2 = 0.0f32;
        let mut sum_xl = 0.0f32;
        for i in 0..n {
            let w = weights[i];
            let l = aux[i] as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * error(diff);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Packs four 2-bit planes the way Q2_K and Q3_K store them: byte `l` of
/// each 32-byte group holds levels `l`, `l + 32`, `l + 64`, `l + 96`.
pub fn pack_2bit(levels: &[u8], qs: &mut [u8]) {
    for (j, q) in (0..QK_K).step_by(128).zip(qs.chunks_exact_mut(32)) {
        for l in 0..32 {
            q[l] = levels[j + l]
                | (levels[j + l + 32] << 2)
                | (levels[j + l + 64] << 4)
                | (levels[j + l + 96] << 6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-0.4), 0);
        assert_eq!(nearest_int(31.49), 31);
    }
}
