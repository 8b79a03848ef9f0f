// MLXR llama.cpp reference program.
//
// Our own small driver over llama.cpp's public C API (llama.h). It records what
// llama.cpp does for a model so that MLXR's tests can compare against it:
// tokenization, chat-template rendering and greedy generation with logits.
//
//   reference MODEL.gguf [--threads N] [--ctx N] [--kv-type f32|f16] [--flash-attn on|off]
//             < requests.txt > responses.jsonl   (defaults: f32 KV cache, no flash attention)
//
// Requests come one per line on stdin, fields separated by TAB; every string
// field is hex-encoded UTF-8 so that any byte (TAB, newline, NUL-free text)
// passes unharmed. An empty string is written as "-".
//
//   info
//   tokenize  ID  TEXT
//   chat      ID  TEMPLATE  ADD_ASS  ROLE CONTENT [ROLE CONTENT ...]
//             (TEMPLATE "-" = the model's own tokenizer.chat_template;
//              otherwise a template string or a llama.cpp built-in name)
//   generate  ID  N_STEPS  PROMPT
//
// One JSON object per request goes to stdout, one per line; string results
// are returned hex-encoded ("..._hex") so the caller decodes exact bytes.
// llama.cpp's own log goes to stderr when REF_VERBOSE=1.

#include "llama.h"
#include "ggml.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static std::string g_log;  // everything llama.cpp logged since the last clear
static bool g_verbose = false;

static void log_cb(enum ggml_log_level level, const char * text, void * /*user*/) {
    (void) level;
    g_log += text;
    if (g_verbose) {
        fputs(text, stderr);
    }
}

static std::string hex_encode(const std::string & s) {
    static const char * digits = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

static std::string hex_decode(const std::string & h) {
    if (h == "-") {
        return "";
    }
    if (h.size() % 2 != 0) {
        fprintf(stderr, "bad hex field (odd length)\n");
        exit(2);
    }
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        fprintf(stderr, "bad hex digit\n");
        exit(2);
    };
    std::string out;
    out.reserve(h.size() / 2);
    for (size_t i = 0; i < h.size(); i += 2) {
        out += (char) ((nib(h[i]) << 4) | nib(h[i + 1]));
    }
    return out;
}

static std::string json_str(const std::string & s) {
    // Only used for ASCII identifiers/names we control plus llama.cpp
    // metadata; escape what JSON requires.
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':  out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;
                }
        }
    }
    return out + "\"";
}

static std::string json_float(float f) {
    if (!std::isfinite(f)) {
        return "null";
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", (double) f);
    return buf;
}

static std::vector<std::string> split_tabs(const std::string & line) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : line) {
        if (c == '\t') {
            out.push_back(cur);
            cur.clear();
        } else if (c != '\r') {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

struct Settings {
    int n_threads = 2;
    int n_ctx = 4096;
    // MLXR's fixtures use an f32 KV cache and no flash attention: llama.cpp's
    // f16 cache and f16 flash-attention accumulators round activations enough
    // to flip its 8-bit activation quantization, which would make the
    // reference differ from any f32 implementation by noise, not by bugs.
    ggml_type kv_type = GGML_TYPE_F32;
    bool flash_attn = false;
};

static llama_context_params make_cparams(const Settings & s) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = s.n_ctx;
    p.n_threads = s.n_threads;
    p.n_threads_batch = s.n_threads;
    p.type_k = s.kv_type;
    p.type_v = s.kv_type;
    p.flash_attn_type = s.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    // Everything else: llama.cpp defaults (recorded by `info`).
    return p;
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text,
                                         bool add_special, bool parse_special) {
    std::vector<llama_token> ids(text.size() + 8);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(),
                               (int32_t) ids.size(), add_special, parse_special);
    if (n < 0) {
        ids.resize((size_t) -n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(),
                           (int32_t) ids.size(), add_special, parse_special);
    }
    if (n < 0) {
        fprintf(stderr, "llama_tokenize failed: %d\n", n);
        exit(1);
    }
    ids.resize((size_t) n);
    return ids;
}

