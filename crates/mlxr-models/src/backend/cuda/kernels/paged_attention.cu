// Paged attention over the engine's mixed batches (prefill chunks and
// decodes in one launch), and the KV-cache write before it.
//
// Layouts (row-major):
//   q, out           [tokens, n_heads * head_dim] f32
//   k, v (new)       [tokens, n_kv_heads * head_dim] f32
//   k_cache, v_cache [num_blocks * block_size, n_kv_heads * head_dim] (T)
//   slots            [tokens]: where each token's k/v go
//   positions        [tokens]: each token's position in its sequence
//   token_seq        [tokens]: each token's sequence (chunk) index
//   table_start      [seqs]: where the sequence's block table starts in
//   block_tables     (flat): block ids, position p in block p / block_size
//
// One thread block per (token, KV head, split): its warps split the split's
// keys (all of 0..=p within the sliding window when there is one split), each
// warp scoring a few keys at a time (their rows loaded together) for all the
// query heads of the KV head's group (the key and value are read once per
// group), with an online softmax; the warps' partial results are merged at
// the end. With several splits
// (steps of few tokens: decode, where (tokens, KV heads) alone would leave
// most SMs idle) a token of context c takes S = min(max_splits, ceil(c /
// min_chunk)) splits of ceil(c / S) keys each; split s writes its running
// max, sum and unnormalized output, and the last of the (token, KV head)'s
// blocks to finish (a ticket counter per pair, which it sets back to 0)
// combines them: no second launch (attention_merge took 6.8 µs a layer of
// the Qwen2.5-1.5B shape's decode: bench/results/gpu-2026-12-04-s38.md).
// S depends on the token's own context alone, so its result does not depend
// on the rest of the batch. Blocks past a token's S return at once, and a
// token of one split writes its output directly.
//
// In such steps (decode, speculative verification) the kernel also stores
// the step's new keys and values (`k_new`, `v_new`: the block of split 0
// writes its token's) and reads them from those rows rather than the cache,
// rounded to the cache's type as a cache read would give them: no
// cache_write launch first. It needs each sequence's tokens in consecutive
// rows at consecutive positions (the host checks). Where `out_qs` is given,
// the blocks that write outputs also write them in 8 bits for the output
// projection (Q8_K where the width is whole super-blocks and so is
// group · head_dim; else a scale per 32, group · head_dim a multiple of 32):
// no quantize launch after.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <climits>

#include "q8_k.cuh"
#include "matvec.cuh"
#include "pdl.cuh"

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void from_f32(float &d, float x) { d = x; }
__device__ __forceinline__ void from_f32(__half &d, float x) { d = __float2half(x); }
__device__ __forceinline__ void from_f32(__nv_bfloat16 &d, float x) { d = __float2bfloat16(x); }
// x as the cache would return it.
template <typename T>
__device__ __forceinline__ float through(float x) {
    T y;
    from_f32(y, x);
    return to_f32(y);
}

// N consecutive values at p (aligned to N values) as f32, in the widest
// loads that alignment allows.
template <int N>
__device__ __forceinline__ void load_row(const float *p, float (&v)[N]) {
    if constexpr (N == 2) {
        const float2 x = *reinterpret_cast<const float2 *>(p);
        v[0] = x.x; v[1] = x.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float4 x = *reinterpret_cast<const float4 *>(p + i);
            v[i] = x.x; v[i + 1] = x.y; v[i + 2] = x.z; v[i + 3] = x.w;
        }
    }
}
__device__ __forceinline__ float2 pair_f32(uint32_t w, const __half *) {
    __half2 h;
    memcpy(&h, &w, 4);
    return __half22float2(h);
}
__device__ __forceinline__ float2 pair_f32(uint32_t w, const __nv_bfloat16 *) {
    __nv_bfloat162 h;
    memcpy(&h, &w, 4);
    return __bfloat1622float2(h);
}
template <int N, typename T>
__device__ __forceinline__ void load_row(const T *p, float (&v)[N]) {
    static_assert(sizeof(T) == 2, "16-bit values");
    uint32_t w[N / 2];
    if constexpr (N == 2) {
        w[0] = *reinterpret_cast<const uint32_t *>(p);
    } else if constexpr (N == 4) {
        const uint2 x = *reinterpret_cast<const uint2 *>(p);
        w[0] = x.x; w[1] = x.y;
    } else {
#pragma unroll
        for (int i = 0; i < N / 2; i += 4) {
            const uint4 x = *reinterpret_cast<const uint4 *>(p + 2 * i);
            w[i] = x.x; w[i + 1] = x.y; w[i + 2] = x.z; w[i + 3] = x.w;
        }
    }
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
        const float2 f = pair_f32(w[i], p);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}
