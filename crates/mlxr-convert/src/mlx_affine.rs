//! MLX's affine quantization of one matrix, as `mlx.core.quantize` computes
//! it on the CPU: each group of `group_size` values of a row gets a scale and
//! a bias, each value a `bits`-bit integer `q` with `w ≈ scale·q + bias`, the
//! integers packed little-endian into `u32` words (value `j` of a row at bit
//! `j·bits` of the row's bit stream, so at 3, 5 and 6 bits values straddle
//! words) — the inverse of mlxr-models' `AffineWeight`.

/// Bit widths `mlx_lm.convert -q` accepts for affine quantization.
pub const MLX_BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
/// Group sizes `mlx_lm.convert -q` accepts.
pub const MLX_GROUP_SIZES: [usize; 3] = [32, 64, 128];

/// A quantized `[rows, cols]` matrix: `rows × cols·bits/32` words and
/// `rows × cols/group_size` scales and biases (f32, before any rounding to
/// the stored dtype).
#[derive(Debug)]
pub struct Quantized {
    pub packed: Vec<u32>,
    pub scales: Vec<f32>,
    pub biases: Vec<f32>,
}

/// Quantizes `values` (row-major, rows of `cols`), whose row width
/// `group_size` divides. `values` are the weights in the precision MLX holds
/// them (an f16/bf16 tensor widened to f32).
pub fn quantize(values: &[f32], cols: usize, bits: u32, group_size: usize) -> Quantized {
    assert!(cols > 0 && cols.is_multiple_of(group_size));
    assert!(values.len().is_multiple_of(cols));
    assert!((group_size * bits as usize).is_multiple_of(32));
    let n_bins = ((1u32 << bits) - 1) as f32;
    let groups = values.len() / group_size;
    let mut out = Quantized {
        packed: vec![0u32; values.len() * bits as usize / 32],
        scales: Vec::with_capacity(groups),
        biases: Vec::with_capacity(groups),
    };
    let words_per_group = group_size * bits as usize / 32;
    for (g, group) in values.chunks_exact(group_size).enumerate() {
        let (scale, bias) = scale_and_bias(group, n_bins);
        let words = &mut out.packed[g * words_per_group..(g + 1) * words_per_group];
        for (j, &w) in group.iter().enumerate() {
            let q = ((w - bias) / scale).round_ties_even().clamp(0.0, n_bins) as u64;
            let bit = j * bits as usize;
            let (word, shift) = (bit / 32, bit % 32);
            let wide = q << shift;
            words[word] |= wide as u32;
            if shift + bits as usize > 32 {
                words[word + 1] |= (wide >> 32) as u32;
            }
        }
        out.scales.push(scale);
        out.biases.push(bias);
    }
    out
}

/// MLX's choice: the edge of larger magnitude (the minimum when it is
/// strictly larger in magnitude, else the maximum) is represented exactly,
/// as the bias, with a scale of the sign that makes every `q` non-negative;
/// the scale is then nudged so that the edge is an exact multiple of it.
/// A group whose edge rounds to `q0 = 0` (all zeros) keeps bias 0.
fn scale_and_bias(group: &[f32], n_bins: f32) -> (f32, f32) {
    const EPS: f32 = 1e-7;
    let (mut min, mut max) = (f32::INFINITY, f32::NEG_INFINITY);
    for &w in group {
        min = min.min(w);
        max = max.max(w);
    }
    let min_is_edge = min.abs() > max.abs();
    let magnitude = ((max - min) / n_bins).max(EPS);
    let mut scale = if min_is_edge { magnitude } else { -magnitude };
    let edge = if min_is_edge { min } else { max };
    let q0 = (edge / scale).round_ties_even();
    let mut bias = 0.0;
    if q0 != 0.0 {
        scale = edge / q0;
        bias = edge;
    }
    (scale, bias)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unpacks as mlxr-models reads the words back.
    fn dequantize(q: &Quantized, cols: usize, bits: u32, group_size: usize) -> Vec<f32> {
        let rows = q.packed.len() * 32 / bits as usize / cols;
        let mut out = Vec::new();
        let words_per_row = cols * bits as usize / 32;
        for r in 0..rows {
            let row = &q.packed[r * words_per_row..(r + 1) * words_per_row];
            for j in 0..cols {
                let bit = j * bits as usize;
                let mut v = (row[bit / 32] as u64) >> (bit % 32);
                if bit % 32 + bits as usize > 32 {
                    v |= (row[bit / 32 + 1] as u64) << (32 - bit % 32);
                }
                let v = (v & ((1 << bits) - 1)) as f32;
                let g = r * (cols / group_size) + j / group_size;
                out.push(q.scales[g] * v + q.biases[g]);
            }
        }
        out
    }

    #[test]
    /// Within one step `(max - min) / (2^bits - 1)` of its group: MLX keeps
    /// the larger edge exact and rescales so it is a whole number of steps,
    /// which can leave the far end up to a step short (clipped there).
    fn every_width_round_trips_within_a_step() {
        let values: Vec<f32> = (0..4 * 128)
            .map(|i| ((i * 37 % 101) as f32 / 50.0 - 1.0) * if i % 7 == 0 { 3.0 } else { 1.0 })
            .collect();
        for bits in MLX_BITS {
            for group in MLX_GROUP_SIZES {
                let q = quantize(&values, 128, bits, group);
                let back = dequantize(&q, 128, bits, group);
                for (i, (a, b)) in values.iter().zip(&back).enumerate() {
                    let g = &values[i / group * group..][..group];
                    let (lo, hi) = g
                        .iter()
                        .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                    let step = (hi - lo) / ((1u32 << bits) - 1) as f32;
                    assert!(
                        (a - b).abs() <= step + 1e-5,
                        "bits {bits} group {group} value {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_all_zero_group_has_zero_bias() {
        let q = quantize(&[0.0; 32], 32, 4, 32);
        assert_eq!(q.biases, [0.0]);
        assert!(q.packed.iter().all(|&w| w == 0));
    }
}
