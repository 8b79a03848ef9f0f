// Weights kept in their checkpoint's codes on the GPU, decoded inside the
// kernels: FP8 (E4M3 or E5M2, one byte a weight) with f32 block scales, and
// bitsandbytes 4-bit (NF4 or FP4, two codes a byte) with an f32 absmax per
// block of the flattened matrix. Every weight is decoded to the f32 product
// the CPU's kernels use (code value · scale, rounded once), so both sides
// multiply the same values; only the order of the sums differs.
//
// Decode matmuls, y[t, n] = Σ_k W[n, k] · x[t, k] (+ b[n]) for up to 8 rows
// of f32 activations: a warp per RW weight rows, 4 warps a block, each lane
// streaming 16 bytes of codes a row at a time, several loads in flight,
// past L1. Longer steps decode W to F16 once per call (`*_to_f16`) for
// cuBLAS.
//
// Layouts (see the CPU's fp8.rs and bnb4.rs):
//   FP8: codes [n, k]; scales [⌈n/bn⌉, ⌈k/bk⌉] for blocks [bn, bk], edge
//        blocks partial. k a multiple of 16.
//   4-bit: the flattened matrix two codes a byte, the even element in the
//        high nibble; absmax [⌈n·k/bs⌉]. k and bs multiples of 32, so a
//        lane's 32 codes (16 bytes) share one absmax.

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "matvec.cuh"

// The f32 values of 16 FP8 codes (exact: every E4M3 and E5M2 value is an
// F16 one; sm_89 and later convert two a instruction).
template <__nv_fp8_interpretation_t F>
__device__ __forceinline__ void fp8_values(const uint4 v, float (&f)[16]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(words[i] & 0xFFFF, F);
        const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(words[i] >> 16, F);
        const float2 a = __half22float2(*(const __half2 *)&lo);
        const float2 b = __half22float2(*(const __half2 *)&hi);
        f[4 * i] = a.x;
        f[4 * i + 1] = a.y;
        f[4 * i + 2] = b.x;
        f[4 * i + 3] = b.y;
    }
}

// Codes [c0, c0 + 16) of a row whose scale row is `srow`, times their
// scales (the F16 decode's values).
template <__nv_fp8_interpretation_t F>
__device__ __forceinline__ void fp8_decode(const uint4 v, const float *__restrict__ srow, int c0,
                                           int bk, float (&w)[16]) {
    fp8_values<F>(v, w);
    if (bk % 16 == 0) {
        const float s = srow[c0 / bk];
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i] = __fmul_rn(w[i], s);
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i] = __fmul_rn(w[i], srow[(c0 + i) / bk]);
    }
}

// Weight rows a warp takes at once (RW): each token's activations are
// loaded once for all of them, and the warp has RW rows' loads in flight
// (a row of 1,536 FP8 codes is 3 loads a lane). The launch
// (cuda/decoded.rs) uses the same numbers.
#define RW_FOR(B) ((B) <= 2 ? 4 : 2)

// The warp's first row and its RW rows' starts (rows past n repeat the
// last, their sums unused).
#define WARP_ROWS(RW)                                                                         \
    const int row0 = (blockIdx.x * ROWS + threadIdx.x / 32) * (RW);                           \
    if (row0 >= n) return;                                                                    \
    const int lane = threadIdx.x & 31;                                                        \
    const int nb = min(B, tokens);                                                            \
    float acc[RW][B];                                                                         \
    _Pragma("unroll") for (int r = 0; r < (RW); ++r)                                          \
        _Pragma("unroll") for (int b = 0; b < B; ++b) acc[r][b] = 0.f;

// Each row's sums to y, plus its bias.
template <int B, int RW>
__device__ __forceinline__ void store_rows(const float (&acc)[RW][B], const float *__restrict__ bias,
                                           float *__restrict__ y, int n, int row0, int nb) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        const int row = row0 + r;
        const float b_row = bias && row < n ? bias[row] : 0.f;
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const float total = warp_sum(acc[r][b]);
            if (lane == b && b < nb && row < n) y[(long)b * n + row] = total + b_row;
        }
    }
}

