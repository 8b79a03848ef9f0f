// Quantized matmuls of the CUDA backend: y[t, n] = Σ_k W[n, k] · x[t, k] for
// GGML Q4_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q8_0 weights, with the activations
// quantized to 8 bits first. For the K-quants they are in Q8_K, exactly as
// the CPU backend (and ggml's CPU) quantizes them: the integer part of every
// super-block's dot product is then the CPU's to the bit; only the order in
// which the float terms are added differs. The other types read the same
// buffer (a scale per 256), or, on widths that are not whole super-blocks,
// the same format with a scale per 32 (the CPU's q8_0 and q8_1 blocks hold
// the same integers' counterparts with a scale per 32 too, rounded another
// way).
//
// Every token is computed the same way whatever the batch size (a column's
// arithmetic does not depend on its neighbours), so a sequence gets the same
// logits alone or batched, in prefill or decode.
//
// Activation buffer (one allocation, from quantize_q8):
//   qs    int8  [tokens, k]
//   d     f32   [tokens, k / 256], or [tokens, k / 32] where k % 256 != 0
//   bsums int32 [tokens, k / 16]   (sums of 16 consecutive quants)

#include <cuda_fp16.h>
#include <stdint.h>

#define QK_K 256
#include "q8_k.cuh"
#include "k_quants.cuh"
#include "matvec.cuh"
#include "pdl.cuh"
#define QK 32
#define WARPS_PER_ROW 4

