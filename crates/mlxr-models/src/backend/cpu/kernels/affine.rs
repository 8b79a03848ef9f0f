//! MLX's affine-quantized weights and a matmul that runs on them directly.
//!
//! A row of `W` (`cols` values) is cut into groups of `group_size`; each value
//! is a `bits`-bit unsigned integer `q`, packed little-endian into `u32` words
//! (value `j` of a row sits at bit `j·bits` of the row's bit stream; at 3, 5
//! and 6 bits values straddle words, as `mlx.core.quantize` packs them), and
//! each group has a scale and a bias: `w = scale·q + bias`.
//!
//! `y = x·Wᵀ` is computed group by group as
//! `scale·Σ x_j q_j + bias·Σ x_j`: the group's integers are unpacked to f32
//! once per output row and reused for every token of the batch, and the
//! per-group sums of `x` are computed once per token. The float order does
//! not depend on the batch: each output is the same whether its token runs
//! alone or with others.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Bit widths MLX uses that this kernel reads.
pub const SUPPORTED_BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];

/// A quantized `[rows, cols]` matrix in MLX's affine layout.
#[derive(Debug)]
pub struct AffineWeight {
    rows: usize,
    cols: usize,
    bits: u32,
    group_size: usize,
    /// `rows × cols·bits/32` words.
    packed: Vec<u32>,
    /// `rows × cols/group_size`.
    scales: Vec<f32>,
    biases: Vec<f32>,
}

impl AffineWeight {
    /// Checks the sizes; `bits` must be one of [`SUPPORTED_BITS`].
    pub fn new(
        rows: usize,
        cols: usize,
        bits: u32,
        group_size: usize,
        packed: Vec<u32>,
        scales: Vec<f32>,
        biases: Vec<f32>,
    ) -> Result<Self, String> {
        if !SUPPORTED_BITS.contains(&bits) {
            return Err(format!(
                "{bits}-bit affine quantization is not supported (supported: 2, 3, 4, 5, 6, 8)"
            ));
        }
        if group_size == 0
            || !cols.is_multiple_of(group_size)
            || !(group_size * bits as usize).is_multiple_of(32)
        {
            return Err(format!(
                "group size {group_size} does not divide {cols} columns into whole words"
            ));
        }
        let words = rows * cols * bits as usize / 32;
        let groups = rows * (cols / group_size);
        if packed.len() != words || scales.len() != groups || biases.len() != groups {
            return Err(format!(
                "{rows}x{cols} at {bits} bits, group {group_size}: expected {words} words and \
                 {groups} scales/biases, found {}, {} and {}",
                packed.len(),
                scales.len(),
                biases.len()
            ));
        }
        Ok(Self {
            rows,
            cols,
            bits,
            group_size,
            packed,
            scales,
            biases,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    pub fn group_size(&self) -> usize {
        self.group_size
    }

    fn words_per_row(&self) -> usize {
        self.cols * self.bits as usize / 32
    }

    fn groups_per_row(&self) -> usize {
        self.cols / self.group_size
    }

    /// The integers of group `g` of row `r`, as f32, into `out` (`group_size`).
    #[inline(always)]
    fn unpack_group(&self, r: usize, g: usize, out: &mut [f32]) {
        let words_per_group = self.group_size * self.bits as usize / 32;
        let first = r * self.words_per_row() + g * words_per_group;
        unpack_stream(&self.packed[first..first + words_per_group], self.bits, out);
    }

    /// Row `r` as f32 values.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let groups = self.groups_per_row();
        for (g, chunk) in out.chunks_exact_mut(self.group_size).enumerate() {
            self.unpack_group(r, g, chunk);
            let (scale, bias) = (self.scales[r * groups + g], self.biases[r * groups + g]);
            for v in chunk.iter_mut() {
                *v = scale * *v + bias;
            }
        }
    }

    /// The whole matrix as f32, `[rows, cols]` row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(r, row);
        }
        out
    }

