// Q8_K quantization of activations, shared by the kernels that produce
// them (quant_matmul.cu's norms and GLU, paged_attention.cu's decode output).
#pragma once
#include <stdint.h>

#ifndef QK_K
#define QK_K 256
#endif

// One warp quantizes 256 activations; lane l holds elements 8l..8l+8 in
// `v`. G lanes share a scale: G = 32, one per 256 (Q8_K, for the K-quants);
// G = 4, one per 32 (for Q4_0, Q4_1, Q5_0 and Q8_0 weights on widths that
// are not whole super-blocks), `d` then holds the warp's 8 scales. Lanes
// not `active` (past the row's end: whole groups of G) write nothing.
// Mirrors quantize_row_q8_K_ref per group: max = the first element of
// largest magnitude, iscale = -127 / max, q = min(127,
// round_half_even(iscale · x)), d = 1 / iscale; `bsums` gets the sum of
// every 16 quants. The _rn intrinsics keep IEEE rounding under
// --use_fast_math.
template <int G>
__device__ __forceinline__ void quantize_values(const float v[8], int8_t *qs, float *d,
                                                int *bsums, bool active = true) {
    const int lane = threadIdx.x & 31;
    float amax = 0.f, max = 0.f;
    int at = 0x7fffffff;
    for (int i = 0; i < 8; ++i) {
        const float ax = fabsf(v[i]);
        if (ax > amax) { amax = ax; max = v[i]; at = lane * 8 + i; }
    }
    for (int off = G / 2; off > 0; off >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffff, amax, off);
        const float om = __shfl_xor_sync(0xffffffff, max, off);
        const int oi = __shfl_xor_sync(0xffffffff, at, off);
        if (oa > amax || (oa == amax && oi < at)) { amax = oa; max = om; at = oi; }
    }
    int8_t q[8];
    int sum = 0;
    float scale = 0.f;
    if (amax == 0.f) {
        for (int i = 0; i < 8; ++i) q[i] = 0;
    } else {
        const float iscale = __fdiv_rn(-127.f, max);
        for (int i = 0; i < 8; ++i) {
            q[i] = (int8_t)fminf(rintf(__fmul_rn(iscale, v[i])), 127.f);
            sum += q[i];
        }
        scale = __fdiv_rn(1.f, iscale);
    }
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    if (!active) return;
    *(int2 *)(qs + lane * 8) = *(const int2 *)q;
    if ((lane & 1) == 0) bsums[lane / 2] = sum;
    if (lane % G == 0) d[lane / G] = scale;
}
