#!/usr/bin/env python3
"""Independent float32 reference logits for MLXR's forward pass.

Loads each test GGUF with Hugging Face `transformers` (PyTorch, CPU), its
weights dequantized to float32 by the `gguf` package, runs it on fixed token
ids taken from the committed llama.cpp fixtures and records the logits of the
LAST position only:

    tests/fixtures/hf-f32/smollm2.json
    tests/fixtures/hf-f32/gemma3.json

Before running anything it checks, and prints, that the model transformers
built is the one the GGUF describes:
  * the config (for Gemma 3: sliding window 512, every 6th layer global,
    local/global RoPE bases 1e4/1e6, query_pre_attn_scalar 256, ...); fields
    that are wrong or missing are set explicitly and listed in the fixture's
    `notes`;
  * every weight: our own dequantization of every GGUF tensor is compared with
    the parameter transformers loaded (un-doing llama.cpp's Q/K row
    permutation for `llama`, and Gemma's "+1 already added" RMSNorm weights),
    and every model parameter must be covered by exactly one GGUF tensor;
  * non-persistent buffers (RoPE inverse frequencies, Gemma's embedding
    scale) against values computed here.

Then, per case, it compares the greedy argmax with llama.cpp's first greedy
id and reruns the case in float64 to show how much of the logits is float32
rounding noise (`max_abs_diff_vs_f64`).

Usage: make-f32-logits.py [--models-dir DIR] [--out-dir DIR] [--only smollm2|gemma3]
(normally run through make.sh, which sets up the venv).
"""

import argparse
import json
import math
import os
import platform
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF loader uses tqdm directly

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import gguf  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
TOP_K = 32
FIXED_IDS = list(range(0, 8)) + list(range(1000, 1008))
EXTEND = 8  # prompt + this many of llama.cpp's greedy ids, for 3 cases


transformers.utils.logging.disable_progress_bar()


def log(*a):
    print(*a, flush=True)


def f32(x):
    """A float32 value as the shortest decimal that round-trips float32."""
    return float("%.9g" % float(np.float32(x)))


# --------------------------------------------------------------------------
# GGUF reading (our own dequantization, independent of transformers' loader)
# --------------------------------------------------------------------------

def gguf_field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def gguf_tensors(reader):
    """name -> float32 numpy array in PyTorch's (out, in) layout."""
    out = {}
    for t in reader.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        a = np.asarray(a, dtype=np.float32)
        # numpy shape is the reverse of GGUF's ne[] order, i.e. (rows, cols)
        want = tuple(int(n) for n in reversed(t.shape.tolist()))
        a = a.reshape(want)
        out[t.name] = a
    return out