// N values to shared memory at p (aligned to N floats, N a power of two).
template <int N>
__device__ __forceinline__ void store_row(float *p, const float (&v)[N]) {
    if constexpr (N == 2) {
        *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
    } else {
#pragma unroll
        for (int i = 0; i < N; i += 4)
            *reinterpret_cast<float4 *>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
    }
}

// Block (t, 0, z) stores token t's key, block (t, 1, z) its value: 4
// values a thread, read before the slot (a thread walking the row one value
// at a time waited 46 cycles an instruction on its loads).
template <typename T>
__device__ void cache_write(const float *__restrict__ k, const float *__restrict__ v,
                            T *__restrict__ k_cache, T *__restrict__ v_cache,
                            const uint32_t *__restrict__ slots, int width) {
    const int t = blockIdx.x;
    const int i0 = (blockIdx.z * blockDim.x + threadIdx.x) * 4;
    if (i0 >= width) return;
    const float *row = (blockIdx.y == 0 ? k : v) + (size_t)t * width;
    T *cache = blockIdx.y == 0 ? k_cache : v_cache;
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = i0 + j < width ? row[i0 + j] : 0.f;
    const size_t dst = (size_t)slots[t] * width + i0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (i0 + j < width) from_f32(cache[dst + j], x[j]);
}

