//! Building blocks of the decoder.

pub mod attention;
pub mod embedding;
pub mod linear;
pub mod mlp;
pub mod norm;
pub mod projections;
pub mod rope;

pub use attention::Attention;
pub use embedding::Embedding;
pub use linear::Linear;
pub use mlp::Mlp;
pub use norm::RmsNorm;
pub use projections::Projections;
pub use rope::Rope;
