// The one-token fused add + RMSNorm + Q8_K quantization
// (kernels/quant_matmul.cu's add_rms_norm_q8) of a 4,096-wide row (the 8B
// shape) and a 1,536-wide one (Qwen2.5-1.5B), launched with different
// block shapes: every block sums the whole row's squares, and its warps
// each write one super-block, so (blocks × warps a block) must cover the
// row's super-blocks. A decode step runs 63 (8B) or 55 (Qwen) of them in a
// chain; here 64 in a row, each reading the last one's sum, are captured
// as a CUDA graph and replayed: µs a launch.
// Built and run on a GPU machine:
//   nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -o /tmp/ns norm_shapes.cu && /tmp/ns
#include <cstdio>
#include <vector>

#include "../../crates/mlxr-models/src/backend/cuda/kernels/quant_matmul.cu"

#include "check.cuh"

static float *make_f32(int n, float v) {
    std::vector<float> host(n);
    for (int i = 0; i < n; ++i) host[i] = v * (1.f + 0.001f * (float)(i % 97));
    float *p;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    CHECK(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

static double time_chain(int k, int blocks, int threads, int reps) {
    float *x = make_f32(k, 0.5f), *r = make_f32(k, 0.25f), *w = make_f32(k, 1.f);
    float *s = make_f32(k, 0.f), *y = make_f32(k, 0.f);
    int8_t *qs;
    float *d;
    int *bsums;
    CHECK(cudaMalloc(&qs, k));
    CHECK(cudaMalloc(&d, (k / 256) * sizeof(float)));
    CHECK(cudaMalloc(&bsums, (k / 16) * sizeof(int)));
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    const int chain = 64;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < chain; ++i) {
        // Alternate the sum's buffer so that each launch reads the last one's.
        float *in = i % 2 ? s : x, *out = i % 2 ? x : s;
        add_rms_norm_q8<<<dim3(blocks, 1), threads, 0, st>>>(in, r, w, out, y, qs, d, bsums, k,
                                                              1e-5f);
    }
    CHECK(cudaStreamEndCapture(st, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; ++i) CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    cudaFree(x); cudaFree(r); cudaFree(w); cudaFree(s); cudaFree(y);
    cudaFree(qs); cudaFree(d); cudaFree(bsums);
    return ms * 1000.0 / (reps * chain);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 50;
    for (int k : {4096, 1536}) {
        const int sbs = k / 256;
        printf("k = %d (%d super-blocks), µs a launch in a graph of 64:\n", k, sbs);
        for (int warps : {1, 2, 4, 8, 16}) {
            if (warps > sbs) continue;
            const int blocks = (sbs + warps - 1) / warps;
            for (int round = 0; round < 2; ++round) {
                const double us = time_chain(k, blocks, 32 * warps, reps);
                printf("  %2d blocks of %2d warps: %6.2f%s\n", blocks, warps, us,
                       round ? "" : "  (round 1)");
            }
        }
    }
    return 0;
}