__device__ __forceinline__ void load8(const float *src, float v[8]) {
    const float4 a = *(const float4 *)src;
    const float4 b = *(const float4 *)(src + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ __forceinline__ void store8(float *dst, const float v[8]) {
    *(float4 *)dst = make_float4(v[0], v[1], v[2], v[3]);
    *(float4 *)(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

// Super-block sb (elements 256 sb .. 256 sb + 256) of row t of the [tokens,
// k] activations, lane l holding elements 8l .. 8l + 8 in `v`, into the
// buffer's format for width k (k a multiple of 32; a scale per 256 where k
// is a multiple of 256, else per 32 and lanes past the row's end idle).
__device__ __forceinline__ void quantize_sb(const float v[8], int8_t *__restrict__ qs,
                                            float *__restrict__ d, int *__restrict__ bsums,
                                            long t, int sb, int k) {
    const long base = t * k + (long)sb * QK_K;
    if (k % QK_K == 0) {
        quantize_values<32>(v, qs + base, d + base / QK_K, bsums + base / 16);
    } else {
        const bool active = sb * QK_K + (int)(threadIdx.x & 31) * 8 < k;
        quantize_values<4>(v, qs + base, d + base / QK, bsums + base / 16, active);
    }
}

// Lane l's 8 values of super-block sb of a row (zeros past its end).
__device__ __forceinline__ void load_sb(const float *__restrict__ row, int sb, int k, float v[8]) {
    const int at = sb * QK_K + (threadIdx.x & 31) * 8;
    if (at < k) {
        load8(row + at, v);
    } else {
        for (int i = 0; i < 8; ++i) v[i] = 0.f;
    }
}

// Grid (super-blocks / warps per block, tokens): one warp per super-block.
extern "C" __global__ void quantize_q8(const float *__restrict__ x,
                                       int8_t *__restrict__ qs,
                                       float *__restrict__ d,
                                       int *__restrict__ bsums, int k) {
    pdl_trigger();
    pdl_wait();
    const long t = blockIdx.y;
    const int sb = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (sb >= (k + QK_K - 1) / QK_K) return;
    float v[8];
    load_sb(x + t * k, sb, k, v);
    quantize_sb(v, qs, d, bsums, t, sb, k);
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

// The row kernels below run on a grid of (super-blocks / warps per block,
// tokens): warp w of block (b, t) writes super-block b · warps + w of row t,
// in f32 and quantized. Spread this way a one-token step keeps many SMs busy
// (one block per row left a 14,336-wide SwiGLU on one SM for 40 µs).

// y = x / sqrt(mean(x²) + eps) · w (ggml's order: scale, then the weight).
// Every block of a row sums the row's squares itself, in the same order, so
// the blocks agree and a row's result does not depend on the batch.
extern "C" __global__ void rms_norm_q8(const float *__restrict__ x,
                                         const float *__restrict__ w,
                                         float *__restrict__ y,
                                         int8_t *__restrict__ qs,
                                         float *__restrict__ d,
                                         int *__restrict__ bsums, int k,
                                         float eps) {
    pdl_trigger();
    // The weights are no earlier kernel's output: their loads start before
    // the wait and overlap the row's.
    const int sb = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const bool active = sb < (k + QK_K - 1) / QK_K;
    float wv[8];
    if (active) load_sb(w, sb, k, wv);
    pdl_wait();
    const long t = blockIdx.y;
    const float *xr = x + t * k;
    float ss = 0.f;
#pragma unroll 4
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        const float4 v = *(const float4 *)(xr + i);
        ss = fmaf(v.x, v.x, ss);
        ss = fmaf(v.y, v.y, ss);
        ss = fmaf(v.z, v.z, ss);
        ss = fmaf(v.w, v.w, ss);
    }
    ss = block_sum(ss);
    const float scale = __fdiv_rn(1.f, __fsqrt_rn(__fdiv_rn(ss, (float)k) + eps));
    if (!active) return;
    const int at = sb * QK_K + (threadIdx.x & 31) * 8;
    float v[8];
    load_sb(xr, sb, k, v);
    for (int i = 0; i < 8; ++i) v[i] = __fmul_rn(__fmul_rn(v[i], scale), wv[i]);
    if (at < k) store8(y + t * k + at, v);
    quantize_sb(v, qs, d, bsums, t, sb, k);
}

// s = x + r (the residual add), then y = rms_norm(s) · w as rms_norm_q8
// does it; writes s, y and y quantized.
extern "C" __global__ void add_rms_norm_q8(const float *__restrict__ x,
                                             const float *__restrict__ r,
                                             const float *__restrict__ w,
                                             float *__restrict__ sum,
                                             float *__restrict__ y,
                                             int8_t *__restrict__ qs,
                                             float *__restrict__ d,
                                             int *__restrict__ bsums, int k,
                                             float eps) {
    pdl_trigger();
    const int sb = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const bool active = sb < (k + QK_K - 1) / QK_K;
    float wv[8];
    if (active) load_sb(w, sb, k, wv);  // as in rms_norm_q8
    pdl_wait();
    const long t = blockIdx.y;
    const float *xr = x + t * k;
    const float *rr = r + t * k;
    float ss = 0.f;
#pragma unroll 4
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        const float4 a = *(const float4 *)(xr + i);
        const float4 b = *(const float4 *)(rr + i);
        const float s0 = __fadd_rn(a.x, b.x), s1 = __fadd_rn(a.y, b.y);
        const float s2 = __fadd_rn(a.z, b.z), s3 = __fadd_rn(a.w, b.w);
        ss = fmaf(s0, s0, ss);
        ss = fmaf(s1, s1, ss);
        ss = fmaf(s2, s2, ss);
        ss = fmaf(s3, s3, ss);
    }
    ss = block_sum(ss);
    const float scale = __fdiv_rn(1.f, __fsqrt_rn(__fdiv_rn(ss, (float)k) + eps));
    if (!active) return;
    const int at = sb * QK_K + (threadIdx.x & 31) * 8;
    float v[8], rv[8];
    load_sb(xr, sb, k, v);
    load_sb(rr, sb, k, rv);
    for (int i = 0; i < 8; ++i) v[i] = __fadd_rn(v[i], rv[i]);
    if (at < k) store8(sum + t * k + at, v);
    for (int i = 0; i < 8; ++i) v[i] = __fmul_rn(__fmul_rn(v[i], scale), wv[i]);
    if (at < k) store8(y + t * k + at, v);
    quantize_sb(v, qs, d, bsums, t, sb, k);
}

// y = silu(gate) · up (ggml's swiglu).
extern "C" __global__ void swiglu_q8(const float *__restrict__ gate,
                                       const float *__restrict__ up,
                                       float *__restrict__ y,
                                       int8_t *__restrict__ qs,
                                       float *__restrict__ d,
                                       int *__restrict__ bsums, int k) {
    pdl_trigger();
    pdl_wait();
    const long t = blockIdx.y;
    const int sb = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (sb >= (k + QK_K - 1) / QK_K) return;
    const int at = sb * QK_K + (threadIdx.x & 31) * 8;
    float g[8], u[8];
    load_sb(gate + t * k, sb, k, g);
    load_sb(up + t * k, sb, k, u);
    for (int i = 0; i < 8; ++i) g[i] = __fmul_rn(__fdiv_rn(g[i], 1.f + expf(-g[i])), u[i]);
    if (at < k) store8(y + t * k + at, g);
    quantize_sb(g, qs, d, bsums, t, sb, k);
}

// The row's sums of its W warps, in a fixed order (the same for every batch
// size), plus the row's bias (when `bias` is not null), to y[t, row] for the
// nb tokens. Warp w of the block is warp w % W of its row, the block's row
// w / W. With W = 1 a warp may hold RW rows (row .. row + nrows).
template <int B, int W, int R, int RW>
__device__ __forceinline__ void store_rows(const float (&acc)[RW][B], float *__restrict__ y,
                                           const float *__restrict__ bias, int n, int nb,
                                           int row, int nrows) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (W == 1) {
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const float b_row = bias && r < nrows ? bias[row + r] : 0.f;
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const float total = warp_sum(acc[r][b]);
                if (lane == b && b < nb && r < nrows) y[(long)b * n + row + r] = total + b_row;
            }
        }
        return;
    }
    const float b_row = bias ? bias[row] : 0.f;
    __shared__ float part[W * R][B];
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float total = warp_sum(acc[0][b]);
        if (lane == 0) part[warp][b] = total;
    }
    __syncthreads();
    const int first = (warp / W) * W;
    if (warp % W == 0 && lane < nb) {
        float sum = part[first][lane];
#pragma unroll
        for (int w = 1; w < W; ++w) sum += part[first + w][lane];
        y[(long)lane * n + row] = sum + b_row;
    }
}

