// Q4_K and Q6_K weights against 8-bit activations on the int8 tensor cores
// (mma.sync), for steps of several tokens: y[t, n] = Σ_k W[n, k] · x[t, k]
// with the activations in quant_matmul.cu's buffer (Q8_K: int8 quants, a
// scale per 256, an int32 sum per 16).
//
// A warp computes a tile of 16 weight rows against every token of the step
// (up to 8 · NT): for each sub-block, one m16n8k32 (Q4_K's 32 elements) or
// m16n8k16 (Q6_K's 16) product per 8 tokens gives the integer dot products
// of the 16 rows, which are scaled by the rows' sub-block scales into the
// super-block's integer sums — the same integers the decode kernels
// (quant_matmul.cu) form — then the super-block's float step of k_quants.cuh.
//
// The same bits as the decode kernels: those spread a row's super-blocks
// over C = G · W classes (sb mod C: G lane groups of a warp, 4 for Q4_K
// and 2 for Q6_K, times W warps per row, W = 4 for launches of at most
// 2,048 rows, else 1), add each class's steps in order, then the classes of
// a warp as its butterfly sum does ((P0 + P2) + (P1 + P3), or P0 + P1) and
// the warps in order. Here a warp runs one class of one tile, and a block
// of as many warps as the launch's largest C (at most 16) holds whole tiles
// (warps / C of them) and adds their classes in that order through shared
// memory. A token's result depends on nothing
// but its own activations, so it is the same alone, batched, or in the
// decode kernels.
//
// Fragments (PTX ISA, mma .s8): lane = 4 g + c. A (16 × 32, rows): a0, a2
// row g, a1, a3 row g + 8; a0, a1 hold k = 4c .. 4c + 3 and a2, a3 k = 16 +
// 4c ..; B (32 × 8): b0 k = 4c .., b1 k = 16 + 4c .., column g; C (16 × 8):
// c0, c1 row g, columns 2c, 2c + 1; c2, c3 row g + 8. For Q4_K the k order
// is permuted (the dot product does not care, A and B agree): k = 4c + i is
// element 8c + i of the sub-block and 16 + 4c + i element 8c + 4 + i, so a
// lane reads 8 consecutive bytes of weights and of activations.

#include <cuda_fp16.h>
#include <stdint.h>

#include "k_quants.cuh"
#include "pdl.cuh"

#define MMQ_WARPS 16  // the most warps a block has
#define TILE 16
#define TYPE_Q4_K 0
#define TYPE_Q6_K 1

__device__ __forceinline__ void mma_k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0,
                                        int b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %10, %10, %10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ void mma_k16(int (&d)[4], int a0, int a1, int b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%7, %7, %7, %7};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// Lane classes per decode warp: Q4_K's 4 groups of 8 lanes, Q6_K's 2 of 16.
__device__ __forceinline__ int groups_of(int type) { return type == TYPE_Q4_K ? 4 : 2; }

// The rows of the tile held by lane (g, c), clamped inside the weight.
struct Rows {
    const uint8_t *a, *b;
};

// Byte i of the packed words p[0..], sign-extended.
__device__ __forceinline__ int sbyte(const uint32_t *p, int i) {
    return (int)(p[i / 4] << (24 - 8 * (i % 4))) >> 24;
}

