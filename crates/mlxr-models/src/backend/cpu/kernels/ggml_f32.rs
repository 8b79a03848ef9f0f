//! The f32 operations of a decoder layer computed the way ggml's CPU backend
//! computes them in llama.cpp's reference build (x86 with AVX-512: 16-lane
//! vectors), bit for bit: RMSNorm, RoPE, attention (KQ, masked softmax, KQV),
//! SiLU/GELU gating.
//!
//! ggml's SIMD code keeps several independent 16-lane accumulators; the
//! functions here keep the same lanes in arrays and combine them in the same
//! order, so the result does not depend on the machine running it. On x86 with
//! FMA the same code is compiled with FMA enabled (the arrays vectorize); the
//! portable fallback calls `mul_add` too, so both give identical bits.

/// Lanes of one AVX-512 vector.
const LANES: usize = 16;

/// `_mm512_reduce_add_ps` as GCC expands it: halves, then quarters, then
/// pairs.
#[inline(always)]
pub fn reduce_add16(a: &[f32; LANES]) -> f32 {
    let mut t3 = [0f32; 8];
    for i in 0..8 {
        t3[i] = a[i + 8] + a[i];
    }
    let mut t6 = [0f32; 4];
    for i in 0..4 {
        t6[i] = t3[i + 4] + t3[i];
    }
    (t6[0] + t6[2]) + (t6[1] + t6[3])
}

/// `ggml_vec_dot_f32` (AVX-512): four 16-lane FMA accumulators over steps of
/// 64, reduced as `(s0 + s2) + (s1 + s3)` then [`reduce_add16`]; the tail
/// (`n % 64` elements) is added one product at a time.
#[inline(always)]
pub fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let n = x.len();
    let np = n & !63;
    let mut sum = [[0f32; LANES]; 4];
    let mut i = 0;
    while i < np {
        for (j, s) in sum.iter_mut().enumerate() {
            let xo = &x[i + j * LANES..i + (j + 1) * LANES];
            let yo = &y[i + j * LANES..i + (j + 1) * LANES];
            for l in 0..LANES {
                s[l] = xo[l].mul_add(yo[l], s[l]);
            }
        }
        i += 64;
    }
    let mut r = [0f32; LANES];
    for l in 0..LANES {
        r[l] = (sum[0][l] + sum[2][l]) + (sum[1][l] + sum[3][l]);
    }
    let mut sumf = reduce_add16(&r);
    for i in np..n {
        sumf = x[i].mul_add(y[i], sumf);
    }
    sumf
}

/// One element of llamafile's tinyBLAS f32 GEMM (AVX-512): a single 16-lane
/// FMA accumulator over `k` (a multiple of 16), then [`reduce_add16`].
#[inline(always)]
pub fn tinyblas_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    debug_assert_eq!(x.len() % LANES, 0);
    let mut acc = [0f32; LANES];
    for (xc, yc) in x.chunks_exact(LANES).zip(y.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] = xc[l].mul_add(yc[l], acc[l]);
        }
    }
    reduce_add16(&acc)
}

/// One lane of ggml's AVX-512 `ggml_v_expf` (ARM's optimized-routines
/// polynomial, max error about 1.5 ulp; `_mm512_scalef_ps` for the exponent).
#[inline(always)]
pub fn v_expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010) // 0x1.0e4020p-7
        .mul_add(b, f32::from_bits(0x3d2b_9f17)) // 0x1.573e2ep-5
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0)); // 0x1.ffffecp-1
    if n.abs() > 192.0 {
        // `_CMP_GT_OQ`: false for NaN, which falls through to the scalef.
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    scalef(j, n)
}

/// `_mm512_scalef_ps(j, n)` for an integral `n` with `|n| <= 192` (or NaN):
/// `j · 2^n`, rounded once.
#[inline(always)]
fn scalef(j: f32, n: f32) -> f32 {
    if n.is_nan() || j.is_nan() {
        return f32::NAN;
    }
    // Exact in f64 (j has 24 significant bits, 2^±192 is in range), then one
    // rounding to f32, as the instruction does.
    let e = n as i32;
    (j as f64 * f64::from_bits(((1023 + e) as u64) << 52)) as f32
}

/// One lane of `ggml_v_silu` (AVX-512): `x / (1 + v_expf(0 - x))`.
#[inline(always)]
pub fn v_silu(x: f32) -> f32 {
    x / (1.0 + v_expf(0.0 - x))
}