template <typename T, int DPL, int NW, int G>
__device__ void attend(const float *__restrict__ q, T *__restrict__ k_cache,
                       T *__restrict__ v_cache, float *__restrict__ out,
                       float *__restrict__ part_ml, float *__restrict__ part_acc,
                       uint32_t *__restrict__ tickets,
                       const uint32_t *__restrict__ positions, const uint32_t *__restrict__ token_seq,
                       const uint32_t *__restrict__ table_start,
                       const uint32_t *__restrict__ block_tables, const float *__restrict__ k_new,
                       const float *__restrict__ v_new, const uint32_t *__restrict__ slots,
                       int8_t *__restrict__ out_qs, float *__restrict__ out_d,
                       int *__restrict__ out_bsums, int n_heads, int n_kv_heads,
                       int head_dim, int block_size, float scale, int window, float softcap,
                       int min_chunk, int max_splits) {
    const int t = blockIdx.x;
    const int kvh = blockIdx.y;
    const int split = blockIdx.z;
    const int splits = gridDim.z;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int group = n_heads / n_kv_heads;
    const int kv_width = n_kv_heads * head_dim;
    const int pos = positions[t];
    const uint32_t *table = block_tables + table_start[token_seq[t]];
    const int lo = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    const int context = pos + 1 - lo;
    // This token's splits: 1 in a launch of one split per token.
    const int own_splits = splits == 1 ? 1 : min(max_splits, (context + min_chunk - 1) / min_chunk);
    if (split >= own_splits) return;  // the whole block
    const int chunk = (context + own_splits - 1) / own_splits;
    const int start = lo + split * chunk;
    const int end = min(pos + 1, start + chunk);
    const int kv_off = kvh * head_dim;

    // Keys from new_from on are this step's: row t - (pos - j) of k_new.
    int new_from = INT_MAX;
    if (k_new != nullptr) {
        const uint32_t seq = token_seq[t];
        int back = 0;
        while (back < t && token_seq[t - back - 1] == seq) ++back;
        new_from = pos - back;
        if (split == 0) {
            const size_t dst = (size_t)slots[t] * kv_width + kv_off;
            const size_t src = (size_t)t * kv_width + kv_off;
            for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
                from_f32(k_cache[dst + d], k_new[src + d]);
                from_f32(v_cache[dst + d], v_new[src + d]);
            }
        }
    }

    // Lane `lane` holds dimensions DPL·lane .. DPL·lane + DPL of the
    // queries, keys, values and outputs: a key's row reaches a lane in one
    // load of DPL values where the row's alignment allows (`vec`).
    const int d0 = DPL * lane;
    const bool vec = head_dim % DPL == 0 &&
                     (reinterpret_cast<uintptr_t>(k_cache) | reinterpret_cast<uintptr_t>(v_cache)) %
                             (DPL * sizeof(T)) == 0;
    float qr[G][DPL];
    float acc[G][DPL];
    float m[G], l[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = d0 + i;
            const int h = kvh * group + g;
            qr[g][i] = g < group && d < head_dim ? q[(size_t)t * n_heads * head_dim + h * head_dim + d] * scale : 0.f;
            acc[g][i] = 0.f;
        }
    }

    auto load = [&](int j, float (&kv)[DPL], float (&vv)[DPL]) {
        if (j >= new_from) {
            const size_t row = (size_t)(t - (pos - j)) * kv_width + kv_off;
#pragma unroll
            for (int i = 0; i < DPL; ++i) {
                const int d = d0 + i;
                kv[i] = d < head_dim ? through<T>(k_new[row + d]) : 0.f;
                vv[i] = d < head_dim ? through<T>(v_new[row + d]) : 0.f;
            }
            return;
        }
        const size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
        const T *kr = k_cache + slot * kv_width + kv_off;
        const T *vr = v_cache + slot * kv_width + kv_off;
        if (vec && d0 < head_dim) {
            load_row<DPL>(kr + d0, kv);
            load_row<DPL>(vr + d0, vv);
            return;
        }
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = d0 + i;
            kv[i] = d < head_dim ? to_f32(kr[d]) : 0.f;
            vv[i] = d < head_dim ? to_f32(vr[d]) : 0.f;
        }
    };
    // KB keys a warp at a time (key j0 + u·NW + warp), all their rows
    // loaded before any math: one memory latency per KB keys rather than
    // per key, the KB · group dot products' shuffles interleaved, and one
    // rescaling of the running sums per KB keys.
    constexpr int KB = DPL >= 8 ? 2 : 4;
    for (int j0 = start; j0 + warp < end; j0 += NW * KB) {
        float kv[KB][DPL], vv[KB][DPL];
#pragma unroll
        for (int u = 0; u < KB; ++u) {
            const int j = j0 + u * NW + warp;
            if (j < end) {
                load(j, kv[u], vv[u]);
            } else {
#pragma unroll
                for (int i = 0; i < DPL; ++i) kv[u][i] = vv[u][i] = 0.f;
            }
        }
        float s[G][KB];
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
            for (int u = 0; u < KB; ++u) {
                float x = 0.f;
#pragma unroll
                for (int i = 0; i < DPL; ++i) x += qr[g][i] * kv[u][i];
                s[g][u] = x;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (g < group) {
#pragma unroll
                    for (int u = 0; u < KB; ++u) s[g][u] += __shfl_xor_sync(0xffffffff, s[g][u], o);
                }
            }
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (g < group) {
                float m_new = m[g];
#pragma unroll
                for (int u = 0; u < KB; ++u) {
                    if (softcap > 0.f) s[g][u] = softcap * tanhf(s[g][u] / softcap);
                    if (j0 + u * NW + warp < end) m_new = fmaxf(m_new, s[g][u]);
                }
                // Key j0 + warp is valid: m_new is finite.
                const float correction = __expf(m[g] - m_new);
                float p[KB];
                float sum = 0.f;
#pragma unroll
                for (int u = 0; u < KB; ++u) {
                    p[u] = j0 + u * NW + warp < end ? __expf(s[g][u] - m_new) : 0.f;
                    sum += p[u];
                }
                l[g] = l[g] * correction + sum;
                m[g] = m_new;
#pragma unroll
                for (int i = 0; i < DPL; ++i) {
                    float a = acc[g][i] * correction;
#pragma unroll
                    for (int u = 0; u < KB; ++u) a += p[u] * vv[u][i];
                    acc[g][i] = a;
                }
            }
        }
    }

    // Merge the warps: each writes (m, l, acc) to shared memory; a thread
    // per query head weighs the warps once, then the block's threads
    // combine them per (query head, dimension).
    __shared__ float sm[NW][G];
    __shared__ float sl[NW][G];
    __shared__ __align__(16) float sacc[NW][G][32 * DPL];
    __shared__ float wt[NW][G];
    __shared__ float gmax[G], gden[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        if (g < group) {
            if (lane == 0) {
                sm[warp][g] = m[g];
                sl[warp][g] = l[g];
            }
            store_row<DPL>(&sacc[warp][g][d0], acc[g]);
        }
    }
    // The group's outputs (group · head_dim values from column kvh · group ·
    // head_dim of row t), staged for their Q8_K.
    __shared__ __align__(16) float staged[G * 32 * DPL];
    const int group_width = group * head_dim;
    float *out_row = out + (size_t)t * n_heads * head_dim + (size_t)kvh * group_width;
    auto quantize_out = [&]() {
        if (out_qs == nullptr) return;
        __syncthreads();
        // The buffer's format for the row's width (quant_matmul.cu's
        // quantize_sb): a scale per 256 where it is whole super-blocks (and
        // so is the group: the host checks), else per 32.
        const int width = n_heads * head_dim;
        const size_t base = (size_t)t * width + (size_t)kvh * group_width;
        for (int w = warp; w * QK_K < group_width; w += NW) {
            const int at = w * QK_K + lane * 8;
            const bool active = at < group_width;
            float v[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = active ? staged[at + i] : 0.f;
            const size_t o = base + (size_t)w * QK_K;
            if (width % QK_K == 0)
                quantize_values<32>(v, out_qs + o, out_d + o / QK_K, out_bsums + o / 16);
            else
                quantize_values<4>(v, out_qs + o, out_d + o / 32, out_bsums + o / 16, active);
        }
    };

    __syncthreads();
    if (threadIdx.x < group) {
        const int g = threadIdx.x;
        float mx = -INFINITY;
        for (int w = 0; w < NW; ++w) mx = fmaxf(mx, sm[w][g]);
        float den = 0.f;
        for (int w = 0; w < NW; ++w) {
            // A warp that saw no key weighs 0.
            const float c = sm[w][g] == -INFINITY ? 0.f : __expf(sm[w][g] - mx);
            wt[w][g] = c;
            den += sl[w][g] * c;
        }
        gmax[g] = mx;
        gden[g] = den;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < group_width; idx += blockDim.x) {
        const int g = idx / head_dim;
        const int d = idx % head_dim;
        const float mx = gmax[g], den = gden[g];
        float num = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) num += sacc[w][g][d] * wt[w][g];
        const int h = kvh * group + g;
        if (own_splits == 1) {
            const float y = den > 0.f ? num / den : 0.f;
            out_row[idx] = y;
            staged[idx] = y;
        } else {
            const size_t at = ((size_t)t * n_heads + h) * splits + split;
            part_acc[at * head_dim + d] = num;
            if (d == 0) {
                part_ml[2 * at] = mx;
                part_ml[2 * at + 1] = den;
            }
        }
    }
    if (own_splits == 1) {
        quantize_out();
        return;
    }

    // The last block of (t, kvh) to get here merges the splits.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t *ticket = tickets + (size_t)t * n_kv_heads + kvh;
        last = atomicAdd(ticket, 1u) == (uint32_t)own_splits - 1;
        if (last) *ticket = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Per query head of the group (a warp each): the splits' weights (one
    // a lane, at most 32 splits) and the sum's inverse.
    __shared__ float weight[G][32];
    __shared__ float inv_den[G];
    for (int g = warp; g < group; g += NW) {
        const size_t base = ((size_t)t * n_heads + kvh * group + g) * splits;
        const float ms = lane < own_splits ? __ldcg(part_ml + 2 * (base + lane)) : -INFINITY;
        const float ls = lane < own_splits ? __ldcg(part_ml + 2 * (base + lane) + 1) : 0.f;
        float mx = ms;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
        // A split that saw no key has m = -inf: weight 0.
        const float c = ms == -INFINITY ? 0.f : __expf(ms - mx);
        weight[g][lane] = c;
        const float den = warp_sum(ls * c);
        if (lane == 0) inv_den[g] = den > 0.f ? 1.f / den : 0.f;
    }
    __syncthreads();
    // Four dimensions a thread (head_dim is a multiple of 4), eight splits'
    // loads in flight: one block does what a launch of a block per query
    // head did. (Every split below own_splits wrote its entries.)
    for (int idx = 4 * threadIdx.x; idx < group * head_dim; idx += 4 * blockDim.x) {
        const int g = idx / head_dim;
        const int d = idx % head_dim;
        const int h = kvh * group + g;
        const size_t base = ((size_t)t * n_heads + h) * splits;
        float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
        for (int sp = 0; sp < own_splits; ++sp) {
            const float c = weight[g][sp];
            const float4 x = __ldcg(reinterpret_cast<const float4 *>(part_acc + (base + sp) * head_dim + d));
            num.x += x.x * c;
            num.y += x.y * c;
            num.z += x.z * c;
            num.w += x.w * c;
        }
        const float inv = inv_den[g];
        const float4 y = make_float4(num.x * inv, num.y * inv, num.z * inv, num.w * inv);
        *reinterpret_cast<float4 *>(out_row + idx) = y;
        *reinterpret_cast<float4 *>(staged + idx) = y;
    }
    quantize_out();
}

