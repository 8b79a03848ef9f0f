// The tensor-core matmuls (kernels/mmq.cu) against the decode kernels
// (kernels/quant_matmul.cu) on random Q4_K/Q6_K weights of the real models'
// shapes: the same bits for every token count (the decode kernels in tiles
// of 8 tokens as quant_matmul.rs launches them), and the time of each.
// Built and run by bench/cuda/mmq-kernels.sh on a GPU machine:
//   nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -o mmq_kernels mmq_kernels.cu
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../../crates/mlxr-models/src/backend/cuda/kernels/quant_matmul.cu"
#include "../../crates/mlxr-models/src/backend/cuda/kernels/mmq.cu"

#include "check.cuh"

typedef void (*Mmvq)(const int8_t *, const float *, const int *, int, int, const uint8_t *,
                     float *, const float *, int, int, const uint8_t *, float *, const float *,
                     int, int, const uint8_t *, float *, const float *, int, int);
typedef void (*Mmq)(const int8_t *, const float *, const int *, int, int, int, const uint8_t *,
                    float *, const float *, int, int, const uint8_t *, float *, const float *,
                    int, int, const uint8_t *, float *, const float *, int, int);

static Mmvq mmvq_kernel(int per, const char *suffix) {
    if (!strcmp(suffix, "")) {
        Mmvq k[] = {mmvq1, mmvq2, 0, mmvq4, 0, 0, 0, mmvq8};
        return k[per - 1];
    }
    if (!strcmp(suffix, "_w")) {
        Mmvq k[] = {mmvq1_w, mmvq2_w, 0, mmvq4_w, 0, 0, 0, mmvq8_w};
        return k[per - 1];
    }
    Mmvq k[] = {0, mmvq2_w2, 0, mmvq4_w2, 0, 0, 0, mmvq8_w2};
    return k[per - 1];
}

// quant_matmul.rs's choice: 8 NT tokens a block.
static int mmq_nt(int tokens) { return tokens <= 8 ? 1 : tokens <= 16 ? 2 : 4; }

static Mmq mmq_kernel(int nt) { return nt == 1 ? mmq1 : nt == 2 ? mmq2 : mmq4; }

struct Weight {
    int n, type;
    std::vector<uint8_t *> copies;  // rotated so that timings read DRAM, not L2
};

static size_t weight_bytes(int n, int k, int type) {
    return (size_t)n * (k / 256) * (type == 0 ? Q4_K_BYTES : Q6_K_BYTES);
}

static uint16_t f16_bits(float f) {
    __half h = __float2half(f);
    return *(uint16_t *)&h;
}

static Weight make_weight(int n, int k, int type, std::mt19937 &rng, int copies) {
    Weight w{n, type, {}};
    size_t bytes = weight_bytes(n, k, type);
    std::vector<uint8_t> host(bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.0005f, 0.002f);
    for (auto &b : host) b = (uint8_t)byte(rng);
    const int blk = type == 0 ? Q4_K_BYTES : Q6_K_BYTES;
    for (size_t at = 0; at < bytes; at += blk) {
        uint16_t d = f16_bits(scale(rng));
        if (type == 0) {
            uint16_t dmin = f16_bits(scale(rng) * 0.5f);
            memcpy(&host[at], &d, 2);
            memcpy(&host[at + 2], &dmin, 2);
        } else {
            memcpy(&host[at + 208], &d, 2);
        }
    }
    for (int c = 0; c < copies; ++c) {
        uint8_t *p;
        CHECK(cudaMalloc(&p, bytes));
        CHECK(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice));
        w.copies.push_back(p);
    }
    return w;
}

// quant_matmul.rs's q8 buffer layout: quants, scales padded to 16 bytes, sums.
struct Act {
    int8_t *qs;
    float *d;
    int *sums;
};

static Act quantize(const std::vector<float> &x, int tokens, int k) {
    float *dx;
    CHECK(cudaMalloc(&dx, x.size() * 4));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    size_t scales = ((size_t)tokens * (k / 256) * 4 + 15) / 16 * 16;
    size_t bytes = (size_t)tokens * k + scales + (size_t)tokens * (k / 16) * 4;
    uint8_t *buf;
    CHECK(cudaMalloc(&buf, bytes));
    Act a{(int8_t *)buf, (float *)(buf + (size_t)tokens * k),
          (int *)(buf + (size_t)tokens * k + scales)};
    dim3 grid((k / 256 + 3) / 4, tokens);
    quantize_q8<<<grid, 128>>>(dx, a.qs, a.d, a.sums, k);
    CHECK(cudaGetLastError());
    CHECK(cudaFree(dx));
    return a;
}

