//! Scalar conversions exactly as ggml's CPU reference does them: round to
//! nearest even for f16 and bf16 (bf16 keeps NaNs quiet).

pub fn f32_to_f16_bits(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

pub fn f16_bits_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// Little-endian F16 `bytes` into `out` (one value a pair), a few hundred
/// at a time through half's slice conversion (the CPU's conversion
/// instructions where it has them).
pub fn f16_bytes_to_f32(bytes: &[u8], out: &mut [f32]) {
    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
    let mut bits = [0u16; 256];
    for (bytes, out) in bytes.chunks(2 * bits.len()).zip(out.chunks_mut(bits.len())) {
        let bits = &mut bits[..out.len()];
        for (d, b) in bits.iter_mut().zip(bytes.chunks_exact(2)) {
            *d = u16::from_le_bytes([b[0], b[1]]);
        }
        bits.reinterpret_cast::<half::f16>()
            .convert_to_f32_slice(out);
    }
}

pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounds_to_nearest_even() {
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(65504.0), 0x7bff);
        assert_eq!(f32_to_f16_bits(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 / 2048.0), 0x3c02);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::NAN) & 0x7fc0, 0x7fc0);
    }
}
