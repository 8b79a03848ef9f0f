//! mlxr-formats