// Q4_K (d, dmin: f16; scales: 12 bytes of 6-bit scales and mins; qs: 128
// bytes; element 64g + i is the low nibble of qs[32g + i], 64g + 32 + i the
// high one). Blocks are 144 = 9 · 16 bytes, so every load is 16 bytes wide:
// 8 lanes to a super-block, 4 super-blocks per warp at a time; lane (g, h)
// takes qs bytes 32g + 16h .. +16: 16 elements of sub-block 2g and 16 of
// 2g + 1, and reads the block's first 16 bytes (d, dmin, scales) whole.
// The 8 lanes' integer sums are added up first, then the first lane takes
// the super-block's float step (k_quants.cuh): the tensor-core kernels
// (mmq.cu) form the same sums and steps in the same order.
// A warp of RW rows loads each token's activations once for all of them
// (with several tokens, activation loads outnumber weight loads RW to 1
// otherwise); every row's sum is formed as with RW = 1.
template <int B, int W, int R, int RW>
__device__ __forceinline__ void q4_K_rows(const uint8_t *__restrict__ w,
                                          const int8_t *__restrict__ xq,
                                          const float *__restrict__ xd,
                                          const int *__restrict__ xs,
                                          float *__restrict__ y,
                                          const float *__restrict__ bias, int n, int k,
                                          int nb, int row, int nrows) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) % W;
    const int nsb = k / QK_K;
    const int l8 = lane & 7, g = l8 >> 1, h = l8 & 1;
    // The 8 lanes of this lane's super-block (a warp's 4 groups may run
    // different numbers of super-blocks).
    const unsigned group = 0xFFu << (lane & 24);
    float acc[RW][B];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int b = 0; b < B; ++b) acc[r][b] = 0.f;
    const uint8_t *wrows[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r)
        wrows[r] = w + (long)(row + min(r, nrows - 1)) * nsb * Q4_K_BYTES;
    // Unrolled so that a lane has several super-blocks' loads in flight
    // (decode is bound by how many bytes are in flight, not by arithmetic):
    // for one token 4 times rather than 2, one-token steps of the
    // Qwen2.5-1.5B shape's norms and matmuls 1.232 → 1.159 ms, of the 8B's
    // 2.787 → 2.742 (H100, bench/results/gpu-2026-12-06-s51.md; 8 times no
    // better); twice for more, whose registers would spill.
    constexpr int unroll = B * RW <= 2 ? 4 : 2;
