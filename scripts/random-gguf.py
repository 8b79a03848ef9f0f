#!/usr/bin/env python3
"""Seeded random-weight GGUF models in the shapes of real ones.

Model files over 64 MiB cannot travel to the GPU machine, so both machines
make the same files with this script (same seed, same bytes: it prints each
file's SHA-256 to compare). Speed depends on shapes and weight types, not on
values; the values are drawn so activations stay finite through every layer
(weights of standard deviation ~0.02, norms near 1), which the GPU-vs-CPU
comparisons need.

  scripts/random-gguf.py SHAPE TYPE OUT.gguf --vocab-from VOCAB.gguf

SHAPE: smollm2-135m | qwen2.5-1.5b | llama3-8b (Llama 3 8B's layers with a
49,152-token vocabulary: 7.38 B parameters, as issue 17's anchors).
TYPE: q4_k_m (llama.cpp's Q4_K_M mix: Q6_K for the output, for half of
attn_v/ffn_down, Q4_K elsewhere), q4_1 (as SmolLM2-135M-Instruct's Q4_1
file: Q8_0 for the output, Q4_1 elsewhere), q8_0 or f16. The tokenizer (tokens,
merges, special ids) is copied from a vocab-only GGUF of llama.cpp's
(models/ggml-vocab-*.gguf in the llama-cpp-python sdist): its token count
sets the vocabulary. Needs numpy and llama.cpp's gguf-py on PYTHONPATH.
"""

import argparse
import hashlib
import sys
import zlib

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

SHAPES = {
    # arch, hidden, layers, heads, kv heads, ffn, rope base, tied, qkv bias
    "smollm2-135m": ("llama", 576, 30, 9, 3, 1536, 100000.0, True, False),
    "qwen2.5-1.5b": ("qwen2", 1536, 28, 12, 2, 8960, 1000000.0, True, True),
    "llama3-8b": ("llama", 4096, 32, 32, 8, 14336, 500000.0, False, False),
}

BLOCK = {Q.Q4_K: (256, 144), Q.Q6_K: (256, 210), Q.Q8_0: (32, 34), Q.Q4_1: (32, 20)}
STD = 0.02


def rng_for(name, seed):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def f16_scale(rng, n, mean):
    return (mean * rng.uniform(0.75, 1.25, n)).astype(np.float16)


def quantized(rng, rows, cols, qtype):
    """Random blocks of `qtype` whose weights have standard deviation ~STD."""
    per, size = BLOCK[qtype]
    if cols % per:
        raise SystemExit(f"{cols} columns are not a multiple of {qtype.name}'s {per}")
    n = rows * cols // per
    raw = np.frombuffer(rng.bytes(n * size), dtype=np.uint8).reshape(n, size).copy()
    if qtype == Q.Q8_0:
        # d * q, q uniform in [-128, 127]: std 74 d.
        raw[:, 0:2] = f16_scale(rng, n, STD / 74).view(np.uint8).reshape(n, 2)
    elif qtype == Q.Q4_1:
        # d * q + m, q uniform in [0, 15]: m = -7.5 d centres them, std 4.6 d.
        d = f16_scale(rng, n, STD / 4.6)
        raw[:, 0:2] = d.view(np.uint8).reshape(n, 2)
        raw[:, 2:4] = (d.astype(np.float32) * -7.5).astype(np.float16).view(np.uint8).reshape(n, 2)
    elif qtype == Q.Q4_K:
        # d * sc * q - dmin * m with 6-bit sc, m and 4-bit q; dmin = 7.5 d
        # centres the weights: std about 245 d.
        d = f16_scale(rng, n, STD / 245)
        raw[:, 0:2] = d.view(np.uint8).reshape(n, 2)
        raw[:, 2:4] = (d.astype(np.float32) * 7.5).astype(np.float16).view(np.uint8).reshape(n, 2)
    elif qtype == Q.Q6_K:
        # d * sc * (q - 32), int8 scales drawn from [-16, 15]: std about 170 d.
        raw[:, 192:208] = (raw[:, 192:208] % 32).astype(np.int8) - 16
        raw[:, 208:210] = f16_scale(rng, n, STD / 170).view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, cols // per * size)


def f16(rng, rows, cols):
    # +-(1 + m/1024) * 2^e, e in {-7, -6}: |w| in [0.0078, 0.031], std ~0.018,
    # built from random bits (a normal draw of 7 G values is too slow).
    bits = np.frombuffer(rng.bytes(rows * cols * 2), dtype=np.uint16).reshape(rows, cols)
    exponent = ((bits >> 10) & 1) + (15 - 7)
    return ((bits & 0x83FF) | (exponent << 10)).astype(np.uint16).view(np.float16)