/// `ggml_silu_f32`, used for the tail that does not fill a vector.
#[inline(always)]
fn silu_scalar(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

macro_rules! with_fma {
    ($(#[$m:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $portable:ident;) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn fast($($arg: $ty),*) $(-> $ret)? {
                    $portable($($arg),*)
                }
                if fma_available() {
                    // SAFETY: the features were detected at run time.
                    return unsafe { fast($($arg),*) };
                }
            }
            $portable($($arg),*)
        }
    };
}

#[cfg(target_arch = "x86_64")]
fn fma_available() -> bool {
    use std::sync::OnceLock;
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        super::isa::allows(super::isa::Isa::Avx2)
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
    })
}

#[inline(always)]
fn rms_norm_portable(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let dim = w.len();
    for (xr, yr) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
        // ggml: sum of f32 squares in double, mean rounded to f32.
        let mut sum = 0f64;
        for &v in xr {
            sum += (v * v) as f64;
        }
        let mean = (sum / dim as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for ((y, &v), &g) in yr.iter_mut().zip(xr).zip(w) {
            *y = (v * scale) * g;
        }
    }
}

with_fma! {
    /// ggml's `rms_norm` followed by `mul` (rows of `w.len()`):
    /// `y = (x · (1 / sqrtf(mean + eps))) · w` with the mean of squares summed
    /// in double.
    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) = rms_norm_portable;
}

#[inline(always)]
fn swiglu_portable(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = gate.len();
    let nv = n & !(LANES - 1);
    for i in 0..nv {
        out[i] = v_silu(gate[i]) * up[i];
    }
    for i in nv..n {
        out[i] = silu_scalar(gate[i]) * up[i];
    }
}

with_fma! {
    /// `ggml_vec_swiglu_f32` over one row: `silu(gate) · up`.
    pub fn swiglu_row(gate: &[f32], up: &[f32], out: &mut [f32]) = swiglu_portable;
}

#[inline(always)]
fn dots_portable(rows: &[f32], dim: usize, x: &[f32], out: &mut [f32], tiny: bool) {
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(dim)) {
        *o = if tiny {
            tinyblas_dot_f32(r, x)
        } else {
            vec_dot_f32(r, x)
        };
    }
}

with_fma! {
    /// `out[j] = rows[j] · x` (`rows` of `dim` floats), with
    /// [`tinyblas_dot_f32`] when `tiny`, else [`vec_dot_f32`].
    pub fn dots(rows: &[f32], dim: usize, x: &[f32], out: &mut [f32], tiny: bool) = dots_portable;
}

#[inline(always)]
fn softmax_portable(x: &mut [f32], scale: f32, lo: usize, hi: usize) {
    // ggml: wp = x * scale + mask (0 or -inf), max, exp(x - max) with
    // v_expf per 16 lanes (each vector's lane sum added to a double), the tail
    // with expf, then multiply by (float)(1 / sum).
    let n = x.len();
    let mut max = f32::NEG_INFINITY;
    for (i, v) in x.iter_mut().enumerate() {
        *v = if (lo..hi).contains(&i) {
            *v * scale
        } else {
            f32::NEG_INFINITY
        };
        max = max.max(*v);
    }
    let nv = n & !(LANES - 1);
    let mut sum = 0f64;
    for chunk in x[..nv].chunks_exact_mut(LANES) {
        let mut vals = [0f32; LANES];
        for l in 0..LANES {
            vals[l] = v_expf(chunk[l] - max);
            chunk[l] = vals[l];
        }
        sum += reduce_add16(&vals) as f64;
    }
    for v in x[nv..].iter_mut() {
        let e = (*v - max).exp();
        sum += e as f64;
        *v = e;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

with_fma! {
    /// ggml's `soft_max_ext` over one row of raw scores with a 0/-inf mask
    /// that keeps entries `lo..hi` (the rest are masked).
    pub fn softmax_row(x: &mut [f32], scale: f32, lo: usize, hi: usize) = softmax_portable;
}

/// `ggml_gelu_f32` (tanh approximation) as the reference build evaluates it
/// when it fills the table.
#[inline(always)]
fn gelu_f32(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    // GCC contracts `1 + a*x*x` into an FMA.
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0)).tanh())
}

