// Writes ggml CPU mul_mat results for mlxr-models' kernels::tests::bit_identical_to_ggml_dumps
// into tests/fixtures/ggml-matmul (our own program over ggml's public API).
// Build against the llama.cpp reference build (scripts/llamacpp-reference), e.g.:
//   I=$VENDOR/llama.cpp/ggml/include L=$BUILD/bin
//   gcc -O2 ggml_dump.c -I$I -L$L -lggml -lggml-base -lggml-cpu -Wl,-rpath,$L -o ggml_dump
//   ./ggml_dump tests/fixtures/ggml-matmul          (or: ./ggml_dump DIR q4_K   for one type)
// Q4_1/Q5_0/Q8_0/Q6_K/Q4_0/Q5_1/Q5_K run from a plain context; Q4_K from the CPU_REPACK buffer
// type, as llama.cpp loads it (link -lggml for the backend API).
//   cargo test --release -p mlxr-models --lib kernels
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
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
  enum ggml_type types[7] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K,
                             GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_K};
  int ms[4] = {1, 2, 7, 19};
  const char* only = argc > 2 ? argv[2] : NULL;
  for (int ti=0; ti<7; ti++) for (int mi=0; mi<4; mi++) {
    enum ggml_type t = types[ti]; int m = ms[mi];
    int n = 40, k = (t == GGML_TYPE_Q6_K || t == GGML_TYPE_Q5_K) ? 512 : 576;
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
  // Q4_K as llama.cpp runs it: the weight in the CPU_REPACK buffer type
  // (repacked to block_q4_Kx8 on upload; ggml_gemm/gemv_q4_K_8x8_q8_K).
  if (!only || strcmp(only, "q4_K") == 0) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    typedef ggml_backend_buffer_type_t * (*extra_fn)(ggml_backend_dev_t);
    extra_fn get_extra = (extra_fn) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t repack = NULL;
    for (ggml_backend_buffer_type_t * b = get_extra ? get_extra(dev) : NULL; b && *b; b++) {
      if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) repack = *b;
    }
    if (!repack) { fprintf(stderr, "no CPU_REPACK buffer type\n"); return 1; }
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    for (int mi=0; mi<4; mi++) {
      int m = ms[mi], n = 48, k = 512;
      enum ggml_type t = GGML_TYPE_Q4_K;
      struct ggml_init_params ip = { 16*1024*1024, NULL, true };
      struct ggml_context* cw = ggml_init(ip);
      struct ggml_context* ca = ggml_init(ip);
      struct ggml_tensor* W = ggml_new_tensor_2d(cw, t, k, n);
      struct ggml_tensor* X = ggml_new_tensor_2d(ca, GGML_TYPE_F32, k, m);
      struct ggml_tensor* Y = ggml_mul_mat(ca, W, X);
      ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors_from_buft(cw, repack);
      ggml_backend_buffer_t ba = ggml_backend_alloc_ctx_tensors_from_buft(ca, ggml_backend_cpu_buffer_type());
      float* wf = malloc(sizeof(float)*n*k);
      for (int i=0;i<n*k;i++) wf[i]=rnd();
      size_t wbytes = ggml_row_size(t, k) * n;
      void* q = malloc(wbytes);
      ggml_quantize_chunk(t, wf, q, 0, n, k, NULL);
      ggml_backend_tensor_set(W, q, 0, wbytes);
      float* xf = malloc(sizeof(float)*m*k);
      for (int i=0;i<m*k;i++) xf[i]=rnd()*3.0f;
      ggml_backend_tensor_set(X, xf, 0, sizeof(float)*m*k);
      struct ggml_cgraph* g = ggml_new_graph(ca);
      ggml_build_forward_expand(g, Y);
      if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) return 1;
      float* yf = malloc(sizeof(float)*m*n);
      ggml_backend_tensor_get(Y, yf, 0, sizeof(float)*m*n);
      char path[512]; snprintf(path, sizeof path, "%s/%s_m%d.bin", dir, ggml_type_name(t), m);
      FILE* f = fopen(path, "wb");
      uint32_t hdr[4] = {(uint32_t)t, (uint32_t)m, (uint32_t)n, (uint32_t)k};
      fwrite(hdr, 4, 4, f);
      fwrite(q, 1, wbytes, f);
      fwrite(xf, 4, m*k, f);
      fwrite(yf, 4, m*n, f);
      fclose(f);
      free(wf); free(q); free(xf); free(yf);
      ggml_backend_buffer_free(bw); ggml_backend_buffer_free(ba);
      ggml_free(cw); ggml_free(ca);
    }
    ggml_backend_free(be);
  }
  return 0;
}