static std::string detokenize(const llama_vocab * vocab, const std::vector<llama_token> & ids) {
    std::string out(ids.size() * 16 + 16, '\0');
    int32_t n = llama_detokenize(vocab, ids.data(), (int32_t) ids.size(), out.data(),
                                 (int32_t) out.size(), false, true);
    if (n < 0) {
        out.resize((size_t) -n);
        n = llama_detokenize(vocab, ids.data(), (int32_t) ids.size(), out.data(),
                             (int32_t) out.size(), false, true);
    }
    out.resize(n < 0 ? 0 : (size_t) n);
    return out;
}

static std::string ids_json(const std::vector<llama_token> & ids) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) out += ",";
        out += std::to_string(ids[i]);
    }
    return out + "]";
}

static std::string meta(const llama_model * model, const char * key) {
    char buf[512];
    int32_t n = llama_model_meta_val_str(model, key, buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf);
}

// --- commands -----------------------------------------------------------

static void cmd_info(llama_model * model, const Settings & s) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    llama_context_params p = make_cparams(s);

    g_log.clear();
    llama_context * ctx = llama_init_from_model(model, p);
    if (!ctx) {
        fprintf(stderr, "failed to create context\n");
        exit(1);
    }
    // Auto flash-attention is resolved while the context is built; llama.cpp
    // only reports the outcome in its log.
    std::string fa_resolved = "unknown";
    if (p.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_ENABLED) {
        fa_resolved = "enabled";
    } else if (p.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED) {
        fa_resolved = "disabled";
    } else if (g_log.find("Flash Attention enabled") != std::string::npos) {
        fa_resolved = "enabled";
    } else if (g_log.find("Flash Attention not supported") != std::string::npos) {
        fa_resolved = "disabled";
    }

    const char * tmpl = llama_model_chat_template(model, nullptr);
    char desc[256];
    llama_model_desc(model, desc, sizeof desc);

    std::ostringstream o;
    o << "{\"cmd\":\"info\"";
    o << ",\"llama_version\":" << json_str(llama_version());
    o << ",\"system_info\":" << json_str(llama_print_system_info());
    o << ",\"model_desc\":" << json_str(desc);
    o << ",\"arch\":" << json_str(meta(model, "general.architecture"));
    o << ",\"n_vocab\":" << llama_vocab_n_tokens(vocab);
    o << ",\"vocab_type\":" << (int) llama_vocab_type(vocab);
    o << ",\"bos\":" << llama_vocab_bos(vocab) << ",\"eos\":" << llama_vocab_eos(vocab)
      << ",\"eot\":" << llama_vocab_eot(vocab);
    auto tok_text = [&](llama_token t) {
        return t < 0 ? std::string("null") : json_str(hex_encode(llama_vocab_get_text(vocab, t)));
    };
    o << ",\"bos_text_hex\":" << tok_text(llama_vocab_bos(vocab));
    o << ",\"eos_text_hex\":" << tok_text(llama_vocab_eos(vocab));
    o << ",\"add_bos\":" << (llama_vocab_get_add_bos(vocab) ? "true" : "false");
    o << ",\"add_eos\":" << (llama_vocab_get_add_eos(vocab) ? "true" : "false");
    std::vector<llama_token> eog;
    for (llama_token t = 0; t < llama_vocab_n_tokens(vocab); t++) {
        if (llama_vocab_is_eog(vocab, t)) eog.push_back(t);
    }
    o << ",\"eog_ids\":" << ids_json(eog);
    o << ",\"n_swa\":" << llama_model_n_swa(model);
    o << ",\"chat_template_hex\":" << (tmpl ? json_str(hex_encode(tmpl)) : std::string("null"));
    o << ",\"settings\":{";
    o << "\"n_threads\":" << p.n_threads << ",\"n_threads_batch\":" << p.n_threads_batch;
    o << ",\"n_ctx_requested\":" << p.n_ctx << ",\"n_ctx\":" << llama_n_ctx(ctx);
    o << ",\"n_ctx_seq\":" << llama_n_ctx_seq(ctx);
    o << ",\"n_batch\":" << llama_n_batch(ctx) << ",\"n_ubatch\":" << llama_n_ubatch(ctx);
    o << ",\"n_seq_max\":" << llama_n_seq_max(ctx);
    o << ",\"flash_attn_type\":" << json_str(llama_flash_attn_type_name(p.flash_attn_type));
    o << ",\"flash_attn\":" << json_str(fa_resolved);
    o << ",\"type_k\":" << json_str(ggml_type_name(p.type_k));
    o << ",\"type_v\":" << json_str(ggml_type_name(p.type_v));
    o << ",\"swa_full\":" << (p.swa_full ? "true" : "false");
    o << ",\"kv_unified\":" << (p.kv_unified ? "true" : "false");
    o << ",\"offload_kqv\":" << (p.offload_kqv ? "true" : "false");
    const llama_model_params mp = llama_model_default_params();
    o << ",\"load_mode\":" << json_str(llama_load_mode_name(mp.load_mode));
    o << ",\"use_extra_bufts\":" << (mp.use_extra_bufts ? "true" : "false");
    o << ",\"n_gpu_layers\":0";
    o << ",\"context_per_prompt\":\"fresh llama_context for every generate request\"";
    o << ",\"sampling\":\"greedy argmax over llama_get_logits_ith(ctx,-1); ties -> lowest id\"";
    o << "}}";
    std::cout << o.str() << std::endl;
    llama_free(ctx);
}