// The launch quant_matmul.rs makes (MatVec::ByRows), in tiles of 8 tokens.
static void run_mmvq(const Act &a, int k, int tokens, std::vector<Weight> &ws, int copy,
                     std::vector<float *> &ys) {
    int rows = 0;
    for (auto &w : ws) rows += w.n;
    const char *suffix;
    int gpb, rpg;
    if (rows <= 2048) { suffix = ""; gpb = 1; rpg = 1; }
    else if (tokens == 1) { suffix = "_w"; gpb = 4; rpg = 1; }
    else { suffix = "_w2"; gpb = 4; rpg = 2; }
    int per = tokens == 1 ? 1 : tokens == 2 ? 2 : tokens <= 4 ? 4 : 8;
    int groups = 0;
    for (auto &w : ws) groups += (w.n + rpg - 1) / rpg;
    int blocks = (groups + gpb - 1) / gpb * ((tokens + per - 1) / per);
    const uint8_t *wp[3] = {0, 0, 0};
    int n[3] = {0, 0, 0}, t[3] = {0, 0, 0};
    float *yp[3] = {0, 0, 0};
    for (size_t j = 0; j < ws.size(); ++j) {
        wp[j] = ws[j].copies[copy % ws[j].copies.size()];
        n[j] = ws[j].n; t[j] = ws[j].type; yp[j] = ys[j];
    }
    mmvq_kernel(per, suffix)<<<blocks, 128>>>(a.qs, a.d, a.sums, k, tokens, wp[0], yp[0], 0, n[0],
                                              t[0], wp[1], yp[1], 0, n[1], t[1], wp[2], yp[2], 0,
                                              n[2], t[2]);
}

