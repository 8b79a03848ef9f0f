//! mlxr-engine
