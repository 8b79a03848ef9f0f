// Decode matmuls of F16 and BF16 weights: y[t, n] = Σ_k W[n, k] · x[t, k]
// (+ b[n]) for W f16 or bf16 [n, k] and up to 8 rows of f32 activations
// x [tokens, k], accumulated in f32 (the activations are not rounded).
//
// A warp per weight row, 4 rows to a block. Lane l reads 8 halves (16
// bytes) at a time, a warp 256 consecutive elements; each lane has UNROLL
// such loads in flight before their math, since a one-token step is bound
// by the bytes in flight. The weights are read once: past L1, with L2 asked
// to fetch 256 bytes at a time (8B F16 tg128 197 t/s against 186 with
// __ldcs: bench/results/gpu-2026-12-03-s33.md); the activations by every
// row, through the caches.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "matvec.cuh"

#define UNROLL 4

// The f32 values of 8 F16 or BF16 weights (exact either way).
__device__ __forceinline__ void widen(const uint4 w, half, float2 (&wf)[4]) {
    const half2 *h = (const half2 *)&w;
#pragma unroll
    for (int i = 0; i < 4; ++i) wf[i] = __half22float2(h[i]);
}

__device__ __forceinline__ void widen(const uint4 w, __nv_bfloat16, float2 (&wf)[4]) {
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&w;
#pragma unroll
    for (int i = 0; i < 4; ++i) wf[i] = __bfloat1622float2(h[i]);
}

template <int B, typename T>
__device__ __forceinline__ void row_dot(const uint4 w, const float *__restrict__ x, int k,
                                        int at, int nb, float (&acc)[B]) {
    float2 wf[4];
    widen(w, T(), wf);
#pragma unroll
    for (int b = 0; b < B; ++b) {
        if (b >= nb) break;
        const float4 a = *(const float4 *)(x + (long)b * k + at);
        const float4 c = *(const float4 *)(x + (long)b * k + at + 4);
        float s = acc[b];
        s = fmaf(wf[0].x, a.x, s);
        s = fmaf(wf[0].y, a.y, s);
        s = fmaf(wf[1].x, a.z, s);
        s = fmaf(wf[1].y, a.w, s);
        s = fmaf(wf[2].x, c.x, s);
        s = fmaf(wf[2].y, c.y, s);
        s = fmaf(wf[3].x, c.z, s);
        s = fmaf(wf[3].y, c.w, s);
        acc[b] = s;
    }
}

// k a multiple of 8; W, x 16-byte aligned.
template <int B, typename T>
__device__ __forceinline__ void half_rows(const T *__restrict__ w,
                                          const float *__restrict__ x,
                                          const float *__restrict__ bias,
                                          float *__restrict__ y, int n, int k, int tokens) {
    const int row = blockIdx.x * ROWS + threadIdx.x / 32;
    if (row >= n) return;
    const int lane = threadIdx.x & 31;
    const int nb = min(B, tokens);
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    const T *wrow = w + (long)row * k;
    const int step = 32 * 8;
    for (int at0 = lane * 8; at0 < k; at0 += step * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int at = at0 + u * step;
            if (at < k) v[u] = load_stream(wrow + at);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int at = at0 + u * step;
            if (at < k) row_dot<B, T>(v[u], x, k, at, nb, acc);
        }
    }
    const float b_row = bias ? bias[row] : 0.f;
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float total = warp_sum(acc[b]);
        if (lane == b && b < nb) y[(long)b * n + row] = total + b_row;
    }
}

#define HALF_MV(B, NAME, T)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * ROWS) NAME##_mv##B(                     \
        const T *__restrict__ w, const float *__restrict__ x,                                 \
        const float *__restrict__ bias, float *__restrict__ y, int n, int k, int tokens) {    \
        half_rows<B, T>(w, x, bias, y, n, k, tokens);                                         \
    }

EACH_TOKENS(HALF_MV, half, half)
EACH_TOKENS(HALF_MV, bf16, __nv_bfloat16)
