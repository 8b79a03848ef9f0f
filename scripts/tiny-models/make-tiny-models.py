#!/usr/bin/env python3
"""Tiny random-weight models + reference outputs for MLXR's HF/MLX/GGUF loaders.

Sub-commands (make.sh runs them in order, each in the right venv):

  hf        tokenizer, HF safetensors models, transformers float32/float64
            references (venv with torch + transformers)
  mlx       mlx-lm affine-quantized conversions + mlx-lm references
            (venv with mlx[cpu] + mlx-lm)
  gguf-ref  after the GGUF conversion: metadata summary of each .gguf
            (gguf-py from llama.cpp)
  index     writes index.json (any venv)

Everything is seeded and written with sorted keys; see README.md.
"""

import json
import math
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

OUT = Path(os.environ.get("TINY_OUT", Path(__file__).resolve().parents[2] / "tests/fixtures/tiny-models"))
REF = OUT / "reference"

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 384
QWEN2_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
               r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Fixed training text: English prose, code-ish text, numbers and some unicode.
CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.",
    "Once upon a time there was a little model that wanted to predict the next token of every sentence.",
    "It read books about the sea, the mountains, the rivers and the cities of the world, and it learned.",
    "In the beginning the weights were random; the loss was high and the outputs were noise.",
    "The sky is blue because molecules in the air scatter blue light from the sun more than red light.",
    "Rust is a systems programming language that runs fast, prevents segfaults and guarantees thread safety.",
    "fn main() { let x = 42; println!(\"{}\", x + 1); }  def fib(n): return n if n < 2 else fib(n-1) + fib(n-2)",
    "User: What is the capital of France? Assistant: The capital of France is Paris.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 1024 3.14159 2.71828 1,000,000.",
    "Größe, Straße, naïve café, résumé, jalapeño, Ångström, São Paulo, Zürich, Kraków.",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다。",
    "Привет, мир! Как дела? Γειά σου κόσμε. שלום עולם. مرحبا بالعالم.",
    "Emoji: 🦙 🚀 ✅ 😀 🌍 ❤️ — math: ∑ ∫ √ π ≈ ≤ ≥ ∞ → ← ✓",
    "A model that reads a sentence one token at a time keeps a cache of keys and values for every layer.",
    "Sliding window attention lets each token look only at the most recent tokens, which saves memory.",
    "The rotary position embedding rotates pairs of query and key dimensions by an angle that grows with position.",
]

PROMPTS = [
    {"name": "short", "text": "The quick brown fox"},
    {
        "name": "long",
        "text": "Once upon a time there was a little model that read books about the sea, the mountains "
        "and the rivers, and every night it tried to predict the next token of the story",
    },
    {"name": "unicode", "text": "Größe: 東京 — naïve café 🦙 ✓ Привет"},
    {
        "name": "chat",
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"},
        ],
    },
]
GREEDY_STEPS = 10

D = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
         max_position_embeddings=256, bos_token_id=0, eos_token_id=2, pad_token_id=0)