#pragma unroll unroll
    for (int sb = 4 * warp + (lane >> 3); sb < nsb; sb += 4 * W) {
        float2 dm[RW];
        int sc[RW][2], mn[RW][2], lo[RW][4], hi[RW][4];
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const uint8_t *blk = wrows[r] + (long)sb * Q4_K_BYTES;
            const uint4 head = *(const uint4 *)blk;
            const int4 v = *(const int4 *)(blk + 16 + 32 * g + 16 * h);
            dm[r] = __half22float2(*(const half2 *)&head.x);
#pragma unroll
            for (int e = 0; e < 2; ++e)
                q4_K_scale_min(head.y, head.z, head.w, 2 * g + e, sc[r][e], mn[r][e]);
            lo[r][0] = v.x & 0x0F0F0F0F; lo[r][1] = v.y & 0x0F0F0F0F;
            lo[r][2] = v.z & 0x0F0F0F0F; lo[r][3] = v.w & 0x0F0F0F0F;
            hi[r][0] = (v.x >> 4) & 0x0F0F0F0F; hi[r][1] = (v.y >> 4) & 0x0F0F0F0F;
            hi[r][2] = (v.z >> 4) & 0x0F0F0F0F; hi[r][3] = (v.w >> 4) & 0x0F0F0F0F;
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (b >= nb) break;
            const long t = b;
            const int8_t *xb = xq + t * k + sb * QK_K + 64 * g + 16 * h;
            const int4 a = *(const int4 *)xb;
            const int4 c = *(const int4 *)(xb + 32);
            const int *bs = xs + t * (k / 16) + sb * 16 + 4 * g + h;
            const int bs0 = bs[0], bs2 = bs[2];
            const float dx = xd[t * nsb + sb];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const int dot_lo = __dp4a(lo[r][3], a.w, __dp4a(lo[r][2], a.z,
                                   __dp4a(lo[r][1], a.y, __dp4a(lo[r][0], a.x, 0))));
                const int dot_hi = __dp4a(hi[r][3], c.w, __dp4a(hi[r][2], c.z,
                                   __dp4a(hi[r][1], c.y, __dp4a(hi[r][0], c.x, 0))));
                int sum = sc[r][0] * dot_lo + sc[r][1] * dot_hi;
                int mins = mn[r][0] * bs0 + mn[r][1] * bs2;
#pragma unroll
                for (int off = 1; off < 8; off <<= 1) {
                    sum += __shfl_xor_sync(group, sum, off);
                    mins += __shfl_xor_sync(group, mins, off);
                }
                if (l8 == 0) acc[r][b] = q4_K_step(acc[r][b], dx, dm[r].x, dm[r].y, sum, mins);
            }
        }
    }
    store_rows<B, W, R, RW>(acc, y, bias, n, nb, row, nrows);
}

