//! mlxr-models
