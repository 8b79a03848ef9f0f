//! GGML tensor element types: ids, names, block geometry.
//!
//! Block sizes and bytes per block follow ggml's type traits (the same numbers
//! as gguf-py's `GGML_QUANT_SIZES`); `QK_K` is 256.

use std::fmt;

/// Super-block size of the k-quants and most i-quants.
const QK_K: u64 = 256;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block:expr, $size:expr, $candle:literal; )*) => {
        /// A GGML tensor element type, as stored in a GGUF tensor info.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant, )*
        }

        impl GgmlType {
            /// Every known type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant),*];

            /// The type with this GGUF/ggml id, or `None` for removed or unknown ids.
            pub fn from_id(id: u32) -> Option<Self> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// The GGUF/ggml id of this type.
            pub fn id(self) -> u32 {
                match self { $( GgmlType::$variant => $id, )* }
            }

            /// The ggml name of this type, e.g. `"Q4_K"`, `"IQ2_XXS"`, `"BF16"`.
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// The type with this ggml name (case-insensitive).
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(name))
            }

            /// Number of elements in one block (1 for plain types).
            pub fn block_size(self) -> u64 {
                match self { $( GgmlType::$variant => $block, )* }
            }

            /// Number of bytes of one block.
            pub fn type_size(self) -> u64 {
                match self { $( GgmlType::$variant => $size, )* }
            }

            /// Whether candle 0.11 can load tensors of this type.
            pub fn is_supported_by_candle(self) -> bool {
                match self { $( GgmlType::$variant => $candle, )* }
            }
        }
    };
}

ggml_types! {
    F32 = 0, "F32", 1, 4, true;
    F16 = 1, "F16", 1, 2, true;
    Q4_0 = 2, "Q4_0", 32, 2 + 16, true;
    Q4_1 = 3, "Q4_1", 32, 2 + 2 + 16, true;
    Q5_0 = 6, "Q5_0", 32, 2 + 4 + 16, true;
    Q5_1 = 7, "Q5_1", 32, 2 + 2 + 4 + 16, true;
    Q8_0 = 8, "Q8_0", 32, 2 + 32, true;
    Q8_1 = 9, "Q8_1", 32, 4 + 4 + 32, true;
    Q2_K = 10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true;
    Q3_K = 11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true;
    Q4_K = 12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, true;
    Q5_K = 13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, true;
    Q6_K = 14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, true;
    Q8_K = 15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8, true;
    IQ2_XXS = 16, "IQ2_XXS", QK_K, 2 + QK_K / 4, false;
    IQ2_XS = 17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false;
    IQ3_XXS = 18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false;
    IQ1_S = 19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false;
    IQ4_NL = 20, "IQ4_NL", 32, 2 + 16, false;
    IQ3_S = 21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false;
    IQ2_S = 22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false;
    IQ4_XS = 23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false;
    I8 = 24, "I8", 1, 1, false;
    I16 = 25, "I16", 1, 2, false;
    I32 = 26, "I32", 1, 4, false;
    I64 = 27, "I64", 1, 8, false;
    F64 = 28, "F64", 1, 8, false;
    IQ1_M = 29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false;
    BF16 = 30, "BF16", 1, 2, true;
    TQ1_0 = 34, "TQ1_0", QK_K, 2 + 4 * 13, false;
    TQ2_0 = 35, "TQ2_0", QK_K, 2 + 64, false;
    MXFP4 = 39, "MXFP4", 32, 1 + 16, false;
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
            assert_eq!(t.to_string(), t.name());
        }
        assert_eq!(GgmlType::ALL.len(), 32);
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 40, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_id(removed), None, "id {removed}");
        }
    }

    #[test]
    fn sizes_match_ggml() {
        // (type, block size, bytes per block), cross-checked with gguf-py's GGML_QUANT_SIZES.
        let expected: &[(GgmlType, u64, u64)] = &[
            (GgmlType::F32, 1, 4),
            (GgmlType::F16, 1, 2),
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q8_1, 32, 40),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::IQ2_XXS, 256, 66),
            (GgmlType::IQ2_XS, 256, 74),
            (GgmlType::IQ3_XXS, 256, 98),
            (GgmlType::IQ1_S, 256, 50),
            (GgmlType::IQ4_NL, 32, 18),
            (GgmlType::IQ3_S, 256, 110),
            (GgmlType::IQ2_S, 256, 82),
            (GgmlType::IQ4_XS, 256, 136),
            (GgmlType::I8, 1, 1),
            (GgmlType::I16, 1, 2),
            (GgmlType::I32, 1, 4),
            (GgmlType::I64, 1, 8),
            (GgmlType::F64, 1, 8),
            (GgmlType::IQ1_M, 256, 56),
            (GgmlType::BF16, 1, 2),
            (GgmlType::TQ1_0, 256, 54),
            (GgmlType::TQ2_0, 256, 66),
            (GgmlType::MXFP4, 32, 17),
        ];
        assert_eq!(expected.len(), GgmlType::ALL.len());
        for &(t, bs, ts) in expected {
            assert_eq!((t.block_size(), t.type_size()), (bs, ts), "{t}");
        }
    }

    #[test]
    fn candle_support() {
        let supported: Vec<&str> = GgmlType::ALL
            .iter()
            .filter(|t| t.is_supported_by_candle())
            .map(|t| t.name())
            .collect();
        assert_eq!(
            supported,
            [
                "F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
                "Q4_K", "Q5_K", "Q6_K", "Q8_K", "BF16"
            ]
        );
    }
}