def weight(name, rows, cols, qtype, seed):
    rng = rng_for(name, seed)
    if qtype == Q.F16:
        return f16(rng, rows, cols), None
    return quantized(rng, rows, cols, qtype), qtype


def use_more_bits(layer, n_layers):
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def tensor_types(kind, n_layers):
    """Per tensor role, the type llama.cpp's mix gives it."""
    if kind == "f16":
        return lambda role, layer: Q.F16
    if kind == "q8_0":
        return lambda role, layer: Q.Q8_0
    if kind == "q4_1":
        return lambda role, layer: Q.Q8_0 if role == "output" else Q.Q4_1

    def q4_k_m(role, layer):
        if role == "output":
            return Q.Q6_K
        if role in ("attn_v", "ffn_down") and use_more_bits(layer, n_layers):
            return Q.Q6_K
        return Q.Q4_K

    return q4_k_m


def copy_tokenizer(writer, vocab_path):
    reader = gguf.GGUFReader(vocab_path)
    n_vocab = None
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        main = field.types[0]
        if main == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            values = [field.contents(i) for i in range(len(field.data))]
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(values)
            writer.add_key_value(key, values, main, sub)
        else:
            writer.add_key_value(key, field.contents(), main)
    if n_vocab is None:
        raise SystemExit(f"{vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shape", choices=SHAPES)
    p.add_argument("type", choices=["q4_k_m", "q4_1", "q8_0", "f16"])
    p.add_argument("out")
    p.add_argument("--vocab-from", required=True)
    p.add_argument("--seed", type=int, default=17)
    a = p.parse_args()

    arch, hidden, n_layers, heads, kv_heads, ffn, rope_base, tied, bias = SHAPES[a.shape]
    head_dim = hidden // heads
    w = gguf.GGUFWriter(a.out, arch)
    n_vocab = copy_tokenizer(w, a.vocab_from)
    w.add_name(f"random {a.shape} {a.type} (seed {a.seed})")
    # Llama 3's (Qwen2.5's is longer): room for pp4096, which needs one token more.
    w.add_context_length(8192)
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(rope_base)
    w.add_layer_norm_rms_eps(1e-6 if arch == "qwen2" else 1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type({"q4_k_m": 15, "q4_1": 3, "q8_0": 7, "f16": 1}[a.type])

    types = tensor_types(a.type, n_layers)
    count = 0

    def add(name, rows, cols, qtype):
        nonlocal count
        data, raw = weight(name, rows, cols, qtype, a.seed)
        w.add_tensor(name, data, raw_dtype=raw)
        count += rows * cols

    def add_f32(name, values):
        nonlocal count
        w.add_tensor(name, values.astype(np.float32))
        count += values.size

    def norm(name, n):
        return 1.0 + 0.05 * rng_for(name, a.seed).standard_normal(n)

    # With tied embeddings llama.cpp gives token_embd the output's type.
    add("token_embd.weight", n_vocab, hidden, types("output" if tied else "token_embd", 0))
    for i in range(n_layers):
        b = f"blk.{i}."
        add_f32(b + "attn_norm.weight", norm(b + "attn_norm", hidden))
        add(b + "attn_q.weight", heads * head_dim, hidden, types("attn_q", i))
        add(b + "attn_k.weight", kv_heads * head_dim, hidden, types("attn_k", i))
        add(b + "attn_v.weight", kv_heads * head_dim, hidden, types("attn_v", i))
        if bias:
            for t, n in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
                name = f"{b}attn_{t}.bias"
                add_f32(name, 0.02 * rng_for(name, a.seed).standard_normal(n * head_dim))
        add(b + "attn_output.weight", hidden, heads * head_dim, types("attn_output", i))
        add_f32(b + "ffn_norm.weight", norm(b + "ffn_norm", hidden))
        add(b + "ffn_gate.weight", ffn, hidden, types("ffn_gate", i))
        add(b + "ffn_up.weight", ffn, hidden, types("ffn_up", i))
        add(b + "ffn_down.weight", hidden, ffn, types("ffn_down", i))
    add_f32("output_norm.weight", norm("output_norm", hidden))
    if not tied:
        add("output.weight", n_vocab, hidden, types("output", 0))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    sha = hashlib.sha256()
    with open(a.out, "rb") as f:
        while chunk := f.read(1 << 24):
            sha.update(chunk)
    print(f"{a.out}: {a.shape} {a.type}, {count / 1e9:.2f} B parameters, vocab {n_vocab}, sha256 {sha.hexdigest()}")


if __name__ == "__main__":
    sys.exit(main())
