// A one-token decode step's norms and matmuls (kernels/quant_matmul.cu, an
// 8-bit quantization standing in for attention) over every layer of random
// Q4_K/Q6_K weights of the real models' shapes, captured as a CUDA graph
// and replayed: launched plainly, and with programmatic dependent launch
// (each kernel may start while the one before ends: kernels/pdl.cuh). Also
// each matmul alone, its weights rotated so that it reads DRAM.
// Each of it for four launch layouts: as quant_matmul.rs launches them, with
// the Q6_K weight of a launch first (its rows, the slowest, start in the
// first wave instead of making the last), and with a block of 4 warps a row
// up to 8,192 rows rather than 2,048 (BLOCK_PER_ROW_MOST), each way.
// With the argument `prefetch`: the layout in use only, under each L2
// prefetch of the weights of the matmul after a launch bound by latency
// (g_prefetch below).
// Built and run by bench/cuda/step-chain.sh on a GPU machine.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <random>
#include <vector>

#include "../../crates/mlxr-models/src/backend/cuda/kernels/quant_matmul.cu"

#include "check.cuh"

static size_t weight_bytes(int n, int k, int type) {
    return (size_t)n * (k / 256) * (type == 0 ? Q4_K_BYTES : Q6_K_BYTES);
}

static uint8_t *make_weight(int n, int k, int type, std::mt19937 &rng) {
    size_t bytes = weight_bytes(n, k, type);
    std::vector<uint8_t> host((bytes + 7) / 8 * 8);
    uint64_t state = rng() | ((uint64_t)rng() << 32) | 1;
    for (size_t at = 0; at < host.size(); at += 8) {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        memcpy(&host[at], &state, 8);
    }
    const int blk = type == 0 ? Q4_K_BYTES : Q6_K_BYTES;
    const uint16_t d = 0x1400;  // f16 0.001
    for (size_t at = 0; at < bytes; at += blk) {
        if (type == 0) {
            memcpy(&host[at], &d, 2);
            memcpy(&host[at + 2], &d, 2);
        } else {
            memcpy(&host[at + 208], &d, 2);
        }
    }
    uint8_t *p;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice));
    return p;
}

struct Q8 {
    int8_t *qs;
    float *d;
    int *sums;
};

static Q8 make_q8(int k) {
    uint8_t *buf;
    size_t scales = ((size_t)(k / 256) * 4 + 15) / 16 * 16;
    CHECK(cudaMalloc(&buf, (size_t)k + scales + (size_t)(k / 16) * 4));
    CHECK(cudaMemset(buf, 0, (size_t)k + scales + (size_t)(k / 16) * 4));
    return Q8{(int8_t *)buf, (float *)(buf + k), (int *)(buf + k + scales)};
}

static float *make_f32(size_t n, float v) {
    std::vector<float> host(n, v);
    float *p;
    CHECK(cudaMalloc(&p, n * 4));
    CHECK(cudaMemcpy(p, host.data(), n * 4, cudaMemcpyHostToDevice));
    return p;
}

static bool g_pdl = false;
// L2 prefetch of the weights a launch bound by latency comes before (the
// attention's stand-in, the norms, SwiGLU): 0 none, 1 the output
// projection's during attention, 2 that and the first g_prefetch_cap bytes
// of the next matmul's during each norm and SwiGLU (3: the same from 64
// blocks whatever the kernel beside has). Issued by a kernel on a
// side stream forked before the latency-bound launch and joined before the
// matmul (cp.async.bulk.prefetch.L2 returns at once: the join costs nothing).
static int g_prefetch = 0;
static size_t g_prefetch_cap = 8u << 20;
static cudaStream_t g_side;
static std::vector<cudaEvent_t> g_events;
static size_t g_next_event = 0;
static bool g_forked = false;

