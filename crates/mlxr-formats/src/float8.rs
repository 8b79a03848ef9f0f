//! The two 8-bit float element formats of FP8 checkpoints (safetensors
//! dtypes `F8_E4M3` and `F8_E5M2`), decoded to f32 exactly.
//!
//! - E4M3 "fn" (OCP FP8, torch `float8_e4m3fn`): sign, 4 exponent bits (bias
//!   7), 3 mantissa bits; no infinities, `S.1111.111` is NaN; largest 448.
//! - E5M2 (torch `float8_e5m2`): IEEE-like, 5 exponent bits (bias 15), 2
//!   mantissa bits, with infinities and NaNs; largest 57344. It is the top
//!   byte of an IEEE half.

/// An FP8 element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Float8 {
    E4M3,
    E5M2,
}

impl Float8 {
    /// The format of a safetensors dtype name (`F8_E4M3`, `F8_E5M2`).
    pub fn from_safetensors(dtype: &str) -> Option<Self> {
        match dtype {
            "F8_E4M3" => Some(Self::E4M3),
            "F8_E5M2" => Some(Self::E5M2),
            _ => None,
        }
    }

    /// The f32 value of every byte, for decoding by table.
    pub fn table(self) -> [f32; 256] {
        let decode = match self {
            Self::E4M3 => e4m3_to_f32,
            Self::E5M2 => e5m2_to_f32,
        };
        std::array::from_fn(|b| decode(b as u8))
    }
}

/// One E4M3 ("fn") byte as f32.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 3) & 0xf) as i32;
    let man = (b & 0x7) as f32;
    if exp == 0xf && b & 0x7 == 0x7 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        man / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    sign * magnitude
}

/// One E5M2 byte as f32.
pub fn e5m2_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 2) & 0x1f) as i32;
    let man = (b & 0x3) as f32;
    let magnitude = match exp {
        0 => man / 4.0 * 2f32.powi(-14),
        0x1f if man == 0.0 => f32::INFINITY,
        0x1f => return f32::NAN,
        _ => (1.0 + man / 4.0) * 2f32.powi(exp - 15),
    };
    sign * magnitude
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_known_values() {
        assert_eq!(e4m3_to_f32(0x00), 0.0);
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0xb8), -1.0);
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(e4m3_to_f32(0x78), 256.0);
        assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
        let finite = Float8::E4M3
            .table()
            .iter()
            .filter(|v| v.is_finite())
            .count();
        assert_eq!(finite, 254);
    }

    #[test]
    fn e5m2_is_the_top_byte_of_a_half() {
        for b in 0..=255u8 {
            let half = half_bits_to_f32((b as u16) << 8);
            let got = e5m2_to_f32(b);
            assert!(
                got == half || (got.is_nan() && half.is_nan()),
                "{b:#04x}: {got} vs {half}"
            );
        }
        assert_eq!(e5m2_to_f32(0x7b), 57344.0);
        assert_eq!(e5m2_to_f32(0x7c), f32::INFINITY);
    }

    /// IEEE half -> f32, written out so the test does not use the code it checks.
    fn half_bits_to_f32(h: u16) -> f32 {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = ((h >> 10) & 0x1f) as i32;
        let man = (h & 0x3ff) as f32;
        sign * match exp {
            0 => man / 1024.0 * 2f32.powi(-14),
            0x1f if man == 0.0 => f32::INFINITY,
            0x1f => f32::NAN,
            _ => (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
        }
    }

    #[test]
    fn dtype_names() {
        assert_eq!(Float8::from_safetensors("F8_E4M3"), Some(Float8::E4M3));
        assert_eq!(Float8::from_safetensors("F8_E5M2"), Some(Float8::E5M2));
        assert_eq!(Float8::from_safetensors("BF16"), None);
    }
}
