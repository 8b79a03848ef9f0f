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
// warp scoring one key at a time for all the query heads of the KV head's
// group (the key and value are read once per group), with an online softmax;
// the warps' partial results are merged at the end. With several splits
// (steps of few tokens: decode, where (tokens, KV heads) alone would leave
// most SMs idle) a token of context c takes S = min(max_splits, ceil(c /
// min_chunk)) splits of ceil(c / S) keys each; split s writes its running
// max, sum and unnormalized output, and attention_merge combines them.
// S depends on the token's own context alone, so its result does not depend
// on the rest of the batch.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define MAX_GROUP 8

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void from_f32(float &d, float x) { d = x; }
__device__ __forceinline__ void from_f32(__half &d, float x) { d = __float2half(x); }
__device__ __forceinline__ void from_f32(__nv_bfloat16 &d, float x) { d = __float2bfloat16(x); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
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

template <typename T, int DPL, int NW>
__device__ void attend(const float *__restrict__ q, const T *__restrict__ k_cache,
                       const T *__restrict__ v_cache, float *__restrict__ out,
                       float *__restrict__ part_ml, float *__restrict__ part_acc,
                       const uint32_t *__restrict__ positions, const uint32_t *__restrict__ token_seq,
                       const uint32_t *__restrict__ table_start,
                       const uint32_t *__restrict__ block_tables, int n_heads, int n_kv_heads,
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
    const int own_splits = min(max_splits, (context + min_chunk - 1) / min_chunk);
    const int chunk = (context + own_splits - 1) / own_splits;
    // Splits past the token's own (s >= own_splits) start past its keys and
    // write an empty result.
    const int start = splits == 1 ? lo : lo + split * chunk;
    const int end = splits == 1 ? pos + 1 : min(pos + 1, start + chunk);

    float qr[MAX_GROUP][DPL];
    float acc[MAX_GROUP][DPL];
    float m[MAX_GROUP], l[MAX_GROUP];
#pragma unroll
    for (int g = 0; g < MAX_GROUP; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = lane + 32 * i;
            const int h = kvh * group + g;
            qr[g][i] = g < group && d < head_dim ? q[(size_t)t * n_heads * head_dim + h * head_dim + d] * scale : 0.f;
            acc[g][i] = 0.f;
        }
    }

    // The next key's row is loaded before this key's math, so its latency
    // hides behind the shuffles.
    auto load = [&](int j, float (&kv)[DPL], float (&vv)[DPL]) {
        const size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
        const T *kr = k_cache + slot * kv_width + kvh * head_dim;
        const T *vr = v_cache + slot * kv_width + kvh * head_dim;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = lane + 32 * i;
            kv[i] = d < head_dim ? to_f32(kr[d]) : 0.f;
            vv[i] = d < head_dim ? to_f32(vr[d]) : 0.f;
        }
    };
    float kn[DPL], vn[DPL];
    if (start + warp < end) load(start + warp, kn, vn);
    for (int j = start + warp; j < end; j += NW) {
        float kv[DPL], vv[DPL];
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            kv[i] = kn[i];
            vv[i] = vn[i];
        }
        if (j + NW < end) load(j + NW, kn, vn);
#pragma unroll
        for (int g = 0; g < MAX_GROUP; ++g) {
            if (g < group) {
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < DPL; ++i) s += qr[g][i] * kv[i];
                s = warp_sum(s);
                if (softcap > 0.f) s = softcap * tanhf(s / softcap);
                const float m_new = fmaxf(m[g], s);
                const float correction = __expf(m[g] - m_new);
                const float p = __expf(s - m_new);
                l[g] = l[g] * correction + p;
                m[g] = m_new;
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[g][i] = acc[g][i] * correction + p * vv[i];
            }
        }
    }

    // Merge the warps: each writes (m, l, acc) to shared memory, then the
    // block's threads combine them per (query head, dimension).
    __shared__ float sm[NW][MAX_GROUP];
    __shared__ float sl[NW][MAX_GROUP];
    __shared__ float sacc[NW][MAX_GROUP][32 * DPL];