// Prefill: one block per (run of up to PREFILL_TQ consecutive tokens of
// one sequence, KV head). The block walks the run's keys in chunks of
// PREFILL_KC, staged in shared memory once for all the run's (token, query
// head) pairs; a warp then scores a chunk for one pair with a key per lane
// (no shuffles in the dot product), takes an online softmax and adds the
// values, a lane per output dimension. The decode kernel above read every
// key once per token: a 512-token prefill of an 8B model spent 0.8 ms a
// layer there (bench/results/gpu-2026-12-04-s36.md). Chunks start at
// multiples of PREFILL_KC, so a token's sums do not depend on its run.
//
// runs [runs + 1]: the first token of each run of at most 32 tokens (the
// last entry = tokens); a block takes `tq` of them (sub-run blockIdx.x %
// subruns), tq · group ≤ PREFILL_PAIRS.
// N (2 or 4) consecutive values at p (4-byte aligned for 16-bit types,
// 8- or 16-byte for f32) as f32, in as few shared-memory loads as possible.
template <int N>
__device__ __forceinline__ void load_n(const float *p, float (&v)[N]) {
    if constexpr (N == 4) {
        const float4 x = *(const float4 *)p;
        v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
    } else {
        const float2 x = *(const float2 *)p;
        v[0] = x.x; v[1] = x.y;
    }
}
template <int N>
__device__ __forceinline__ void load_n(const __half *p, float (&v)[N]) {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
        const float2 x = __half22float2(*(const __half2 *)(p + i));
        v[i] = x.x; v[i + 1] = x.y;
    }
}
template <int N>
__device__ __forceinline__ void load_n(const __nv_bfloat16 *p, float (&v)[N]) {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
        const float2 x = __bfloat1622float2(*(const __nv_bfloat162 *)(p + i));
        v[i] = x.x; v[i + 1] = x.y;
    }
}

