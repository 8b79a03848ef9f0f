// Quantized matmuls of the CUDA backend: y[t, n] = Σ_k W[n, k] · x[t, k] for
// GGML Q4_K and Q6_K weights, with the activations quantized to Q8_K first,
// exactly as the CPU backend (and ggml's CPU) quantizes them. The integer
// part of every super-block's dot product is then the CPU's to the bit; only
// the order in which the float terms are added differs.
//
// Every token is computed the same way whatever the batch size (a column's
// arithmetic does not depend on its neighbours), so a sequence gets the same
// logits alone or batched, in prefill or decode.
//
// Activation buffer (one allocation, from quantize_q8_K):
//   qs    int8  [tokens, k]
//   d     f32   [tokens, k / 256]
//   bsums int32 [tokens, k / 16]   (sums of 16 consecutive quants)

#include <cuda_fp16.h>
#include <stdint.h>

#define QK_K 256
#define Q4_K_BYTES 144
#define Q6_K_BYTES 210
#define WARPS_PER_ROW 4

// One warp quantizes the super-block of 256 activations at `src`; lane l
// takes 8l..8l+8. Mirrors quantize_row_q8_K_ref: max = the first element of
// largest magnitude, iscale = -127 / max, q = min(127, round_half_even(iscale
// · x)), d = 1 / iscale. The _rn intrinsics keep IEEE rounding under
// --use_fast_math.
__device__ __forceinline__ void quantize_block(const float *src, int8_t *qs, float *d,
                                               int *bsums) {
    const int lane = threadIdx.x & 31;
    float v[8];
    const float4 a = *(const float4 *)(src + lane * 8);
    const float4 b = *(const float4 *)(src + lane * 8 + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    float amax = 0.f, max = 0.f;
    int at = 0x7fffffff;
    for (int i = 0; i < 8; ++i) {
        const float ax = fabsf(v[i]);
        if (ax > amax) { amax = ax; max = v[i]; at = lane * 8 + i; }
    }
    for (int off = 16; off > 0; off >>= 1) {
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
    *(int2 *)(qs + lane * 8) = *(const int2 *)q;
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    if ((lane & 1) == 0) bsums[lane / 2] = sum;
    if (lane == 0) *d = scale;
}

// One warp per super-block of the [tokens, k] activations.
extern "C" __global__ void quantize_q8_K(const float *__restrict__ x,
                                         int8_t *__restrict__ qs,
                                         float *__restrict__ d,
                                         int *__restrict__ bsums, int k,
                                         int tokens) {
    const long sb = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (sb >= (long)(k / QK_K) * tokens) return;
    quantize_block(x + sb * QK_K, qs + sb * QK_K, d + sb, bsums + sb * 16);
}

// The quantization of row `t` of y ([tokens, k]), which the block wrote.
__device__ __forceinline__ void quantize_row(const float *y, int8_t *qs, float *d,
                                             int *bsums, int k, long t) {
    __syncthreads();
    const int nsb = k / QK_K;
    for (int sb = threadIdx.x / 32; sb < nsb; sb += blockDim.x / 32) {
        const long at = t * nsb + sb;
        quantize_block(y + at * QK_K, qs + at * QK_K, d + at, bsums + at * 16);
    }
}

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}

// One block per token: y = x / sqrt(mean(x²) + eps) · w (ggml's order:
// scale, then the weight), and y in Q8_K, the input of the next matmuls.
extern "C" __global__ void rms_norm_q8_K(const float *__restrict__ x,
                                         const float *__restrict__ w,
                                         float *__restrict__ y,
                                         int8_t *__restrict__ qs,
                                         float *__restrict__ d,
                                         int *__restrict__ bsums, int k,
                                         float eps) {
    const long t = blockIdx.x;
    const float *xr = x + t * k;
    float *yr = y + t * k;
    float ss = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = block_sum(ss);
    const float scale = __fdiv_rn(1.f, __fsqrt_rn(__fdiv_rn(ss, (float)k) + eps));
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
    quantize_row(y, qs, d, bsums, k, t);
}

// One block per token: y = silu(gate) · up (ggml's swiglu), and y in Q8_K.
extern "C" __global__ void swiglu_q8_K(const float *__restrict__ gate,
                                       const float *__restrict__ up,
                                       float *__restrict__ y,
                                       int8_t *__restrict__ qs,
                                       float *__restrict__ d,
                                       int *__restrict__ bsums, int k) {
    const long t = blockIdx.x;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        const float g = gate[t * k + i];
        y[t * k + i] = __fmul_rn(__fdiv_rn(g, 1.f + expf(-g)), up[t * k + i]);
    }
    quantize_row(y, qs, d, bsums, k, t);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}

