#!/usr/bin/env python3
"""Real-weight HF / MLX folders of SmolLM2-135M-Instruct, built offline from the
GGUF that scripts/fetch-models.sh downloads, plus a small reference fixture.

Steps (each run by make-smollm2-folders.sh in the right venv):
  hf      (torch venv)  GGUF -> transformers (weights dequantized to f32, checked
                        against our own gguf dequantization) -> bf16 HF folder
  ref-hf  (torch venv)  transformers f32 (bf16 weights upcast, eager attention):
                        greedy 16 tokens per prompt -> $WORK/hf.json
  ref-mlx (mlx venv)    mlx-lm on each MLX folder (activations f32) -> $WORK/mlx-<name>.json
  merge   (any)         -> tests/fixtures/real-folders/smollm2.json

Usage: make-smollm2-folders.py STEP --models-dir DIR --work DIR [--out FILE]
"""

import argparse
import hashlib
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_DIR = "smollm2-135m-hf-bf16"
MLX_DIRS = {"mlx-q4": ("smollm2-135m-mlx-q4", 4, 64), "mlx-q8": ("smollm2-135m-mlx-q8", 8, 64)}
STEPS = 16
TOPK = 10

PROMPTS = [
    {"name": "chat_capital", "kind": "chat",
     "messages": [{"role": "user", "content": "What is the capital of France?"}]},
    {"name": "chat_system_haiku", "kind": "chat",
     "messages": [{"role": "system", "content": "You are a concise assistant."},
                  {"role": "user", "content": "Write a haiku about the sea."}]},
    {"name": "chat_multiturn", "kind": "chat",
     "messages": [{"role": "user", "content": "Hi! My name is Ada."},
                  {"role": "assistant", "content": "Hello Ada! How can I help you today?"},
                  {"role": "user", "content": "List three primary colors."}]},
    {"name": "raw_story", "kind": "raw", "text": "Once upon a time, there was a little"},
]


def log(*a):
    print(*a, flush=True)


