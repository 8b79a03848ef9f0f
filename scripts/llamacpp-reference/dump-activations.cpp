// Dumps llama.cpp's intermediate tensors for one prompt (plus optional decode
// steps), for bit-level comparison with MLXR (crates/mlxr-models/tests/activations.rs).
//
//   dump-activations MODEL.gguf OUT_DIR N_DECODE TOKEN_ID [TOKEN_ID ...]
//
// Same context settings as reference.cpp: 2 threads, n_ctx 4096, f32 K/V cache,
// flash attention off. Every f32 tensor the graph computes is written as
// OUT_DIR/<pass>/<seq>-<name>-<op>.bin: u32 ne0..ne3 then the values in ggml order
// (ne0 fastest), made contiguous. Pass 0 is the prompt; pass i > 0 decodes the
// greedy token of pass i - 1. OUT_DIR/prompt.txt lists the prompt, OUT_DIR/tokens.txt the greedy tokens.
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::string g_dir;
static int g_seq = 0;

static bool cb_eval(struct ggml_tensor * t, bool ask, void * /*ud*/) {
    if (ask) {
        return true;
    }
    if (t->type != GGML_TYPE_F32) {
        return true;
    }
    const bool host = t->buffer == nullptr || ggml_backend_buffer_is_host(t->buffer);
    if (!host) {
        return true;
    }
    std::vector<float> out;
    out.reserve(ggml_nelements(t));
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const char * p = (const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    float v;
                    memcpy(&v, p, 4);
                    out.push_back(v);
                }
    char path[1024];
    std::string name = t->name;
    for (auto & c : name) {
        if (c == '/' || c == ' ' || c == '(' || c == ')') c = '_';
    }
    snprintf(path, sizeof path, "%s/%04d-%s-%s.bin", g_dir.c_str(), g_seq++, name.c_str(), ggml_op_desc(t));
    FILE * f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    uint32_t ne[4] = {(uint32_t) t->ne[0], (uint32_t) t->ne[1], (uint32_t) t->ne[2], (uint32_t) t->ne[3]};
    fwrite(ne, 4, 4, f);
    fwrite(out.data(), 4, out.size(), f);
    fclose(f);
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL OUT_DIR N_DECODE TOKEN...\n", argv[0]);
        return 2;
    }
    std::string root = argv[2];
    int n_decode = atoi(argv[3]);
    std::vector<llama_token> prompt;
    for (int i = 4; i < argc; i++) prompt.push_back(atoi(argv[i]));

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    llama_context_params p = llama_context_default_params();
    p.n_ctx = 4096;
    p.n_threads = 2;
    p.n_threads_batch = 2;
    p.type_k = GGML_TYPE_F32;
    p.type_v = GGML_TYPE_F32;
    p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    p.cb_eval = cb_eval;
    p.cb_eval_user_data = nullptr;
    llama_context * ctx = llama_init_from_model(model, p);
    if (!ctx) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    FILE * pf = fopen((root + "/prompt.txt").c_str(), "w");
    for (llama_token t : prompt) fprintf(pf, "%d\n", t);
    fclose(pf);
    FILE * toks = fopen((root + "/tokens.txt").c_str(), "w");
    std::vector<llama_token> pending = prompt;
    for (int pass = 0; pass <= n_decode; pass++) {
        g_dir = root + "/" + std::to_string(pass);
        std::string mk = "mkdir -p '" + g_dir + "'";
        if (system(mk.c_str()) != 0) return 1;
        g_seq = 0;
        llama_batch batch = llama_batch_get_one(pending.data(), (int32_t) pending.size());
        if (llama_decode(ctx, batch) != 0) return 1;
        const float * logits = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int i = 1; i < n_vocab; i++) if (logits[i] > logits[best]) best = i;
        fprintf(toks, "%d\n", best);
        pending = {best};
    }
    fclose(toks);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