// The row's sums of the block's warps, in a fixed order (the same for
// every batch size), to y[t, row] for the nb tokens.
template <int B>
__device__ __forceinline__ void store_row(const float (&acc)[B], float *__restrict__ y,
                                          int n, int nb, int row) {
    __shared__ float part[WARPS_PER_ROW][B];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float total = warp_sum(acc[b]);
        if (lane == 0) part[warp][b] = total;
    }
    __syncthreads();
    if (threadIdx.x < nb) {
        float sum = part[0][threadIdx.x];
#pragma unroll
        for (int w = 1; w < WARPS_PER_ROW; ++w) sum += part[w][threadIdx.x];
        y[(long)threadIdx.x * n + row] = sum;
    }
}

// Two bytes at a time: Q6_K blocks (210 bytes) are only 2-byte aligned.
__device__ __forceinline__ int load_u32_2aligned(const uint8_t *p) {
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | ((uint32_t)h[1] << 16));
}

// Q4_K (d, dmin: f16; scales: 12 bytes of 6-bit scales and mins; qs: 128
// bytes; element 64g + i is the low nibble of qs[32g + i], 64g + 32 + i the
// high one). Each warp of the row takes two super-blocks at a time, 16
// lanes each; lane (g, q) takes bytes 32g + 8q .. +8: 8 elements of
// sub-block 2g and 8 of 2g + 1.
template <int B>
__device__ __forceinline__ void q4_K_rows(const uint8_t *__restrict__ w,
                                          const int8_t *__restrict__ xq,
                                          const float *__restrict__ xd,
                                          const int *__restrict__ xs,
                                          float *__restrict__ y, int n, int k,
                                          int nb, int row) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nsb = k / QK_K;
    const int l16 = lane & 15, g = l16 >> 2, q = l16 & 3;
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    const uint8_t *wrow = w + (long)row * nsb * Q4_K_BYTES;
    // Unrolled so that a lane has several super-blocks' loads in flight
    // (decode is bound by how many bytes are in flight, not by arithmetic).
#pragma unroll 4
    for (int sb = 2 * warp + (lane >> 4); sb < nsb; sb += 2 * WARPS_PER_ROW) {
        const uint8_t *blk = wrow + (long)sb * Q4_K_BYTES;
        const float2 dm = __half22float2(*(const half2 *)blk);
        const uint32_t *s32 = (const uint32_t *)(blk + 4);
        uint8_t s[12];
        *(uint32_t *)s = s32[0];
        *(uint32_t *)(s + 4) = s32[1];
        *(uint32_t *)(s + 8) = s32[2];
        int sc[2], mn[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = 2 * g + h;
            if (j < 4) {
                sc[h] = s[j] & 63;
                mn[h] = s[j + 4] & 63;
            } else {
                sc[h] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
                mn[h] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
            }
        }
        const int2 v = *(const int2 *)(blk + 16 + 32 * g + 8 * q);
        const int lo0 = v.x & 0x0F0F0F0F, lo1 = v.y & 0x0F0F0F0F;
        const int hi0 = (v.x >> 4) & 0x0F0F0F0F, hi1 = (v.y >> 4) & 0x0F0F0F0F;
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (b >= nb) break;
            const long t = b;
            const int8_t *xb = xq + t * k + sb * QK_K + 64 * g + 8 * q;
            const int2 a = *(const int2 *)xb;
            const int2 c = *(const int2 *)(xb + 32);
            const int dot_lo = __dp4a(lo1, a.y, __dp4a(lo0, a.x, 0));
            const int dot_hi = __dp4a(hi1, c.y, __dp4a(hi0, c.x, 0));
            const int sum = sc[0] * dot_lo + sc[1] * dot_hi;
            int mins = 0;
            if (q == 0) {
                const int *bs = xs + t * (k / 16) + sb * 16 + 4 * g;
                mins = mn[0] * (bs[0] + bs[1]) + mn[1] * (bs[2] + bs[3]);
            }
            const float dx = xd[t * nsb + sb];
            acc[b] += dx * (dm.x * (float)sum - dm.y * (float)mins);
        }
    }
    store_row<B>(acc, y, n, nb, row);
}