def hf_name(arch, gname):
    """GGUF tensor name -> transformers parameter name."""
    if gname == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gname == "output_norm.weight":
        return "model.norm.weight"
    if gname == "output.weight":
        return "lm_head.weight"
    parts = gname.split(".")
    assert parts[0] == "blk", gname
    i, what = parts[1], ".".join(parts[2:])
    common = {
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "attn_q_norm.weight": "self_attn.q_norm.weight",
        "attn_k_norm.weight": "self_attn.k_norm.weight",
        "attn_norm.weight": "input_layernorm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }
    if arch == "llama":
        common["ffn_norm.weight"] = "post_attention_layernorm.weight"
    elif arch == "gemma3":
        common["ffn_norm.weight"] = "pre_feedforward_layernorm.weight"
        common["post_attention_norm.weight"] = "post_attention_layernorm.weight"
        common["post_ffw_norm.weight"] = "post_feedforward_layernorm.weight"
    return "model.layers.%s.%s" % (i, common[what])


def llama_cpp_qk_permute(w, n_head):
    """The row order llama.cpp's converter gives llama Q/K weights: within each
    head, HF's [first half | second half] rotary layout becomes interleaved
    pairs (x0, x(d/2)), (x1, x(d/2+1)), ... so that ggml's "normal" RoPE, which
    rotates adjacent pairs, computes the same thing."""
    rows = w.shape[0]
    d = rows // n_head
    return (w.reshape(n_head, 2, d // 2, *w.shape[1:])
             .swapaxes(1, 2)
             .reshape(w.shape))


def check_weights(arch, model, cfg, raw, notes):
    """Compare every GGUF tensor (our dequantization) with the loaded parameter."""
    params = dict(model.named_parameters(remove_duplicate=False))
    covered = set()
    worst = 0.0
    norm_example = None
    for gname, a in sorted(raw.items()):
        name = hf_name(arch, gname)
        p = params[name].detach().to(torch.float32).numpy()
        covered.add(name)
        expect = a
        if arch == "llama" and gname.endswith(("attn_q.weight", "attn_k.weight")):
            heads = cfg.num_attention_heads if "attn_q" in gname else cfg.num_key_value_heads
            # transformers un-permutes on load: permuting its weight back must
            # give the GGUF rows exactly.
            p = llama_cpp_qk_permute(p, heads)
        if arch == "gemma3" and gname.endswith("norm.weight"):
            # The GGUF stores Gemma's RMSNorm weight with +1 already added
            # (llama.cpp then multiplies by it directly); transformers'
            # Gemma3RMSNorm computes x * (1 + w), so its loader must subtract 1.
            p = p + 1.0
            if norm_example is None and gname == "blk.0.attn_norm.weight":
                norm_example = (a[:4].tolist(), (p[:4] - 1.0).tolist())
        if p.shape != expect.shape:
            raise SystemExit("shape mismatch %s: gguf %s vs hf %s" % (gname, expect.shape, p.shape))
        diff = float(np.max(np.abs(p - expect))) if p.size else 0.0
        worst = max(worst, diff)
        if diff > 1e-6:
            raise SystemExit("weight mismatch %s -> %s: max abs diff %g" % (gname, name, diff))
    # every parameter must come from the GGUF (tied lm_head aside)
    missing = []
    for name in params:
        if name in covered:
            continue
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            if params[name].data_ptr() != params["model.embed_tokens.weight"].data_ptr():
                raise SystemExit("lm_head is not tied to embed_tokens")
            continue
        missing.append(name)
    if missing:
        raise SystemExit("parameters not loaded from the GGUF: %s" % missing[:8])
    log("  weights: %d GGUF tensors == loaded parameters (max abs diff %.3g)%s"
        % (len(raw), worst, ", lm_head tied to embed_tokens" if cfg.tie_word_embeddings else ""))
    if arch == "llama":
        notes.append("Q/K weights: llama.cpp stores them row-permuted for interleaved "
                     "(adjacent-pair) RoPE; transformers un-permutes on load and uses "
                     "rotate_half RoPE; checked: re-permuting gives the GGUF rows exactly.")
    if norm_example is not None:
        log("  gemma3 RMSNorm: GGUF blk.0.attn_norm[:4] = %s, transformers weight = %s "
            "(loader subtracted 1; Gemma3RMSNorm uses 1 + w)" % (norm_example[0], norm_example[1]))
        notes.append("RMSNorm weights: the GGUF holds w+1 (converter added 1); transformers' "
                     "loader subtracts 1 and Gemma3RMSNorm multiplies by (1 + w), so the "
                     "effective scale equals the raw GGUF value; checked for every norm "
                     "tensor (incl. q_norm/k_norm), e.g. blk.0.attn_norm[:4] GGUF %s -> HF %s."
                     % (norm_example[0], norm_example[1]))


# --------------------------------------------------------------------------
# Config checks / fix-ups
# --------------------------------------------------------------------------

def fix(cfg, key, want, notes, fixes):
    have = getattr(cfg, key, None)
    ok = (have == want) if not isinstance(want, float) else (
        have is not None and math.isclose(float(have), want, rel_tol=1e-6))
    if not ok:
        setattr(cfg, key, want)
        fixes.append("%s: %r -> %r" % (key, have, want))
    return ok


def build_config(arch, reader, models_dir, fname, notes):
    cfg = AutoConfig.from_pretrained(models_dir, gguf_file=fname)
    fixes = []
    eps = float(gguf_field(reader, arch + ".attention.layer_norm_rms_epsilon"))
    n_layer = int(gguf_field(reader, arch + ".block_count"))
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    tied = all(t.name != "output.weight" for t in reader.tensors)
    fix(cfg, "num_hidden_layers", n_layer, notes, fixes)
    fix(cfg, "hidden_size", int(gguf_field(reader, arch + ".embedding_length")), notes, fixes)
    fix(cfg, "intermediate_size", int(gguf_field(reader, arch + ".feed_forward_length")), notes, fixes)
    fix(cfg, "num_attention_heads", int(gguf_field(reader, arch + ".attention.head_count")), notes, fixes)
    fix(cfg, "num_key_value_heads", int(gguf_field(reader, arch + ".attention.head_count_kv")), notes, fixes)
    fix(cfg, "rms_norm_eps", eps, notes, fixes)
    fix(cfg, "vocab_size", vocab, notes, fixes)
    fix(cfg, "tie_word_embeddings", tied, notes, fixes)
    base = float(gguf_field(reader, arch + ".rope.freq_base"))
    if arch == "llama":
        fix(cfg, "hidden_act", "silu", notes, fixes)
        fix(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads, notes, fixes)
        rp = getattr(cfg, "rope_parameters", None) or {}
        if rp.get("rope_type", "default") != "default" or not math.isclose(rp.get("rope_theta", 0.0), base):
            fixes.append("rope_parameters: %r -> default, theta %g" % (rp, base))
            cfg.rope_parameters = {"rope_type": "default", "rope_theta": base}
        if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            fixes.append("attention_bias/mlp_bias -> False")
            cfg.attention_bias = False
            cfg.mlp_bias = False
    elif arch == "gemma3":
        head_dim = int(gguf_field(reader, "gemma3.attention.key_length"))
        swa = int(gguf_field(reader, "gemma3.attention.sliding_window"))
        fix(cfg, "head_dim", head_dim, notes, fixes)
        fix(cfg, "sliding_window", swa, notes, fixes)
        # Gemma 3: query_pre_attn_scalar = head_dim (not in the GGUF; the
        # 270M checkpoint uses 256 = head_dim, as llama.cpp assumes).
        fix(cfg, "query_pre_attn_scalar", head_dim, notes, fixes)
        fix(cfg, "hidden_activation", "gelu_pytorch_tanh", notes, fixes)
        fix(cfg, "attn_logit_softcapping", None, notes, fixes)
        fix(cfg, "final_logit_softcapping", None, notes, fixes)
        fix(cfg, "attention_bias", False, notes, fixes)
        if getattr(cfg, "use_bidirectional_attention", False):
            fixes.append("use_bidirectional_attention -> False")
            cfg.use_bidirectional_attention = False
        # every 6th layer (5, 11, 17) is global, the others slide
        want_types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                      for i in range(n_layer)]
        fix(cfg, "layer_types", want_types, notes, fixes)
        want_rope = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": base},
        }
        rp = getattr(cfg, "rope_parameters", None) or {}
        ok = all(
            isinstance(rp.get(k), dict)
            and rp[k].get("rope_type", "default") == "default"
            and math.isclose(float(rp[k].get("rope_theta", 0.0)), v["rope_theta"])
            and not any(x in rp[k] for x in ("factor",))
            for k, v in want_rope.items())
        if not ok:
            fixes.append("rope_parameters: %r -> %r" % (rp, want_rope))
            cfg.rope_parameters = want_rope
        for legacy, v in (("rope_local_base_freq", 10000.0), ("rope_theta", base)):
            if getattr(cfg, legacy, None) not in (None, v):
                fixes.append("%s: %r -> %r" % (legacy, getattr(cfg, legacy), v))
                setattr(cfg, legacy, v)
        if abs(base - 1e6) > 1:
            raise SystemExit("unexpected gemma3 rope base %g" % base)
    if fixes:
        notes.append("config fix-ups applied on top of transformers' GGUF config: " + "; ".join(fixes))
    else:
        notes.append("config derived by transformers from the GGUF was correct; no fix-ups needed.")
    return cfg, fixes