// Class `cls` of a Q4_K tile: acc[j][i] for C fragment entry i of tokens
// 8j .. 8j + 8.
template <int NT>
__device__ __forceinline__ void q4_K_class(Rows rows, const int8_t *__restrict__ xq,
                                           const float *__restrict__ xd,
                                           const int *__restrict__ xs, int k, int tokens,
                                           int cls, int classes, float (&acc)[NT][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int nsb = k / QK_K;
    for (int sb = cls; sb < nsb; sb += classes) {
        const uint8_t *ba = rows.a + (long)sb * Q4_K_BYTES, *bb = rows.b + (long)sb * Q4_K_BYTES;
        const uint4 ha = *(const uint4 *)ba, hb = *(const uint4 *)bb;
        uint2 qa[4], qb[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            qa[j] = *(const uint2 *)(ba + 16 + 32 * j + 8 * c);
            qb[j] = *(const uint2 *)(bb + 16 + 32 * j + 8 * c);
        }
        int sum[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) sum[j][i] = 0;
        uint32_t mna[2] = {0, 0}, mnb[2] = {0, 0};
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            int sca, scb, mn;
            q4_K_scale_min(ha.y, ha.z, ha.w, s, sca, mn);
            mna[s / 4] |= mn << (8 * (s % 4));
            q4_K_scale_min(hb.y, hb.z, hb.w, s, scb, mn);
            mnb[s / 4] |= mn << (8 * (s % 4));
            const int shift = 4 * (s & 1);
            const int a0 = (qa[s / 2].x >> shift) & 0x0F0F0F0F;
            const int a2 = (qa[s / 2].y >> shift) & 0x0F0F0F0F;
            const int a1 = (qb[s / 2].x >> shift) & 0x0F0F0F0F;
            const int a3 = (qb[s / 2].y >> shift) & 0x0F0F0F0F;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int t = min(8 * j + g, tokens - 1);
                const uint2 x = *(const uint2 *)(xq + (long)t * k + sb * QK_K + 32 * s + 8 * c);
                int d[4];
                mma_k32(d, a0, a1, a2, a3, (int)x.x, (int)x.y);
                sum[j][0] += sca * d[0];
                sum[j][1] += sca * d[1];
                sum[j][2] += scb * d[2];
                sum[j][3] += scb * d[3];
            }
        }
        const float2 dma = __half22float2(*(const half2 *)&ha.x);
        const float2 dmb = __half22float2(*(const half2 *)&hb.x);
        // The mins' sums, Σ_s min_s · bsum_s, on the tensor cores too: A =
        // the rows' 8 mins (k 0..7; k 8..15 zero), B = each sub-block's
        // activation sum split exactly into bytes, bsum = 128 hi + lo (lo in
        // -64..63, hi in -32..32), one product for each part.
        const int ma = c < 2 ? (int)mna[c] : 0, mb = c < 2 ? (int)mnb[c] : 0;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            int lo = 0, hi = 0;
            if (c < 2) {
                const int t = min(8 * j + g, tokens - 1);
                const int4 *bs = (const int4 *)(xs + (long)t * (k / 16) + sb * 16 + 8 * c);
                const int4 u = bs[0], v = bs[1];
                const int sums[4] = {u.x + u.y, u.z + u.w, v.x + v.y, v.z + v.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int h = (sums[i] + 64) >> 7;
                    lo |= ((sums[i] - (h << 7)) & 0xFF) << (8 * i);
                    hi |= (h & 0xFF) << (8 * i);
                }
            }
            int m_lo[4], m_hi[4];
            mma_k16(m_lo, ma, mb, lo);
            mma_k16(m_hi, ma, mb, hi);
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int t = min(8 * j + 2 * c + e, tokens - 1);
                const int mins_a = 128 * m_hi[e] + m_lo[e];
                const int mins_b = 128 * m_hi[2 + e] + m_lo[2 + e];
                const float dx = xd[(long)t * nsb + sb];
                acc[j][e] = q4_K_step(acc[j][e], dx, dma.x, dma.y, sum[j][e], mins_a);
                acc[j][2 + e] = q4_K_step(acc[j][2 + e], dx, dmb.x, dmb.y, sum[j][2 + e], mins_b);
            }
        }
    }
}

// Q6_K's 6-bit values (minus 32) of quadrant q of half h at l = l0 .. l0 + 3:
// lo0 = ql[64h + l0 ..], lo1 = ql[64h + 32 + l0 ..], hi = qh[32h + l0 ..].
__device__ __forceinline__ int q6_K_quad(int lo0, int lo1, int hi, int q) {
    int v;
    switch (q) {
    case 0: v = (lo0 & 0x0F0F0F0F) | ((hi << 4) & 0x30303030); break;
    case 1: v = (lo1 & 0x0F0F0F0F) | ((hi << 2) & 0x30303030); break;
    case 2: v = ((lo0 >> 4) & 0x0F0F0F0F) | (hi & 0x30303030); break;
    default: v = ((lo1 >> 4) & 0x0F0F0F0F) | ((hi >> 2) & 0x30303030); break;
    }
    return __vsubss4(v, 0x20202020);
}

