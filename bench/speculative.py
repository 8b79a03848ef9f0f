"""Speculative decoding client (issue 19), for bench/speculative.sh: sends
each prompt of a JSONL set to an OpenAI-style server (/v1/chat/completions,
temperature 0), once per variant (extra body keys), and records per request
the client's wall time, the completion tokens, the text, and the server's
`timings` (decode time, draft_n, draft_n_accepted).

    python bench/speculative.py --url URL --model NAME --prompts FILE \
        --variant none '{"speculative.type": "none"}' \
        --variant ngram '{"speculative.type": "ngram"}' --json-out out.json

One request at a time by default; variants alternate their order from
prompt to prompt, so drift in the machine's speed falls on both alike.
With --concurrency N, N clients share the set (each takes the next prompt
when its request ends), one variant after the other, and every request
records the whole set's wall time (`set_wall_s`): the summary's e2e tok/s
is then the aggregate, all tokens over that time.
"""

import re
import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def one(url, model, prompt, max_tokens, extra):
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "temperature": 0, "max_tokens": max_tokens, **extra}
    t0 = time.perf_counter()
    r = post(url + "/v1/chat/completions", body)
    wall = time.perf_counter() - t0
    t = r.get("timings", {})
    return {
        "wall_s": wall,
        "completion_tokens": r["usage"]["completion_tokens"],
        "text": r["choices"][0]["message"]["content"],
        "predicted_n": t.get("predicted_n"),
        "predicted_ms": t.get("predicted_ms"),
        "draft_n": t.get("draft_n", 0),
        "draft_n_accepted": t.get("draft_n_accepted", 0),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--variant", nargs=2, action="append", metavar=("LABEL", "JSON"), required=True)
    ap.add_argument("--json-out", required=True)
    ap.add_argument("--concurrency", type=int, default=1)
    a = ap.parse_args()
    prompts = [json.loads(l) for l in open(a.prompts) if l.strip()]
    variants = [(label, json.loads(extra)) for label, extra in a.variant]
    # Warm-up, untimed.
    one(a.url, a.model, "Say hi.", 8, variants[0][1])
    results = {label: [] for label, _ in variants}
    if a.concurrency > 1:
        for label, extra in variants:
            results[label] = concurrent(a, prompts, extra)
            tokens = sum(r["completion_tokens"] for r in results[label])
            print(f"{label}: {len(prompts)} requests, {a.concurrency} at a time, "
                  f"{tokens / results[label][0]['set_wall_s']:.1f} tok/s aggregate", flush=True)
        json.dump(results, open(a.json_out, "w"))
        return
    for i, p in enumerate(prompts):
        order = variants if i % 2 == 0 else variants[::-1]
        for label, extra in order:
            r = one(a.url, a.model, p["prompt"], a.max_tokens, extra)
            r["id"] = p["id"]
            results[label].append(r)
        print(f"[{p['id']}] " + "  ".join(
            f"{label} {results[label][-1]['completion_tokens'] / results[label][-1]['wall_s']:.1f} tok/s"
            for label, _ in variants), flush=True)
    json.dump(results, open(a.json_out, "w"))


def concurrent(a, prompts, extra):
    """Every prompt once, a.concurrency requests in flight; in prompt order."""
    def run(p):
        r = one(a.url, a.model, p["prompt"], a.max_tokens, extra)
        r["id"] = p["id"]
        return r
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.concurrency) as pool:
        rs = list(pool.map(run, prompts))
    wall = time.perf_counter() - t0
    for r in rs:
        r["set_wall_s"] = wall
    return rs


def summary(results):
    """Per variant: e2e tok/s (all completion tokens over all wall time),
    decode tok/s (server timings: per stream when streams ran concurrently),
    drafts and acceptance."""
    out = {}
    for label, rs in results.items():
        tokens = sum(r["completion_tokens"] for r in rs)
        # Concurrent runs: the set's wall time, once; else each request's.
        wall = rs[0]["set_wall_s"] if rs and "set_wall_s" in rs[0] else sum(r["wall_s"] for r in rs)
        pn = sum(r["predicted_n"] or 0 for r in rs)
        pms = sum(r["predicted_ms"] or 0 for r in rs)
        drafted = sum(r["draft_n"] or 0 for r in rs)
        accepted = sum(r["draft_n_accepted"] or 0 for r in rs)
        out[label] = {
            "requests": len(rs), "tokens": tokens,
            "e2e_tps": tokens / wall if wall else 0.0,
            "decode_tps": pn * 1000.0 / pms if pms else 0.0,
            "draft_n": drafted, "draft_n_accepted": accepted,
            "acceptance": accepted / drafted if drafted else 0.0,
        }
    return out


def draft_positions(metrics):
    """From an mlxr /metrics page: the drafts per length ({k: n}) and, per
    position i (1-based), the share of the drafts that reached it whose
    token i stood ({i: (stood, reached)})."""
    lengths, stood = {}, {}
    for line in metrics.splitlines():
        for name, key, into in (("spec_decode_num_drafts_per_len_total", "length", lengths),
                                ("spec_decode_num_accepted_tokens_per_pos_total", "position", stood)):
            # The daemon labels each line with its model too.
            m = re.match(rf'mlxr:{name}{{.*\b{key}="(\d+)".*}} (\d+)$', line)
            if m:
                into[int(m.group(1))] = into.get(int(m.group(1)), 0) + int(m.group(2))
    positions = {}
    for i in range(1, max(lengths, default=0) + 1):
        reached = sum(n for k, n in lengths.items() if k >= i)
        positions[i] = (stood.get(i - 1, 0), reached)
    return dict(sorted(lengths.items())), positions


if __name__ == "__main__":
    main()