def f32(x):
    import numpy as np
    return float("%.9g" % float(np.float32(x)))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def encode_prompts(tok):
    """prompt name -> token ids, using the HF tokenizer (chat template for chat prompts)."""
    out = {}
    for p in PROMPTS:
        if p["kind"] == "chat":
            ids = tok.apply_chat_template(p["messages"], add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            ids = tok(p["text"])["input_ids"]
        out[p["name"]] = [int(i) for i in ids]
    return out


def greedy(step_logits, ids, eos):
    """step_logits(ids) -> 1-D float32 numpy logits of the last position.
    Greedy STEPS tokens (no early stop at EOS: the stop position is recorded)."""
    import numpy as np
    seq = list(ids)
    gen, gaps, top2 = [], [], []
    first = None
    for s in range(STEPS):
        lg = np.asarray(step_logits(seq), dtype=np.float32)
        if s == 0:
            order = np.argsort(-lg, kind="stable")[:TOPK]
            first = {"ids": [int(i) for i in order], "logits": [f32(lg[i]) for i in order]}
        o = np.argsort(-lg, kind="stable")[:2]
        gen.append(int(o[0]))
        top2.append([int(o[0]), int(o[1])])
        gaps.append(f32(lg[o[0]] - lg[o[1]]))
        seq.append(int(o[0]))
    eos_at = next((i for i, t in enumerate(gen) if t in eos), None)
    return {"greedy_ids": gen, "top2_ids": top2, "top2_gaps": gaps,
            "min_gap": min(gaps), "eos_at_step": eos_at, "prompt_last_top10": first}


# ----------------------------------------------------------------------------- hf

def step_hf(a):
    import numpy as np
    import torch
    import gguf
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    out = os.path.join(a.models_dir, HF_DIR)
    tok = AutoTokenizer.from_pretrained(a.models_dir, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(a.models_dir, gguf_file=GGUF, dtype=torch.float32)
    cfg = model.config
    notes = []

    # 1. transformers' dequantization vs. gguf's numpy dequantization, tensor by tensor
    reader = gguf.GGUFReader(os.path.join(a.models_dir, GGUF))
    params = dict(model.named_parameters())
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    per = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
           "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
           "ffn_norm": "post_attention_layernorm"}
    worst_hf, worst_bf16_rel, types, covered = 0.0, 0.0, {}, set()
    bf16_exact = 0
    for t in reader.tensors:
        if t.name in names:
            hn = names[t.name]
        else:
            _, i, what, _w = t.name.split(".")
            hn = "model.layers.%s.%s.weight" % (i, per[what])
        covered.add(hn)
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
        ref = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        ref = ref.reshape(tuple(int(n) for n in reversed(t.shape.tolist())))
        p = params[hn].detach().numpy()
        if t.name.endswith(("attn_q.weight", "attn_k.weight")):
            nh = cfg.num_attention_heads if "attn_q" in t.name else cfg.num_key_value_heads
            d = p.shape[0] // nh  # re-apply llama.cpp's interleaving permutation
            p = p.reshape(nh, 2, d // 2, -1).swapaxes(1, 2).reshape(p.shape)
        assert p.shape == ref.shape, (t.name, p.shape, ref.shape)
        worst_hf = max(worst_hf, float(np.max(np.abs(p - ref))))
        b = params[hn].detach().to(torch.bfloat16).to(torch.float32).numpy()
        full = params[hn].detach().numpy()
        bf16_exact += int(np.array_equal(b, full))
        denom = np.maximum(np.abs(full), 1e-30)
        worst_bf16_rel = max(worst_bf16_rel, float(np.max(np.abs(b - full) / denom)))
    missing = [n for n in params if n not in covered and n != "lm_head.weight"]
    assert not missing, missing
    log("  GGUF tensor types: %s" % types)
    log("  transformers' dequantization vs gguf.quants.dequantize: max abs diff %g" % worst_hf)
    log("  f32 -> bf16: %d/%d tensors exact, worst relative rounding %.3g"
        % (bf16_exact, len(reader.tensors), worst_bf16_rel))

    # reference logits from the f32 GGUF weights (to measure what bf16 storage costs)
    prompts = encode_prompts(tok)
    model.eval()
    gguf_last = {}
    with torch.no_grad():
        for name, ids in prompts.items():
            lg = model(torch.tensor([ids])).logits[0, -1].float().numpy()
            gguf_last[name] = [f32(x) for x in lg]

    # 2. save the bf16 folder
    if os.path.isdir(out):
        import shutil
        shutil.rmtree(out)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    # the weights are plain dense tensors already (transformers dequantized them on
    # load); drop the GGUF "quantizer" so save_pretrained writes ordinary safetensors
    model.hf_quantizer = None
    for attr in ("is_quantized", "quantization_method"):
        if hasattr(model, attr):
            try:
                setattr(model, attr, False if attr == "is_quantized" else None)
            except Exception:
                pass
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # tidy config.json: no GGUF quantization_config, upstream eps spelling
    cp = os.path.join(out, "config.json")
    c = json.load(open(cp))
    c.pop("quantization_config", None)
    c.pop("_name_or_path", None)
    c.pop("_model_name_or_path", None)
    c["rms_norm_eps"] = 1e-05  # GGUF holds the f32 value 9.99999975e-06 = float32(1e-5)
    c["architectures"] = ["LlamaForCausalLM"]
    c["dtype"] = "bfloat16"
    json.dump(c, open(cp, "w"), indent=2, sort_keys=True)
    # chat template inline in tokenizer_config.json (not chat_template.jinja)
    tp = os.path.join(out, "tokenizer_config.json")
    tc = json.load(open(tp))
    tc["chat_template"] = tok.chat_template
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc.setdefault("add_bos_token", False)
    tc.setdefault("add_eos_token", False)
    json.dump(tc, open(tp, "w"), indent=2, sort_keys=True)
    jp = os.path.join(out, "chat_template.jinja")
    if os.path.exists(jp):
        os.remove(jp)
    gen = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "do_sample": False,
           "transformers_version": transformers.__version__}
    json.dump(gen, open(os.path.join(out, "generation_config.json"), "w"), indent=2, sort_keys=True)

    # reload check: the saved tokenizer encodes every prompt identically
    tok2 = AutoTokenizer.from_pretrained(out)
    assert tok2.chat_template == tok.chat_template
    p2 = encode_prompts(tok2)
    assert p2 == prompts, "saved tokenizer encodes differently"
    log("  saved %s (tokenizer round-trip identical on all prompts)" % out)

    json.dump({"prompts": prompts, "gguf_f32_last_logits": gguf_last,
               "gguf_tensor_types": types,
               "transformers_vs_gguf_dequant_max_abs_diff": worst_hf,
               "bf16_exact_tensors": bf16_exact, "tensors": len(reader.tensors),
               "bf16_worst_relative_rounding": worst_bf16_rel,
               "tokenizer_class_loaded": type(tok).__name__,
               "raw_prompt_adds_bos": prompts["raw_story"][0] == tok.bos_token_id,
               "bos_token": tok.bos_token, "eos_token": tok.eos_token,
               "chat_template": tok.chat_template,
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "gguf": getattr(gguf, "__version__", "?")}},
              open(os.path.join(a.work, "hf-step.json"), "w"))