// Q6_K (ql: 128 bytes of low nibbles, qh: 64 bytes of 2 high bits, scales:
// 16 int8, d: f16). In half h (128 elements), byte l < 32 of ql/qh gives
// elements l, l + 32, l + 64, l + 96, with scale 8h + l/16 + 0, 2, 4, 6.
// Lane (h, r) takes l = 4r .. 4r + 4: 16 elements.
template <int B>
__device__ __forceinline__ void q6_K_rows(const uint8_t *__restrict__ w,
                                          const int8_t *__restrict__ xq,
                                          const float *__restrict__ xd,
                                          float *__restrict__ y, int n, int k,
                                          int nb, int row) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nsb = k / QK_K;
    const int l16 = lane & 15, h = l16 >> 3, r = l16 & 7;
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    const uint8_t *wrow = w + (long)row * nsb * Q6_K_BYTES;
    // Unrolled so that a lane has several super-blocks' loads in flight
    // (decode is bound by how many bytes are in flight, not by arithmetic).
#pragma unroll 4
    for (int sb = 2 * warp + (lane >> 4); sb < nsb; sb += 2 * WARPS_PER_ROW) {
        const uint8_t *blk = wrow + (long)sb * Q6_K_BYTES;
        const int lo_a = load_u32_2aligned(blk + 64 * h + 4 * r);
        const int lo_b = load_u32_2aligned(blk + 64 * h + 32 + 4 * r);
        const int hi = load_u32_2aligned(blk + 128 + 32 * h + 4 * r);
        const int8_t *scales = (const int8_t *)(blk + 192 + 8 * h + (r >> 2));
        const int sc[4] = {scales[0], scales[2], scales[4], scales[6]};
        const float dw = __half2float(*(const half *)(blk + 208));
        int qv[4];
        qv[0] = (lo_a & 0x0F0F0F0F) | ((hi << 4) & 0x30303030);
        qv[1] = (lo_b & 0x0F0F0F0F) | ((hi << 2) & 0x30303030);
        qv[2] = ((lo_a >> 4) & 0x0F0F0F0F) | (hi & 0x30303030);
        qv[3] = ((lo_b >> 4) & 0x0F0F0F0F) | ((hi >> 2) & 0x30303030);
#pragma unroll
        for (int i = 0; i < 4; ++i) qv[i] = __vsubss4(qv[i], 0x20202020);
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (b >= nb) break;
            const long t = b;
            const int8_t *xb = xq + t * k + sb * QK_K + 128 * h + 4 * r;
            int sum = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) sum += sc[i] * __dp4a(qv[i], *(const int *)(xb + 32 * i), 0);
            acc[b] += (dw * xd[t * nsb + sb]) * (float)sum;
        }
    }
    store_row<B>(acc, y, n, nb, row);
}

// Up to three weights against the same activations in one launch (Q, K
// and V; gate and up): weight j is a Q4_K (type 0) or Q6_K (type 1) matrix
// of n_j rows, written to y_j ([tokens, n_j]). One block of WARPS_PER_ROW
// warps per row (grid: Σ n_j), all `tokens` (at most B) at once.
#define MMVQ(NAME, B)                                                          \
    extern "C" __global__ void NAME(                                           \
        const int8_t *__restrict__ xq, const float *__restrict__ xd,           \
        const int *__restrict__ xs, int k, int tokens, const uint8_t *w0,      \
        float *y0, int n0, int type0, const uint8_t *w1, float *y1, int n1,    \
        int type1, const uint8_t *w2, float *y2, int n2, int type2) {          \
        int row = blockIdx.x;                                                  \
        const uint8_t *w = w0;                                                 \
        float *y = y0;                                                         \
        int n = n0, type = type0;                                              \
        if (row >= n0 + n1) {                                                  \
            row -= n0 + n1; w = w2; y = y2; n = n2; type = type2;              \
        } else if (row >= n0) {                                                \
            row -= n0; w = w1; y = y1; n = n1; type = type1;                   \
        }                                                                      \
        const int nb = min(B, tokens);                                         \
        if (type == 0)                                                         \
            q4_K_rows<B>(w, xq, xd, xs, y, n, k, nb, row);                     \
        else                                                                   \
            q6_K_rows<B>(w, xq, xd, y, n, k, nb, row);                         \
    }

MMVQ(mmvq1, 1)
MMVQ(mmvq2, 2)
MMVQ(mmvq4, 4)
MMVQ(mmvq8, 8)
