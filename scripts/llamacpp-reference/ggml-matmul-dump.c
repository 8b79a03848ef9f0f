// Writes ggml CPU mul_mat results for mlxr-models' kernels::tests::bit_identical_to_ggml_dumps
// into tests/fixtures/ggml-matmul (our own program over ggml's public API).
// Build against the llama.cpp reference build (scripts/llamacpp-reference), e.g.:
//   I=$VENDOR/llama.cpp/ggml/include L=$BUILD/bin
//   gcc -O2 ggml_dump.c -I$I -L$L -lggml -lggml-base -lggml-cpu -Wl,-rpath,$L -o ggml_dump
//   ./ggml_dump tests/fixtures/ggml-matmul
//   cargo test --release -p mlxr-models --lib kernels
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
static uint64_t st = 88172645463325252ull;
static float rnd(void){ st ^= st<<13; st ^= st>>7; st ^= st<<17; return (float)((st>>40)/16777216.0)*2.0f-1.0f; }
int main(int argc, char** argv){
  const char* dir = argv[1];
  // Q6_K (not repacked on x86, so a plain context runs ggml_vec_dot_q6_K_q8_K
  // as llama.cpp does) needs k a multiple of 256.
  enum ggml_type types[4] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K};
  int ms[4] = {1, 2, 7, 19};
  const char* only = argc > 2 ? argv[2] : NULL;
  for (int ti=0; ti<4; ti++) for (int mi=0; mi<4; mi++) {
    enum ggml_type t = types[ti]; int m = ms[mi];
    int n = 40, k = t == GGML_TYPE_Q6_K ? 512 : 576;
    if (only && strcmp(only, ggml_type_name(t)) != 0) continue;
    struct ggml_init_params ip = { 64*1024*1024, NULL, false };
    struct ggml_context* ctx = ggml_init(ip);
    struct ggml_tensor* W = ggml_new_tensor_2d(ctx, t, k, n);
    struct ggml_tensor* X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
    float* wf = malloc(sizeof(float)*n*k);
    for (int i=0;i<n*k;i++) wf[i]=rnd();
    ggml_quantize_chunk(t, wf, W->data, 0, n, k, NULL);
    float* xf = (float*)X->data;
    for (int i=0;i<m*k;i++) xf[i]=rnd()*3.0f;
    struct ggml_tensor* Y = ggml_mul_mat(ctx, W, X);
    struct ggml_cgraph* g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, Y);
    ggml_graph_compute_with_ctx(ctx, g, 2);
    char path[512]; snprintf(path, sizeof path, "%s/%s_m%d.bin", dir, ggml_type_name(t), m);
    FILE* f = fopen(path, "wb");
    uint32_t hdr[4] = {(uint32_t)t, (uint32_t)m, (uint32_t)n, (uint32_t)k};
    fwrite(hdr, 4, 4, f);
    fwrite(W->data, 1, ggml_nbytes(W), f);
    fwrite(xf, 4, m*k, f);
    fwrite(Y->data, 4, m*n, f);
    fclose(f);
    free(wf); ggml_free(ctx);
  }
  return 0;
}
