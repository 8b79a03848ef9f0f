// What one-token decode matmuls could read: the 8B shape's gate+up weights
// (32 layers of 28,672 rows x 16 Q4_K super-blocks, rotated so that each
// launch reads DRAM) read by kernels that only load and XOR, with the
// decode kernel's pattern (a warp a row, 4 super-blocks at a time) and
// linearly; beside the decode kernel itself. On an H100 (stop 60,
// bench/results/gpu-2026-12-07-s60.md) the loads alone reach the linear
// read's 2.7 TB/s, the decode kernel 2.1. Built and run by hand on a GPU
// machine: nvcc -O3 -std=c++17 -arch=sm_90 stream_ceiling.cu.
#include <cstdio>
#include <vector>

#include "../../crates/mlxr-models/src/backend/cuda/kernels/quant_matmul.cu"

#include "check.cuh"

// The decode kernel's loads alone: lane (j, g, h) reads its super-block's
// head and its 16 bytes, 4 super-blocks a warp at a time.
template <int UNROLL>
__global__ void __launch_bounds__(128) pattern_loads(const uint8_t *__restrict__ w, int nsb,
                                                     int rows, unsigned *out) {
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = threadIdx.x & 31, l8 = lane & 7, g = l8 >> 1, h = l8 & 1;
    const uint8_t *wr = w + (long)row * nsb * Q4_K_BYTES;
    unsigned acc = 0;
#pragma unroll UNROLL
    for (int sb = lane >> 3; sb < nsb; sb += 4) {
        const uint8_t *blk = wr + (long)sb * Q4_K_BYTES;
        const uint4 head = *(const uint4 *)blk;
        const uint4 v = *(const uint4 *)(blk + 16 + 32 * g + 16 * h);
        acc ^= head.x ^ head.y ^ v.x ^ v.y ^ v.z ^ v.w;
    }
    for (int off = 16; off > 0; off >>= 1) acc ^= __shfl_xor_sync(0xffffffff, acc, off);
    if (lane == 0) out[row] = acc;
}

// Without the heads: each lane one 16-byte chunk a row group at a time,
// the warp's 32 chunks contiguous (512 bytes).
__global__ void __launch_bounds__(128) row_linear(const uint4 *__restrict__ w, int chunks,
                                                  int rows, unsigned *out) {
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = threadIdx.x & 31;
    const uint4 *wr = w + (long)row * chunks;
    unsigned acc = 0;
#pragma unroll 4
    for (int c = lane; c < chunks; c += 32) {
        const uint4 v = wr[c];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    for (int off = 16; off > 0; off >>= 1) acc ^= __shfl_xor_sync(0xffffffff, acc, off);
    if (lane == 0) out[row] = acc;
}

// The whole matrix by a grid-stride loop.
__global__ void linear(const uint4 *__restrict__ w, long n, unsigned *out) {
    unsigned acc = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const uint4 v = w[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) out[0] = acc;
}

int main() {
    const int layers = 32, rows = 2 * 14336, nsb = 16, k = nsb * 256;
    const size_t bytes = (size_t)rows * nsb * Q4_K_BYTES;
    std::vector<uint8_t *> ws(layers);
    std::vector<uint8_t> host(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = (uint8_t)(i * 2654435761u >> 13);
    for (auto &w : ws) {
        CHECK(cudaMalloc(&w, bytes));
        CHECK(cudaMemcpy(w, host.data(), bytes, cudaMemcpyHostToDevice));
    }
    unsigned *out;
    CHECK(cudaMalloc(&out, rows * 4));
    float *y;
    CHECK(cudaMalloc(&y, rows * 4));
    uint8_t *xbuf;
    CHECK(cudaMalloc(&xbuf, k * 2));
    CHECK(cudaMemset(xbuf, 1, k * 2));
    const int8_t *xq = (const int8_t *)xbuf;
    const float *xd = (const float *)(xbuf + k);
    const int *xs = (const int *)(xbuf + k + 64);
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    auto time = [&](const char *name, auto body) {
        for (int pass = 0; pass < 2; ++pass) {
            body(ws[0]);
            CHECK(cudaEventRecord(e0));
            const int reps = 5;
            for (int r = 0; r < reps; ++r)
                for (auto w : ws) body(w);
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            const double us = ms * 1e3 / (reps * layers);
            printf("  %-40s %7.2f us a launch, %6.0f GB/s\n", name, us, bytes / (us * 1e3));
        }
        CHECK(cudaGetLastError());
    };
    printf("%zu bytes a launch (8B gate+up, Q4_K)\n", bytes);
    time("mmvq1_w (the decode kernel)", [&](uint8_t *w) {
        mmvq1_w<<<rows / 4, 128>>>(xq, xd, xs, k, 1, w, y, nullptr, rows, 0, nullptr, nullptr,
                                   nullptr, 0, 0, nullptr, nullptr, nullptr, 0, 0);
    });
    {
        int blocks = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, mmvq1_w, 128, 0));
        printf("  mmvq1_w: %d blocks a multiprocessor\n", blocks);
    }
    time("its loads alone, unroll 1", [&](uint8_t *w) {
        pattern_loads<1><<<rows / 4, 128>>>(w, nsb, rows, out);
    });
    time("its loads alone, unroll 4", [&](uint8_t *w) {
        pattern_loads<4><<<rows / 4, 128>>>(w, nsb, rows, out);
    });
    time("a warp a row, 512 contiguous bytes", [&](uint8_t *w) {
        row_linear<<<rows / 4, 128>>>((const uint4 *)w, nsb * Q4_K_BYTES / 16, rows, out);
    });
    for (int blocks : {132 * 4, 132 * 8, 132 * 16}) {
        char name[64];
        snprintf(name, sizeof name, "linear, %d blocks of 256", blocks);
        time(name, [&](uint8_t *w) { linear<<<blocks, 256>>>((const uint4 *)w, bytes / 16, out); });
    }
    time("cudaMemcpy d2d (read + written)", [&](uint8_t *w) {
        CHECK(cudaMemcpyAsync(ws[(w == ws[0]) ? 1 : 0], w, bytes / 2, cudaMemcpyDeviceToDevice));
    });
    return 0;
}
