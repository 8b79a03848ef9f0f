//! The quantization mixes of llama.cpp (`llama_ftype`): the names
//! `llama-quantize` accepts, the id written as `general.file_type`, and
//! each mix's default tensor type.

use std::fmt;
use std::str::FromStr;

use mlxr_formats::gguf::GgmlType;

use crate::QuantizeError;

macro_rules! file_types {
    ($( $variant:ident = $id:literal, $name:literal, $default:ident, $about:literal; )*) => {
        /// A quantization mix (llama.cpp's `llama_ftype`).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum FileType { $( $variant, )* }

        impl FileType {
            /// Every mix, in `llama-quantize --help` order.
            pub const ALL: &'static [FileType] = &[$(FileType::$variant),*];

            /// The value of `general.file_type`.
            pub fn id(self) -> u32 {
                match self { $( FileType::$variant => $id, )* }
            }

            /// The name `llama-quantize` takes, e.g. `Q4_K_M`.
            pub fn name(self) -> &'static str {
                match self { $( FileType::$variant => $name, )* }
            }

            /// The type of every tensor the mix's rules do not change.
            pub fn default_type(self) -> GgmlType {
                match self { $( FileType::$variant => GgmlType::$default, )* }
            }

            /// One line for `--help`.
            pub fn about(self) -> &'static str {
                match self { $( FileType::$variant => $about, )* }
            }
        }
    };
}

file_types! {
    Q4_0 = 2, "Q4_0", Q4_0, "4-bit, one scale per 32 weights";
    Q4_1 = 3, "Q4_1", Q4_1, "4-bit, scale and minimum per 32 weights";
    Q5_0 = 8, "Q5_0", Q5_0, "5-bit, one scale per 32 weights";
    Q5_1 = 9, "Q5_1", Q5_1, "5-bit, scale and minimum per 32 weights";
    Q2_K = 10, "Q2_K", Q2_K, "2-bit k-quant mix (attn_v, ffn_down in Q3_K/Q4_K)";
    Q3_K_S = 11, "Q3_K_S", Q3_K, "3-bit k-quants";
    Q3_K_M = 12, "Q3_K_M", Q3_K, "3-bit k-quant mix (attn_v, ffn_down, attn_output in Q4_K/Q5_K)";
    Q3_K_L = 13, "Q3_K_L", Q3_K, "3-bit k-quant mix (attn_v, ffn_down, attn_output in Q5_K)";
    Q4_K_S = 14, "Q4_K_S", Q4_K, "4-bit k-quants (first layers' attn_v, ffn_down in Q5_K)";
    Q4_K_M = 15, "Q4_K_M", Q4_K, "4-bit k-quant mix (half of attn_v, ffn_down in Q6_K)";
    Q5_K_S = 16, "Q5_K_S", Q5_K, "5-bit k-quants";
    Q5_K_M = 17, "Q5_K_M", Q5_K, "5-bit k-quant mix (half of attn_v, ffn_down in Q6_K)";
    Q6_K = 18, "Q6_K", Q6_K, "6-bit k-quants";
    Q8_0 = 7, "Q8_0", Q8_0, "8-bit, one scale per 32 weights";
    F16 = 1, "F16", F16, "16-bit floats";
    BF16 = 32, "BF16", BF16, "bfloat16";
    F32 = 0, "F32", F32, "32-bit floats";
}

impl FileType {
    /// Comma-separated names, for error messages.
    pub fn valid_names() -> String {
        Self::ALL
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl FromStr for FileType {
    type Err = QuantizeError;

    /// A name as `llama-quantize` spells it, in any case (`q4_k_m`), also
    /// `Q4_K` and `Q5_K` for their `_M` mixes and `Q3_K` for `Q3_K_M`, as
    /// llama-quantize accepts them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.trim().to_ascii_uppercase();
        let name = match upper.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            other => other,
        };
        Self::ALL
            .iter()
            .copied()
            .find(|t| t.name() == name)
            .ok_or_else(|| QuantizeError::UnknownType {
                name: s.to_string(),
                valid: Self::valid_names(),
            })
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_any_case() {
        for &t in FileType::ALL {
            assert_eq!(t.name().parse::<FileType>().unwrap(), t);
            assert_eq!(t.name().to_lowercase().parse::<FileType>().unwrap(), t);
        }
        assert_eq!("q4_k".parse::<FileType>().unwrap(), FileType::Q4_K_M);
        let e = "Q4_K_X".parse::<FileType>().unwrap_err().to_string();
        assert!(e.contains("Q4_K_X") && e.contains("Q4_K_M, Q5_K_S"), "{e}");
    }
}