// Where a block's 16 columns share one scale (bk a multiple of 16), the
// codes' values are summed against the activations first and the sum taken
// times the scale once: the CPU's f32 result up to rounding.
template <int B, __nv_fp8_interpretation_t F>
__device__ __forceinline__ void fp8_rows(const uint8_t *__restrict__ codes,
                                         const float *__restrict__ scales,
                                         const float *__restrict__ x,
                                         const float *__restrict__ bias, float *__restrict__ y,
                                         int n, int k, int tokens, int bn, int bk) {
    constexpr int RW = RW_FOR(B);
    constexpr int UNROLL_R = 2;
    WARP_ROWS(RW)
    const int scale_cols = (k + bk - 1) / bk;
    const uint8_t *wrow[RW];
    const float *srow[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        const int row = min(row0 + r, n - 1);
        wrow[r] = codes + (long)row * k;
        srow[r] = scales + (long)(row / bn) * scale_cols;
    }
    const int step = 32 * 16;
    for (int c00 = lane * 16; c00 < k; c00 += step * UNROLL_R) {
        uint4 v[UNROLL_R][RW];
#pragma unroll
        for (int u = 0; u < UNROLL_R; ++u) {
            const int c0 = c00 + u * step;
            if (c0 < k)
#pragma unroll
                for (int r = 0; r < RW; ++r) v[u][r] = load_stream(wrow[r] + c0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL_R; ++u) {
            const int c0 = c00 + u * step;
            if (c0 >= k) break;
            float w[RW][16], s[RW];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                if (bk % 16 == 0) {
                    fp8_values<F>(v[u][r], w[r]);
                    s[r] = srow[r][c0 / bk];
                } else {
                    fp8_decode<F>(v[u][r], srow[r], c0, bk, w[r]);
                    s[r] = 1.f;
                }
            }
#pragma unroll
            for (int b = 0; b < B; ++b) {
                if (b >= nb) break;
                const float *xb = x + (long)b * k + c0;
                float xv[16];
#pragma unroll
                for (int i = 0; i < 16; i += 4) {
                    const float4 a = *(const float4 *)(xb + i);
                    xv[i] = a.x; xv[i + 1] = a.y; xv[i + 2] = a.z; xv[i + 3] = a.w;
                }
#pragma unroll
                for (int r = 0; r < RW; ++r) {
                    float p = 0.f;
#pragma unroll
                    for (int i = 0; i < 16; ++i) p = fmaf(w[r][i], xv[i], p);
                    acc[r][b] = fmaf(p, s[r], acc[r][b]);
                }
            }
        }
    }
    store_rows<B, RW>(acc, bias, y, n, row0, nb);
}

// The values of 32 codes (16 bytes, high nibble first) from `table`.
__device__ __forceinline__ void bnb4_values(const uint4 v, const float *table, float (&w)[32]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t byte = (words[i] >> (8 * j)) & 0xFF;
            w[8 * i + 2 * j] = table[byte >> 4];
            w[8 * i + 2 * j + 1] = table[byte & 0xF];
        }
    }
}

// The 32 codes' values times `absmax` (the F16 decode's values).
__device__ __forceinline__ void bnb4_decode(const uint4 v, const float *table, float absmax,
                                            float (&w)[32]) {
    bnb4_values(v, table, w);
#pragma unroll
    for (int i = 0; i < 32; ++i) w[i] = __fmul_rn(w[i], absmax);
}

// A lane's 32 codes share one absmax: summed against the activations
// first, the sum times the absmax once.
template <int B>
__device__ __forceinline__ void bnb4_rows(const uint8_t *__restrict__ packed,
                                          const float *__restrict__ absmax,
                                          const float *__restrict__ code,
                                          const float *__restrict__ x,
                                          const float *__restrict__ bias, float *__restrict__ y,
                                          int n, int k, int tokens, int bs) {
    // The 16 code values, shared: a warp's lookups hit at most 16 words,
    // each in its own bank.
    __shared__ float table[16];
    if (threadIdx.x < 16) table[threadIdx.x] = code[threadIdx.x];
    __syncthreads();
    constexpr int RW = RW_FOR(B);
    WARP_ROWS(RW)
    long first[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) first[r] = (long)min(row0 + r, n - 1) * k;
    const int step = 32 * 32;
    for (int c00 = lane * 32; c00 < k; c00 += step * 2) {
        uint4 v[2][RW];
        float am[2][RW];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int c0 = c00 + u * step;
            if (c0 < k)
#pragma unroll
                for (int r = 0; r < RW; ++r) {
                    v[u][r] = load_stream(packed + (first[r] + c0) / 2);
                    am[u][r] = absmax[(first[r] + c0) / bs];
                }
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int c0 = c00 + u * step;
            if (c0 >= k) break;
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                float w[32];
                bnb4_values(v[u][r], table, w);
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    if (b >= nb) break;
                    const float *xb = x + (long)b * k + c0;
                    float p = 0.f;
#pragma unroll
                    for (int i = 0; i < 32; i += 4) {
                        const float4 a = *(const float4 *)(xb + i);
                        p = fmaf(w[i], a.x, p);
                        p = fmaf(w[i + 1], a.y, p);
                        p = fmaf(w[i + 2], a.z, p);
                        p = fmaf(w[i + 3], a.w, p);
                    }
                    acc[r][b] = fmaf(p, am[u][r], acc[r][b]);
                }
            }
        }
    }
    store_rows<B, RW>(acc, bias, y, n, row0, nb);
}

