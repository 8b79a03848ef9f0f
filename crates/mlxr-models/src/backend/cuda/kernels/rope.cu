// RoPE over a step's queries and keys in one launch.
//
// Layouts (row-major, f32): q [tokens, q_heads * head_dim], k [tokens,
// k_heads * head_dim]; cos, sin [tokens, rot / 2] (the step's tables, as the
// CPU backend computes them). One thread block per (token, head), the q heads
// first, then the k heads; a thread per rotated pair. Dimensions past `rot`
// (partial rotary) are copied. `neox`: pairs (i, i + rot / 2) (llama.cpp's
// NEOX style, transformers' rotate_half); otherwise (2i, 2i + 1).

#include "pdl.cuh"

extern "C" __global__ void rope_qk(const float *__restrict__ q, const float *__restrict__ k,
                                   float *__restrict__ q_out, float *__restrict__ k_out,
                                   const float *__restrict__ cos, const float *__restrict__ sin,
                                   int q_heads, int k_heads, int head_dim, int rot, int neox) {
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    const bool is_q = (int)blockIdx.y < q_heads;
    const int heads = is_q ? q_heads : k_heads;
    const int h = is_q ? blockIdx.y : blockIdx.y - q_heads;
    const size_t row = ((size_t)t * heads + h) * head_dim;
    const float *x = (is_q ? q : k) + row;
    float *y = (is_q ? q_out : k_out) + row;
    const int half = rot / 2;
    const float *c = cos + (size_t)t * half;
    const float *s = sin + (size_t)t * half;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const int a = neox ? i : 2 * i;
        const int b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b];
        y[a] = x0 * c[i] - x1 * s[i];
        y[b] = x0 * s[i] + x1 * c[i];
    }
    for (int d = rot + threadIdx.x; d < head_dim; d += blockDim.x) y[d] = x[d];
}