def summarize_config(arch, cfg):
    keys = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "head_dim", "rms_norm_eps", "vocab_size", "tie_word_embeddings",
            "rope_parameters"]
    if arch == "llama":
        keys += ["hidden_act"]
    else:
        keys += ["sliding_window", "query_pre_attn_scalar", "hidden_activation",
                 "attn_logit_softcapping", "final_logit_softcapping"]
    s = {k: getattr(cfg, k, None) for k in keys}
    if arch == "gemma3":
        s["full_attention_layers"] = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
    return s


def check_buffers(arch, model, cfg, notes):
    """Non-persistent buffers are recomputed at init; make sure they are right."""
    rot = model.model.rotary_emb
    hd = cfg.head_dim

    def inv(base):
        return 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))

    if arch == "llama":
        got = rot.inv_freq.to(torch.float64)
        want = inv(cfg.rope_parameters["rope_theta"])
        assert torch.allclose(got, want, rtol=1e-6, atol=0), "llama inv_freq wrong"
        assert float(getattr(rot, "attention_scaling", 1.0)) == 1.0
        log("  rope: inv_freq ok (base %g, dim %d, rotate_half pairing)" % (cfg.rope_parameters["rope_theta"], hd))
    else:
        for lt, base in (("sliding_attention", 10000.0), ("full_attention", 1e6)):
            got = getattr(rot, lt + "_inv_freq").to(torch.float64)
            assert torch.allclose(got, inv(base), rtol=1e-6, atol=0), "gemma3 %s inv_freq wrong" % lt
            assert float(getattr(rot, lt + "_attention_scaling")) == 1.0
        log("  rope: sliding inv_freq base 1e4, full base 1e6 ok (dim %d, rotate_half pairing)" % hd)
        es = float(model.model.embed_tokens.embed_scale)
        want = math.sqrt(cfg.hidden_size)
        assert abs(es - want) < 1e-5, "embed_scale %r != sqrt(hidden) %r" % (es, want)
        log("  embed_scale = %.7f (sqrt(%d))" % (es, cfg.hidden_size))
        att = model.model.layers[0].self_attn
        assert abs(att.scaling - cfg.query_pre_attn_scalar ** -0.5) < 1e-12
        for i, layer in enumerate(model.model.layers):
            sw = layer.self_attn.sliding_window
            assert sw == (None if cfg.layer_types[i] == "full_attention" else 512), (i, sw)
        log("  attention: scale 1/sqrt(%d), sliding_window 512 on layers %s, global on %s" % (
            cfg.query_pre_attn_scalar,
            [i for i, t in enumerate(cfg.layer_types) if t == "sliding_attention"],
            [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]))
    assert model.config._attn_implementation == "eager", model.config._attn_implementation