// Q6_K (ql: 128 bytes of low nibbles, qh: 64 bytes of 2 high bits, scales:
// 16 int8, d: f16). In half h (128 elements), byte l < 32 of ql/qh gives
// elements l, l + 32, l + 64, l + 96, with scale 8h + l/16 + 0, 2, 4, 6.
// Lane (h, r) takes l = 4r .. 4r + 4: 16 elements. The 16 lanes' sums are
// added up before the float step, as in Q4_K. RW rows as in Q4_K.
//
// A warp sums two super-blocks at a time, 420 contiguous bytes a row, only
// 2-byte aligned (210-byte blocks): they come in as aligned 16-byte chunks,
// one a lane, through shared memory, the next pair's chunks loaded while
// this pair is summed. Read straight from global memory, 1-2 bytes a load,
// a super-block took eleven loads a lane: one-token steps of the
// Qwen2.5-1.5B shape's norms and matmuls 1.046 → 0.970 ms, the 8B's equal
// (H100, bench/results/gpu-2026-12-07-s58.md; the same bits, checked
// against mmq.cu for 1-64 tokens). Two pairs ahead was slower.
template <int B, int W, int R, int RW>
__device__ __forceinline__ void q6_K_rows(const uint8_t *__restrict__ w,
                                          const int8_t *__restrict__ xq,
                                          const float *__restrict__ xd,
                                          float *__restrict__ y,
                                          const float *__restrict__ bias, int n, int k,
                                          int nb, int row, int nrows) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) % W;
    const int nsb = k / QK_K;
    const int l16 = lane & 15, h = l16 >> 3, r = l16 & 7;
    const unsigned group = 0xFFFFu << (lane & 16);
    float acc[RW][B];
#pragma unroll
    for (int i = 0; i < RW; ++i)
#pragma unroll
        for (int b = 0; b < B; ++b) acc[i][b] = 0.f;
    const uint8_t *wrows[RW];
#pragma unroll
    for (int i = 0; i < RW; ++i)
        wrows[i] = w + (long)(row + min(i, nrows - 1)) * nsb * Q6_K_BYTES;
    // Every launch has 4 warps a block (W · R = 4).
    __shared__ __align__(16) uint8_t stage[4][RW][512];
    const int wb = threadIdx.x >> 5;
    const uint8_t *end = w + (long)n * nsb * Q6_K_BYTES;
    // Lane l's chunk of the pair at `base` of each row, and where the pair
    // starts in the chunks.
    auto load = [&](int4 (&c)[RW], int base, int (&skip)[RW]) {
        const int span = min(2, nsb - base) * Q6_K_BYTES;
#pragma unroll
        for (int i = 0; i < RW; ++i) {
            const uint8_t *start = wrows[i] + (long)base * Q6_K_BYTES;
            const uint8_t *a0 = (const uint8_t *)((uintptr_t)start & ~(uintptr_t)15);
            skip[i] = (int)(start - a0);
            const uint8_t *chunk = a0 + 16 * lane;
            c[i] = make_int4(0, 0, 0, 0);
            if (chunk < start + span) {
                if (chunk + 16 <= end) {
                    c[i] = *(const int4 *)chunk;
                } else {
                    // The matrix's last chunk: not past its (2-byte aligned) end.
                    unsigned short hw[8];
#pragma unroll
                    for (int j = 0; j < 8; ++j)
                        hw[j] = chunk + 2 * j < end ? ((const unsigned short *)chunk)[j] : 0;
                    c[i] = make_int4(hw[0] | hw[1] << 16, hw[2] | hw[3] << 16,
                                     hw[4] | hw[5] << 16, hw[6] | hw[7] << 16);
                }
            }
        }
    };
    int4 next[RW];
    int next_skip[RW];
    if (2 * warp < nsb) load(next, 2 * warp, next_skip);
    // The same trip count on every lane: all of them load and stage chunks.
    for (int base = 2 * warp; base < nsb; base += 2 * W) {
        const bool valid = base + (lane >> 4) < nsb;
        const int sb = min(base + (lane >> 4), nsb - 1);
        int skip[RW];
        __syncwarp();
#pragma unroll
        for (int i = 0; i < RW; ++i) {
            *(int4 *)&stage[wb][i][16 * lane] = next[i];
            skip[i] = next_skip[i];
        }
        __syncwarp();
        if (base + 2 * W < nsb) load(next, base + 2 * W, next_skip);
        int sc[RW][4], qv[RW][4];
        float dw[RW];
#pragma unroll
        for (int i = 0; i < RW; ++i) {
            const uint8_t *blk = &stage[wb][i][skip[i] + (sb - base) * Q6_K_BYTES];
            const int lo_a = load_u32_2aligned(blk + 64 * h + 4 * r);
            const int lo_b = load_u32_2aligned(blk + 64 * h + 32 + 4 * r);
            const int hi = load_u32_2aligned(blk + 128 + 32 * h + 4 * r);
            const int8_t *scales = (const int8_t *)(blk + 192 + 8 * h + (r >> 2));
            sc[i][0] = scales[0]; sc[i][1] = scales[2];
            sc[i][2] = scales[4]; sc[i][3] = scales[6];
            dw[i] = __half2float(*(const half *)(blk + 208));
            qv[i][0] = (lo_a & 0x0F0F0F0F) | ((hi << 4) & 0x30303030);
            qv[i][1] = (lo_b & 0x0F0F0F0F) | ((hi << 2) & 0x30303030);
            qv[i][2] = ((lo_a >> 4) & 0x0F0F0F0F) | (hi & 0x30303030);
            qv[i][3] = ((lo_b >> 4) & 0x0F0F0F0F) | ((hi >> 2) & 0x30303030);
#pragma unroll
            for (int j = 0; j < 4; ++j) qv[i][j] = __vsubss4(qv[i][j], 0x20202020);
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (b >= nb) break;
            const long t = b;
            const int8_t *xb = xq + t * k + sb * QK_K + 128 * h + 4 * r;
            int xv[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) xv[j] = *(const int *)(xb + 32 * j);
            const float dx = xd[t * nsb + sb];
#pragma unroll
            for (int i = 0; i < RW; ++i) {
                int sum = 0;
#pragma unroll
                for (int j = 0; j < 4; ++j) sum += sc[i][j] * __dp4a(qv[i][j], xv[j], 0);
#pragma unroll
                for (int off = 1; off < 16; off <<= 1) sum += __shfl_xor_sync(group, sum, off);
                if (l16 == 0 && valid) acc[i][b] = q6_K_step(acc[i][b], dx, dw[i], sum);
            }
        }
    }
    store_rows<B, W, R, RW>(acc, y, bias, n, nb, row, nrows);
}

