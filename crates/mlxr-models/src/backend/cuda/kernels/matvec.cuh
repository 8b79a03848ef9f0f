// What the decode matmuls of 16-bit and coded weights share
// (half_matvec.cu, decoded_matvec.cu): warps per block, the warp's sum, the
// weights' streaming load, and the kernels' token counts (1, 2, 4 and 8
// activation rows; cuda/half_matvec.rs `tokens_variant`). The quantized
// matmuls (quant_matmul.cu) and the attention kernels (paged_attention.cu)
// take their warp sums from here too.
#pragma once
#include <stdint.h>

#define ROWS 4

// M(B, ...) for every token count B a kernel is built for.
#define EACH_TOKENS(M, ...) M(1, __VA_ARGS__) M(2, __VA_ARGS__) M(4, __VA_ARGS__) M(8, __VA_ARGS__)

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}

// 16 bytes of weights, read once: past L1, with L2 asked to fetch 256 bytes
// at a time.
__device__ __forceinline__ uint4 load_stream(const void *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}
