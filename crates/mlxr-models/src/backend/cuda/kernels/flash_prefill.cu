// Prefill attention on tensor cores (FlashAttention-2's loop, over the
// paged cache): for f16 and bf16 caches and head dimensions 64 and 128.
//
// One block per (run of at most FLASH_ROWS / group consecutive tokens of one
// sequence, KV head), as paged_prefill in paged_attention.cu; its rows are
// the run's (token, query head) pairs, 16 per warp. The block walks the
// run's keys in chunks of FLASH_KC, copied into shared memory with cp.async
// (the next chunk's copy in flight while the warps work on this one). A
// warp takes S = Q·Kᵀ for its 16 rows with mma.sync m16n8k16 (queries
// scaled and rounded to the cache's type once, in registers), an online
// softmax on S in the accumulators' registers, and O += P·V with P rounded
// to the cache's type (values through ldmatrix.trans). Sums in f32. Chunks
// start at multiples of FLASH_KC, so a token's result does not depend on
// its run.
//
// Fragment layouts of mma.m16n8k16 (lane = 4·g + t):
//   A (16×16, row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16×8):             b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g)
//   C (16×8, f32):        c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define FLASH_ROWS 64
#define FLASH_KC 32
#define FLASH_NW (FLASH_ROWS / 16)

template <typename T> struct Mma;

template <> struct Mma<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const uint32_t *>(&h);
    }
    static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <> struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const uint32_t *>(&h);
    }
    static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

// 16 bytes from global to shared memory without passing through registers;
// `valid` false writes zeros (keys past the run's last, whose values must
// not be NaN garbage: P is 0 there, but 0 · NaN is not).
__device__ __forceinline__ void copy16(void *smem, const void *gmem, bool valid) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copies_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void copies_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T, int HD>
__device__ void flash_prefill(const float *__restrict__ q, const T *__restrict__ k_cache,
                              const T *__restrict__ v_cache, float *__restrict__ out,
                              const uint32_t *__restrict__ positions,
                              const uint32_t *__restrict__ token_seq,
                              const uint32_t *__restrict__ table_start,
                              const uint32_t *__restrict__ block_tables,
                              const uint32_t *__restrict__ runs, int tq, int subruns, int n_heads,
                              int n_kv_heads, int block_size, float scale, int window,
                              float softcap) {
    // Rows of HD + 8 values: 16-byte aligned for cp.async and ldmatrix, and
    // successive rows 4 banks apart (no conflicts in either read).
    constexpr int ROW = HD + 8;
    constexpr int KS = HD / 16;  // k-steps of Q·Kᵀ
    constexpr int NT = HD / 8;   // n-tiles of O
    constexpr int SEGS = HD / 8; // 16-byte pieces of a key
    __shared__ __align__(16) T sk[2][FLASH_KC][ROW];
    __shared__ __align__(16) T sv[2][FLASH_KC][ROW];

    const int run = blockIdx.x / subruns, sub = blockIdx.x % subruns;
    const int kvh = blockIdx.y;
    const int first = runs[run] + sub * tq;
    const int last = min((int)runs[run + 1], first + tq);  // exclusive
    if (first >= last) return;
    const int group = n_heads / n_kv_heads;
    const int pairs = (last - first) * group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int kv_width = n_kv_heads * HD;
    const uint32_t *table = block_tables + table_start[token_seq[first]];
    const int pos_first = positions[first], pos_last = positions[last - 1];
    const int lo_first = window > 0 && pos_first + 1 > window ? pos_first + 1 - window : 0;

    // This thread's two rows: pair p0 = 16·warp + g and p0 + 8.
    int qpos[2], qlo[2];
    const float *qrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int p = 16 * warp + g + 8 * r;
        const int tok = first + p / group, h = kvh * group + p % group;
        qpos[r] = p < pairs ? (int)positions[tok] : -1;
        qlo[r] = window > 0 && qpos[r] + 1 > window ? qpos[r] + 1 - window : 0;
        qrow[r] = p < pairs ? q + (size_t)tok * n_heads * HD + h * HD : nullptr;
    }
    uint32_t qa[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = i % 2, d = 16 * ks + 2 * t + 8 * (i / 2);
            float2 x = make_float2(0.f, 0.f);
            if (qrow[r]) x = *(const float2 *)(qrow[r] + d);
            qa[ks][i] = Mma<T>::pack(x.x * scale, x.y * scale);
        }
    }

    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this thread's part

    const int c_first = lo_first / FLASH_KC * FLASH_KC;
    const int chunks = (pos_last - c_first) / FLASH_KC + 1;
    auto issue = [&](int chunk, int buf) {
        const int c0 = c_first + chunk * FLASH_KC;
        for (int i = threadIdx.x; i < 2 * FLASH_KC * SEGS; i += 32 * FLASH_NW) {
            const int which = i / (FLASH_KC * SEGS), j = i % (FLASH_KC * SEGS) / SEGS,
                      seg = i % SEGS;
            const int key = c0 + j;
            const bool valid = key <= pos_last;
            const T *cache = which == 0 ? k_cache : v_cache;
            const T *src = cache;
            if (valid) {
                const size_t slot =
                    (size_t)table[key / block_size] * block_size + key % block_size;
                src = cache + slot * kv_width + kvh * HD + 8 * seg;
            }
            T *dst = which == 0 ? &sk[buf][j][8 * seg] : &sv[buf][j][8 * seg];
            copy16(dst, src, valid);
        }
        copies_commit();
    };

    const bool active = 16 * warp < pairs;
    issue(0, 0);
    for (int chunk = 0; chunk < chunks; ++chunk) {
        const int buf = chunk & 1;
        if (chunk + 1 < chunks) {
            issue(chunk + 1, buf ^ 1);
            copies_wait<1>();
        } else {
            copies_wait<0>();
        }
        __syncthreads();
        if (active) {
            const int c0 = c_first + chunk * FLASH_KC;
            // S = Q·Kᵀ, 16 rows × FLASH_KC keys.
            float s[FLASH_KC / 8][4];
#pragma unroll
            for (int n = 0; n < FLASH_KC / 8; ++n) {
                s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const T *kr = &sk[buf][8 * n + g][16 * ks + 2 * t];
                    Mma<T>::run(s[n], qa[ks], *(const uint32_t *)kr,
                                *(const uint32_t *)(kr + 8));
                }
            }
            // Online softmax per row; a row's four lanes (t = 0..3) agree
            // on its max through two shuffles.
            float corr[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = -INFINITY;
#pragma unroll
                for (int n = 0; n < FLASH_KC / 8; ++n) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float x = s[n][2 * r + e];
                        if (softcap > 0.f) x = softcap * tanhf(x / softcap);
                        const int key = c0 + 8 * n + 2 * t + e;
                        x = key <= qpos[r] && key >= qlo[r] ? x : -INFINITY;
                        s[n][2 * r + e] = x;
                        mx = fmaxf(mx, x);
                    }
                }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                const float m_new = fmaxf(m[r], mx);
                corr[r] = m_new == -INFINITY ? 1.f : __expf(m[r] - m_new);
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < FLASH_KC / 8; ++n) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float x = s[n][2 * r + e];
                        const float p = x == -INFINITY ? 0.f : __expf(x - m_new);
                        s[n][2 * r + e] = p;
                        sum += p;
                    }
                }
                l[r] = l[r] * corr[r] + sum;
                m[r] = m_new;
            }
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                o[n][0] *= corr[0];
                o[n][1] *= corr[0];
                o[n][2] *= corr[1];
                o[n][3] *= corr[1];
            }
            // O += P·V: P's C fragments of two key tiles are the A fragment
            // of one k-step of 16 keys.
