//! Building blocks of the decoder.

pub mod attention;
pub mod dense_attention;
pub mod linear;
pub mod mlp;
pub mod norm;
pub mod rope;

pub use attention::Attention;
pub use dense_attention::dense_attention;
pub use linear::QLinear;
pub use mlp::Mlp;
pub use norm::RmsNorm;
pub use rope::Rope;
