//! mlxr-tokenizer