// The 32-element block types: Q4_0 (d; 16 bytes of nibbles: element i the
// low nibble of qs[i], 16 + i the high one; q - 8), Q4_1 (d, m; nibbles as
// Q4_0; d q + m), Q5_0 (d; 32 high bits qh; nibbles as Q4_0; q - 16) and
// Q8_0 (d; 32 int8), all scales f16. Lane (b, h) takes elements 16h .. 16h +
// 16 of block b: one sum of 16 activation quants (bsums) covers them, so
// the offsets (- 8, - 16) and Q4_1's m are one multiply each. 16 blocks per
// warp at a time. Blocks are 2-byte aligned (18, 20, 22 and 34 bytes).
#define TYPE_Q4_0 2
#define TYPE_Q4_1 3
#define TYPE_Q5_0 4
#define TYPE_Q8_0 5

template <int T> struct Block;
template <> struct Block<TYPE_Q4_0> { static constexpr int bytes = 18, qs = 2; };
template <> struct Block<TYPE_Q4_1> { static constexpr int bytes = 20, qs = 4; };
template <> struct Block<TYPE_Q5_0> { static constexpr int bytes = 22, qs = 6; };
template <> struct Block<TYPE_Q8_0> { static constexpr int bytes = 34, qs = 2; };

// Four high bits (bit i of `b` to bit 4 of byte i).
__device__ __forceinline__ int spread4(int b) {
    return ((b & 1) << 4) | ((b & 2) << 11) | ((b & 4) << 18) | ((b & 8) << 25);
}

template <int B, int W, int R, int RW, int T>
__device__ __forceinline__ void block_rows(const uint8_t *__restrict__ w,
                                           const int8_t *__restrict__ xq,
                                           const float *__restrict__ xd,
                                           const int *__restrict__ xs,
                                           float *__restrict__ y,
                                           const float *__restrict__ bias, int n, int k,
                                           int nb, int row, int nrows) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) % W;
    const int nblk = k / QK, h = lane & 1;
    // The activations' scale of block b of token t: [t · k/32 + b] >> shift.
    const int shift = k % QK_K == 0 ? 3 : 0;
    float acc[RW][B];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int b = 0; b < B; ++b) acc[r][b] = 0.f;
    const uint8_t *wrows[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r)
        wrows[r] = w + (long)(row + min(r, nrows - 1)) * nblk * Block<T>::bytes;