#define PREFILL_KC 32
#define PREFILL_PAIRS 24
#define PREFILL_HD 128
#define PREFILL_NW 4

template <typename T, int DPL>
__device__ void prefill(const float *__restrict__ q, const T *__restrict__ k_cache,
                        const T *__restrict__ v_cache, float *__restrict__ out,
                        const uint32_t *__restrict__ positions, const uint32_t *__restrict__ token_seq,
                        const uint32_t *__restrict__ table_start,
                        const uint32_t *__restrict__ block_tables, const uint32_t *__restrict__ runs,
                        int tq, int subruns, int n_heads, int n_kv_heads, int head_dim,
                        int block_size, float scale, int window, float softcap) {
    // Odd row strides in 4-byte words: a lane per key reads its own row
    // without bank conflicts.
    constexpr int PAD = 4 / sizeof(T);
    constexpr int ROW = PREFILL_HD + PAD;
    __shared__ __align__(16) float sq[PREFILL_PAIRS][PREFILL_HD];
    __shared__ __align__(16) T sk[PREFILL_KC][ROW];
    __shared__ __align__(16) T sv[PREFILL_KC][PREFILL_HD];
    const int run = blockIdx.x / subruns, sub = blockIdx.x % subruns;
    const int kvh = blockIdx.y;
    const int first = runs[run] + sub * tq;
    const int last = min((int)runs[run + 1], first + tq);  // exclusive
    if (first >= last) return;
    const int n = last - first;
    const int group = n_heads / n_kv_heads;
    const int pairs = n * group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kv_width = n_kv_heads * head_dim;
    const uint32_t *table = block_tables + table_start[token_seq[first]];
    const int pos_first = positions[first], pos_last = positions[last - 1];
    const int lo_first = window > 0 && pos_first + 1 > window ? pos_first + 1 - window : 0;

    for (int i = threadIdx.x; i < pairs * head_dim; i += blockDim.x) {
        const int p = i / head_dim, d = i % head_dim;
        const int t = first + p / group, h = kvh * group + p % group;
        sq[p][d] = q[(size_t)t * n_heads * head_dim + h * head_dim + d] * scale;
    }
    // Each warp's pairs: p = warp, warp + NW, ... (at most PREFILL_PAIRS / NW).
    constexpr int PW = PREFILL_PAIRS / PREFILL_NW;
    float m[PW], l[PW], acc[PW][DPL];
    int qpos[PW], qlo[PW];
#pragma unroll
    for (int j = 0; j < PW; ++j) {
        m[j] = -INFINITY;
        l[j] = 0.f;
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[j][i] = 0.f;
        const int p = warp + PREFILL_NW * j;
        qpos[j] = p < pairs ? (int)positions[first + p / group] : -1;
        qlo[j] = window > 0 && qpos[j] + 1 > window ? qpos[j] + 1 - window : 0;
    }
    // A chunk's keys and values travel in 16-byte pieces, a thread's pieces
    // of the next chunk loaded into registers while the block works on this
    // one (one load's latency per chunk, not one per value).
    constexpr int E = 16 / sizeof(T);
    constexpr int L = PREFILL_KC * PREFILL_HD / E / (32 * PREFILL_NW);
    const int segs = head_dim / E;
    uint4 kreg[L], vreg[L];
    auto fetch = [&](int c0) {
#pragma unroll
        for (int u = 0; u < L; ++u) {
            const int i = threadIdx.x + u * 32 * PREFILL_NW;
            const int j = i / segs, seg = i % segs;
            const int key = c0 + j;
            kreg[u] = vreg[u] = make_uint4(0, 0, 0, 0);
            if (j < PREFILL_KC && key <= pos_last) {
                const size_t slot = (size_t)table[key / block_size] * block_size + key % block_size;
                const size_t at = slot * kv_width + kvh * head_dim + seg * E;
                kreg[u] = *(const uint4 *)(k_cache + at);
                vreg[u] = *(const uint4 *)(v_cache + at);
            }
        }
    };
    auto stage = [&]() {
#pragma unroll
        for (int u = 0; u < L; ++u) {
            const int i = threadIdx.x + u * 32 * PREFILL_NW;
            const int j = i / segs, seg = i % segs;
            if (j < PREFILL_KC) {
                // Rows of sk are 4-byte aligned only (odd word strides).
                uint32_t *kw = (uint32_t *)&sk[j][seg * E];
                kw[0] = kreg[u].x; kw[1] = kreg[u].y; kw[2] = kreg[u].z; kw[3] = kreg[u].w;
                *(uint4 *)&sv[j][seg * E] = vreg[u];
            }
        }
    };
    const int c_first = lo_first / PREFILL_KC * PREFILL_KC;
    fetch(c_first);
    for (int c0 = c_first; c0 <= pos_last; c0 += PREFILL_KC) {
        __syncthreads();  // the previous chunk's readers are done
        stage();
        __syncthreads();
        if (c0 + PREFILL_KC <= pos_last) fetch(c0 + PREFILL_KC);
#pragma unroll
        for (int j = 0; j < PW; ++j) {
            const int p = warp + PREFILL_NW * j;
            if (p >= pairs) break;
            const int key = c0 + lane;
            const bool valid = key <= qpos[j] && key >= qlo[j];
            float s = 0.f;
            for (int d = 0; d < head_dim; d += 4) {
                const float4 qv = *(const float4 *)&sq[p][d];
                float kv[4];
                if constexpr (sizeof(T) == 4) {
#pragma unroll
                    for (int i = 0; i < 4; ++i) kv[i] = to_f32(sk[lane][d + i]);
                } else {
                    load_n<4>(&sk[lane][d], kv);
                }
                s = fmaf(qv.x, kv[0], s);
                s = fmaf(qv.y, kv[1], s);
                s = fmaf(qv.z, kv[2], s);
                s = fmaf(qv.w, kv[3], s);
            }
            if (softcap > 0.f) s = softcap * tanhf(s / softcap);
            if (!valid) s = -INFINITY;
            float mc = s;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mc = fmaxf(mc, __shfl_xor_sync(0xffffffff, mc, o));
            if (mc == -INFINITY) continue;  // no key of this chunk for this pair
            const float m_new = fmaxf(m[j], mc);
            const float correction = __expf(m[j] - m_new);
            const float pj = valid ? __expf(s - m_new) : 0.f;
            l[j] = l[j] * correction + warp_sum(pj);
            m[j] = m_new;
#pragma unroll
            for (int i = 0; i < DPL; ++i) acc[j][i] *= correction;
            // Lane l holds dimensions DPL·l .. DPL·l + DPL.
            if (DPL * lane < head_dim) {
#pragma unroll 8
                for (int k = 0; k < PREFILL_KC; ++k) {
                    const float pk = __shfl_sync(0xffffffff, pj, k);
                    float vv[DPL];
                    load_n<DPL>(&sv[k][DPL * lane], vv);
#pragma unroll
                    for (int i = 0; i < DPL; ++i) acc[j][i] = fmaf(pk, vv[i], acc[j][i]);
                }
            } else {
#pragma unroll 8
                for (int k = 0; k < PREFILL_KC; ++k) __shfl_sync(0xffffffff, pj, k);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < PW; ++j) {
        const int p = warp + PREFILL_NW * j;
        if (p >= pairs) break;
        const int t = first + p / group, h = kvh * group + p % group;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = DPL * lane + i;
            if (d < head_dim)
                out[(size_t)t * n_heads * head_dim + h * head_dim + d] = l[j] > 0.f ? acc[j][i] / l[j] : 0.f;
        }
    }
}

#define PREFILL(T, SUFFIX, DPL)                                                                 \
    extern "C" __global__ void __launch_bounds__(PREFILL_NW * 32)                              \
        paged_prefill_##SUFFIX##_##DPL(const float *q, const T *k_cache, const T *v_cache,      \
                                       float *out, const uint32_t *positions,                  \
                                       const uint32_t *token_seq, const uint32_t *table_start, \
                                       const uint32_t *block_tables, const uint32_t *runs,     \
                                       int tq, int subruns, int n_heads, int n_kv_heads,       \
                                       int head_dim, int block_size, float scale, int window,  \
                                       float softcap) {                                        \
        prefill<T, DPL>(q, k_cache, v_cache, out, positions, token_seq, table_start,           \
                        block_tables, runs, tq, subruns, n_heads, n_kv_heads, head_dim,        \
                        block_size, scale, window, softcap);                                   \
    }

