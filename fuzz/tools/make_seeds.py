#!/usr/bin/env python3
"""Writes the seeds of every fuzz target except gguf_parse (which
`cargo run -p mlxr-formats --example write_fuzz_seeds` writes): small,
real-looking inputs. Run from anywhere: python3 fuzz/tools/make_seeds.py"""

import json
import struct
from pathlib import Path

SEEDS = Path(__file__).resolve().parent.parent / "seeds"


def write(target, name, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)


# ---- safetensors_header: [u64 len][header JSON][config.json] and index files
def safetensors(tensors, metadata=None, config=None):
    header, offset, body = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I64": 8, "U8": 1}
    for name, dtype, shape in tensors:
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
        body += bytes(n)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    out = struct.pack("<Q", len(h)) + h + body
    if config is not None:
        out += json.dumps(config).encode()
    return out


write("safetensors_header", "bert_f32.bin", safetensors(
    [("embeddings.word_embeddings.weight", "F32", [8, 4]),
     ("encoder.layer.0.attention.self.query.bias", "F32", [4])],
    {"format": "pt"}))
write("safetensors_header", "llama_bf16_config.bin", safetensors(
    [("model.embed_tokens.weight", "BF16", [16, 8]),
     ("model.layers.0.self_attn.q_proj.weight", "BF16", [8, 8]),
     ("model.norm.weight", "BF16", [8])],
    {"format": "pt"}, {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
write("safetensors_header", "mlx_q4_config.bin", safetensors(
    [("model.layers.0.mlp.down_proj.weight", "U32", [8, 2]),
     ("model.layers.0.mlp.down_proj.scales", "F16", [8, 1]),
     ("model.layers.0.mlp.down_proj.biases", "F16", [8, 1])],
    None, {"model_type": "qwen2", "quantization": {"group_size": 64, "bits": 4}}))
index = {
    "metadata": {"total_size": 16060522496},
    "weight_map": {
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
    },
}
write("safetensors_header", "model.safetensors.index.json", json.dumps(index, indent=2))

# ---- hf_config: config.json of the supported architectures
base = {
    "hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
    "num_key_value_heads": 3, "num_hidden_layers": 30, "rms_norm_eps": 1e-05,
    "vocab_size": 49152, "max_position_embeddings": 8192, "rope_theta": 100000,
    "hidden_act": "silu", "torch_dtype": "bfloat16", "tie_word_embeddings": True,
}
configs = {
    "smollm2_llama.json": {**base, "architectures": ["LlamaForCausalLM"], "model_type": "llama",
                           "rope_scaling": None},
    "qwen2.json": {**base, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                   "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2,
                   "num_hidden_layers": 24, "sliding_window": 32768, "use_sliding_window": False},
    "qwen3.json": {**base, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                   "hidden_size": 1024, "head_dim": 128, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "num_hidden_layers": 28},
    "phi3.json": {**base, "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
                  "hidden_size": 3072, "num_attention_heads": 32, "num_key_value_heads": 32,
                  "partial_rotary_factor": 0.75, "rope_scaling": {"type": "default"}},
    "mistral.json": {**base, "architectures": ["MistralForCausalLM"], "model_type": "mistral",
                     "sliding_window": 4096},
    "gemma3_text.json": {**base, "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                         "hidden_size": 640, "head_dim": 256, "num_attention_heads": 4,
                         "num_key_value_heads": 1, "num_hidden_layers": 6,
                         "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
                         "sliding_window": 512, "rope_local_base_freq": 10000.0,
                         "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                         "final_logit_softcapping": None, "attn_logit_softcapping": None},
    "gemma3_rope_parameters.json": {**base, "model_type": "gemma3_text", "num_hidden_layers": 2,
                                    "sliding_window": 512,
                                    "layer_types": ["sliding_attention", "full_attention"],
                                    "rope_parameters": {
                                        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
}
for name, cfg in configs.items():
    write("hf_config", name, json.dumps(cfg, indent=2))


# ---- gguf_tokenizer: GGUF v3 files holding only tokenizer metadata
def gguf(kvs):
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    def value(v):
        if isinstance(v, bool):
            return struct.pack("<I?", 7, v)
        if isinstance(v, int):
            return struct.pack("<II", 4, v)
        if isinstance(v, float):
            return struct.pack("<If", 6, v)
        if isinstance(v, str):
            return struct.pack("<I", 8) + s(v)
        kind, items = v  # ("str" | "f32" | "i32", [...])
        code, enc = {"str": (8, s), "f32": (6, lambda x: struct.pack("<f", x)),
                     "i32": (5, lambda x: struct.pack("<i", x))}[kind]
        return struct.pack("<IIQ", 9, code, len(items)) + b"".join(enc(x) for x in items)

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for k, v in kvs.items():
        out += s(k) + value(v)
    return out


byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
spm_tokens = ["<unk>", "<s>", "</s>"] + byte_tokens + ["▁", "▁H", "ello", "▁world", "!", "1", "2",
                                                        "3", "▁he", "llo", "▁Hello", "é", "▁c", "af"]
spm_types = [2, 3, 3] + [6] * 256 + [1] * (len(spm_tokens) - 259)
write("gguf_tokenizer", "llama_spm.gguf", gguf({
    "general.architecture": "llama", "general.name": "Tiny SPM ▁Hello",
    "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ("str", spm_tokens),
    "tokenizer.ggml.scores": ("f32", [-float(i) for i in range(len(spm_tokens))]),
    "tokenizer.ggml.token_type": ("i32", spm_types),
    "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
    "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True,
}))
# GPT-2 byte-level BPE: printable byte alphabet, a few merges.
alphabet = [chr(c) for c in range(33, 127)] + ["Ġ", "Ċ", "ĉ", "Ã", "©"]
merges = ["Ġ w", "Ġw o", "r l", "Ġwo rl", "Ġworl d", "H e", "l l", "He ll", "Hell o", "Ã ©"]
merged = [m.replace(" ", "") for m in merges]
bpe_tokens = alphabet + merged + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
bpe_types = [1] * (len(alphabet) + len(merged)) + [3, 3, 3]
for pre in ["qwen2", "llama-bpe", "smollm"]:
    write("gguf_tokenizer", f"gpt2_bpe_{pre}.gguf", gguf({
        "general.architecture": "qwen2", "general.name": "Hello world",
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": ("str", bpe_tokens), "tokenizer.ggml.token_type": ("i32", bpe_types),
        "tokenizer.ggml.merges": ("str", merges),
        "tokenizer.ggml.bos_token_id": len(bpe_tokens) - 3,
        "tokenizer.ggml.eos_token_id": len(bpe_tokens) - 1, "tokenizer.ggml.add_bos_token": False,
    }))

# ---- openai_request
openai = {
    "chat_minimal.json": {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}]},
    "chat_full.json": {
        "model": "qwen2.5:0.5b", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": "Be terse."},
                     {"role": "user", "content": [{"type": "text", "text": "Hello "},
                                                  {"type": "text", "text": "there"}]},
                     {"role": "assistant", "content": None}],
        "max_completion_tokens": 64, "temperature": 0.2, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
        "repeat_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": 0.5, "seed": 42,
        "stop": ["\n\n", "User:"], "logit_bias": {"50256": -100, "13": 2.5}, "n": 1,
        "logprobs": True, "top_logprobs": 3, "tool_choice": "none", "tools": [],
        "parallel_tool_calls": True, "response_format": {"type": "text"}, "user": "u1",
    },
    "completion_tokens.json": {"model": "m", "prompt": [[1, 2, 3, 4]], "max_tokens": 16,
                               "logprobs": 2, "echo": False, "best_of": 1, "stop": "###",
                               "ignore_eos": True},
    "completion_text.json": {"model": "m", "prompt": ["Once upon a time"], "temperature": 0,
                             "seed": -1},
}
for name, body in openai.items():
    write("openai_request", name, json.dumps(body))

# ---- ollama_request
ollama = {
    "generate.json": {"model": "llama3.2", "prompt": "Why is the sky blue?", "stream": False,
                      "options": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "num_ctx": 2048,
                                  "num_predict": 128, "stop": ["</s>"], "seed": 7,
                                  "repeat_last_n": 64, "repeat_penalty": 1.1, "min_p": 0.05,
                                  "num_thread": 8, "mirostat": 0},
                      "keep_alive": "5m", "system": "Be brief.", "context": [1, 2, 3]},
    "generate_raw.json": {"model": "m", "prompt": "[INST] hi [/INST]", "raw": True,
                          "keep_alive": 0, "format": "", "think": False},
    "chat.json": {"model": "qwen2.5", "messages": [{"role": "system", "content": "Be terse."},
                                                   {"role": "User", "content": "Hello"}],
                  "options": {"num_predict": -1, "presence_penalty": 0.2,
                              "frequency_penalty": 0.1}, "keep_alive": "1h30m",
                  "logprobs": True, "top_logprobs": 2, "tools": []},
    "chat_unload.json": {"model": "m", "messages": [], "keep_alive": -1},
    "parameters.json": {"temperature": 0.0, "stop": ["<|im_end|>", "<|endoftext|>"],
                        "num_ctx": 8192},
}
for name, body in ollama.items():
    write("ollama_request", name, json.dumps(body))

# ---- modelfile
write("modelfile", "full", '''# a comment
FROM ./smollm2-135m-instruct-q8_0.gguf
PARAMETER temperature 0.7
PARAMETER stop "<|im_end|>"
parameter stop User:
PARAMETER num_ctx 4096
TEMPLATE """{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}<|im_start|>user
{{ .Prompt }}<|im_end|>
<|im_start|>assistant
"""
SYSTEM You are a helpful assistant.
MESSAGE user Hi there
MESSAGE assistant """Hello!
How can I help?"""
LICENSE """Apache License 2.0"""
''')
write("modelfile", "minimal", "FROM llama3.2\n")
write("modelfile", "quoted", 'from hf.co/org/repo:Q4_K_M\nSYSTEM """one line"""\nMESSAGE system "be kind"\n')