# name -> (class name, config class name, extra config, stored dtype, seed, save kwargs)
MODELS = {
    "llama": dict(cls="LlamaForCausalLM", cfg="LlamaConfig", dtype="float32", seed=1001,
                  extra=dict(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
                             rms_norm_eps=1e-5, tie_word_embeddings=False)),
    "mistral": dict(cls="MistralForCausalLM", cfg="MistralConfig", dtype="bfloat16", seed=1002,
                    extra=dict(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 2000.0},
                               rms_norm_eps=1e-5, sliding_window=8, tie_word_embeddings=False)),
    "qwen2": dict(cls="Qwen2ForCausalLM", cfg="Qwen2Config", dtype="float16", seed=1003, shard="300KB",
                  extra=dict(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 8000.0},
                             rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False)),
    "qwen3": dict(cls="Qwen3ForCausalLM", cfg="Qwen3Config", dtype="float32", seed=1004,
                  extra=dict(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                             rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
                             use_sliding_window=False)),
    "gemma3": dict(cls="Gemma3ForCausalLM", cfg="Gemma3TextConfig", dtype="float32", seed=1005,
                   extra=dict(num_hidden_layers=3, sliding_window=8, sliding_window_pattern=2,
                              layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                              rope_parameters={
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 300.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 5000.0}},
                              query_pre_attn_scalar=48, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                              final_logit_softcapping=None, attn_logit_softcapping=None,
                              tie_word_embeddings=True)),
    # Gemma 2: Gemma 3's recipe without q/k norms, one RoPE base, plus soft-capped attention scores and
    # logits. The caps are small for these random weights so that each one changes the logits by far more than
    # the tests' tolerance (recorded per case: max_abs_diff_if_*_softcap_ignored).
    "gemma2": dict(cls="Gemma2ForCausalLM", cfg="Gemma2Config", dtype="float32", seed=1007,
                   extra=dict(num_hidden_layers=3, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                              rope_parameters={"rope_type": "default", "rope_theta": 700.0},
                              query_pre_attn_scalar=48, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                              attn_logit_softcapping=2.0, final_logit_softcapping=8.0,
                              tie_word_embeddings=True)),
    # Gemma 2 as a GGUF can hold it: llama.cpp's converter stores neither the RoPE base nor
    # query_pre_attn_scalar, and llama.cpp then uses 10000 and the head dimension (27B aside). This folder
    # uses exactly those, so its GGUF conversion (gguf/gemma2-gguf.f32.gguf) must match transformers.
    "gemma2-gguf": dict(cls="Gemma2ForCausalLM", cfg="Gemma2Config", dtype="float32", seed=1008,
                        extra=dict(num_hidden_layers=3, sliding_window=8,
                                   layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                                   query_pre_attn_scalar=32, rms_norm_eps=1e-6,
                                   hidden_activation="gelu_pytorch_tanh",
                                   attn_logit_softcapping=2.0, final_logit_softcapping=8.0,
                                   tie_word_embeddings=True)),
    "phi3": dict(cls="Phi3ForCausalLM", cfg="Phi3Config", dtype="float32", seed=1006,
                 extra=dict(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 3000.0,
                                                                  "partial_rotary_factor": 1.0},
                            original_max_position_embeddings=256, rms_norm_eps=1e-5, sliding_window=None,
                            tie_word_embeddings=False, hidden_act="silu")),
}

MLX_MODELS = {
    "llama-mlx-q4-g64": dict(src="llama", bits=4, group=64),
    "llama-mlx-q8-g32": dict(src="llama", bits=8, group=32),
    "qwen3-mlx-q4-g128": dict(src="qwen3", bits=4, group=128),
    "gemma3-mlx-q4-g32": dict(src="gemma3", bits=4, group=32),
}

GGUF_MODELS = ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2-gguf"]


def f9(x):
    return float(f"{float(x):.9g}")


def dump_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


# --------------------------------------------------------------------------------------------
# tokenizer


