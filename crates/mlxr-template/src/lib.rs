//! mlxr-template