#pragma unroll 2
    for (int blk = 16 * warp + (lane >> 1); blk < nblk; blk += 16 * W) {
        float dw[RW], mw[RW];
        int qv[RW][4];
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const uint8_t *p = wrows[r] + (long)blk * Block<T>::bytes;
            dw[r] = __half2float(*(const half *)p);
            mw[r] = T == TYPE_Q4_1 ? __half2float(*(const half *)(p + 2)) : 0.f;
            const uint8_t *q = p + Block<T>::qs;
            if (T == TYPE_Q8_0) {
#pragma unroll
                for (int j = 0; j < 4; ++j) qv[r][j] = load_u32_2aligned(q + 16 * h + 4 * j);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int word = load_u32_2aligned(q + 4 * j);
                    qv[r][j] = (word >> (4 * h)) & 0x0F0F0F0F;
                }
                if (T == TYPE_Q5_0) {
                    const int qh = load_u32_2aligned(p + 2) >> (16 * h);
#pragma unroll
                    for (int j = 0; j < 4; ++j) qv[r][j] |= spread4((qh >> (4 * j)) & 0xF);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (b >= nb) break;
            const long t = b;
            const int4 a = *(const int4 *)(xq + t * k + blk * QK + 16 * h);
            const int bsum = xs[t * (k / 16) + 2 * blk + h];
            const float dx = xd[(t * nblk + blk) >> shift];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                int sum = __dp4a(qv[r][3], a.w, __dp4a(qv[r][2], a.z,
                          __dp4a(qv[r][1], a.y, __dp4a(qv[r][0], a.x, 0))));
                if (T == TYPE_Q4_0) sum -= 8 * bsum;
                if (T == TYPE_Q5_0) sum -= 16 * bsum;
                // Rounded as written, whatever the compiler would contract:
                // every kernel shape (and so every batch) the same bits.
                float part = __fmul_rn(dw[r], (float)sum);
                if (T == TYPE_Q4_1) part = __fmaf_rn(mw[r], (float)bsum, part);
                acc[r][b] = __fmaf_rn(dx, part, acc[r][b]);
            }
        }
    }
    store_rows<B, W, R, RW>(acc, y, bias, n, nb, row, nrows);
}

// The rows of a weight of type `type` (the same in the whole grid).
template <int B, int W, int R, int RW>
__device__ __forceinline__ void rows_of(int type, const uint8_t *__restrict__ w,
                                        const int8_t *__restrict__ xq,
                                        const float *__restrict__ xd,
                                        const int *__restrict__ xs, float *__restrict__ y,
                                        const float *__restrict__ bias, int n, int k, int nb,
                                        int row, int nrows) {
    switch (type) {
    case 0: q4_K_rows<B, W, R, RW>(w, xq, xd, xs, y, bias, n, k, nb, row, nrows); break;
    case 1: q6_K_rows<B, W, R, RW>(w, xq, xd, y, bias, n, k, nb, row, nrows); break;
    case TYPE_Q4_0: block_rows<B, W, R, RW, TYPE_Q4_0>(w, xq, xd, xs, y, bias, n, k, nb, row, nrows); break;
    case TYPE_Q4_1: block_rows<B, W, R, RW, TYPE_Q4_1>(w, xq, xd, xs, y, bias, n, k, nb, row, nrows); break;
    case TYPE_Q5_0: block_rows<B, W, R, RW, TYPE_Q5_0>(w, xq, xd, xs, y, bias, n, k, nb, row, nrows); break;
    default: block_rows<B, W, R, RW, TYPE_Q8_0>(w, xq, xd, xs, y, bias, n, k, nb, row, nrows); break;
    }
}