def make_tokenizer(tok_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    # Same pipeline as Qwen2's tokenizer.json (NFC, Qwen2 split regex, ByteLevel without regex):
    # transformers 5 loads a `qwen2` folder with its hard-coded Qwen2Tokenizer pipeline whatever
    # tokenizer.json says, so this is the one byte-level BPE pipeline that every folder (and
    # tokenizer.json read directly) encodes identically. llama.cpp pre-tokenizer name: "qwen2".
    from tokenizers import Regex, normalizers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i

    if tok_dir.exists():
        shutil.rmtree(tok_dir)
    tok_dir.mkdir(parents=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.save_pretrained(str(tok_dir))
    # Write tokenizer_config.json ourselves: chat template inline (not chat_template.jinja),
    # explicit add_bos/add_eos false.
    for extra in ["chat_template.jinja", "special_tokens_map.json"]:
        if (tok_dir / extra).exists():
            (tok_dir / extra).unlink()
    cfg = json.loads((tok_dir / "tokenizer_config.json").read_text())
    cfg.update({
        "add_bos_token": False, "add_eos_token": False, "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False, "model_max_length": 256,
        "tokenizer_class": "PreTrainedTokenizerFast",
    })
    dump_json(tok_dir / "tokenizer_config.json", cfg)
    # canonical formatting of tokenizer.json
    tj = json.loads((tok_dir / "tokenizer.json").read_text())
    (tok_dir / "tokenizer.json").write_text(json.dumps(tj, indent=1, ensure_ascii=False) + "\n")
    return tok


def tokenize_cases(model_dir):
    """Prompt texts and ids from transformers' AutoTokenizer; cross-checked with the raw tokenizers lib."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    at = AutoTokenizer.from_pretrained(str(model_dir))
    raw = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    cases = []
    for p in PROMPTS:
        c = {"name": p["name"]}
        if "messages" in p:
            c["messages"] = p["messages"]
            text = at.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
            c["add_generation_prompt"] = True
        else:
            text = p["text"]
        ids = at(text, add_special_tokens=True)["input_ids"]
        ids = list(ids)
        raw_ids = raw.encode(text, add_special_tokens=True).ids
        assert ids == raw_ids, (p["name"], ids, raw_ids)
        assert at.decode(ids) == text, (at.decode(ids), text)
        c["text"] = text
        c["ids"] = ids
        c["pieces"] = raw.encode(text).tokens
        cases.append(c)
    return cases


# --------------------------------------------------------------------------------------------
# HF models


def init_weights(model, seed, gemma_norms):
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shape = tuple(p.shape)
            if name.endswith("norm.weight") or "layernorm" in name or name.endswith("_norm.weight"):
                base = 1.0
                if gemma_norms:
                    # Gemma norms scale by (1 + w). Its embeddings are multiplied by sqrt(hidden) and tied
                    # to the output: with plain weights the residual stream is dominated by the input
                    # token's embedding and greedy decoding just repeats it. Larger post-norm and final
                    # norm scales (and smaller embeddings, below) give a non-degenerate model.
                    base = {"post_attention_layernorm": 4.0, "post_feedforward_layernorm": 4.0,
                            "model.norm.weight": 1.5}.get(name.split(".")[-2] if "layers" in name else name, 0.0)
                v = base + 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)
            elif name.endswith(".bias"):
                v = 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
            elif "embed_tokens" in name:
                v = (0.15 if gemma_norms else 0.4) * torch.randn(shape, generator=g, dtype=torch.float64)
            elif "lm_head" in name:
                v = 0.4 * torch.randn(shape, generator=g, dtype=torch.float64)
            elif len(shape) == 2:
                fan_in = shape[1]
                v = (2.0 / math.sqrt(fan_in)) * torch.randn(shape, generator=g, dtype=torch.float64)
            else:
                raise RuntimeError(f"unhandled parameter {name} {shape}")
            p.copy_(v.to(p.dtype))


def add_legacy_config_keys(model_dir, spec):
    """mlx-lm 0.32.2 (llama.py, gemma3_text.py) and older loaders read only the pre-transformers-5 keys
    (`rope_theta`, `rope_local_base_freq`, `sliding_window_pattern`) and silently fall back to defaults
    without them; real Hub configs carry them. Add them next to `rope_parameters`."""
    p = model_dir / "config.json"
    cfg = json.loads(p.read_text())
    rp = cfg["rope_parameters"]
    if "full_attention" in rp:
        cfg["rope_theta"] = rp["full_attention"]["rope_theta"]
        cfg["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        cfg["sliding_window_pattern"] = spec["extra"]["sliding_window_pattern"]
    else:
        cfg["rope_theta"] = rp["rope_theta"]
    cfg["rope_scaling"] = None
    dump_json(p, cfg)


def hf_forward_cases(model, cases, torch_dtype):
    import torch

    out = []
    with torch.no_grad():
        for c in cases:
            ids = torch.tensor([c["ids"]])
            logits = model(input_ids=ids).logits[0, -1].to(torch.float64)
            out.append(logits)
    return out


def greedy(step_fn, ids, steps):
    """step_fn(list[int]) -> float64 numpy logits of last position. Full recompute each step (no cache)."""
    import numpy as np

    ids = list(ids)
    gen, gaps = [], []
    for _ in range(steps):
        lg = np.asarray(step_fn(ids), dtype=np.float64)
        order = np.argsort(-lg, kind="stable")
        gen.append(int(order[0]))
        gaps.append(float(lg[order[0]] - lg[order[1]]))
        ids.append(int(order[0]))
    return gen, gaps


def case_record(c, logits_np):
    import numpy as np

    lg = np.asarray(logits_np, dtype=np.float32)
    l64 = lg.astype(np.float64)
    m = l64.max()
    lse = m + math.log(np.exp(l64 - m).sum())
    order = np.argsort(-l64, kind="stable")
    rec = {k: v for k, v in c.items()}
    rec.update({
        "last_logits": [f9(x) for x in lg.tolist()],
        "logsumexp": f9(lse),
        "argmax": int(order[0]),
        "top5": [[int(i), f9(lg[i])] for i in order[:5]],
        "top2_gap": f9(l64[order[0]] - l64[order[1]]),
    })
    return rec


def gap_stats(records):
    gaps = [g for r in records for g in r["greedy"]["top2_gaps"]]
    return {"top2_gap_min": f9(min(gaps)), "top2_gap_median": f9(median(gaps)),
            "top2_gap_frac_gt_0.1": f9(sum(g > 0.1 for g in gaps) / len(gaps)), "n_steps": len(gaps)}


def cmd_hf():
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tok_dir = OUT / "_tokenizer"
    make_tokenizer(tok_dir)
    REF.mkdir(parents=True, exist_ok=True)

    only = os.environ.get("TINY_ONLY", "").split(",") if os.environ.get("TINY_ONLY") else None
    for name, spec in MODELS.items():
        if only and name not in only:
            continue
        print(f"== {name}", flush=True)
        mdir = OUT / name
        if mdir.exists():
            shutil.rmtree(mdir)
        cfg_cls = getattr(transformers, spec["cfg"])
        cfg = cfg_cls(vocab_size=VOCAB_SIZE, **D, **spec["extra"])
        cfg._attn_implementation = "eager"
        torch.manual_seed(spec["seed"])
        model = getattr(transformers, spec["cls"])(cfg).to(torch.float32).eval()
        init_weights(model, spec["seed"], gemma_norms=name.startswith("gemma"))
        model = model.to(getattr(torch, spec["dtype"]))
        kw = {"max_shard_size": spec["shard"]} if "shard" in spec else {}
        model.save_pretrained(str(mdir), **kw)
        add_legacy_config_keys(mdir, spec)
        for f in tok_dir.iterdir():
            shutil.copy(f, mdir / f.name)
        if name == "phi3":
            # llama.cpp's Phi3 converter reads tokenizer.model (SentencePiece) unless tokenizer_class is
            # "GPT2Tokenizer" (the Phi-4 case). transformers 5 ignores the class for phi3 (TokenizersBackend).
            tc = json.loads((mdir / "tokenizer_config.json").read_text())
            tc["tokenizer_class"] = "GPT2Tokenizer"
            dump_json(mdir / "tokenizer_config.json", tc)
        dump_json(mdir / "generation_config.json", {
            "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 0, "do_sample": False,
            "transformers_version": transformers.__version__})
        del model

        cases = tokenize_cases(mdir)
        m32 = AutoModelForCausalLM.from_pretrained(str(mdir), dtype=torch.float32,
                                                   attn_implementation="eager").eval()
        m64 = AutoModelForCausalLM.from_pretrained(str(mdir), dtype=torch.float64,
                                                   attn_implementation="eager").eval()
        assert m32.config.rope_parameters == model_cfg_rope(spec), (m32.config.rope_parameters, spec)
        sd = m32.state_dict()
        records = []
        with torch.no_grad():
            def step32(ids):
                return m32(input_ids=torch.tensor([ids])).logits[0, -1].to(torch.float64).numpy()

            def step64(ids):
                return m64(input_ids=torch.tensor([ids])).logits[0, -1].numpy()

            for c in cases:
                l32 = step32(c["ids"])
                l64 = step64(c["ids"])
                rec = case_record(c, l32)
                rec["max_abs_diff_vs_f64"] = f9(np.abs(l32 - l64).max())
                g, gaps = greedy(step32, c["ids"], GREEDY_STEPS)
                g64, _ = greedy(step64, c["ids"], GREEDY_STEPS)
                rec["greedy"] = {"ids": g, "top2_gaps": [f9(x) for x in gaps], "f64_ids_agree": g == g64}
                if spec["extra"].get("attn_logit_softcapping") or spec["extra"].get("final_logit_softcapping"):
                    # show each soft cap matters: rerun with it disabled
                    m_nc = AutoModelForCausalLM.from_pretrained(str(mdir), dtype=torch.float32,
                                                                attn_implementation="eager").eval()
                    m_nc.config.final_logit_softcapping = None
                    lnc = m_nc(input_ids=torch.tensor([c["ids"]])).logits[0, -1].to(torch.float64).numpy()
                    rec["max_abs_diff_if_final_softcap_ignored"] = f9(np.abs(lnc - l32).max())
                    m_nc.config.final_logit_softcapping = m32.config.final_logit_softcapping
                    for layer in m_nc.model.layers:
                        layer.self_attn.attn_logit_softcapping = None
                    lnc = m_nc(input_ids=torch.tensor([c["ids"]])).logits[0, -1].to(torch.float64).numpy()
                    rec["max_abs_diff_if_attn_softcap_ignored"] = f9(np.abs(lnc - l32).max())
                if name in ("mistral", "gemma2", "gemma2-gguf", "gemma3") and c["name"] == "long":
                    # show the sliding window matters: rerun with the window disabled
                    m_nw = AutoModelForCausalLM.from_pretrained(str(mdir), dtype=torch.float32,
                                                                attn_implementation="eager").eval()
                    m_nw.config.sliding_window = 4096  # > any prompt: same as no window
                    for layer in m_nw.model.layers:
                        if getattr(layer.self_attn, "sliding_window", None) is not None:
                            layer.self_attn.sliding_window = 4096
                    lnw = m_nw(input_ids=torch.tensor([c["ids"]])).logits[0, -1].to(torch.float64).numpy()
                    rec["max_abs_diff_if_sliding_window_ignored"] = f9(np.abs(lnw - l32).max())
                records.append(rec)
        n_params = sum(v.numel() for v in m32.parameters())
        from safetensors import safe_open
        stored = {}
        for f in sorted(mdir.glob("*.safetensors")):
            with safe_open(str(f), "np") as sf:
                for k in sorted(sf.keys()):
                    t = sf.get_slice(k)
                    stored[k] = [t.get_dtype(), list(t.get_shape()), f.name]
        files = sorted(p.name for p in mdir.iterdir())
        ref = {
            "model": name, "dir": name, "format": "hf-safetensors", "architecture": spec["cls"],
            "stored_dtype": spec["dtype"], "files": files, "n_params": n_params,
            "reference": {"implementation": f"transformers {transformers.__version__} / torch "
                                            f"{torch.__version__.split('+')[0]} CPU, eager attention",
                          "dtype": "float32 (stored weights upcast)", "noise_check": "float64 rerun"},
            "state_dict": {k: list(v.shape) for k, v in sorted(sd.items())},
            "safetensors_tensors": stored,
            "cases": records,
            "stats": dict(gap_stats(records), max_abs_diff_vs_f64=f9(max(r["max_abs_diff_vs_f64"] for r in records))),
        }
        dump_json(REF / f"{name}.json", ref)
        print(json.dumps(ref["stats"]), flush=True)
    shutil.rmtree(tok_dir)


def model_cfg_rope(spec):
    return spec["extra"]["rope_parameters"]


# --------------------------------------------------------------------------------------------
# MLX


def cmd_mlx():
    import mlx.core as mx
    import mlx_lm
    import numpy as np
    from mlx_lm import convert, load
    from importlib.metadata import version

    only = os.environ.get("TINY_ONLY", "").split(",") if os.environ.get("TINY_ONLY") else None
    for name, q in MLX_MODELS.items():
        if only and name not in only:
            continue
        print(f"== {name}", flush=True)
        mdir = OUT / name
        if mdir.exists():
            shutil.rmtree(mdir)
        src = OUT / q["src"]
        mx.random.seed(0)
        convert(str(src), mlx_path=str(mdir), quantize=True, q_group_size=q["group"], q_bits=q["bits"],
                dtype="float32")
        src_ref = json.loads((REF / f"{q['src']}.json").read_text())
        model, tok = load(str(mdir))
        model_fp, _ = load(str(src))  # mlx-lm on the unquantized HF folder: config translation check

        def step(m):
            def f(ids):
                lg = m(mx.array([ids]))[0, -1]
                assert lg.dtype == mx.float32, lg.dtype
                return np.array(lg.astype(mx.float32), dtype=np.float64)
            return f

        records = []
        for c_src in src_ref["cases"]:
            c = {k: c_src[k] for k in ("name", "text", "ids", "pieces") if k in c_src}
            if "messages" in c_src:
                c["messages"] = c_src["messages"]
                c["add_generation_prompt"] = True
                assert tok.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=True) == c["text"]
            assert list(tok.encode(c["text"], add_special_tokens=True)) == c["ids"]
            lg = step(model)(c["ids"])
            rec = case_record(c, lg)
            hf = np.array(c_src["last_logits"], dtype=np.float64)
            rec["max_abs_diff_vs_hf_unquantized"] = f9(np.abs(lg - hf).max())
            rec["mlx_unquantized_max_abs_diff_vs_hf"] = f9(np.abs(step(model_fp)(c["ids"]) - hf).max())
            g, gaps = greedy(step(model), c["ids"], GREEDY_STEPS)
            rec["greedy"] = {"ids": g, "top2_gaps": [f9(x) for x in gaps]}
            records.append(rec)
        from safetensors import safe_open
        layout = {}
        for f in sorted(mdir.glob("*.safetensors")):
            with safe_open(str(f), "np") as sf:
                for k in sorted(sf.keys()):
                    t = sf.get_slice(k)
                    layout[k] = [t.get_dtype(), list(t.get_shape())]
        cfg = json.loads((mdir / "config.json").read_text())
        ref = {
            "model": name, "dir": name, "format": "mlx", "source_model": q["src"],
            "quantization": cfg.get("quantization"), "files": sorted(p.name for p in mdir.iterdir()),
            "reference": {"implementation": f"mlx-lm {version('mlx-lm')} / mlx {version('mlx')} CPU "
                                            "(mlx_lm.load + model(ids), no KV cache)",
                          "dtype": "float32 activations, float32 scales/biases"},
            "tensors": layout,
            "cases": records,
            "stats": dict(gap_stats(records),
                          max_abs_diff_vs_hf_unquantized=f9(max(r["max_abs_diff_vs_hf_unquantized"] for r in records)),
                          mlx_unquantized_max_abs_diff_vs_hf=f9(max(r["mlx_unquantized_max_abs_diff_vs_hf"] for r in records))),
        }
        dump_json(REF / f"{name}.json", ref)
        print(json.dumps(ref["stats"]), flush=True)


# --------------------------------------------------------------------------------------------
# GGUF metadata summary (reference = the HF model it came from)


def cmd_gguf_ref():
    import gguf
    import numpy as np

    for name in GGUF_MODELS:
        path = OUT / "gguf" / f"{name}.f32.gguf"
        r = gguf.GGUFReader(str(path))
        meta = {}
        for k, f in r.fields.items():
            if k.startswith("GGUF.") or k in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                               "tokenizer.ggml.token_type", "tokenizer.chat_template"):
                continue
            v = f.contents()
            meta[k] = v
        tensors = {t.name: [t.tensor_type.name, [int(x) for x in reversed(t.shape.tolist())]] for t in r.tensors}
        tt = r.fields["tokenizer.ggml.token_type"].contents()
        ref = {
            "model": f"gguf/{name}", "file": f"gguf/{name}.f32.gguf", "format": "gguf",
            "source_model": name, "reference": f"reference/{name}.json (transformers on the HF folder {name}/)",
            "metadata": meta, "n_tokens": len(r.fields["tokenizer.ggml.tokens"].contents()),
            "control_token_ids": [i for i, t in enumerate(tt) if t == 3],
            "tensors_ggml_order_reversed_to_row_major": tensors,
        }
        dump_json(REF / f"gguf-{name}.json", ref)
        print(name, meta.get("tokenizer.ggml.pre"), len(tensors), flush=True)


def cmd_index():
    idx = {"models": {}, "gguf": {}}
    for p in sorted(REF.glob("*.json")):
        r = json.loads(p.read_text())
        if r["format"] == "gguf":
            idx["gguf"][r["file"]] = {"source_model": r["source_model"], "reference": r["reference"],
                                      "summary": f"reference/{p.name}"}
        else:
            idx["models"][r["dir"]] = {"format": r["format"], "reference": f"reference/{p.name}",
                                       "source_model": r.get("source_model"), "stats": r["stats"]}
    dump_json(OUT / "index.json", idx)


if __name__ == "__main__":
    {"hf": cmd_hf, "mlx": cmd_mlx, "gguf-ref": cmd_gguf_ref, "index": cmd_index}[sys.argv[1]]()