static void cmd_tokenize(const llama_vocab * vocab, const std::string & id, const std::string & text) {
    std::vector<llama_token> ids = tokenize(vocab, text, true, true);
    std::cout << "{\"cmd\":\"tokenize\",\"id\":" << json_str(id) << ",\"ids\":" << ids_json(ids)
              << ",\"detok_hex\":" << json_str(hex_encode(detokenize(vocab, ids))) << "}" << std::endl;
}

static void cmd_chat(llama_model * model, const std::vector<std::string> & f) {
    // f: chat ID TEMPLATE ADD_ASS ROLE CONTENT ...
    const std::string & id = f[1];
    std::string tmpl;
    const char * tmpl_ptr = nullptr;
    std::string source;
    if (f[2] == "-") {
        tmpl_ptr = llama_model_chat_template(model, nullptr);
        source = "model";
    } else {
        tmpl = hex_decode(f[2]);
        tmpl_ptr = tmpl.c_str();
        source = "given";
    }
    bool add_ass = f[3] == "1";
    std::vector<std::string> roles, contents;
    for (size_t i = 4; i + 1 < f.size(); i += 2) {
        roles.push_back(hex_decode(f[i]));
        contents.push_back(hex_decode(f[i + 1]));
    }
    std::vector<llama_chat_message> msgs;
    size_t total = 0;
    for (size_t i = 0; i < roles.size(); i++) {
        msgs.push_back({roles[i].c_str(), contents[i].c_str()});
        total += roles[i].size() + contents[i].size();
    }
    int32_t rc = -1;
    std::string out;
    if (tmpl_ptr) {
        std::vector<char> buf(2 * total + 1024);
        rc = llama_chat_apply_template(tmpl_ptr, msgs.data(), msgs.size(), add_ass, buf.data(), (int32_t) buf.size());
        if (rc > (int32_t) buf.size()) {
            buf.resize(rc);
            rc = llama_chat_apply_template(tmpl_ptr, msgs.data(), msgs.size(), add_ass, buf.data(), (int32_t) buf.size());
        }
        if (rc >= 0) out.assign(buf.data(), (size_t) rc);
    }
    std::cout << "{\"cmd\":\"chat\",\"id\":" << json_str(id) << ",\"template_source\":" << json_str(source)
              << ",\"has_template\":" << (tmpl_ptr ? "true" : "false") << ",\"rc\":" << rc
              << ",\"rendered_hex\":" << (rc >= 0 ? json_str(hex_encode(out)) : std::string("null")) << "}"
              << std::endl;
}

