//! `exp` for the softmax over a whole vocabulary (262k entries per token).
//! libm's `exp` is a function call per element; this version is branch-free
//! arithmetic that the compiler vectorises, accurate to a few f32 ulps,
//! which is all a probability needs.

const LOG2_E: f32 = std::f32::consts::LOG2_E;
// ln 2 split in two so n * ln 2 is subtracted without losing bits.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
const ROUND: f32 = 12_582_912.0;
/// Below this `exp` is under f32's smallest normal number; treated as 0.
const MIN_ARG: f32 = -87.0;
const MAX_ARG: f32 = 88.0;

/// e^x for x in [-87, 88] (clamped outside, with 0 below -87 and for -inf).
#[inline]
pub(crate) fn exp(x: f32) -> f32 {
    let clamped = x.clamp(MIN_ARG, MAX_ARG);
    let rounded = clamped * LOG2_E + ROUND;
    let n = rounded - ROUND;
    let r = clamped - n * LN2_HI - n * LN2_LO;
    // e^r for |r| <= ln2/2 by its Taylor series up to r^7 (error < 1e-8).
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // n sits in the low mantissa bits of `rounded`; move it into the exponent.
    let scale = f32::from_bits(
        rounded
            .to_bits()
            .wrapping_sub(ROUND.to_bits())
            .wrapping_add(127)
            << 23,
    );
    let y = p * scale;
    if x < MIN_ARG {
        0.0
    } else {
        y
    }
}

/// Σ e^(x - shift).
pub(crate) fn sum_exp_shifted(xs: &[f32], shift: f32) -> f64 {
    sum_mapped(xs, |x| exp(x - shift))
}

/// Σ xs, as [`sum_exp_shifted`] adds.
pub(crate) fn sum(xs: &[f32]) -> f64 {
    sum_mapped(xs, |x| x)
}

/// Eight f32 lanes (so it vectorises) over blocks short enough to keep f32
/// rounding negligible, the block sums added in f64.
#[inline]
fn sum_mapped(xs: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    const LANES: usize = 8;
    const BLOCK: usize = 512;
    let mut total = 0f64;
    for block in xs.chunks(BLOCK) {
        let mut lanes = [0f32; LANES];
        let mut chunks = block.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (lane, &x) in lanes.iter_mut().zip(chunk) {
                *lane += f(x);
            }
        }
        let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
        total += f64::from(lanes.iter().sum::<f32>() + tail);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_to_libm_over_the_useful_range() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.000_37;
        }
        assert!(worst < 4e-7, "worst relative error {worst:e}");
    }

    #[test]
    fn edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert!(exp(100.0).is_finite());
        let xs: Vec<f32> = (0..1003).map(|i| -(i as f32) * 0.01).collect();
        let want: f64 = xs.iter().map(|&x| f64::from(x).exp()).sum();
        assert!((sum_exp_shifted(&xs, 0.0) - want).abs() / want < 1e-6);
    }
}