// Up to three weights against the same activations in one launch (Q, K
// and V; gate and up): weight j is a Q4_K (type 0), Q6_K (1), Q4_0 (2), Q4_1
// (3), Q5_0 (4) or Q8_0 (5) matrix
// of n_j rows, written to y_j ([tokens, n_j]) with bias b_j added (when not
// null). A row is W warps (partial sums added in a fixed order), a block R
// row groups of RW rows. mmvqB: a block of 4 warps per row; mmvqB_w: a warp
// per row, 4 rows to a block; mmvqB_wRW: a warp per RW rows, 4 warps to a
// block. The tokens go in tiles of B (the last one partial), each tile its
// own blocks: grid Σ ⌈n_j / RW⌉ / R · tiles, the tile the fastest-varying
// index so that the tiles of a row group run together and read its weights
// once from DRAM (then from L2). A token is computed by the same code in
// every tile, so its result does not depend on how many tokens there are.
#define MMVQ(NAME, B, W, R, RW)                                                \
    extern "C" __global__ void __launch_bounds__(32 * W * R) NAME(             \
        const int8_t *__restrict__ xq, const float *__restrict__ xd,           \
        const int *__restrict__ xs, int k, int tokens, const uint8_t *w0,      \
        float *y0, const float *b0, int n0, int type0, const uint8_t *w1,      \
        float *y1, const float *b1, int n1, int type1, const uint8_t *w2,      \
        float *y2, const float *b2, int n2, int type2) {                       \
        const int g0 = (n0 + RW - 1) / RW, g1 = (n1 + RW - 1) / RW;            \
        const int groups = g0 + g1 + (n2 + RW - 1) / RW;                       \
        const int tiles = (tokens + B - 1) / B;                                \
        const int tile = blockIdx.x % tiles;                                   \
        int group = (blockIdx.x / tiles) * R + (threadIdx.x >> 5) / W;         \
        if (group >= groups) {                                                 \
            if (W == 1) return;                                                \
            group = groups - 1; /* R = 1 when W > 1: never here */             \
        }                                                                      \
        const uint8_t *w = w0;                                                 \
        float *y = y0;                                                         \
        const float *bias = b0;                                                \
        int n = n0, type = type0;                                              \
        if (group >= g0 + g1) {                                                \
            group -= g0 + g1; w = w2; y = y2; bias = b2; n = n2; type = type2; \
        } else if (group >= g0) {                                              \
            group -= g0; w = w1; y = y1; bias = b1; n = n1; type = type1;      \
        }                                                                      \
        const long first = (long)tile * B;                                     \
        const int scales = k % QK_K == 0 ? k / QK_K : k / QK;                  \
        const int row = group * RW, nrows = min(RW, n - row);                  \
        pdl_trigger();                                                         \
        pdl_wait();                                                            \
        const int nb = min(B, tokens - (int)first);                            \
        rows_of<B, W, R, RW>(type, w, xq + first * k, xd + first * scales,     \
                             xs + first * (k / 16), y + first * n, bias, n, k, \
                             nb, row, nrows);                                  \
    }

MMVQ(mmvq1, 1, WARPS_PER_ROW, 1, 1)
MMVQ(mmvq2, 2, WARPS_PER_ROW, 1, 1)
MMVQ(mmvq4, 4, WARPS_PER_ROW, 1, 1)
MMVQ(mmvq8, 8, WARPS_PER_ROW, 1, 1)
MMVQ(mmvq1_w, 1, 1, 4, 1)
MMVQ(mmvq2_w, 2, 1, 4, 1)
MMVQ(mmvq4_w, 4, 1, 4, 1)
MMVQ(mmvq8_w, 8, 1, 4, 1)
MMVQ(mmvq2_w2, 2, 1, 4, 2)
MMVQ(mmvq4_w2, 4, 1, 4, 2)
MMVQ(mmvq8_w2, 8, 1, 4, 2)
MMVQ(mmvq2_w4, 2, 1, 4, 4)
MMVQ(mmvq4_w4, 4, 1, 4, 4)
MMVQ(mmvq8_w4, 8, 1, 4, 4)