static void run_mmq(const Act &a, int k, int tokens, std::vector<Weight> &ws, int copy,
                    std::vector<float *> &ys) {
    int rows = 0;
    for (auto &w : ws) rows += w.n;
    int w4 = rows <= 2048 ? 4 : 1;
    int blocks = 0, warps = 0;
    const uint8_t *wp[3] = {0, 0, 0};
    int n[3] = {0, 0, 0}, t[3] = {0, 0, 0};
    float *yp[3] = {0, 0, 0};
    for (auto &w : ws) warps = std::max(warps, (w.type == 0 ? 4 : 2) * w4);
    for (size_t j = 0; j < ws.size(); ++j) {
        int per = warps / ((ws[j].type == 0 ? 4 : 2) * w4);
        blocks += ((ws[j].n + 15) / 16 + per - 1) / per;
        wp[j] = ws[j].copies[copy % ws[j].copies.size()];
        n[j] = ws[j].n; t[j] = ws[j].type; yp[j] = ys[j];
    }
    const int nt = mmq_nt(tokens);
    blocks *= (tokens + 8 * nt - 1) / (8 * nt);
    mmq_kernel(nt)<<<blocks, 32 * warps>>>(a.qs, a.d, a.sums, k, tokens, w4, wp[0], yp[0],
                                                  0, n[0], t[0], wp[1], yp[1], 0, n[1], t[1],
                                                  wp[2], yp[2], 0, n[2], t[2]);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 50;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    struct Case { const char *name; int k; std::vector<std::pair<int, int>> ws; };
    std::vector<Case> cases = {
        {"8B q+k+v (Q4_K, Q4_K, Q6_K)", 4096, {{4096, 0}, {1024, 0}, {1024, 1}}},
        {"8B attn_output Q4_K", 4096, {{4096, 0}}},
        {"8B gate+up Q4_K", 4096, {{14336, 0}, {14336, 0}}},
        {"8B ffn_down Q4_K", 14336, {{4096, 0}}},
        {"8B ffn_down Q6_K", 14336, {{4096, 1}}},
        {"8B output Q6_K", 4096, {{49152, 1}}},
        {"1.5B q Q4_K (W=4)", 1536, {{1536, 0}}},
        {"1.5B k+v (Q4_K, Q6_K; W=4)", 1536, {{256, 0}, {256, 1}}},
        {"1.5B ffn_down Q6_K", 8960, {{1536, 1}}},
        {"odd rows 1000 Q4_K + 40 Q6_K (W=4)", 2304, {{1000, 0}, {40, 1}}},
    };
    int token_counts[] = {1, 2, 3, 4, 8, 9, 16, 24, 32, 48, 64};
    std::mt19937 rng(1234);
    int failures = 0;
    printf("%-38s %6s %10s %10s %8s %s\n", "case", "tokens", "mmvq us", "mmq us", "ratio",
           "bits");
    for (auto &c : cases) {
        size_t total = 0;
        for (auto &w : c.ws) total += weight_bytes(w.first, c.k, w.second);
        int copies = (int)std::max<size_t>(1, (size_t)200e6 / total + 1);
        std::vector<Weight> ws;
        for (auto &w : c.ws) ws.push_back(make_weight(w.first, c.k, w.second, rng, copies));
        for (int tokens : token_counts) {
            std::normal_distribution<float> normal(0.f, 1.f);
            std::vector<float> x((size_t)tokens * c.k);
            for (auto &v : x) v = normal(rng);
            Act a = quantize(x, tokens, c.k);
            std::vector<float *> y1, y2;
            for (auto &w : ws) {
                float *p, *q;
                CHECK(cudaMalloc(&p, (size_t)tokens * w.n * 4));
                CHECK(cudaMalloc(&q, (size_t)tokens * w.n * 4));
                CHECK(cudaMemset(q, 0xFF, (size_t)tokens * w.n * 4));
                y1.push_back(p); y2.push_back(q);
            }
            run_mmvq(a, c.k, tokens, ws, 0, y1);
            run_mmq(a, c.k, tokens, ws, 0, y2);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            long differ = 0, count = 0;
            float worst = 0.f;
            for (size_t j = 0; j < ws.size(); ++j) {
                size_t len = (size_t)tokens * ws[j].n;
                std::vector<float> h1(len), h2(len);
                CHECK(cudaMemcpy(h1.data(), y1[j], len * 4, cudaMemcpyDeviceToHost));
                CHECK(cudaMemcpy(h2.data(), y2[j], len * 4, cudaMemcpyDeviceToHost));
                for (size_t i = 0; i < len; ++i) {
                    ++count;
                    if (memcmp(&h1[i], &h2[i], 4) != 0 && !(h1[i] == 0.f && h2[i] == 0.f)) {
                        ++differ;
                        worst = std::max(worst, fabsf(h1[i] - h2[i]));
                    }
                }
            }
            float ms1 = 0.f, ms2 = 0.f;
            cudaEvent_t e0, e1;
            CHECK(cudaEventCreate(&e0));
            CHECK(cudaEventCreate(&e1));
            for (int pass = 0; pass < 2; ++pass) {
                for (int r = 0; r < 3; ++r) {
                    if (pass == 0) run_mmvq(a, c.k, tokens, ws, r, y1);
                    else run_mmq(a, c.k, tokens, ws, r, y2);
                }
                CHECK(cudaEventRecord(e0));
                for (int r = 0; r < reps; ++r) {
                    if (pass == 0) run_mmvq(a, c.k, tokens, ws, r, y1);
                    else run_mmq(a, c.k, tokens, ws, r, y2);
                }
                CHECK(cudaEventRecord(e1));
                CHECK(cudaEventSynchronize(e1));
                CHECK(cudaEventElapsedTime(pass == 0 ? &ms1 : &ms2, e0, e1));
            }
            CHECK(cudaGetLastError());
            double us1 = ms1 * 1000.0 / reps, us2 = ms2 * 1000.0 / reps;
            printf("%-38s %6d %10.1f %10.1f %8.2f %s", c.name, tokens, us1, us2, us1 / us2,
                   differ ? "DIFFER" : "equal");
            if (differ) printf(" (%ld of %ld, max %.3g)", differ, count, worst);
            printf("   %.0f GB/s mmq\n", total / (us2 * 1e3));
            failures += differ != 0;
            for (auto p : y1) CHECK(cudaFree(p));
            for (auto p : y2) CHECK(cudaFree(p));
            CHECK(cudaFree(a.qs));
        }
        for (auto &w : ws)
            for (auto p : w.copies) CHECK(cudaFree(p));
    }
    printf("%d cases differ\n", failures);
    return failures != 0;
}
