//! mlxr-sampling