// Class `cls` of a Q6_K tile. Sub-block s = 8h + 2q + p holds elements
// 128h + 32q + 16p + i, i < 16, of l = 16p + i; lane c takes i = 4c .. 4c + 3.
template <int NT>
__device__ __forceinline__ void q6_K_class(Rows rows, const int8_t *__restrict__ xq,
                                           const float *__restrict__ xd, int k, int tokens,
                                           int cls, int classes, float (&acc)[NT][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int nsb = k / QK_K;
    for (int sb = cls; sb < nsb; sb += classes) {
        const uint8_t *ba = rows.a + (long)sb * Q6_K_BYTES, *bb = rows.b + (long)sb * Q6_K_BYTES;
        uint32_t sca[4], scb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            sca[i] = load_u32_2aligned(ba + 192 + 4 * i);
            scb[i] = load_u32_2aligned(bb + 192 + 4 * i);
        }
        int sum[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) sum[j][i] = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const int l0 = 16 * p + 4 * c;
                const int a_lo0 = load_u32_2aligned(ba + 64 * h + l0);
                const int a_lo1 = load_u32_2aligned(ba + 64 * h + 32 + l0);
                const int a_hi = load_u32_2aligned(ba + 128 + 32 * h + l0);
                const int b_lo0 = load_u32_2aligned(bb + 64 * h + l0);
                const int b_lo1 = load_u32_2aligned(bb + 64 * h + 32 + l0);
                const int b_hi = load_u32_2aligned(bb + 128 + 32 * h + l0);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int s = 8 * h + 2 * q + p;
                    const int a0 = q6_K_quad(a_lo0, a_lo1, a_hi, q);
                    const int a1 = q6_K_quad(b_lo0, b_lo1, b_hi, q);
                    const int sa = sbyte(sca, s), sb_ = sbyte(scb, s);
#pragma unroll
                    for (int j = 0; j < NT; ++j) {
                        const int t = min(8 * j + g, tokens - 1);
                        const int x =
                            *(const int *)(xq + (long)t * k + sb * QK_K + 16 * s + 4 * c);
                        int d[4];
                        mma_k16(d, a0, a1, x);
                        sum[j][0] += sa * d[0];
                        sum[j][1] += sa * d[1];
                        sum[j][2] += sb_ * d[2];
                        sum[j][3] += sb_ * d[3];
                    }
                }
            }
        }
        const float da = __half2float(*(const half *)(ba + 208));
        const float db = __half2float(*(const half *)(bb + 208));
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int t = min(8 * j + 2 * c + e, tokens - 1);
                const float dx = xd[(long)t * nsb + sb];
                acc[j][e] = q6_K_step(acc[j][e], dx, da, sum[j][e]);
                acc[j][2 + e] = q6_K_step(acc[j][2 + e], dx, db, sum[j][2 + e]);
            }
        }
    }
}

// Adds the partner warps' sums to `acc` in the decode kernels' order (see
// the top). `part`: 8 warps' fragments, [slot][entry][lane].
template <int NT>
__device__ __forceinline__ void merge_classes(float (&acc)[NT][4], float *part, int cls,
                                              int groups, int classes, int tile) {
    const int lane = threadIdx.x & 31;
    const int grp = cls % groups, w = cls / groups;
    const int per_tile = classes / 2;
    auto slot = [&](int i) { return part + ((tile * per_tile + i) * NT * 4) * 32 + lane; };
    auto put = [&](float *at) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) at[(j * 4 + i) * 32] = acc[j][i];
    };
    auto add = [&](const float *at) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[j][i] = __fadd_rn(acc[j][i], at[(j * 4 + i) * 32]);
    };
    // Q4_K: groups 2 and 3 into 0 and 1.
    if (groups == 4) {
        if (grp >= 2) put(slot(w * 2 + grp - 2));
        __syncthreads();
        if (grp < 2) add(slot(w * 2 + grp));
        __syncthreads();
    }
    // Group 1 into group 0: the warp's sum.
    if (grp == 1) put(slot(w));
    __syncthreads();
    if (grp == 0) add(slot(w));
    __syncthreads();
    // The warps of a row in order.
    if (grp == 0 && w > 0) put(slot(w - 1));
    __syncthreads();
    if (grp == 0 && w == 0) {
        const int warps = classes / groups;
        for (int v = 1; v < warps; ++v) add(slot(v - 1));
    }
}

