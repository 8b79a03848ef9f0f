#!/usr/bin/env python3
"""Reference sentence embeddings for mlxr-embed, from plain transformers.

Computes what sentence-transformers computes for all-MiniLM-L6-v2 (its
modules.json: Transformer -> Pooling(mean) -> Normalize), without the
sentence-transformers package:

    tokenizer(text, truncation=True, max_length=256)   # sentence_bert_config.json
    AutoModel (float32, eager attention) -> last_hidden_state
    mean over the attention mask -> torch.nn.functional.normalize (L2)

Each text is run alone (no padding). Writes tests/fixtures/embeddings/all-minilm.json
with the texts, token ids, token counts (also without truncation) and the
vectors rounded to 6 decimals; `max_abs_diff_vs_f64` shows how much of each
vector is float32 rounding noise.

Usage: make-fixtures.py [--model-dir DIR] [--out FILE]  (normally via make-fixtures.sh)
"""

import argparse
import json
import os
import platform
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModel, AutoTokenizer

LONG_PARAGRAPH = (
    "Retrieval-augmented generation combines a search step with a language model: "
    "documents are split into chunks, every chunk is embedded into a vector, and at "
    "question time the nearest chunks are pasted into the prompt. "
)

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street.",
    "Ünïcödé: café, naïve, Zürich, São Paulo — déjà vu!",
    "日本語の文章も埋め込みできます。中文也可以。",
    "Emoji and math: 🚀🔥 ∑ ∫ ≠ ≤ √2 ½",
    "",
    "   \t\n  ",
    "?",
    'fn main() { println!("Hello, world! {}", 1 + 2); }',
    "def add(a, b):\n    return a + b  # tabs\tand newlines\n",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism HELLO WoRlD",
    # 128 < tokens <= 256: catches tokenizer.json's own truncation at 128.
    LONG_PARAGRAPH * 4,
    # > 256 tokens: truncated to max_seq_length.
    LONG_PARAGRAPH * 12,
]


def embed(model, tokenizer, text, max_length, dtype):
    batch = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state.to(dtype)
    mask = batch["attention_mask"].unsqueeze(-1).to(dtype)
    pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return batch["input_ids"][0].tolist(), F.normalize(pooled, p=2, dim=1)[0]


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    models = os.environ.get("MLXR_MODELS_DIR", os.path.expanduser("~/.cache/mlxr/models"))
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=os.path.join(models, "all-MiniLM-L6-v2"))
    parser.add_argument("--out", default=os.path.join(root, "tests/fixtures/embeddings/all-minilm.json"))
    args = parser.parse_args()

    with open(os.path.join(args.model_dir, "sentence_bert_config.json")) as f:
        max_length = json.load(f)["max_seq_length"]
    with open(os.path.join(args.model_dir, "modules.json")) as f:
        kinds = [m["type"] for m in json.load(f)]
    with open(os.path.join(args.model_dir, "1_Pooling/config.json")) as f:
        pooling = json.load(f)
    # The recipe below is mean pooling + normalize; refuse anything else.
    assert kinds[-1].endswith("Normalize"), kinds
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"], pooling

    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModel.from_pretrained(
        args.model_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    model64 = AutoModel.from_pretrained(
        args.model_dir, dtype=torch.float64, attn_implementation="eager"
    ).eval()

    cases = []
    for text in TEXTS:
        ids, vector = embed(model, tokenizer, text, max_length, torch.float32)
        ids64, vector64 = embed(model64, tokenizer, text, max_length, torch.float64)
        assert ids == ids64
        untruncated = len(tokenizer(text, truncation=False)["input_ids"])
        cases.append(
            {
                "text": text,
                "tokens": len(ids),
                "untruncated_tokens": untruncated,
                "ids": ids,
                "max_abs_diff_vs_f64": float((vector.double() - vector64).abs().max()),
                "embedding": [round(float(x), 6) for x in vector],
            }
        )
        print(f"{len(ids):4d} tokens ({untruncated:4d} untruncated)  {text[:50]!r}", file=sys.stderr)

    fixture = {
        "model": os.path.basename(os.path.normpath(args.model_dir)),
        "recipe": "transformers AutoModel f32 eager, one text per pass, mean pooling over the "
        "attention mask, L2 normalize (= sentence-transformers modules.json)",
        "max_seq_length": max_length,
        "dimensions": len(cases[0]["embedding"]),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
