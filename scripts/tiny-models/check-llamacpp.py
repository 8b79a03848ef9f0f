#!/usr/bin/env python3
"""llama.cpp on the tiny GGUF conversions, against the transformers references of their folders.

Usage: check-llamacpp.py REFERENCE_BINARY [NAME ...]   (default: llama qwen2 qwen3 gemma2-gguf)

REFERENCE_BINARY is scripts/llamacpp-reference's driver (`. ~/.cache/mlxr/llama.cpp/env.sh` gives
$REFERENCE after scripts/llamacpp-reference/build.sh). For each case of reference/<source>.json it
lets llama.cpp tokenize the case's text and decode greedily as many steps as transformers did, then
checks that the prompt ids are the same and that the greedy ids agree up to the first step whose
transformers top-2 gap is below CLEAR_GAP (the rule of crates/mlxr-models/tests/tiny_models.rs).
This shows the converter's layout (e.g. Gemma 2's norm weights + 1, soft caps, window pattern) is
what llama.cpp itself runs, independently of MLXR. Prints a markdown table; exits 1 on a mismatch.

Not in the default list: mistral (the converter drops its sliding window, so llama.cpp differs from
transformers, as tiny_models.rs says) and phi3 (llama.cpp 0.3.36 fails to load this tiny file's
vocabulary: "unordered_map::at").
"""
import json
import subprocess
import sys
from pathlib import Path

CLEAR_GAP = 0.01
OUT = Path(__file__).resolve().parents[2] / "tests/fixtures/tiny-models"


def hx(s):
    return s.encode("utf-8").hex() if s else "-"


def main():
    ref_bin = sys.argv[1]
    index = json.loads((OUT / "index.json").read_text())["gguf"]
    names = sys.argv[2:] or ["llama", "qwen2", "qwen3", "gemma2-gguf"]
    failed = False
    print("| GGUF | case | prompt ids equal | greedy steps compared | equal |")
    print("|---|---|---|---:|---|")
    for name in names:
        entry = index[f"gguf/{name}.f32.gguf"]
        ref = json.loads((OUT / entry["reference"].split(" ")[0]).read_text())
        reqs = [["generate", f"g{i}", str(len(c["greedy"]["ids"])), hx(c["text"])]
                for i, c in enumerate(ref["cases"])]
        stdin = "".join("\t".join(r) + "\n" for r in reqs)
        p = subprocess.run([ref_bin, str(OUT / "gguf" / f"{name}.f32.gguf"), "--threads", "2", "--ctx", "256"],
                           input=stdin.encode(), capture_output=True, check=False)
        if p.returncode != 0:
            sys.exit(p.stderr.decode(errors="replace")[-4000:])
        replies = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]
        for case, r in zip(ref["cases"], replies):
            same_prompt = r["prompt_ids"] == case["ids"]
            want, gaps = case["greedy"]["ids"], case["greedy"]["top2_gaps"]
            steps = next((i for i, g in enumerate(gaps) if g < CLEAR_GAP), len(want))
            equal = same_prompt and r["ids"][:steps] == want[:steps]
            failed |= not equal
            print(f"| {name} | {case['name']} | {same_prompt} | {steps} | {equal} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