# ------------------------------------------------------------------------- ref-hf

def step_ref_hf(a):
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    transformers.utils.logging.disable_progress_bar()
    d = os.path.join(a.models_dir, HF_DIR)
    pre = json.load(open(os.path.join(a.work, "hf-step.json")))
    tok = AutoTokenizer.from_pretrained(d)
    prompts = encode_prompts(tok)
    assert prompts == pre["prompts"]
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    assert next(model.parameters()).dtype == torch.float32

    def step(seq):
        with torch.no_grad():
            return model(torch.tensor([seq])).logits[0, -1].float().numpy()

    res = {}
    for name, ids in prompts.items():
        r = greedy(step, ids, {2})
        lg = step(ids)
        g = np.asarray(pre["gguf_f32_last_logits"][name], dtype=np.float32)
        r["vs_gguf_f32_weights"] = {"max_abs_last_logit_diff": f32(np.max(np.abs(lg - g))),
                                    "same_argmax": bool(int(np.argmax(lg)) == int(np.argmax(g)))}
        r["text"] = tok.decode(r["greedy_ids"])
        log("  [hf f32] %-18s %r" % (name, r["text"]))
        res[name] = r
    json.dump({"dtype": "float32", "weights": "bf16 upcast to f32", "attn_implementation": "eager",
               "results": res}, open(os.path.join(a.work, "hf.json"), "w"))


# ------------------------------------------------------------------------ ref-mlx

def step_ref_mlx(a):
    import numpy as np
    import mlx.core as mx
    import mlx_lm
    from mlx_lm import load
    pre = json.load(open(os.path.join(a.work, "hf-step.json")))
    prompts = pre["prompts"]
    for key, (dname, bits, gs) in MLX_DIRS.items():
        d = os.path.join(a.models_dir, dname)
        model, tok = load(d)
        cfg = json.load(open(os.path.join(d, "config.json")))
        q = cfg.get("quantization")
        # which tensors were quantized
        from safetensors import safe_open  # noqa: F401  (may be missing; fall back to mx.load)
        weights = {}
        for f in sorted(os.listdir(d)):
            if f.endswith(".safetensors"):
                weights.update(mx.load(os.path.join(d, f)))
        qnames = sorted(k[:-len(".scales")] for k in weights if k.endswith(".scales"))
        plain = sorted(k for k in weights if not k.endswith((".scales", ".biases"))
                       and k[:-len(".weight")] not in qnames)
        kinds = {}
        for n in qnames:
            kk = n.split(".")[-1] if "layers" in n else n
            kinds[kk] = kinds.get(kk, 0) + 1
        stored = {k: str(v.dtype) for k, v in weights.items() if k.startswith("model.layers.0.")}
        # activations in f32: cast every floating parameter (scales/biases, norms)
        model.set_dtype(mx.float32)
        # tokenizer check: mlx-lm's wrapped tokenizer encodes the same ids
        tok_same = True
        for p in PROMPTS:
            if p["kind"] == "chat":
                ids = tok.apply_chat_template(p["messages"], add_generation_prompt=True, tokenize=True)
                if hasattr(ids, "keys"):
                    ids = ids["input_ids"]
            else:
                ids = tok.encode(p["text"])
            tok_same &= [int(i) for i in ids] == prompts[p["name"]]
        out_dtype = []

        def step(seq):
            lg = model(mx.array([seq]))[0, -1]
            out_dtype.append(str(lg.dtype))
            return np.array(lg.astype(mx.float32))

        res = {}
        for name, ids in prompts.items():
            r = greedy(step, ids, set(tok.eos_token_ids) if hasattr(tok, "eos_token_ids") else {2})
            r["text"] = tok.decode(r["greedy_ids"])
            log("  [%s] %-18s %r" % (key, name, r["text"]))
            res[name] = r
        json.dump({"folder": dname, "bits": bits, "group_size": gs, "config_quantization": q,
                   "activation_dtype": sorted(set(out_dtype)),
                   "stored_dtypes_layer0": stored,
                   "quantized_tensors": len(qnames), "quantized_by_kind": kinds,
                   "unquantized_tensors": plain[:8] + (["..."] if len(plain) > 8 else []),
                   "unquantized_count": len(plain),
                   "tokenizer_same_ids": bool(tok_same),
                   "versions": {"mlx": mx.__version__, "mlx_lm": mlx_lm.__version__},
                   "results": res}, open(os.path.join(a.work, "%s.json" % key), "w"))