// A warp a block, each lane one slice: as the first warp of each block of
// the kernel it stands beside would issue them (its grid, `blocks`).
__global__ void prefetch_l2(const uint8_t *p, size_t bytes) {
    const size_t slices = (size_t)gridDim.x * 32;
    const size_t per = (bytes / slices + 15) & ~(size_t)15;
    const size_t off = (blockIdx.x * 32 + threadIdx.x) * per;
    if (off >= bytes) return;
    const unsigned n = (unsigned)(min(per, bytes - off) & ~(size_t)15);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (n > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
#endif
}

static cudaEvent_t next_event() {
    if (g_next_event == g_events.size()) {
        cudaEvent_t event;
        CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
        g_events.push_back(event);
    }
    return g_events[g_next_event++];
}

static void prefetch(cudaStream_t s, const uint8_t *w, size_t bytes, int blocks) {
    if (bytes == 0) return;
    cudaEvent_t fork = next_event();
    CHECK(cudaEventRecord(fork, s));
    CHECK(cudaStreamWaitEvent(g_side, fork));
    prefetch_l2<<<g_prefetch == 3 ? 64 : blocks, 32, 0, g_side>>>(w, bytes);
    g_forked = true;
}

static void join(cudaStream_t s) {
    if (!g_forked) return;
    cudaEvent_t done = next_event();
    CHECK(cudaEventRecord(done, g_side));
    CHECK(cudaStreamWaitEvent(s, done));
    g_forked = false;
}
static bool g_six_first = false;
static int g_block_most = 2048;

template <typename... Params, typename... Args>
static void launch(void (*kernel)(Params...), int blocks, int threads, cudaStream_t s,
                   Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(threads);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = g_pdl ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

struct Mat {
    int n, type;
    uint8_t *w;
    float *y;
};

// quant_matmul.rs's launch for one token (MatVec::ByRows).
static void matvec(cudaStream_t s, const Q8 &x, int k, std::vector<Mat> ms) {
    int rows = 0;
    for (auto &m : ms) rows += m.n;
    if (g_six_first)
        std::stable_sort(ms.begin(), ms.end(),
                         [](const Mat &a, const Mat &b) { return a.type > b.type; });
    while (ms.size() < 3) ms.push_back(Mat{0, 0, nullptr, nullptr});
    if (rows <= g_block_most) {
        launch(mmvq1, rows, 128, s, (const int8_t *)x.qs, (const float *)x.d,
               (const int *)x.sums, k, 1, (const uint8_t *)ms[0].w, ms[0].y,
               (const float *)nullptr, ms[0].n, ms[0].type, (const uint8_t *)ms[1].w, ms[1].y,
               (const float *)nullptr, ms[1].n, ms[1].type, (const uint8_t *)ms[2].w, ms[2].y,
               (const float *)nullptr, ms[2].n, ms[2].type);
    } else {
        launch(mmvq1_w, (rows + 3) / 4, 128, s, (const int8_t *)x.qs, (const float *)x.d,
               (const int *)x.sums, k, 1, (const uint8_t *)ms[0].w, ms[0].y,
               (const float *)nullptr, ms[0].n, ms[0].type, (const uint8_t *)ms[1].w, ms[1].y,
               (const float *)nullptr, ms[1].n, ms[1].type, (const uint8_t *)ms[2].w, ms[2].y,
               (const float *)nullptr, ms[2].n, ms[2].type);
    }
}

struct Shape {
    const char *name;
    int layers, hidden, q, kv, ffn;
};

struct Layer {
    Mat q, k, v, o, gate, up, down;
};

struct Model {
    Shape shape;
    std::vector<Layer> layers;
    float *h, *h2, *norm_w, *normed, *attn, *ffn_out, *ffn_w, *glu;
    Q8 xh, xq, xf;
};

static Model make_model(const Shape &sh, std::mt19937 &rng) {
    Model m{sh, {}, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
            {}, {}, {}};
    for (int l = 0; l < sh.layers; ++l) {
        // Q4_K_M: V and ffn_down Q6_K in half the layers.
        int six = l % 2 == 0 ? 1 : 0;
        Layer L;
        L.q = Mat{sh.q, 0, make_weight(sh.q, sh.hidden, 0, rng), make_f32(sh.q, 0)};
        L.k = Mat{sh.kv, 0, make_weight(sh.kv, sh.hidden, 0, rng), make_f32(sh.kv, 0)};
        L.v = Mat{sh.kv, six, make_weight(sh.kv, sh.hidden, six, rng), make_f32(sh.kv, 0)};
        L.o = Mat{sh.hidden, 0, make_weight(sh.hidden, sh.q, 0, rng), make_f32(sh.hidden, 0)};
        L.gate = Mat{sh.ffn, 0, make_weight(sh.ffn, sh.hidden, 0, rng), make_f32(sh.ffn, 0)};
        L.up = Mat{sh.ffn, 0, make_weight(sh.ffn, sh.hidden, 0, rng), make_f32(sh.ffn, 0)};
        L.down = Mat{sh.hidden, six, make_weight(sh.hidden, sh.ffn, six, rng),
                     make_f32(sh.hidden, 0)};
        m.layers.push_back(L);
    }
    m.h = make_f32(sh.hidden, 0.5f);
    m.h2 = make_f32(sh.hidden, 0.5f);
    m.norm_w = make_f32(sh.hidden, 1.f);
    m.normed = make_f32(sh.hidden, 0);
    m.attn = make_f32(sh.q, 0.25f);
    m.ffn_out = make_f32(sh.hidden, 0);
    m.ffn_w = make_f32(sh.ffn, 0);
    m.glu = make_f32(sh.ffn, 0);
    m.xh = make_q8(sh.hidden);
    m.xq = make_q8(sh.q);
    m.xf = make_q8(sh.ffn);
    return m;
}

static int norm_blocks(int k) { return (k / 256 + 7) / 8; }

static void step(Model &m, cudaStream_t s) {
    const Shape &sh = m.shape;
    const float eps = 1e-5f;
    g_next_event = 0;
    const size_t cap = g_prefetch >= 2 ? g_prefetch_cap : 0;
    for (size_t l = 0; l < m.layers.size(); ++l) {
        Layer &L = m.layers[l];
        if (l > 0)
            prefetch(s, L.q.w, std::min(cap, weight_bytes(L.q.n, sh.hidden, L.q.type)),
                     norm_blocks(sh.hidden));
        launch(add_rms_norm_q8, norm_blocks(sh.hidden), 256, s, (const float *)m.h,
               (const float *)L.o.y, (const float *)m.norm_w, m.h2, m.normed, m.xh.qs, m.xh.d,
               m.xh.sums, sh.hidden, eps);
        join(s);
        matvec(s, m.xh, sh.hidden, {L.q, L.k, L.v});
        // The real attention's grid: KV heads × 32 splits.
        if (g_prefetch > 0) prefetch(s, L.o.w, weight_bytes(L.o.n, sh.q, L.o.type), (sh.kv / 128) * 32);
        // Attention's stand-in: its output quantized for the output projection.
        launch(quantize_q8, (sh.q / 256 + 3) / 4, 128, s, (const float *)L.q.y, m.xq.qs,
               m.xq.d, m.xq.sums, sh.q);
        join(s);
        matvec(s, m.xq, sh.q, {L.o});
        prefetch(s, L.gate.w, std::min(cap, weight_bytes(L.gate.n, sh.hidden, L.gate.type)),
                 norm_blocks(sh.hidden));
        launch(add_rms_norm_q8, norm_blocks(sh.hidden), 256, s, (const float *)m.h2,
               (const float *)L.o.y, (const float *)m.norm_w, m.h, m.normed, m.xh.qs, m.xh.d,
               m.xh.sums, sh.hidden, eps);
        join(s);
        matvec(s, m.xh, sh.hidden, {L.gate, L.up});
        prefetch(s, L.down.w, std::min(cap, weight_bytes(L.down.n, sh.ffn, L.down.type)),
                 norm_blocks(sh.ffn));
        launch(swiglu_q8, norm_blocks(sh.ffn), 256, s, (const float *)L.gate.y,
               (const float *)L.up.y, m.glu, m.xf.qs, m.xf.d, m.xf.sums, sh.ffn);
        join(s);
        matvec(s, m.xf, sh.ffn, {L.down});
    }
}

static double bytes_of(const Model &m) {
    double b = 0;
    for (auto &L : m.layers)
        for (const Mat *x : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
            b += weight_bytes(x->n, x == &L.down ? m.shape.ffn
                                    : x == &L.o  ? m.shape.q
                                                 : m.shape.hidden,
                              x->type);
    return b;
}

static float replay_ms(Model &m, bool pdl, int reps) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_pdl = pdl;
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    step(m, s);
    CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, s));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < reps; ++i) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamDestroy(s));
    return ms / reps;
}