// NW warps a block: 8 where the merge's shared memory allows (head
// dimensions up to 128), so that each warp walks fewer keys one after the
// other (4 warps: 28 µs per layer at a context of 1,024, waiting on memory:
// bench/results/gpu-2026-12-03-s33.md).
#define ATTEND(T, SUFFIX, DPL, NW, G)                                                           \
    extern "C" __global__ void __launch_bounds__(NW * 32)                                     \
        paged_attention_##SUFFIX##_##DPL##_g##G(                                              \
        const float *q, T *k_cache, T *v_cache, float *out, float *part_ml,       \
        float *part_acc, uint32_t *tickets, const uint32_t *positions,                        \
        const uint32_t *token_seq,                                                            \
        const uint32_t *table_start, const uint32_t *block_tables, const float *k_new,        \
        const float *v_new, const uint32_t *slots, int8_t *out_qs, float *out_d,              \
        int *out_bsums, int n_heads, int n_kv_heads, int head_dim, int block_size,            \
        float scale, int window, float softcap, int min_chunk, int max_splits) {              \
        pdl_trigger();                                                                        \
        pdl_wait();                                                                           \
        attend<T, DPL, NW, G>(q, k_cache, v_cache, out, part_ml, part_acc, tickets, positions,   \
                           token_seq, table_start, block_tables, k_new, v_new, slots, out_qs, \
                           out_d, out_bsums, n_heads, n_kv_heads, head_dim, block_size,       \
                           scale, window, softcap, min_chunk, max_splits);                    \
    }