// Up to three weights against the same activations in one launch (Q, K
// and V; gate and up), as the decode kernels' mmvq: weight j is a Q4_K
// (type 0) or Q6_K (1) matrix of n_j rows written to y_j ([tokens, n_j])
// with bias b_j added (when not null). `w4`: the decode kernels' warps per
// row for this launch's rows (4 or 1). The tokens go in tiles of 8 NT (more
// live registers spill), each tile its own blocks, the tile the
// fastest-varying index so that the tiles of a row block run together and
// read its weights once from DRAM. Grid: Σ_j ⌈tiles_j / (warps / C_j)⌉ ·
// token tiles blocks of `warps` = max_j C_j warps (so that a weight of few
// classes still spreads over the GPU: Q6_K's ffn_down in 16-warp blocks ran
// on 32 of an H100's 132 SMs).
template <int NT>
__device__ __forceinline__ void mmq(const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                    const int *__restrict__ xs, int k, int tokens, int w4,
                                    const uint8_t *w0, float *y0, const float *b0, int n0,
                                    int type0, const uint8_t *w1, float *y1, const float *b1,
                                    int n1, int type1, const uint8_t *w2, float *y2,
                                    const float *b2, int n2, int type2) {
    __shared__ float part[8 * NT * 4 * 32];
    const uint8_t *w = w0;
    float *y = y0;
    const float *bias = b0;
    const int tiles = (tokens + 8 * NT - 1) / (8 * NT);
    const int token_tile = blockIdx.x % tiles;
    int n = n0, type = type0, block = blockIdx.x / tiles;
    const int warps = blockDim.x >> 5;
    auto blocks_of = [&](int nj, int tj) {
        // Unused slots (no rows) may name a type of more classes than the
        // block has warps.
        if (nj == 0) return 0;
        const int per = warps / (groups_of(tj) * w4);
        return ((nj + TILE - 1) / TILE + per - 1) / per;
    };
    const int bl0 = blocks_of(n0, type0), bl1 = blocks_of(n1, type1);
    if (block >= bl0 + bl1) {
        block -= bl0 + bl1; w = w2; y = y2; bias = b2; n = n2; type = type2;
    } else if (block >= bl0) {
        block -= bl0; w = w1; y = y1; bias = b1; n = n1; type = type1;
    }
    const long first = (long)token_tile * 8 * NT;
    const int nt = min(8 * NT, tokens - (int)first);
    const int nsb = k / QK_K;
    xq += first * k;
    xd += first * nsb;
    xs += first * (k / 16);
    y += first * n;
    const int groups = groups_of(type), classes = groups * w4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int tile = warp / classes, cls = warp % classes;
    const int row0 = (block * (warps / classes) + tile) * TILE;
    const int bytes = type == TYPE_Q4_K ? Q4_K_BYTES : Q6_K_BYTES;
    Rows rows;
    rows.a = w + (long)min(row0 + g, n - 1) * nsb * bytes;
    rows.b = w + (long)min(row0 + g + 8, n - 1) * nsb * bytes;
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][i] = 0.f;
    // Tiles past the weight's end still take part in the block's merges.
    if (row0 < n) {
        if (type == TYPE_Q4_K)
            q4_K_class<NT>(rows, xq, xd, xs, k, nt, cls, classes, acc);
        else
            q6_K_class<NT>(rows, xq, xd, k, nt, cls, classes, acc);
    }
    merge_classes<NT>(acc, part, cls, groups, classes, tile);
    if (cls != 0 || row0 >= n) return;
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + g + 8 * (i >> 1), t = 8 * j + 2 * c + (i & 1);
            if (r < n && t < nt) y[(long)t * n + r] = acc[j][i] + (bias ? bias[r] : 0.f);
        }
}

#define MMQ(NT)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MMQ_WARPS) mmq##NT(                \
        const int8_t *__restrict__ xq, const float *__restrict__ xd,                     \
        const int *__restrict__ xs, int k, int tokens, int w4, const uint8_t *w0,        \
        float *y0, const float *b0, int n0, int type0, const uint8_t *w1, float *y1,     \
        const float *b1, int n1, int type1, const uint8_t *w2, float *y2,                \
        const float *b2, int n2, int type2) {                                            \
        pdl_trigger();                                                                   \
        pdl_wait();                                                                      \
        mmq<NT>(xq, xd, xs, k, tokens, w4, w0, y0, b0, n0, type0, w1, y1, b1, n1, type1, \
                w2, y2, b2, n2, type2);                                                  \
    }

MMQ(1)
MMQ(2)
MMQ(4)
