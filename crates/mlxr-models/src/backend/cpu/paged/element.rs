//! The element types a paged KV cache can store, and their f32 conversions.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// A cache element type; keys and values are written from f32 and read back
/// as f32 one block at a time.
pub(crate) trait CacheElement: Copy + Send + Sync + 'static {
    /// `src` as f32: `src` itself for f32, else converted into `scratch`
    /// (which must hold at least `src.len()` values).
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32];

    /// Rounds `src` into `dst` (same length).
    fn store_f32(src: &[f32], dst: &mut [Self]);

    /// `src` as f32 into `dst` (same length).
    fn write_f32(src: &[Self], dst: &mut [f32]);
}

impl CacheElement for f32 {
    fn as_f32<'s>(src: &'s [Self], _scratch: &'s mut [f32]) -> &'s [f32] {
        src
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.copy_from_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl CacheElement for f16 {
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32] {
        let out = &mut scratch[..src.len()];
        src.convert_to_f32_slice(out);
        out
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
}

impl CacheElement for bf16 {
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32] {
        let out = &mut scratch[..src.len()];
        src.convert_to_f32_slice(out);
        out
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
}
