//! Errors of quantization: each names the input (type, tensor, shape) that
//! was wrong.

use mlxr_formats::gguf::{GgmlType, GgufError};

#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    #[error(transparent)]
    Gguf(#[from] GgufError),

    #[error("unknown quantization type {name:?}; valid types: {valid}")]
    UnknownType { name: String, valid: String },

    #[error("cannot quantize to {0}: only F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K-Q6_K are written")]
    UnsupportedTarget(GgmlType),

    #[error("tensor {tensor} is {ty}, which cannot be read back as f32")]
    UnsupportedSource { tensor: String, ty: GgmlType },

    #[error("tensor {tensor} is already quantized ({ty}); requantizing loses quality and must be allowed explicitly")]
    Requantize { tensor: String, ty: GgmlType },

    #[error("{values} values are not whole rows of {n_per_row} (rows must be whole blocks of {block} for {ty})")]
    Shape {
        values: usize,
        n_per_row: usize,
        block: usize,
        ty: GgmlType,
    },

    #[error("tensor {tensor}: {message}")]
    Tensor { tensor: String, message: String },

    #[error("cancelled")]
    Cancelled,

    #[error("model metadata: {0}")]
    Metadata(String),
}