# --------------------------------------------------------------------------
# Cases and forward passes
# --------------------------------------------------------------------------

def make_cases(fixture):
    gen = fixture["generate"]
    n = len(gen)
    longest = max(range(n), key=lambda i: len(gen[i]["prompt_ids"]))
    extend = []
    for i in (0, n // 2, longest):  # first, middle and longest prompt
        if i not in extend:
            extend.append(i)
    cases = []
    for g in gen:
        cases.append({"name": g["name"], "ids": list(g["prompt_ids"]),
                      "llama_cpp_next": g["ids"][0] if g["ids"] else None,
                      "llama_cpp_gap": g["top2_gap"][0] if g.get("top2_gap") else None})
    for i in extend:
        g = gen[i]
        k = min(EXTEND, len(g["ids"]))
        cases.append({"name": "%s+%d" % (g["name"], k), "ids": list(g["prompt_ids"]) + list(g["ids"][:k]),
                      "llama_cpp_next": g["ids"][k] if len(g["ids"]) > k else None,
                      "llama_cpp_gap": g["top2_gap"][k] if len(g.get("top2_gap", [])) > k else None})
    return cases


def swa_control(model, cases, notes):
    """Negative control: with the sliding window switched off, the logits of
    the cases longer than the window must change (proves the mask is applied)."""
    cfg = model.config
    saved = cfg.sliding_window
    long_cases = [c for c in cases if len(c["ids"]) > saved]
    if not long_cases:
        raise SystemExit("no gemma3 case is longer than the sliding window")
    short = min(cases, key=lambda c: len(c["ids"]))
    cfg.sliding_window = 1 << 20
    try:
        for c in long_cases + [short]:
            d = float((last_logits(model, c["ids"]) - c["logits"]).abs().max())
            log("  SWA control: %s (n=%d) without the window: max |logit diff| %.4g" % (
                c["name"], len(c["ids"]), d))
            if c is short and d != 0.0:
                raise SystemExit("sliding window control changed a short case")
            if c is not short and d < 1e-2:
                raise SystemExit("sliding window seems not applied (%s changed by %g)" % (c["name"], d))
            if c is long_cases[0]:
                first = (c["name"], d)
    finally:
        cfg.sliding_window = saved
    notes.append("Sliding window check: running %s with the window disabled changes its last "
                 "logits by up to %.3g, so the 512 window is really applied (short cases are "
                 "unchanged)." % first)


@torch.no_grad()
def last_logits(model, ids):
    x = torch.tensor([ids], dtype=torch.long)
    pos = torch.arange(len(ids), dtype=torch.long)[None]
    out = model(input_ids=x, position_ids=pos, use_cache=False, logits_to_keep=1)
    return out.logits[0, -1]


def run_model(key, models_dir, out_dir):
    fname = MODELS[key]
    path = os.path.join(models_dir, fname)
    fixture_path = os.path.join(ROOT, "tests", "fixtures", "llamacpp", key + ".json")
    with open(fixture_path) as f:
        fixture = json.load(f)
    if fixture["model_file"] != fname:
        raise SystemExit("%s is for %s, not %s" % (fixture_path, fixture["model_file"], fname))
    log("== %s (%s)" % (key, fname))
    t0 = time.time()
    reader = gguf.GGUFReader(path)
    arch = str(gguf_field(reader, "general.architecture"))
    notes = []
    cfg, fixes = build_config(arch, reader, models_dir, fname, notes)
    log("  config: %s" % json.dumps(summarize_config(arch, cfg)))
    log("  config fix-ups: %s" % (fixes or "none"))
    model = AutoModelForCausalLM.from_pretrained(
        models_dir, gguf_file=fname, config=cfg, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    t_load = time.time() - t0
    log("  loaded %s in %.1fs" % (type(model).__name__, t_load))
    raw = gguf_tensors(reader)
    check_weights(arch, model, model.config, raw, notes)
    del raw
    check_buffers(arch, model, model.config, notes)

    cases = make_cases(fixture)
    results = []
    t1 = time.time()
    for c in cases:
        lg = last_logits(model, c["ids"])
        assert lg.dtype == torch.float32 and lg.shape[0] == model.config.vocab_size
        c["logits"] = lg.clone()
    t_f32 = time.time() - t1
    if arch == "gemma3":
        swa_control(model, cases, notes)
    # float64 re-run of the same (exact f32) weights: how much of the f32
    # result is accumulated rounding noise
    model.to(torch.float64)
    t2 = time.time()
    for c in cases:
        c["diff64"] = float((last_logits(model, c["ids"]) - c["logits"].double()).abs().max())
    t_f64 = time.time() - t2

    matches, compared, near_ties = 0, 0, []
    for c in cases:
        lg = c["logits"]
        vals, idx = torch.topk(lg, TOP_K)
        am = int(idx[0])
        gap = float(vals[0] - vals[1])
        status = ""
        if c["llama_cpp_next"] is not None:
            compared += 1
            if am == c["llama_cpp_next"]:
                matches += 1
                status = "match"
            else:
                status = "DIFF (llama.cpp %d, its top2_gap %.3f; here logit[llama.cpp id] = %.4f)" % (
                    c["llama_cpp_next"], c["llama_cpp_gap"] or float("nan"), float(lg[c["llama_cpp_next"]]))
                near_ties.append(c["name"])
        else:
            status = "(no llama.cpp next id)"
        log("  %-34s n=%4d argmax %6d top2_gap %7.4f  f64 diff %.2e  %s" % (
            c["name"], len(c["ids"]), am, gap, c["diff64"], status))
        results.append({
            "name": c["name"],
            "ids": c["ids"],
            "top": [[int(i), f32(v)] for i, v in zip(idx.tolist(), vals.tolist())],
            "logsumexp": f32(torch.logsumexp(lg.double(), 0)),
            "logits_at": {str(i): f32(lg[i]) for i in FIXED_IDS},
            "max_abs_diff_vs_f64": float("%.3g" % c["diff64"]),
        })
    log("  argmax == llama.cpp greedy id: %d/%d%s" % (
        matches, compared, (" (differ: %s)" % ", ".join(near_ties)) if near_ties else ""))
    log("  forward: f32 %.1fs, f64 %.1fs" % (t_f32, t_f64))
    notes.append("argmax equals llama.cpp's greedy id (tests/fixtures/llamacpp/%s.json, quantized "
                 "activations) in %d of %d cases%s." % (
                     key, matches, compared,
                     (" (differ: %s)" % ", ".join(near_ties)) if near_ties else ""))
    notes.append("Cases: every generate[] prompt_ids, plus '<name>+N' = prompt_ids followed by "
                 "that case's first N llama.cpp greedy ids, for the first, the middle and the "
                 "longest-prompt case. Logits are of the last position only, from one full "
                 "forward pass over all ids (positions 0..n-1, no KV cache), eager attention.")
    notes.append("max_abs_diff_vs_f64: max |logit| difference of this float32 run against a "
                 "float64 run of the same weights, i.e. float32 rounding noise of the reference.")
    doc = {
        "model_file": fname,
        "arch": arch,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "gguf_version": getattr(gguf, "__version__", None) or _dist_version("gguf"),
        "dtype": "float32",
        "generated_by": "scripts/hf-reference/make-f32-logits.py",
        "config": summarize_config(arch, model.config),
        "notes": " ".join(notes),
        "fixed_ids": FIXED_IDS,
        "cases": results,
    }
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, key + ".json")
    with open(out + ".tmp", "w") as f:
        f.write(dump_json(doc))
    os.replace(out + ".tmp", out)
    log("  wrote %s (%d bytes), total %.1fs" % (out, os.path.getsize(out), time.time() - t0))
    return matches, compared


def dump_json(doc):
    """JSON with one line per top-level key and per case field (diff-friendly)."""
    c = lambda v: json.dumps(v, ensure_ascii=False)
    lines = []
    for k, v in doc.items():
        if k != "cases":
            lines.append(" %s: %s" % (c(k), c(v)))
    cases = []
    for case in doc["cases"]:
        cases.append("  {\n" + ",\n".join("   %s: %s" % (c(k), c(v)) for k, v in case.items()) + "\n  }")
    lines.append(' "cases": [\n' + ",\n".join(cases) + "\n ]")
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == json.loads(json.dumps(doc))
    return text


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models-dir", default=os.environ.get(
        "MLXR_MODELS_DIR", os.path.expanduser("~/.cache/mlxr/models")))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "tests", "fixtures", "hf-f32"))
    ap.add_argument("--only", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("THREADS", "2")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    log("python %s, torch %s, transformers %s, gguf %s, numpy %s, %s" % (
        platform.python_version(), torch.__version__, transformers.__version__,
        _dist_version("gguf"), np.__version__, platform.machine()))
    t0 = time.time()
    for key in MODELS:
        if args.only and key != args.only:
            continue
        run_model(key, args.models_dir, args.out_dir)
    log("done in %.1fs" % (time.time() - t0))


if __name__ == "__main__":
    sys.exit(main())