#define FP8_MV(B, NAME, F)                                                                    \
    extern "C" __global__ void __launch_bounds__(32 * ROWS) NAME##_mv##B(                     \
        const uint8_t *__restrict__ codes, const float *__restrict__ scales,                 \
        const float *__restrict__ x, const float *__restrict__ bias, float *__restrict__ y,  \
        int n, int k, int tokens, int bn, int bk) {                                           \
        fp8_rows<B, F>(codes, scales, x, bias, y, n, k, tokens, bn, bk);                      \
    }

#define BNB4_MV(B, ...)                                                                       \
    extern "C" __global__ void __launch_bounds__(32 * ROWS) bnb4_mv##B(                       \
        const uint8_t *__restrict__ packed, const float *__restrict__ absmax,                \
        const float *__restrict__ code, const float *__restrict__ x,                         \
        const float *__restrict__ bias, float *__restrict__ y, int n, int k, int tokens,     \
        int bs) {                                                                             \
        bnb4_rows<B>(packed, absmax, code, x, bias, y, n, k, tokens, bs);                     \
    }

EACH_TOKENS(FP8_MV, e4m3, __NV_E4M3)
EACH_TOKENS(FP8_MV, e5m2, __NV_E5M2)
EACH_TOKENS(BNB4_MV)

__device__ __forceinline__ void store_f16(half *dst, const float *w, int count) {
#pragma unroll
    for (int i = 0; i < count; i += 8) {
        half2 h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(w[i + 2 * j], w[i + 2 * j + 1]);
        *(uint4 *)(dst + i) = *(const uint4 *)h;
    }
}

// W decoded to F16 [n, k] for cuBLAS: a thread per 16 codes.
template <__nv_fp8_interpretation_t F>
__device__ __forceinline__ void fp8_to_f16(const uint8_t *__restrict__ codes,
                                           const float *__restrict__ scales,
                                           half *__restrict__ out, int n, int k, int bn, int bk) {
    const long chunk = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const int per_row = k / 16;
    if (chunk >= (long)n * per_row) return;
    const int row = chunk / per_row, c0 = (chunk % per_row) * 16;
    const float *srow = scales + (long)(row / bn) * ((k + bk - 1) / bk);
    const long at = (long)row * k + c0;
    float w[16];
    fp8_decode<F>(*(const uint4 *)(codes + at), srow, c0, bk, w);
    store_f16(out + at, w, 16);
}

extern "C" __global__ void e4m3_to_f16(const uint8_t *__restrict__ codes,
                                       const float *__restrict__ scales, half *__restrict__ out,
                                       int n, int k, int bn, int bk) {
    fp8_to_f16<__NV_E4M3>(codes, scales, out, n, k, bn, bk);
}

extern "C" __global__ void e5m2_to_f16(const uint8_t *__restrict__ codes,
                                       const float *__restrict__ scales, half *__restrict__ out,
                                       int n, int k, int bn, int bk) {
    fp8_to_f16<__NV_E5M2>(codes, scales, out, n, k, bn, bk);
}

// A thread per 32 codes (16 bytes) of the flattened matrix.
extern "C" __global__ void bnb4_to_f16(const uint8_t *__restrict__ packed,
                                       const float *__restrict__ absmax,
                                       const float *__restrict__ code, half *__restrict__ out,
                                       int n, int k, int bs) {
    __shared__ float table[16];
    if (threadIdx.x < 16) table[threadIdx.x] = code[threadIdx.x];
    __syncthreads();
    const long chunk = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (chunk >= (long)n * k / 32) return;
    const long at = chunk * 32;
    float w[32];
    bnb4_decode(*(const uint4 *)(packed + at / 2), table, absmax[at / bs], w);
    store_f16(out + at, w, 32);
}
