// Q4_K and Q6_K weights as both quantized matmuls read them (the decode
// kernels of quant_matmul.cu and the tensor-core tiles of mmq.cu): the
// blocks' layout, and the float step of a super-block. Both kernels form a
// super-block's integer sums exactly (the CPU's integers), then take this
// same float step for it and add the steps of a row in the same order, so
// a token's result is the same bits whichever of them runs it.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef QK_K
#define QK_K 256
#endif
#define Q4_K_BYTES 144
#define Q6_K_BYTES 210

// Two bytes at a time: Q6_K blocks (210 bytes) are only 2-byte aligned.
__device__ __forceinline__ int load_u32_2aligned(const uint8_t *p) {
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | ((uint32_t)h[1] << 16));
}

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes,
// held as the words s0 (bytes 0-3), s1 (4-7), s2 (8-11). Without branches:
// the lanes of one super-block take different j, and a branch on j < 4
// ran both ways for them (ncu: the decode kernels issue an instruction in
// 55% of cycles, bench/results/gpu-2026-12-06-s51.md).
__device__ __forceinline__ void q4_K_scale_min(uint32_t s0, uint32_t s1, uint32_t s2, int j,
                                               int &sc, int &mn) {
    const int shift = 8 * (j & 3);
    const int b0 = (s0 >> shift) & 0xFF, b1 = (s1 >> shift) & 0xFF, b2 = (s2 >> shift) & 0xFF;
    const int high_sc = (b2 & 0xF) | ((b0 >> 6) << 4);
    const int high_mn = (b2 >> 4) | ((b1 >> 6) << 4);
    sc = j < 4 ? b0 & 63 : high_sc;
    mn = j < 4 ? b1 & 63 : high_mn;
}

// acc + dx · (d · sum - dmin · mins) for a Q4_K super-block (sum = Σ scale ·
// dot over its sub-blocks, mins = Σ min · activation sum), rounded as
// written whatever the compiler would contract.
__device__ __forceinline__ float q4_K_step(float acc, float dx, float d, float dmin, int sum,
                                           int mins) {
    const float part = __fsub_rn(__fmul_rn(d, (float)sum), __fmul_rn(dmin, (float)mins));
    return __fmaf_rn(dx, part, acc);
}

// acc + (d · dx) · sum for a Q6_K super-block (sum = Σ scale · dot).
__device__ __forceinline__ float q6_K_step(float acc, float dx, float d, int sum) {
    return __fmaf_rn(__fmul_rn(d, dx), (float)sum, acc);
}