/// ggml's `ggml_table_gelu_f16`: GELU of every f16 value, rounded to f16.
fn gelu_table() -> &'static [f32] {
    use std::sync::OnceLock;
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|i| {
                let x = half::f16::from_bits(i).to_f32();
                half::f16::from_f32(gelu_f32(x)).to_f32()
            })
            .collect()
    })
}

/// `ggml_vec_geglu_f32` with `GGML_GELU_FP16` (ggml's default): `gelu(gate)`
/// looked up at `f16(gate)` (0 below -10, identity above 10), times `up`.
pub fn geglu_row(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let table = gelu_table();
    for ((y, &x), &g) in out.iter_mut().zip(gate).zip(up) {
        *y = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x * g
        } else {
            table[half::f16::from_f32(x).to_bits() as usize] * g
        };
    }
}

/// One pair of ggml's `rotate_pairs` as GCC compiles it for the reference
/// build (FMA contraction, checked against llama.cpp's activations):
/// `y0 = fma(x0, c, -(x1 s))`, `y1 = fma(x0, s, x1 c)`.
#[inline(always)]
fn rotate(x0: f32, x1: f32, c: f32, s: f32) -> (f32, f32) {
    (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c))
}

#[inline(always)]
fn rope_portable(x: &mut [f32], head_dim: usize, rot: usize, neox: bool, cos: &[f32], sin: &[f32]) {
    let half = rot / 2;
    let heads_per_token = x.len() / head_dim / (cos.len() / half);
    for (r, row) in x.chunks_exact_mut(head_dim).enumerate() {
        let t = r / heads_per_token;
        let (c, s) = (
            &cos[t * half..(t + 1) * half],
            &sin[t * half..(t + 1) * half],
        );
        for i in 0..half {
            let (a, b) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (y0, y1) = rotate(row[a], row[b], c[i], s[i]);
            row[a] = y0;
            row[b] = y1;
        }
    }
}

with_fma! {
    /// ggml's `rope_ext` (no YaRN, `freq_scale` 1) in place over rows of
    /// `head_dim` (`[tokens, heads, head_dim]`): the first `rot` dimensions are
    /// rotated, in adjacent pairs or, with `neox`, halves. `cos`/`sin`:
    /// `[tokens, rot / 2]` (see `Rope::tables`).
    pub fn rope(x: &mut [f32], head_dim: usize, rot: usize, neox: bool, cos: &[f32], sin: &[f32]) = rope_portable;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v_expf_is_close_to_exp_and_handles_edges() {
        for i in -2000..2000 {
            let x = i as f32 * 0.05;
            let (a, b) = (v_expf(x), x.exp());
            assert!(
                a == b || (a - b).abs() <= 4.0 * f32::EPSILON * b.max(f32::MIN_POSITIVE),
                "{x}: {a} vs {b}"
            );
        }
        assert_eq!(v_expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(v_expf(-200.0), 0.0);
        assert_eq!(v_expf(200.0), f32::INFINITY);
        assert!(v_expf(-100.0) > 0.0, "subnormal results are kept");
    }

    #[test]
    fn dots_match_f64() {
        let x: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let y: Vec<f32> = (0..256)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 5.0)
            .collect();
        let exact: f64 = x.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64).sum();
        for n in [64, 80, 256] {
            let exact_n: f64 = x[..n]
                .iter()
                .zip(&y[..n])
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum();
            let a = vec_dot_f32(&x[..n], &y[..n]) as f64;
            let b = tinyblas_dot_f32(&x[..n], &y[..n]) as f64;
            assert!((a - exact_n).abs() < 1e-3 && (b - exact_n).abs() < 1e-3);
        }
        let mut out = [0f32; 2];
        let rows = [x.clone(), x.clone()].concat();
        dots(&rows, 256, &y, &mut out, false);
        assert_eq!(out[0].to_bits(), dots_portable_one(&x, &y).to_bits());
        assert!((out[1] as f64 - exact).abs() < 1e-3);
    }

    fn dots_portable_one(x: &[f32], y: &[f32]) -> f32 {
        let mut out = [0f32];
        dots_portable(x, x.len(), y, &mut out, false);
        out[0]
    }

    #[test]
    fn softmax_sums_to_one_and_masks() {
        let mut x: Vec<f32> = (0..40).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        softmax_row(&mut x, 0.5, 0, 33);
        let s: f32 = x.iter().sum();
        assert!((s - 1.0).abs() < 1e-5);
        assert!(x[33..].iter().all(|&v| v == 0.0));
    }
}