# -------------------------------------------------------------------------- merge

def step_merge(a):
    pre = json.load(open(os.path.join(a.work, "hf-step.json")))
    hf = json.load(open(os.path.join(a.work, "hf.json")))
    folders = {}
    for key, dname in [("hf-bf16", HF_DIR)] + [(k, v[0]) for k, v in MLX_DIRS.items()]:
        d = os.path.join(a.models_dir, dname)
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        folders[key] = {"dir": dname,
                        "weight_files": {f: {"bytes": os.path.getsize(os.path.join(d, f)),
                                             "sha256": sha256(os.path.join(d, f))} for f in files},
                        "files": sorted(os.listdir(d))}
    mlx = {k: json.load(open(os.path.join(a.work, "%s.json" % k))) for k in MLX_DIRS}
    prompts = []
    for p in PROMPTS:
        e = dict(p)
        e["ids"] = pre["prompts"][p["name"]]
        prompts.append(e)
    # agreement summary
    agree = {}
    for k, m in mlx.items():
        agree[k] = {}
        for p in PROMPTS:
            h, x = hf["results"][p["name"]]["greedy_ids"], m["results"][p["name"]]["greedy_ids"]
            n = next((i for i in range(STEPS) if h[i] != x[i]), STEPS)
            agree[k][p["name"]] = n
    doc = {
        "schema": 1,
        "model": "SmolLM2-135M-Instruct",
        "source_gguf": GGUF,
        "source_gguf_sha256": sha256(os.path.join(a.models_dir, GGUF)),
        "generated_by": "scripts/tiny-models/real/make-smollm2-folders.sh",
        "steps": STEPS,
        "greedy": "argmax, no early stop (eos_at_step marks the first <|im_end|>); ties -> lowest id",
        "top2_gap": "logit[top1] - logit[top2] at each step",
        "prompt_last_top10": "top-10 (ids, logits) at the last prompt position = step 0",
        "conversion": {
            "gguf_tensor_types": pre["gguf_tensor_types"],
            "transformers_vs_gguf_dequant_max_abs_diff": pre["transformers_vs_gguf_dequant_max_abs_diff"],
            "bf16_exact_tensors": "%d/%d" % (pre["bf16_exact_tensors"], pre["tensors"]),
            "bf16_worst_relative_rounding": pre["bf16_worst_relative_rounding"],
            "tokenizer_class_loaded": pre["tokenizer_class_loaded"],
            "bos_token": pre["bos_token"], "eos_token": pre["eos_token"],
            "raw_prompt_adds_bos": pre["raw_prompt_adds_bos"],
        },
        "chat_template": pre["chat_template"],
        "versions": dict(pre["versions"], **next(iter(mlx.values()))["versions"]),
        "folders": folders,
        "prompts": prompts,
        "references": {"transformers-f32": hf,
                       **{k: m for k, m in mlx.items()}},
        "greedy_agreement_vs_transformers": agree,
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    log("  wrote %s" % a.out)
    log("  greedy steps identical to transformers f32 before first divergence: %s" % agree)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["hf", "ref-hf", "ref-mlx", "merge"])
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out")
    a = ap.parse_args()
    {"hf": step_hf, "ref-hf": step_ref_hf, "ref-mlx": step_ref_mlx, "merge": step_merge}[a.step](a)


if __name__ == "__main__":
    sys.exit(main())