static void cmd_generate(llama_model * model, const Settings & s, const std::string & id, int n_steps,
                         const std::string & prompt) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> prompt_ids = tokenize(vocab, prompt, true, true);
    if (prompt_ids.empty()) {
        fprintf(stderr, "generate %s: empty prompt\n", id.c_str());
        exit(1);
    }

    llama_context * ctx = llama_init_from_model(model, make_cparams(s));  // fresh KV per prompt
    if (!ctx) {
        fprintf(stderr, "failed to create context\n");
        exit(1);
    }

    std::vector<llama_token> ids;
    std::vector<float> gaps;
    std::vector<std::vector<std::pair<llama_token, float>>> top5s;
    bool stopped_on_eog = false;

    std::vector<llama_token> pending = prompt_ids;
    std::vector<int> order(n_vocab);
    for (int step = 0; step < n_steps; step++) {
        llama_batch batch = llama_batch_get_one(pending.data(), (int32_t) pending.size());
        int32_t rc = llama_decode(ctx, batch);
        if (rc != 0) {
            fprintf(stderr, "generate %s: llama_decode failed at step %d: %d\n", id.c_str(), step, rc);
            exit(1);
        }
        const float * logits = llama_get_logits_ith(ctx, -1);
        for (int i = 0; i < n_vocab; i++) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) {
            if (logits[a] != logits[b]) return logits[a] > logits[b];
            return a < b;
        });
        std::vector<std::pair<llama_token, float>> top5;
        for (int k = 0; k < 5; k++) top5.push_back({order[k], logits[order[k]]});
        llama_token next = order[0];
        ids.push_back(next);
        gaps.push_back(logits[order[0]] - logits[order[1]]);
        top5s.push_back(top5);
        if (llama_vocab_is_eog(vocab, next)) {
            stopped_on_eog = true;
            break;
        }
        pending.assign(1, next);
    }
    llama_free(ctx);

    std::ostringstream o;
    o << "{\"cmd\":\"generate\",\"id\":" << json_str(id);
    o << ",\"prompt_ids\":" << ids_json(prompt_ids);
    o << ",\"ids\":" << ids_json(ids);
    o << ",\"top2_gap\":[";
    for (size_t i = 0; i < gaps.size(); i++) o << (i ? "," : "") << json_float(gaps[i]);
    o << "],\"top5\":[";
    for (size_t i = 0; i < top5s.size(); i++) {
        o << (i ? "," : "") << "[";
        for (size_t k = 0; k < top5s[i].size(); k++) {
            o << (k ? "," : "") << "[" << top5s[i][k].first << "," << json_float(top5s[i][k].second) << "]";
        }
        o << "]";
    }
    o << "],\"stopped_on_eog\":" << (stopped_on_eog ? "true" : "false");
    o << ",\"text_hex\":" << json_str(hex_encode(detokenize(vocab, ids)));
    o << "}";
    std::cout << o.str() << std::endl;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [--threads N] [--ctx N] [--kv-type f32|f16] [--flash-attn on|off] < requests\n", argv[0]);
        return 2;
    }
    Settings s;
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--threads") s.n_threads = atoi(argv[i + 1]);
        else if (a == "--ctx") s.n_ctx = atoi(argv[i + 1]);
        else if (a == "--kv-type") s.kv_type = std::string(argv[i + 1]) == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
        else if (a == "--flash-attn") s.flash_attn = std::string(argv[i + 1]) == "on";
        else { fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
    }
    const char * v = getenv("REF_VERBOSE");
    g_verbose = v && strcmp(v, "1") == 0;
    llama_log_set(log_cb, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "failed to load %s\n%s", argv[1], g_log.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        std::vector<std::string> f = split_tabs(line);
        const std::string & cmd = f[0];
        if (cmd == "info") {
            cmd_info(model, s);
        } else if (cmd == "tokenize" && f.size() == 3) {
            cmd_tokenize(vocab, f[1], hex_decode(f[2]));
        } else if (cmd == "chat" && f.size() >= 4 && f.size() % 2 == 0) {
            cmd_chat(model, f);
        } else if (cmd == "generate" && f.size() == 4) {
            cmd_generate(model, s, f[1], atoi(f[2].c_str()), hex_decode(f[3]));
        } else {
            fprintf(stderr, "bad request: %s\n", line.c_str());
            return 2;
        }
        g_log.clear();
    }

    llama_model_free(model);
    llama_backend_free();
    return 0;
}