#pragma unroll
            for (int kk = 0; kk < FLASH_KC / 16; ++kk) {
                const uint32_t pa[4] = {Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]),
                                        Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                                        Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                        Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    // Lanes 0-15 address keys 16·kk + 0..15 at dimension
                    // 8·n, lanes 16-31 the same keys at 8·(n + 1).
                    const T *vr = &sv[buf][16 * kk + (lane & 15)][8 * (n + (lane >> 4))];
                    const unsigned addr = (unsigned)__cvta_generic_to_shared(vr);
                    uint32_t b[4];
                    asm volatile(
                        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                        : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                        : "r"(addr));
                    Mma<T>::run(o[n], pa, b[0], b[1]);
                    Mma<T>::run(o[n + 1], pa, b[2], b[3]);
                }
            }
        }
        __syncthreads();  // this buffer is the copy target of the next iteration
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        sum += __shfl_xor_sync(0xffffffff, sum, 2);
        if (!qrow[r]) continue;
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int p = 16 * warp + g + 8 * r;
        const int tok = first + p / group, h = kvh * group + p % group;
        float *dst = out + (size_t)tok * n_heads * HD + h * HD;
#pragma unroll
        for (int n = 0; n < NT; ++n)
            *(float2 *)(dst + 8 * n + 2 * t) = make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
}

#define FLASH(T, SUFFIX, HD)                                                                    \
    extern "C" __global__ void __launch_bounds__(FLASH_NW * 32)                                \
        flash_prefill_##SUFFIX##_##HD(const float *q, const T *k_cache, const T *v_cache,       \
                                      float *out, const uint32_t *positions,                   \
                                      const uint32_t *token_seq, const uint32_t *table_start,  \
                                      const uint32_t *block_tables, const uint32_t *runs,      \
                                      int tq, int subruns, int n_heads, int n_kv_heads,        \
                                      int head_dim, int block_size, float scale, int window,   \
                                      float softcap) {                                         \
        /* paged_prefill's arguments; head_dim is HD */                                        \
        flash_prefill<T, HD>(q, k_cache, v_cache, out, positions, token_seq, table_start,      \
                             block_tables, runs, tq, subruns, n_heads, n_kv_heads, block_size, \
                             scale, window, softcap);                                          \
    }

FLASH(__half, f16, 64)
FLASH(__half, f16, 128)
FLASH(__nv_bfloat16, bf16, 64)
FLASH(__nv_bfloat16, bf16, 128)