// A kernel per query group size rounded up to a power of two: the
// registers of the queries and sums are sized by it (8 for every group,
// 169 registers a thread, left the 8B shape's groups of 4 one block an SM).
#define ATTEND_GROUPS(T, SUFFIX, DPL, NW)                                                       \
    ATTEND(T, SUFFIX, DPL, NW, 1)                                                             \
    ATTEND(T, SUFFIX, DPL, NW, 2)                                                             \
    ATTEND(T, SUFFIX, DPL, NW, 4)                                                             \
    ATTEND(T, SUFFIX, DPL, NW, 8)

#define INSTANTIATE(T, SUFFIX)                                                                  \
    extern "C" __global__ void cache_write_##SUFFIX(const float *k, const float *v,           \
                                                    T *k_cache, T *v_cache,                   \
                                                    const uint32_t *slots, int width) {       \
        cache_write<T>(k, v, k_cache, v_cache, slots, width);                                 \
    }                                                                                         \
    ATTEND_GROUPS(T, SUFFIX, 2, 8)                                                            \
    ATTEND_GROUPS(T, SUFFIX, 4, 8)                                                            \
    ATTEND_GROUPS(T, SUFFIX, 8, 4)                                                            \
    PREFILL(T, SUFFIX, 2)                                                                     \
    PREFILL(T, SUFFIX, 4)

INSTANTIATE(float, f32)
INSTANTIATE(__half, f16)
INSTANTIATE(__nv_bfloat16, bf16)