    /// [`Self::rows_product`] compiled for AVX2 + FMA (the same float
    /// operations in the same order, so results equal the portable path's).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2(
        &self,
        rows: std::ops::Range<usize>,
        xt: &[f32],
        m: usize,
        group_sums: &[f32],
    ) -> Vec<f32> {
        self.rows_product(rows, xt, m, group_sums)
    }

    /// Outputs of `rows` for every token, row-major `[rows.len(), m]`.
    /// `xt` is `x` with each group's values in word-lane order
    /// ([`lane_order`]).
    #[inline(always)]
    fn rows_product(
        &self,
        rows: std::ops::Range<usize>,
        xt: &[f32],
        m: usize,
        group_sums: &[f32],
    ) -> Vec<f32> {
        match self.bits {
            2 => self.rows_product_bits::<2>(rows, xt, m, group_sums),
            4 => self.rows_product_bits::<4>(rows, xt, m, group_sums),
            8 => self.rows_product_bits::<8>(rows, xt, m, group_sums),
            _ => self.rows_product_stream(rows, xt, m, group_sums),
        }
    }

    /// [`Self::rows_product_bits`] for widths whose values straddle words
    /// (3, 5, 6 bits): each group is unpacked in natural order once per row
    /// and dotted with every token the same way (`xt` is `x` unchanged), so
    /// a row's result does not depend on the batch either.
    #[inline(always)]
    fn rows_product_stream(
        &self,
        rows: std::ops::Range<usize>,
        x: &[f32],
        m: usize,
        group_sums: &[f32],
    ) -> Vec<f32> {
        let (gs, groups) = (self.group_size, self.groups_per_row());
        let mut part = vec![0.0f32; rows.len() * m];
        let mut q = vec![0.0f32; gs];
        for (i, r) in rows.enumerate() {
            for g in 0..groups {
                self.unpack_group(r, g, &mut q);
                let (scale, bias) = (self.scales[r * groups + g], self.biases[r * groups + g]);
                for t in 0..m {
                    let xs = &x[t * self.cols + g * gs..t * self.cols + (g + 1) * gs];
                    let (p, tail) = lane_dot(&q, xs, gs);
                    let dot = p.iter().sum::<f32>() + tail;
                    part[i * m + t] += scale * dot + bias * group_sums[t * groups + g];
                }
            }
        }
        part
    }

    #[inline(always)]
    fn rows_product_bits<const BITS: u32>(
        &self,
        rows: std::ops::Range<usize>,
        xt: &[f32],
        m: usize,
        group_sums: &[f32],
    ) -> Vec<f32> {
        let (gs, groups) = (self.group_size, self.groups_per_row());
        let words_per_group = gs * BITS as usize / 32;
        let words_per_row = self.words_per_row();
        let mut part = vec![0.0f32; rows.len() * m];
        // One token: multiply straight from the packed words. Several: unpack
        // each group once and reuse it for every token. Both give the same
        // per-lane products in the same order, so a row's result does not
        // depend on the batch. Lanes are reduced once per row, not per group.
        // Tokens in tiles small enough that their activations stay in cache
        // while every row of the task is multiplied with them.
        const TOKENS_PER_TILE: usize = 16;
        let mut q = vec![0.0f32; gs];
        let mut lanes = [[0.0f32; 8]; TOKENS_PER_TILE];
        let mut scalar = [0.0f32; TOKENS_PER_TILE];
        for t0 in (0..m).step_by(TOKENS_PER_TILE) {
            let tile = t0..(t0 + TOKENS_PER_TILE).min(m);
            for (i, r) in rows.clone().enumerate() {
                lanes.fill([0.0; 8]);
                scalar.fill(0.0);
                let row_words = &self.packed[r * words_per_row..(r + 1) * words_per_row];
                for (g, words) in row_words.chunks_exact(words_per_group).enumerate() {
                    let (scale, bias) = (self.scales[r * groups + g], self.biases[r * groups + g]);
                    if m > 1 {
                        unpack_lanes::<BITS>(words, &mut q);
                    }
                    for (k, t) in tile.clone().enumerate() {
                        let xs = &xt[t * self.cols + g * gs..t * self.cols + (g + 1) * gs];
                        let (p, tail) = if m > 1 {
                            lane_dot(&q, xs, words.len())
                        } else {
                            group_dot::<BITS>(words, xs)
                        };
                        for l in 0..8 {
                            lanes[k][l] += scale * p[l];
                        }
                        scalar[k] += scale * tail + bias * group_sums[t * groups + g];
                    }
                }
                for (k, t) in tile.clone().enumerate() {
                    part[i * m + t] = lanes[k].iter().sum::<f32>() + scalar[k];
                }
            }
        }
        part
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ`.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(
            x.len(),
            m * self.cols,
            "activations do not match the weight"
        );
        let gs = self.group_size;
        let group_sums: Vec<f32> = x.chunks_exact(gs).map(sum8).collect();
        let xt = lane_order(x, gs, self.bits);
        // Output rows in chunks, each computing every token; rows are then
        // scattered into the token-major result.
        const ROWS_PER_TASK: usize = 16;
        let parts: Vec<Vec<f32>> = (0..self.rows.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|task| {
                let rows = task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(self.rows);
                #[cfg(target_arch = "x86_64")]
                if super::isa::allows(super::isa::Isa::Avx2)
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    return unsafe { self.rows_avx2(rows, &xt, m, &group_sums) };
                }
                self.rows_product(rows, &xt, m, &group_sums)
            })
            .collect();
        let mut y = vec![0.0f32; m * self.rows];
        for (task, part) in parts.iter().enumerate() {
            let first = task * ROWS_PER_TASK;
            for (i, row) in part.chunks_exact(m).enumerate() {
                for (t, &v) in row.iter().enumerate() {
                    y[t * self.rows + first + i] = v;
                }
            }
        }
        y
    }
}

/// `x` with every group's values reordered to match the packed words:
/// position `k·W + j` holds the value in bits `k·BITS..` of word `j` (of `W`
/// words per group), so that one shift and mask of all the group's words
/// lines up with a contiguous run of `x`.
/// Widths whose values straddle words keep `x` as it is.
fn lane_order(x: &[f32], group_size: usize, bits: u32) -> Vec<f32> {
    if !32u32.is_multiple_of(bits) {
        return x.to_vec();
    }
    let per_word = 32 / bits as usize;
    let words = group_size / per_word;
    let mut out = vec![0.0f32; x.len()];
    for (src, dst) in x
        .chunks_exact(group_size)
        .zip(out.chunks_exact_mut(group_size))
    {
        for j in 0..words {
            for k in 0..per_word {
                dst[k * words + j] = src[j * per_word + k];
            }
        }
    }
    out
}

/// `out.len()` `bits`-bit integers, as f32, read from the little-endian bit
/// stream `words` (value `k` at bit `k·bits`, possibly across two words).
#[inline(always)]
fn unpack_stream(words: &[u32], bits: u32, out: &mut [f32]) {
    let mask = (1u64 << bits) - 1;
    for (k, v) in out.iter_mut().enumerate() {
        let bit = k * bits as usize;
        let (word, shift) = (bit / 32, bit % 32);
        let mut pair = words[word] as u64;
        if shift + bits as usize > 32 {
            pair |= (words[word + 1] as u64) << 32;
        }
        *v = ((pair >> shift) & mask) as f32;
    }
}

/// The group's integers as f32 in lane order (see [`lane_order`]).
#[inline(always)]
fn unpack_lanes<const BITS: u32>(words: &[u32], q: &mut [f32]) {
    let mask = (1u32 << BITS) - 1;
    for (k, lane) in q.chunks_exact_mut(words.len()).enumerate() {
        let shift = k as u32 * BITS;
        for (v, &w) in lane.iter_mut().zip(words) {
            *v = ((w >> shift) & mask) as f32;
        }
    }
}

/// [`group_dot`] on unpacked integers: the same products summed in the same
/// order (eight lanes over the words, bit positions in turn, then the tail).
#[inline(always)]
fn lane_dot(q: &[f32], xs: &[f32], n: usize) -> ([f32; 8], f32) {
    let mut acc = [0.0f32; 8];
    let mut tail = 0.0f32;
    for (qk, xk) in q.chunks_exact(n).zip(xs.chunks_exact(n)) {
        let (qc, xc) = (qk.chunks_exact(8), xk.chunks_exact(8));
        for (&a, &b) in qc.remainder().iter().zip(xc.remainder()) {
            tail += a * b;
        }
        for (a, b) in qc.zip(xc) {
            for l in 0..8 {
                acc[l] += a[l] * b[l];
            }
        }
    }
    (acc, tail)
}

/// Σ q·x over one group: `words` packed integers, `xs` in lane order.
/// Eight lanes over the words, one pass per bit position (vectorises);
/// returns the lanes and the part past the last whole eight words.
#[inline(always)]
fn group_dot<const BITS: u32>(words: &[u32], xs: &[f32]) -> ([f32; 8], f32) {
    let per_word = (32 / BITS) as usize;
    let mask = (1u32 << BITS) - 1;
    let n = words.len();
    let mut acc = [0.0f32; 8];
    let mut tail = 0.0f32;
    for k in 0..per_word {
        let shift = k as u32 * BITS;
        let xk = &xs[k * n..(k + 1) * n];
        let (wc, xc) = (words.chunks_exact(8), xk.chunks_exact(8));
        for (&w, &x) in wc.remainder().iter().zip(xc.remainder()) {
            tail += ((w >> shift) & mask) as f32 * x;
        }
        for (w, x) in wc.zip(xc) {
            for l in 0..8 {
                acc[l] += ((w[l] >> shift) & mask) as f32 * x[l];
            }
        }
    }
    (acc, tail)
}

#[inline(always)]
fn sum8(a: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = a.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for x in chunks {
        for k in 0..8 {
            acc[k] += x[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// [`AffineWeight::matmul`] as a candle op on `[.., cols]` f32 activations.
pub struct AffineMatMul<'a>(pub &'a AffineWeight);

impl AffineMatMul<'_> {
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }
}

impl CustomOp1 for AffineMatMul<'_> {
    fn name(&self) -> &'static str {
        "mlxr-affine-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, mut dims) = super::matmul_input(self.name(), storage, layout, self.0.cols)?;
        let y = self.0.matmul(x, x.len() / self.0.cols);
        *dims.last_mut().expect("checked") = self.0.rows;
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(rows: usize, cols: usize, bits: u32, gs: usize, seed: u64) -> AffineWeight {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let words = rows * cols * bits as usize / 32;
        let groups = rows * cols / gs;
        AffineWeight::new(
            rows,
            cols,
            bits,
            gs,
            (0..words).map(|_| rng.random()).collect(),
            (0..groups).map(|_| rng.random_range(-0.1..0.1)).collect(),
            (0..groups).map(|_| rng.random_range(-0.5..0.5)).collect(),
        )
        .unwrap()
    }

    /// Value `j` of row `r` read bit by bit from the little-endian stream.
    fn reference_value(w: &AffineWeight, r: usize, j: usize) -> f32 {
        let bit0 = j * w.bits as usize;
        let mut q = 0u32;
        for b in 0..w.bits as usize {
            let bit = bit0 + b;
            let word = w.packed[r * w.words_per_row() + bit / 32];
            q |= ((word >> (bit % 32)) & 1) << b;
        }
        let g = r * w.groups_per_row() + j / w.group_size;
        w.scales[g] * q as f32 + w.biases[g]
    }

    #[test]
    fn matmul_matches_dequantized_f64_reference() {
        for (bits, gs, rows, cols, m) in [
            (4, 64, 37, 128, 1),
            (4, 32, 16, 96, 5),
            (8, 32, 40, 64, 3),
            (8, 128, 9, 256, 17),
            (2, 64, 23, 192, 2),
            (3, 32, 19, 96, 1),
            (3, 64, 8, 128, 4),
            (5, 32, 11, 160, 3),
            (5, 128, 7, 256, 1),
            (6, 64, 13, 192, 5),
            (6, 32, 5, 64, 1),
        ] {
            let w = random(rows, cols, bits, gs, bits as u64 * 1000 + m as u64);
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
            let y = w.matmul(&x, m);
            let dense = w.dequantize();
            for t in 0..m {
                for r in 0..rows {
                    let want: f64 = (0..cols)
                        .map(|j| x[t * cols + j] as f64 * reference_value(&w, r, j) as f64)
                        .sum();
                    assert!(
                        (dense[r * cols + 3] - reference_value(&w, r, 3)).abs() < 1e-6,
                        "dequantize"
                    );
                    let got = y[t * rows + r] as f64;
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "bits {bits} group {gs}: y[{t},{r}] = {got}, want {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_row_does_not_depend_on_the_batch() {
        for bits in [4, 3, 5, 6] {
            let w = random(33, 128, bits, 64, 1);
            let mut rng = rand::rngs::StdRng::seed_from_u64(2);
            let x: Vec<f32> = (0..6 * 128).map(|_| rng.random_range(-1.0..1.0)).collect();
            let batched = w.matmul(&x, 6);
            for t in 0..6 {
                let alone = w.matmul(&x[t * 128..(t + 1) * 128], 1);
                assert_eq!(alone, batched[t * 33..(t + 1) * 33], "{bits} bits");
            }
        }
    }

    /// `mx.quantize` of a [2, 64] matrix at 3, 5 and 6 bits (group 32),
    /// against `mx.dequantize` (tests/fixtures/fp8-nf4/mlx-pack.json, from
    /// scripts/fixtures/fp8-nf4.py, mlx 0.32.4).
    #[test]
    fn straddling_widths_match_mlx_dequantize() {
        let path = mlxr_testkit::fixture_path("fp8-nf4/mlx-pack.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let floats = |v: &serde_json::Value| -> Vec<f32> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        };
        let x = floats(&doc["weight"]);
        for case in doc["cases"].as_array().unwrap() {
            let bits = case["bits"].as_u64().unwrap() as u32;
            let packed: Vec<u32> = case["packed"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().unwrap() as u32)
                .collect();
            let w = AffineWeight::new(
                2,
                64,
                bits,
                32,
                packed,
                floats(&case["scales"]),
                floats(&case["biases"]),
            )
            .unwrap();
            let want = floats(&case["dequantized"]);
            let got = w.dequantize();
            assert!(
                max_abs(&got, &want) <= 1e-6,
                "{bits} bits: dequantize differs from mlx by {}",
                max_abs(&got, &want)
            );
            // One token through the kernel against the dot with mlx's values.
            let y = w.matmul(&x[..64], 1);
            for (r, &yr) in y.iter().enumerate() {
                let dot: f32 = want[r * 64..(r + 1) * 64]
                    .iter()
                    .zip(&x[..64])
                    .map(|(a, b)| a * b)
                    .sum();
                assert!(
                    (yr - dot).abs() <= 1e-4,
                    "{bits} bits row {r}: {yr} vs {dot}"
                );
            }
        }
    }

    fn max_abs(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(
            AffineWeight::new(2, 64, 7, 32, vec![0; 28], vec![0.0; 4], vec![0.0; 4])
                .unwrap_err()
                .contains("7-bit")
        );
        assert!(AffineWeight::new(2, 64, 3, 32, vec![0; 11], vec![0.0; 4], vec![0.0; 4]).is_err());
        assert!(AffineWeight::new(2, 64, 4, 48, vec![0; 8], vec![0.0; 4], vec![0.0; 4]).is_err());
        assert!(AffineWeight::new(2, 64, 4, 32, vec![0; 7], vec![0.0; 4], vec![0.0; 4]).is_err());
    }
}
