#!/usr/bin/env python3
"""A float Hugging Face folder's linear weights as FP8 and NF4 checkpoints.

    fp8_nf4_folders.py SRC FP8_OUT NF4_OUT

SRC: a folder with config.json and one model.safetensors of f32 tensors
(what `mlxr convert MODEL.gguf SRC` writes). Every 2-D `*_proj.weight` becomes
  FP8: `quant_method: fp8`, E4M3 codes with an f32 scale per [128, 128] block
       (edge blocks partial), s = amax / 448, as DeepSeek and Qwen3-FP8 publish;
  NF4: bitsandbytes' 4-bit serialisation without double quantization (codes
       packed two a byte, first element in the high nibble; absmax per 64;
       quant_map; the quant_state JSON), the nearest NF4 value of w / absmax;
the other tensors BF16, as such checkpoints keep them. Written from the
formats' definitions with numpy (no torch here); the layout is the one
scripts/fixtures/fp8-nf4.py writes with bitsandbytes itself
(tests/fixtures/fp8-nf4/llama-nf4). For speed measurements
(bench/fp8-nf4.sh), not for correctness, which tests/fixtures covers.
"""
import json
import os
import shutil
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import load_file, save_file

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
BLOCK = 128
NF4_BLOCK = 64


def quantized(name, t):
    return t.ndim == 2 and name.endswith("_proj.weight")


def bf16(t):
    return t.astype(ml_dtypes.bfloat16)


def fp8(w):
    rows, cols = -(-w.shape[0] // BLOCK), -(-w.shape[1] // BLOCK)
    pad = np.zeros((rows * BLOCK, cols * BLOCK), np.float32)
    pad[: w.shape[0], : w.shape[1]] = np.abs(w)
    amax = pad.reshape(rows, BLOCK, cols, BLOCK).max(axis=(1, 3))
    s = np.maximum(amax / 448.0, 1e-12).astype(np.float32)
    full = np.repeat(np.repeat(s, BLOCK, 0), BLOCK, 1)[: w.shape[0], : w.shape[1]]
    q = np.clip(w / full, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return q, s


def nf4(w):
    flat = w.reshape(-1, NF4_BLOCK)
    absmax = np.abs(flat).max(axis=1).astype(np.float32)
    scaled = flat / np.where(absmax == 0, 1, absmax)[:, None]
    codes = np.abs(scaled[..., None] - NF4).argmin(axis=-1).astype(np.uint8).reshape(-1)
    packed = (codes[0::2] << 4) | codes[1::2]
    state = json.dumps({"quant_type": "nf4", "blocksize": NF4_BLOCK, "dtype": "float32",
                        "shape": list(w.shape)}).encode()
    return packed.reshape(-1, 1), absmax, np.frombuffer(state, np.uint8).copy()


def write(src, out, config_extra, tensors):
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.safetensors*", "config.json"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(config_extra)
    cfg["torch_dtype"] = "bfloat16"
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def main():
    src, fp8_out, nf4_out = sys.argv[1:4]
    weights = load_file(os.path.join(src, "model.safetensors"))
    f8, n4 = {}, {}
    for name, t in weights.items():
        t = t.astype(np.float32)
        if not quantized(name, t):
            f8[name] = n4[name] = bf16(t)
            continue
        q, s = fp8(t)
        f8[name], f8[name[: -len("weight")] + "weight_scale_inv"] = q, s
        packed, absmax, state = nf4(t)
        n4[name], n4[name + ".absmax"], n4[name + ".quant_map"] = packed, absmax, NF4.copy()
        n4[name + ".quant_state.bitsandbytes__nf4"] = state
    write(src, fp8_out, {"quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": ["lm_head"]}}, f8)
    write(src, nf4_out, {"quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
        "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False,
        "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8",
        "llm_int8_skip_modules": None}}, n4)


if __name__ == "__main__":
    main()