#pragma unroll
    for (int g = 0; g < MAX_GROUP; ++g) {
        if (g < group) {
            if (lane == 0) {
                sm[warp][g] = m[g];
                sl[warp][g] = l[g];
            }
#pragma unroll
            for (int i = 0; i < DPL; ++i) sacc[warp][g][lane + 32 * i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x) {
        const int g = idx / head_dim;
        const int d = idx % head_dim;
        float mx = -INFINITY;
        for (int w = 0; w < NW; ++w) mx = fmaxf(mx, sm[w][g]);
        float num = 0.f, den = 0.f;
        for (int w = 0; w < NW; ++w) {
            if (sm[w][g] == -INFINITY) continue;  // a warp that saw no key
            const float c = __expf(sm[w][g] - mx);
            num += sacc[w][g][d] * c;
            den += sl[w][g] * c;
        }
        const int h = kvh * group + g;
        if (splits == 1) {
            out[(size_t)t * n_heads * head_dim + h * head_dim + d] = den > 0.f ? num / den : 0.f;
        } else {
            const size_t at = ((size_t)t * n_heads + h) * splits + split;
            part_acc[at * head_dim + d] = num;
            if (d == 0) {
                part_ml[2 * at] = mx;
                part_ml[2 * at + 1] = den;
            }
        }
    }
}

// One block per (token, query head), a thread per dimension: the splits'
// partial results (running max m, sum l, unnormalized output) into one.
// The first warp reads every split's (m, l) at once and turns them into the
// splits' weights, so the threads' loads of the outputs do not wait on each
// other (a loop over the splits reading m then the output took 10.8 µs per
// layer: bench/results/gpu-2026-12-03-s33.md). At most MERGE_SPLITS splits.
#define MERGE_SPLITS 64
extern "C" __global__ void attention_merge(const float *__restrict__ part_ml,
                                           const float *__restrict__ part_acc,
                                           float *__restrict__ out, int n_heads, int head_dim,
                                           int splits) {
    __shared__ float weight[MERGE_SPLITS];
    __shared__ float inv_den;
    const int t = blockIdx.x;
    const int h = blockIdx.y;
    const size_t base = ((size_t)t * n_heads + h) * splits;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float ms[MERGE_SPLITS / 32], ls[MERGE_SPLITS / 32];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < MERGE_SPLITS / 32; ++i) {
            const int s = lane + 32 * i;
            ms[i] = s < splits ? part_ml[2 * (base + s)] : -INFINITY;
            ls[i] = s < splits ? part_ml[2 * (base + s) + 1] : 0.f;
            mx = fmaxf(mx, ms[i]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
        float den = 0.f;
#pragma unroll
        for (int i = 0; i < MERGE_SPLITS / 32; ++i) {
            // A split past the token's keys has m = -inf: weight 0.
            const float c = ms[i] == -INFINITY ? 0.f : __expf(ms[i] - mx);
            if (lane + 32 * i < MERGE_SPLITS) weight[lane + 32 * i] = c;
            den += ls[i] * c;
        }
        den = warp_sum(den);
        if (lane == 0) inv_den = den > 0.f ? 1.f / den : 0.f;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float num = 0.f;
#pragma unroll 8
        for (int s = 0; s < splits; ++s) {
            const float c = weight[s];
            if (c != 0.f) num += part_acc[(base + s) * head_dim + d] * c;
        }
        out[((size_t)t * n_heads + h) * head_dim + d] = num * inv_den;
    }
}

// NW warps a block: 8 where the merge's shared memory allows (head
// dimensions up to 128), so that each warp walks fewer keys one after the
// other (4 warps: 28 µs per layer at a context of 1,024, waiting on memory:
// bench/results/gpu-2026-12-03-s33.md).
#define ATTEND(T, SUFFIX, DPL, NW)                                                              \
    extern "C" __global__ void __launch_bounds__(NW * 32) paged_attention_##SUFFIX##_##DPL(    \
        const float *q, const T *k_cache, const T *v_cache, float *out, float *part_ml,       \
        float *part_acc, const uint32_t *positions, const uint32_t *token_seq,                \
        const uint32_t *table_start, const uint32_t *block_tables, int n_heads,               \
        int n_kv_heads, int head_dim, int block_size, float scale, int window, float softcap, \
        int min_chunk, int max_splits) {                                                      \
        attend<T, DPL, NW>(q, k_cache, v_cache, out, part_ml, part_acc, positions, token_seq, \
                           table_start, block_tables, n_heads, n_kv_heads, head_dim,          \
                           block_size, scale, window, softcap, min_chunk, max_splits);        \
    }

#define INSTANTIATE(T, SUFFIX)                                                                  \
    extern "C" __global__ void cache_write_##SUFFIX(const float *k, const float *v,           \
                                                    T *k_cache, T *v_cache,                   \
                                                    const uint32_t *slots, int width) {       \
        cache_write<T>(k, v, k_cache, v_cache, slots, width);                                 \
    }                                                                                         \
    ATTEND(T, SUFFIX, 2, 8)                                                                   \
    ATTEND(T, SUFFIX, 4, 8)                                                                   \
    ATTEND(T, SUFFIX, 8, 4)

INSTANTIATE(float, f32)
INSTANTIATE(__half, f16)
INSTANTIATE(__nv_bfloat16, bf16)
