// Weights kept in their checkpoint's codes on the GPU, decoded inside the
// kernels: FP8 (E4M3 or E5M2, one byte a weight) with f32 block scales, and
// bitsandbytes 4-bit (NF4 or FP4, two codes a byte) with an f32 absmax per
// block of the flattened matrix. Every weight is decoded to the f32 product
// the CPU's kernels use (code value · scale, rounded once), so both sides
// multiply the same values; only the order of the sums differs.
//
// Decode matmuls, y[t, n] = Σ_k W[n, k] · x[t, k] (+ b[n]) for up to 8 rows
// of f32 activations, have half_matvec.cu's shape: a warp per weight row, 4
// rows a block, each lane streaming 16 bytes of codes at a time with UNROLL
// loads in flight past L1. Longer steps decode W to F16 once per call
// (`*_to_f16`) for cuBLAS.
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

#define ROWS 4
#define UNROLL 4

__device__ __forceinline__ uint4 load_stream(const uint8_t *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}

// acc[b] += Σ_i w[i] · x[b, at + i] over N consecutive weights.
template <int B, int N>
__device__ __forceinline__ void dot(const float (&w)[N], const float *__restrict__ x, int k,
                                    int at, int nb, float (&acc)[B]) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
        if (b >= nb) break;
        const float *xb = x + (long)b * k + at;
        float s = acc[b];
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float4 a = *(const float4 *)(xb + i);
            s = fmaf(w[i], a.x, s);
            s = fmaf(w[i + 1], a.y, s);
            s = fmaf(w[i + 2], a.z, s);
            s = fmaf(w[i + 3], a.w, s);
        }
        acc[b] = s;
    }
}

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
// scales.
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

template <int B, __nv_fp8_interpretation_t F>
__device__ __forceinline__ void fp8_rows(const uint8_t *__restrict__ codes,
                                         const float *__restrict__ scales,
                                         const float *__restrict__ x,
                                         const float *__restrict__ bias, float *__restrict__ y,
                                         int n, int k, int tokens, int bn, int bk) {
    const int row = blockIdx.x * ROWS + threadIdx.x / 32;
    if (row >= n) return;
    const int lane = threadIdx.x & 31;
    const int nb = min(B, tokens);
    const float *srow = scales + (long)(row / bn) * ((k + bk - 1) / bk);
    const uint8_t *wrow = codes + (long)row * k;
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    const int step = 32 * 16;
    for (int c00 = lane * 16; c00 < k; c00 += step * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c0 = c00 + u * step;
            if (c0 < k) v[u] = load_stream(wrow + c0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c0 = c00 + u * step;
            if (c0 >= k) break;
            float w[16];
            fp8_decode<F>(v[u], srow, c0, bk, w);
            dot<B, 16>(w, x, k, c0, nb, acc);
        }
    }
    const float b_row = bias ? bias[row] : 0.f;
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float total = warp_sum(acc[b]);
        if (lane == b && b < nb) y[(long)b * n + row] = total + b_row;
    }
}

// The 32 codes of 16 bytes (high nibble first) looked up in `table`, times
// `absmax`.
__device__ __forceinline__ void bnb4_decode(const uint4 v, const float *table, float absmax,
                                            float (&w)[32]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t byte = (words[i] >> (8 * j)) & 0xFF;
            w[8 * i + 2 * j] = __fmul_rn(table[byte >> 4], absmax);
            w[8 * i + 2 * j + 1] = __fmul_rn(table[byte & 0xF], absmax);
        }
    }
}

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
    const int row = blockIdx.x * ROWS + threadIdx.x / 32;
    if (row >= n) return;
    const int lane = threadIdx.x & 31;
    const int nb = min(B, tokens);
    const long first = (long)row * k;
    const uint8_t *wrow = packed + first / 2;
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    const int step = 32 * 32;
    for (int c00 = lane * 32; c00 < k; c00 += step * UNROLL) {
        uint4 v[UNROLL];
        float am[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c0 = c00 + u * step;
            if (c0 < k) {
                v[u] = load_stream(wrow + c0 / 2);
                am[u] = absmax[(first + c0) / bs];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c0 = c00 + u * step;
            if (c0 >= k) break;
            float w[32];
            bnb4_decode(v[u], table, am[u], w);
            dot<B, 32>(w, x, k, c0, nb, acc);
        }
    }
    const float b_row = bias ? bias[row] : 0.f;
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float total = warp_sum(acc[b]);
        if (lane == b && b < nb) y[(long)b * n + row] = total + b_row;
    }
}

#define FP8_MV(B, NAME, F)                                                                    \
    extern "C" __global__ void __launch_bounds__(32 * ROWS) NAME##_mv##B(                     \
        const uint8_t *__restrict__ codes, const float *__restrict__ scales,                 \
        const float *__restrict__ x, const float *__restrict__ bias, float *__restrict__ y,  \
        int n, int k, int tokens, int bn, int bk) {                                           \
        fp8_rows<B, F>(codes, scales, x, bias, y, n, k, tokens, bn, bk);                      \
    }

#define BNB4_MV(B)                                                                            \
    extern "C" __global__ void __launch_bounds__(32 * ROWS) bnb4_mv##B(                       \
        const uint8_t *__restrict__ packed, const float *__restrict__ absmax,                \
        const float *__restrict__ code, const float *__restrict__ x,                         \
        const float *__restrict__ bias, float *__restrict__ y, int n, int k, int tokens,     \
        int bs) {                                                                             \
        bnb4_rows<B>(packed, absmax, code, x, bias, y, n, k, tokens, bs);                     \
    }

FP8_MV(1, e4m3, __NV_E4M3)
FP8_MV(2, e4m3, __NV_E4M3)
FP8_MV(4, e4m3, __NV_E4M3)
FP8_MV(8, e4m3, __NV_E4M3)
FP8_MV(1, e5m2, __NV_E5M2)
FP8_MV(2, e5m2, __NV_E5M2)
FP8_MV(4, e5m2, __NV_E5M2)
FP8_MV(8, e5m2, __NV_E5M2)
BNB4_MV(1)
BNB4_MV(2)
BNB4_MV(4)
BNB4_MV(8)

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