// One matmul of every layer in turn (so each reads DRAM), plainly.
static void matmuls_alone(Model &m, int reps) {
    const Shape &sh = m.shape;
    g_pdl = false;
    struct Which { const char *name; int k; };
    Which which[] = {{"q+k+v", sh.hidden}, {"o", sh.q}, {"gate+up", sh.hidden}, {"down", sh.ffn}};
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int w = 0; w < 4; ++w) {
        double bytes = 0;
        CHECK(cudaEventRecord(e0));
        int launches = 0;
        for (int r = 0; r < reps; ++r)
            for (auto &L : m.layers) {
                std::vector<Mat> ms;
                if (w == 0) ms = {L.q, L.k, L.v};
                if (w == 1) ms = {L.o};
                if (w == 2) ms = {L.gate, L.up};
                if (w == 3) ms = {L.down};
                for (auto &x : ms) bytes += weight_bytes(x.n, which[w].k, x.type);
                Q8 &x = w == 1 ? m.xq : w == 3 ? m.xf : m.xh;
                matvec(0, x, which[w].k, ms);
                ++launches;
            }
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        printf("  %-8s %7.2f us a launch, %6.0f GB/s\n", which[w].name, ms * 1e3 / launches,
               bytes / (ms * 1e6));
    }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    Shape shapes[] = {{"8B", 32, 4096, 4096, 1024, 14336}, {"Qwen2.5-1.5B", 28, 1536, 1536, 256, 8960}};
    std::mt19937 rng(7);
    CHECK(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
    const bool prefetching = argc > 2 && strcmp(argv[2], "prefetch") == 0;
    for (auto &sh : shapes) {
        Model m = make_model(sh, rng);
        double gb = bytes_of(m) / 1e9;
        printf("%s: %d layers, %.2f GB of matmul weights\n", sh.name, sh.layers, gb);
        if (prefetching) {
            // The launch layout in use (Q6_K first, a block a row up to 2,048
            // rows), under each prefetch, rotated twice.
            g_six_first = true;
            g_block_most = 2048;
            struct Mode { int mode; size_t cap; } modes[] = {
                {0, 0}, {1, 0}, {2, 4u << 20}, {2, 8u << 20}, {2, 16u << 20},
                {3, 8u << 20}, {3, 16u << 20}};
            for (int pass = 0; pass < 2; ++pass)
                for (auto md : modes) {
                    g_prefetch = md.mode;
                    g_prefetch_cap = md.cap;
                    float plain = replay_ms(m, false, reps);
                    printf("  round %d, prefetch %d (cap %zu MiB): plain %.3f ms (%.0f GB/s)\n",
                           pass + 1, md.mode, md.cap >> 20, plain, gb / plain * 1e3);
                }
            g_prefetch = 0;
            continue;
        }
        for (int pass = 0; pass < 2; ++pass)
            for (int layout = 0; layout < 4; ++layout) {
                g_six_first = layout & 1;
                g_block_most = layout & 2 ? 8192 : 2048;
                printf(" round %d: Q6_K %s, a block a row up to %d rows\n", pass + 1,
                       g_six_first ? "first" : "in place", g_block_most);
                matmuls_alone(m, 3);
                float plain = replay_ms(m, false, reps);
                float pdl = replay_ms(m, true, reps);
                printf("  step graph: plain %.3f ms (%.0f GB/s), pdl %.3f ms (%.0f GB/s): "
                       "%.3fx\n",
                       plain, gb / plain * 1e3, pdl, gb / pdl * 1e3, plain / pdl);
            }
        CHECK(cudaDeviceSynchronize());
        // Freed with the process.
    }
    CHECK(cudaGetLastError());
    return 0;
}
