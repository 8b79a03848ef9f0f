//! Software prefetch for the tile kernels. Decode waits on memory without
//! it (a quarter of Qwen2.5-1.5B's Q4_K tile-kernel samples on a Zen 1 EPYC
//! under AVX2 stalled right after a tile's first load; under AVX-512 on a
//! Zen 5 its decode ran at 0.6x of the AVX2 path's), so each kernel asks
//! for the lines of the tiles [`AHEAD`] ahead as it reads the current ones
//! (the Q4_K and Q6_K ones only in the passes `matmul::first_pass`
//! picks). Past a row group's slice those are the next group's tiles, which
//! a thread usually takes next.

/// How many tiles ahead (pairs of tiles for the 32-element kernels, which
/// walk their tiles in pairs) the kernels ask for weight lines.
pub const AHEAD: usize = 2;

/// Asks for the 64-byte line holding `at`. The address may lie past the end
/// of the weights: it is formed with wrapping arithmetic and only prefetched,
/// never read, and a prefetch never faults.
#[inline(always)]
pub fn line(at: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: prefetching touches no memory the program can observe; SSE is
    // part of x86-64's baseline.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at as *const i8) };
}

/// Asks for line `i` (of 64 bytes) of the tile [`AHEAD`] tiles after
/// `tile` in memory, if a tile has that many lines.
#[inline(always)]
pub fn tile_line<U>(tile: &U, i: usize) {
    if i * 64 < std::mem::size_of::<U>() {
        line(
            (tile as *const U as *const u8).wrapping_add(AHEAD * std::mem::size_of::<U>() + 64 * i),
        );
    }
}
